//! The SLURM client commands on the PATH, as the backend calls them: bounded in time, with no
//! key and none of the user's variables that would change what a command does.

use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;

use super::{JobInfo, SlurmCommands, parse_job};
use crate::ProcessError;

/// One call of a SLURM command may take this long before it counts as failed.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// The SLURM client commands on the PATH.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SlurmCli;

impl SlurmCli {
    async fn run(
        &self,
        program: &str,
        args: &[&str],
        workdir: Option<&Path>,
    ) -> Result<std::process::Output, ProcessError> {
        let mut command = tokio::process::Command::new(program);
        command
            .args(args)
            .stdin(std::process::Stdio::null())
            // A command given up on (timed out, its caller stopped) must not go on by itself.
            .kill_on_drop(true);
        if let Some(dir) = workdir {
            command.current_dir(dir);
        }
        // SLURM keeps a batch job's environment on disk: no key goes into it (and `sbatch`
        // exports none of the caller's environment, see `submit`).
        rl_settings::withhold(command.as_std_mut(), &[]);
        // A user's `SBATCH_*` (`SQUEUE_*`, `SCANCEL_*`…) variables would change what the
        // command does behind the operator's settings: each command gets none of its own.
        let own = format!("{}_", program.to_ascii_uppercase());
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with(&own) {
                command.env_remove(name);
            }
        }
        let output = tokio::time::timeout(COMMAND_TIMEOUT, command.output())
            .await
            .map_err(|_| {
                ProcessError::Slurm(format!(
                    "`{program}` did not answer within {} s",
                    COMMAND_TIMEOUT.as_secs()
                ))
            })?
            .map_err(|error| ProcessError::Slurm(format!("cannot run `{program}`: {error}")))?;
        Ok(output)
    }
}

fn failed(program: &str, output: &std::process::Output) -> ProcessError {
    ProcessError::Slurm(format!(
        "`{program}` failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr).trim()
    ))
}

#[async_trait]
impl SlurmCommands for SlurmCli {
    async fn submit(&self, script: &Path, workdir: &Path) -> Result<String, ProcessError> {
        let script = script.to_string_lossy();
        let output = self
            .run(
                "sbatch",
                // Nothing of the caller's environment is kept with the job (SLURM stores it
                // on disk); the script sets its own PATH, the steps get theirs from srun.
                &["--parsable", "--export=NIL", &script],
                Some(workdir),
            )
            .await?;
        if !output.status.success() {
            return Err(failed("sbatch", &output));
        }
        // `--parsable` prints `JOB` or `JOB;CLUSTER`.
        let text = String::from_utf8_lossy(&output.stdout);
        let job = text.trim().split(';').next().unwrap_or_default();
        if job.is_empty() || !job.chars().all(|c| c.is_ascii_digit()) {
            return Err(ProcessError::Slurm(format!(
                "sbatch printed no job id: {text:?}"
            )));
        }
        Ok(job.to_owned())
    }

    async fn job(&self, job: &str) -> Result<Option<JobInfo>, ProcessError> {
        let output = self
            .run("scontrol", &["show", "job", "-o", job], None)
            .await?;
        if !output.status.success() {
            // An id SLURM has purged (or never had) is exit code 1 with "Invalid job id".
            let stderr = String::from_utf8_lossy(&output.stderr);
            if stderr.contains("Invalid job id") {
                return Ok(None);
            }
            return Err(failed("scontrol", &output));
        }
        Ok(parse_job(&String::from_utf8_lossy(&output.stdout)))
    }

    async fn step(&self, job: &str, name: &str) -> Result<Option<String>, ProcessError> {
        let output = self
            .run("squeue", &["-h", "-s", "-j", job, "-o", "%i|%j"], None)
            .await?;
        if !output.status.success() {
            return Ok(None);
        }
        Ok(String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter_map(|line| line.split_once('|'))
            .find(|(_, step_name)| step_name.trim() == name)
            .map(|(id, _)| id.trim().to_owned()))
    }

    async fn jobs_named(&self, name: &str) -> Result<Vec<String>, ProcessError> {
        let output = self
            .run("squeue", &["-h", "--me", "-n", name, "-o", "%i"], None)
            .await?;
        if !output.status.success() {
            return Err(failed("squeue", &output));
        }
        Ok(String::from_utf8_lossy(&output.stdout)
            .split_whitespace()
            .map(str::to_owned)
            .collect())
    }

    async fn cancel(
        &self,
        target: &str,
        signal: Option<&'static str>,
        batch_only: bool,
    ) -> Result<(), ProcessError> {
        let signal_arg = signal.map(|signal| format!("--signal={signal}"));
        let mut args: Vec<&str> = Vec::new();
        if let Some(signal) = &signal_arg {
            args.push(signal);
        }
        if batch_only {
            args.push("--batch");
        }
        args.push(target);
        let output = self.run("scancel", &args, None).await?;
        if output.status.success() {
            Ok(())
        } else {
            Err(failed("scancel", &output))
        }
    }
}
