//! Runs on SLURM: one batch job per run holds the allocation (its script, kept in the run
//! folder, only waits), and the supervisor starts each component in it as a job step with
//! `srun --jobid`, so the readiness gates, logs and stop order stay those of a local run.
//!
//! Measured on slurm 22.05 (ci/slurm/FINDINGS.md): a SIGTERM to a local `srun` kills its step at
//! once, so a graceful stop is `scancel --signal=TERM JOB.STEP`; killing every `srun` process
//! orphans the step, so the step is cancelled through SLURM before the local group is ended.
//! `sbatch` keeps the submitter's environment on disk, so it is submitted without keys; an
//! outside `srun`'s environment is kept nowhere, and keys reach each step only through it.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use rl_settings::{RunConfig, RunFolder, RunId, SlurmSettings};
use tokio::sync::mpsc;

use crate::ProcessError;
use crate::groups::{StopOutcome, group_is_ours};
use crate::identity::ProcessIdentity;
use crate::launcher::{
    AllocationNote, ClusterEnd, LaunchSpec, Launcher, LocalLauncher, Placement, RunningComponent,
};
use crate::state::{Component, RunState};
use crate::strays::StrayOutcome;

mod cli;
pub(crate) use cli::SlurmCli;

/// The batch script's file in the run folder.
/// How often the queue is asked while a job ends, and at first while it waits.
const POLL: Duration = Duration::from_secs(1);
/// A job that waits long is asked ever less often, up to this: a scheduler is shared.
const MAX_QUEUE_POLL: Duration = Duration::from_secs(15);
/// A job ending (COMPLETING) settles into its final state within SLURM's `KillWait` (30 s by
/// default) and the epilog; this bounds the wait for it.
const SETTLE: Duration = Duration::from_secs(45);
/// Failed queries of a queued job in a row before the run gives up on it.
const QUERY_ATTEMPTS: u32 = 5;
/// Reasons a job waits for that no amount of waiting changes: its request exceeds what the
/// partition can give, or names what the user may not use.
const NEVER_RUNS: &[&str] = &[
    "PartitionConfig",
    "PartitionNodeLimit",
    "PartitionTimeLimit",
    "InvalidAccount",
    "InvalidQOS",
    "AccountNotAllowed",
    "QOSNotAllowed",
];

/// What `scontrol show job -o` says of a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JobInfo {
    pub state: String,
    pub reason: String,
    /// The node the batch script runs on (the components' node), once it runs.
    pub batch_host: Option<String>,
    /// `exit code:signal`, as SLURM reports it.
    pub exit_code: String,
}

/// Where a job is, as a run sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum JobPhase {
    Queued {
        reason: String,
    },
    Running,
    /// Its processes are being ended; the final state follows.
    Completing,
    Ended(ClusterEnd),
    /// A state this backend does not know: no verdict, asked again later.
    Unknown,
}

/// The SLURM commands the backend uses, behind a trait so tests can stand in for a cluster.
#[cfg_attr(test, mockall::automock)]
#[async_trait]
pub(crate) trait SlurmCommands: Send + Sync {
    /// `sbatch --parsable SCRIPT`, without keys in its environment; returns the job id.
    async fn submit(&self, script: &Path, workdir: &Path) -> Result<String, ProcessError>;
    /// `scontrol show job -o JOB`; `None` once SLURM no longer knows the job.
    async fn job(&self, job: &str) -> Result<Option<JobInfo>, ProcessError>;
    /// The id (`JOB.STEP`) of the job's step named `name`, while it exists.
    async fn step(&self, job: &str, name: &str) -> Result<Option<String>, ProcessError>;
    /// The ids of the jobs named `name` that SLURM still knows (a submission whose answer was
    /// lost still has its job found and cancelled).
    async fn jobs_named(&self, name: &str) -> Result<Vec<String>, ProcessError>;
    /// `scancel [--signal=SIGNAL] [--batch] TARGET` (a job or `JOB.STEP`).
    async fn cancel(
        &self,
        target: &str,
        signal: Option<&'static str>,
        batch_only: bool,
    ) -> Result<(), ProcessError>;
}

/// `scontrol show job -o` output (`Key=Value` pairs on one line).
pub(crate) fn parse_job(text: &str) -> Option<JobInfo> {
    let line = text.lines().find(|line| line.contains("JobState="))?;
    let field = |key: &str| {
        line.split_whitespace()
            .find_map(|pair| pair.strip_prefix(key)?.strip_prefix('='))
            .map(str::to_owned)
    };
    Some(JobInfo {
        state: field("JobState")?,
        reason: field("Reason").unwrap_or_else(|| "None".to_owned()),
        batch_host: field("BatchHost").filter(|host| !host.is_empty() && host != "(null)"),
        exit_code: field("ExitCode").unwrap_or_else(|| "0:0".to_owned()),
    })
}

/// A job's SLURM state as a run's: waiting, running, ending, or ended (and how).
pub(crate) fn phase_of(job_id: &str, info: &JobInfo) -> JobPhase {
    let ended = |outcome: RunState, what: &str| {
        JobPhase::Ended(ClusterEnd {
            outcome,
            message: format!(
                "SLURM job {job_id} {what} ({}, reason {}, exit code {})",
                info.state, info.reason, info.exit_code
            ),
        })
    };
    match info.state.as_str() {
        "PENDING" | "REQUEUED" | "REQUEUE_HOLD" | "REQUEUE_FED" | "SUSPENDED" | "RESV_DEL_HOLD"
        | "CONFIGURING" | "RESIZING" => JobPhase::Queued {
            reason: info.reason.clone(),
        },
        "RUNNING" => JobPhase::Running,
        "COMPLETING" | "STAGE_OUT" | "SIGNALING" => JobPhase::Completing,
        "COMPLETED" => ended(RunState::Completed, "completed"),
        "CANCELLED" => ended(RunState::Stopped, "was cancelled"),
        "TIMEOUT" => ended(RunState::Failed, "reached its time limit"),
        "OUT_OF_MEMORY" => ended(RunState::Failed, "ran out of memory"),
        "NODE_FAIL" | "BOOT_FAIL" => ended(RunState::Failed, "lost its node"),
        "PREEMPTED" => ended(RunState::Failed, "was preempted"),
        "DEADLINE" => ended(RunState::Failed, "missed its deadline"),
        "FAILED" => ended(RunState::Failed, "failed"),
        _ => JobPhase::Unknown,
    }
}

/// The batch script of a run: `#SBATCH` lines from the operator's settings, and a body that
/// only holds the allocation until the supervisor ends it (SIGUSR1, a clean end) or SLURM does.
pub(crate) fn batch_script(run_id: &RunId, settings: &SlurmSettings, run_dir: &Path) -> String {
    let gpus = settings.gpus;
    let mut lines = vec![
        "#!/bin/bash".to_owned(),
        format!("#SBATCH --job-name=rl-{run_id}"),
        format!(
            "#SBATCH --output={}",
            RunFolder::at(run_dir).slurm_output("%j").display()
        ),
        format!("#SBATCH --chdir={}", run_dir.display()),
        // One task, this script; the components' steps share its allocation (`--overlap`).
        // Asking for a task per component would wait forever on a node with fewer CPUs.
        format!("#SBATCH --nodes={}", settings.nodes.unwrap_or(1)),
    ];
    if let Some(partition) = &settings.partition {
        lines.push(format!("#SBATCH --partition={partition}"));
    }
    if let Some(account) = &settings.account {
        lines.push(format!("#SBATCH --account={account}"));
    }
    if let Some(time) = &settings.time_limit {
        lines.push(format!("#SBATCH --time={time}"));
    }
    let total_gpus = gpus.engine + gpus.api + gpus.trainer + gpus.env;
    if total_gpus > 0 {
        lines.push(format!("#SBATCH --gpus={total_gpus}"));
    }
    lines.extend(
        settings
            .extra_sbatch
            .iter()
            .map(|line| format!("#SBATCH {line}")),
    );
    lines.push(String::new());
    lines.push(format!(
        "# rl run {run_id}: this job holds the allocation. rl's supervisor starts the API, the\n\
         # trainer and the environment in it as job steps (srun --jobid) behind readiness checks,\n\
         # and ends this script with SIGUSR1 once they have stopped. No key is in this file or\n\
         # in this job's environment: each step gets only its own, through srun's environment."
    ));
    // Submitted with none of the caller's environment: a PATH of its own for `sleep`.
    lines.push("export PATH=/usr/local/bin:/usr/bin:/bin".to_owned());
    lines.push("trap 'exit 0' USR1".to_owned());
    lines.push("while true; do sleep 5 & wait $!; done".to_owned());
    lines.join("\n") + "\n"
}

/// The name of a component's step, to find it in the queue.
fn step_name(run_id: &RunId, component: Component) -> String {
    format!("rl-{run_id}-{component}")
}

/// Components as steps of one SLURM job per run.
pub(crate) struct SlurmLauncher {
    run_id: RunId,
    settings: SlurmSettings,
    run_dir: PathBuf,
    commands: Box<dyn SlurmCommands>,
    /// Starts each step's local `srun`, whose output is the step's.
    local: LocalLauncher,
    state: Mutex<SlurmState>,
}

#[derive(Default)]
struct SlurmState {
    job: Option<String>,
    node: Option<String>,
    /// Each step's local `srun` (the leader of its process group), and the step's name.
    steps: Vec<(ProcessIdentity, String)>,
}

impl SlurmLauncher {
    pub(crate) fn new(
        run_id: RunId,
        settings: SlurmSettings,
        run_dir: PathBuf,
        commands: Box<dyn SlurmCommands>,
        local: LocalLauncher,
    ) -> Self {
        Self {
            run_id,
            settings,
            run_dir,
            commands,
            local,
            state: Mutex::new(SlurmState::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, SlurmState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn job(&self) -> Option<String> {
        self.state().job.clone()
    }

    /// The `srun` that starts `spec` as a step of the job, on the job's node, its output going
    /// to the local `srun` and from there to the component's log.
    fn step_spec(&self, spec: &LaunchSpec, job: &str, node: &str) -> LaunchSpec {
        let gpus = match spec.component {
            Component::Engine => self.settings.gpus.engine,
            Component::Api => self.settings.gpus.api,
            Component::Trainer => self.settings.gpus.trainer,
            Component::Env => self.settings.gpus.env,
        };
        let mut args = vec![
            format!("--jobid={job}"),
            "--overlap".to_owned(),
            "--nodes=1".to_owned(),
            "--ntasks=1".to_owned(),
            format!("--nodelist={node}"),
            format!("--job-name={}", step_name(&self.run_id, spec.component)),
            format!("--chdir={}", spec.cwd.display()),
            // The step gets srun's own environment: the component's variables and keys.
            "--export=ALL".to_owned(),
        ];
        if gpus > 0 {
            args.push(format!("--gpus={gpus}"));
        }
        args.push(spec.program.to_string_lossy().into_owned());
        args.extend(spec.args.iter().cloned());
        if spec.component == Component::Env && self.settings.env_uses_allocation {
            // atroposlib's own switch for taking inference servers from the allocation.
            args.extend(["--slurm".to_owned(), "true".to_owned()]);
        }
        LaunchSpec {
            program: PathBuf::from("srun"),
            args,
            ..spec.clone()
        }
    }

    /// Whether parts of the run may run on other nodes than its components' (more nodes, or an
    /// environment told to use the allocation); otherwise loopback stays right.
    fn spans_nodes(&self) -> bool {
        self.settings.nodes.unwrap_or(1) > 1 || self.settings.env_uses_allocation
    }

    /// The run's config names its API and trainer by the node they run on, not loopback: the
    /// node is known only now, and workers on other nodes of the allocation must reach them.
    fn place_config_on(&self, node: &str) -> Result<(), ProcessError> {
        Ok(RunConfig::place_file_on(
            &RunFolder::at(&self.run_dir).config(),
            node,
        )?)
    }

    /// The job's id: the one submitted, else (a submission given up on before its answer) any
    /// job of this run's name SLURM still knows.
    async fn jobs(&self) -> Vec<String> {
        if let Some(job) = self.job() {
            return vec![job];
        }
        self.commands
            .jobs_named(&format!("rl-{}", self.run_id))
            .await
            .unwrap_or_default()
    }
}

/// How a job is ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JobEnding {
    /// Its steps are done: SIGUSR1 to the holding script ends the job COMPLETED.
    Clean,
    /// Its steps may still run (their supervisor is gone): SIGTERM to them through SLURM, a
    /// grace, then the job is cancelled.
    StepsFirst,
}

/// A grace for steps told to stop by [`JobEnding::StepsFirst`].
const STEP_GRACE: Duration = Duration::from_secs(5);

/// Ends a job SLURM still holds, as `how` says, then `scancel`, tried twice, each checked.
/// Whether there was a job to end; errs naming the job when SLURM still holds it.
pub(crate) async fn end_job(
    commands: &dyn SlurmCommands,
    job: &str,
    how: JobEnding,
) -> Result<bool, ProcessError> {
    let phase = match commands.job(job).await? {
        Some(info) => phase_of(job, &info),
        None => return Ok(false),
    };
    if matches!(phase, JobPhase::Ended(_)) {
        return Ok(false);
    }
    match how {
        JobEnding::Clean if phase == JobPhase::Running => {
            let _ = commands.cancel(job, Some("USR1"), true).await;
            if job_ends(commands, job).await {
                return Ok(true);
            }
        }
        JobEnding::Clean => {}
        JobEnding::StepsFirst => {
            // TERM to every step (not the holding script), then a grace to act on it.
            let _ = commands.cancel(job, Some("TERM"), false).await;
            tokio::time::sleep(STEP_GRACE).await;
        }
    }
    for _ in 0..2 {
        let _ = commands.cancel(job, None, false).await;
        if job_ends(commands, job).await {
            return Ok(true);
        }
    }
    Err(ProcessError::Slurm(format!(
        "job {job} is still held by SLURM after scancel; cancel it with `scancel {job}`"
    )))
}

/// Whether the job ends within the wait's bound (a job SLURM no longer knows, or cannot say
/// anything of, counts as ended: nothing more can be done to it from here).
async fn job_ends(commands: &dyn SlurmCommands, job: &str) -> bool {
    let deadline = tokio::time::Instant::now() + SETTLE;
    loop {
        match commands.job(job).await {
            Ok(Some(info)) if !matches!(phase_of(job, &info), JobPhase::Ended(_)) => {}
            _ => return true,
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(POLL).await;
    }
}

#[async_trait]
impl Launcher for SlurmLauncher {
    async fn allocate(
        &self,
        notes: mpsc::UnboundedSender<AllocationNote>,
    ) -> Result<Placement, ProcessError> {
        let script = RunFolder::at(&self.run_dir).slurm_script();
        let text = batch_script(&self.run_id, &self.settings, &self.run_dir);
        std::fs::write(&script, text).map_err(|source| ProcessError::Io {
            action: "write",
            path: script.clone(),
            source,
        })?;
        let job = self.commands.submit(&script, &self.run_dir).await?;
        self.state().job = Some(job.clone());
        let _ = notes.send(AllocationNote::Submitted { job: job.clone() });
        let mut last_reason = None;
        let mut failed_queries = 0;
        let mut pause = POLL;
        loop {
            let info = match self.commands.job(&job).await {
                Ok(Some(info)) => info,
                Ok(None) => {
                    return Err(ProcessError::Slurm(format!(
                        "SLURM no longer knows job {job}"
                    )));
                }
                // A busy controller: asked again, a few times.
                Err(error) => {
                    failed_queries += 1;
                    if failed_queries >= QUERY_ATTEMPTS {
                        return Err(error);
                    }
                    tokio::time::sleep(pause).await;
                    continue;
                }
            };
            failed_queries = 0;
            match phase_of(&job, &info) {
                JobPhase::Queued { reason } => {
                    if NEVER_RUNS.contains(&reason.as_str()) {
                        return Err(ProcessError::Slurm(format!(
                            "SLURM will never run job {job} as asked (pending: {reason}); \
                             change the [slurm] settings"
                        )));
                    }
                    if last_reason.as_ref() != Some(&reason) {
                        let _ = notes.send(AllocationNote::Waiting {
                            job: job.clone(),
                            reason: reason.clone(),
                        });
                        last_reason = Some(reason);
                    }
                }
                JobPhase::Running => {
                    let node = info.batch_host.clone().ok_or_else(|| {
                        ProcessError::Slurm(format!("job {job} runs but SLURM names no node"))
                    })?;
                    self.state().node = Some(node.clone());
                    if self.spans_nodes() {
                        self.place_config_on(&node)?;
                    }
                    let host = self.settings.host.clone().unwrap_or_else(|| node.clone());
                    return Ok(Placement {
                        host,
                        local: false,
                        description: format!("SLURM job {job} on {node}"),
                    });
                }
                JobPhase::Unknown => {}
                JobPhase::Ended(end) => return Err(ProcessError::SlurmEnded(end)),
                JobPhase::Completing => {
                    return Err(ProcessError::Slurm(format!(
                        "SLURM job {job} is ending before the run could start in it \
                         (COMPLETING, reason {})",
                        info.reason
                    )));
                }
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(MAX_QUEUE_POLL);
        }
    }

    async fn launch(&self, spec: &LaunchSpec) -> Result<Box<dyn RunningComponent>, ProcessError> {
        let (job, node) = {
            let state = self.state();
            (state.job.clone(), state.node.clone())
        };
        let (Some(job), Some(node)) = (job, node) else {
            return Err(ProcessError::Launch {
                component: spec.component,
                reason: "the run has no SLURM allocation".to_owned(),
            });
        };
        // A step whose output folder is missing stays listed forever: the log's folder first.
        if let Some(dir) = spec.log_path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| ProcessError::Io {
                action: "create",
                path: dir.to_owned(),
                source,
            })?;
        }
        let running = self
            .local
            .launch(&self.step_spec(spec, &job, &node))
            .await?;
        self.state()
            .steps
            .push((running.identity(), step_name(&self.run_id, spec.component)));
        Ok(running)
    }

    async fn stop_group(&self, leader: ProcessIdentity, grace: Duration) -> StopOutcome {
        let (job, name) = {
            let state = self.state();
            let name = state
                .steps
                .iter()
                .find(|(srun, _)| *srun == leader)
                .map(|(_, name)| name.clone());
            (state.job.clone(), name)
        };
        let step = match (&job, &name) {
            (Some(job), Some(name)) => self.commands.step(job, name).await.ok().flatten(),
            _ => None,
        };
        let Some(step) = step else {
            // The step is gone (its component ended): only the local srun may be left.
            return self.local.stop_group(leader, grace).await;
        };
        // SIGTERM through SLURM reaches the component itself; a signal to srun would kill it.
        let _ = self.commands.cancel(&step, Some("TERM"), false).await;
        let deadline = tokio::time::Instant::now() + grace;
        // Signal 0 to the group asks only whether it has members: no scan of /proc. Members of
        // a group that is no longer srun's are another's, and not waited for.
        let group = nix::unistd::Pid::from_raw(i32::try_from(leader.pid).unwrap_or(0));
        while group_is_ours(leader) && nix::sys::signal::killpg(group, None).is_ok() {
            if tokio::time::Instant::now() >= deadline {
                // Cancelled through SLURM first: killing srun alone would orphan the step.
                let _ = self.commands.cancel(&step, None, false).await;
                let mut outcome = self.local.stop_group(leader, Duration::from_secs(2)).await;
                outcome.graceful = false;
                return outcome;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        StopOutcome {
            was_empty: false,
            graceful: true,
            survivors: Vec::new(),
        }
    }

    async fn end_strays(&self, grace: Duration) -> StrayOutcome {
        // What is left on this machine: the steps themselves end with the job.
        self.local.end_strays(grace).await
    }

    async fn cluster_end(&self) -> Option<ClusterEnd> {
        let job = self.job()?;
        // A job that ends (a time limit, a cancel) kills its steps and is seen COMPLETING as
        // they exit; a job still RUNNING means the component ended by itself.
        let deadline = tokio::time::Instant::now() + SETTLE;
        loop {
            let info = self.commands.job(&job).await.ok()??;
            match phase_of(&job, &info) {
                JobPhase::Ended(end) => return Some(end),
                JobPhase::Completing if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(POLL).await;
                }
                // Still ending after the wait: the cluster is ending it all the same.
                JobPhase::Completing => {
                    return Some(ClusterEnd {
                        outcome: RunState::Failed,
                        message: format!("SLURM job {job} is being ended by SLURM (COMPLETING)"),
                    });
                }
                _ => return None,
            }
        }
    }

    async fn release(&self) -> Result<(), ProcessError> {
        for job in self.jobs().await {
            end_job(self.commands.as_ref(), &job, JobEnding::Clean).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
