//! Running one model's process: its own process group, its environment marked with its test
//! and model, everything it prints copied to its log with keys redacted (atroposlib prints its
//! whole config, key included) by the copier runs use, progress read from the groups file as it
//! grows, and a timeout. However it ends, its group and whatever it left outside (a `setsid`
//! daemon, found by the marks) are ended with it.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use rl_process::ProcessIdentity;
use rl_settings::Secrets;
use tokio::io::AsyncWriteExt;

use crate::analysis::count_groups;
use crate::command::ModelJob;
use crate::marks::{ModelMarks, STOP_GRACE};
use crate::model::ModelOutcome;
use crate::tracking::{record_group, stop_request};

/// How often the groups file is looked at for progress.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

/// What a person or agent watching the test is told.
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    /// The test's folder exists: from now on it can be followed, listed and stopped by its id.
    Created {
        test_id: String,
        dir: std::path::PathBuf,
    },
    Started {
        model: String,
        total_groups: u32,
    },
    Groups {
        model: String,
        done: u32,
        total: u32,
    },
    Finished {
        model: String,
        outcome: ModelOutcome,
    },
}

pub type ProgressSink = Arc<dyn Fn(Progress) + Send + Sync>;

/// How one model's run ended, and how long it took.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRun {
    pub outcome: ModelOutcome,
    pub duration: Duration,
}

/// Runs a model's job to its end. Never fails: a model that cannot start is an outcome.
#[async_trait]
pub trait ModelRunner: Send + Sync {
    async fn run(
        &self,
        job: ModelJob,
        timeout: Duration,
        // Redacted from everything the model prints, and from why it could not start.
        secrets: Secrets,
        progress: ProgressSink,
    ) -> ModelRun;
}

/// Runs jobs as local processes, and knows their process groups while they run, so that a
/// caller interrupted mid-test can stop them all (they are not in its group, so a Ctrl-C in a
/// terminal does not reach them).
///
/// `stop_all` is final: every clone shares one state, and once stopped the runner starts no
/// model again — each is reported not started. Every caller stops it only as its process
/// ends (`rl serve` at shutdown, `rl mcp` when its session is over, `rl preflight` and `rl tool
/// call` on a signal), and a permanent stop is what keeps the models of a test still waiting
/// for their turn from starting after it.
#[derive(Debug, Default, Clone)]
pub struct LocalModelRunner {
    state: Arc<std::sync::Mutex<RunnerState>>,
}

#[derive(Debug, Default)]
struct RunnerState {
    stopped: bool,
    /// Each running model's group, by its leader (the group's id is the leader's pid), and the
    /// marks of its processes.
    live_groups: BTreeMap<u32, (ProcessIdentity, ModelMarks)>,
}

/// Why a model was not run: the runner or its test was stopped before, or as, it started.
const STOPPED_REASON: &str = "the test was stopped before this model could run";

impl LocalModelRunner {
    /// Stops every model's process group still running (SIGTERM, grace, SIGKILL) with what it
    /// left outside, and every model asked to run from now on is refused.
    pub fn stop_all(&self) {
        let models: Vec<(ProcessIdentity, ModelMarks)> = {
            let mut state = self.lock_state();
            state.stopped = true;
            state.live_groups.values().cloned().collect()
        };
        // Side by side: each group may take its whole grace period to end.
        std::thread::scope(|scope| {
            for (leader, marks) in &models {
                scope.spawn(move || end_model(*leader, marks));
            }
        });
    }

    fn is_stopped(&self) -> bool {
        self.lock_state().stopped
    }

    /// Records a just-spawned group, unless the runner has been stopped: checked under the
    /// lock `stop_all` takes, so a group is either seen by `stop_all` or refused here, never
    /// missed by both. Returns whether the group may run.
    fn track_started(&self, leader: ProcessIdentity, marks: &ModelMarks) -> bool {
        let mut state = self.lock_state();
        if state.stopped {
            return false;
        }
        state
            .live_groups
            .insert(leader.pid, (leader, marks.clone()));
        true
    }

    fn track_ended(&self, pgid: u32) {
        self.lock_state().live_groups.remove(&pgid);
    }

    /// A panic elsewhere while holding the lock must not stop `stop_all` from stopping
    /// anything: the state is a flag and a set, consistent after any single update.
    fn lock_state(&self) -> std::sync::MutexGuard<'_, RunnerState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[async_trait]
impl ModelRunner for LocalModelRunner {
    async fn run(
        &self,
        job: ModelJob,
        timeout: Duration,
        secrets: Secrets,
        progress: ProgressSink,
    ) -> ModelRun {
        let started = Instant::now();
        // Not announced as started: it never will be.
        if self.is_stopped() || stop_request(&job.stop_path).is_some() {
            let outcome = ModelOutcome::NotStarted {
                reason: STOPPED_REASON.to_owned(),
            };
            progress(Progress::Finished {
                model: job.model.clone(),
                outcome: outcome.clone(),
            });
            return ModelRun {
                outcome,
                duration: started.elapsed(),
            };
        }
        progress(Progress::Started {
            model: job.model.clone(),
            total_groups: job.total_groups,
        });
        let outcome = match self.run_process(&job, timeout, &secrets, &progress).await {
            Ok(outcome) => outcome,
            Err(reason) => ModelOutcome::NotStarted {
                reason: secrets.redact(&reason),
            },
        };
        progress(Progress::Finished {
            model: job.model.clone(),
            outcome: outcome.clone(),
        });
        ModelRun {
            outcome,
            duration: started.elapsed(),
        }
    }
}

impl LocalModelRunner {
    async fn run_process(
        &self,
        job: &ModelJob,
        timeout: Duration,
        secrets: &Secrets,
        progress: &ProgressSink,
    ) -> Result<ModelOutcome, String> {
        // Copied as bytes in bounded chunks: a model printing one endless line costs no memory.
        let (output, mut copy) =
            rl_process::redacted_output(&job.log_path, secrets.clone(), job.log_limit)
                .map_err(|error| format!("cannot create {}: {error}", job.log_path.display()))?;
        let output_err = output
            .try_clone()
            .map_err(|error| format!("cannot share its output pipe: {error}"))?;
        let mut command = tokio::process::Command::new(&job.program);
        command
            .args(&job.args)
            .current_dir(&job.working_dir)
            .stdin(Stdio::null())
            .stdout(output)
            .stderr(output_err)
            // Its own group, so that a timeout stops whatever it started too.
            .process_group(0);
        for name in &job.env_remove {
            command.env_remove(name);
        }
        for (name, value) in &job.env {
            command.env(name, value);
        }
        // Inherited by all it starts: what leaves its group is still found by them.
        command.envs(job.marks.environment());
        let spawned = command.spawn();
        // The command holds the pipe's write end: only the model may keep it open, so that the
        // copy ends when the model's processes do.
        drop(command);
        let mut child =
            spawned.map_err(|error| format!("cannot start {}: {error}", job.program.display()))?;
        let pgid = child.id().unwrap_or_default();
        let Some(leader) = ProcessIdentity::of(pgid) else {
            let reason = format!("its process {pgid} cannot be read in /proc");
            return Err(self.abandon(pgid, child, &job.marks, reason).await);
        };
        if !self.track_started(leader, &job.marks) {
            // `stop_all` ran between the check in `run` and the spawn: this group is ours to
            // stop, nobody else knows of it.
            let reason = STOPPED_REASON.to_owned();
            return Err(self.abandon(pgid, child, &job.marks, reason).await);
        }
        // Recorded before anything else, so that another process can find the group, and end
        // it, should this one die.
        let recorded =
            record_group(&job.group_path, &job.model, leader).map_err(|error| error.to_string());
        // Looked for after the record: a stop from another process writes its request before
        // it reads the records, so this group is either read there or refused here.
        let refusal = match recorded {
            Err(reason) => Some(format!("its process group cannot be recorded: {reason}")),
            Ok(()) if stop_request(&job.stop_path).is_some() => Some(STOPPED_REASON.to_owned()),
            Ok(()) => None,
        };
        if let Some(reason) = refusal {
            return Err(self.abandon(pgid, child, &job.marks, reason).await);
        }
        let watcher = tokio::spawn(watch_progress(job.clone(), progress.clone()));

        let mut no_signal = None;
        let waited = tokio::time::timeout(timeout, async {
            tokio::select! {
                status = child.wait() => Some(status),
                cause = without_signal(job) => {
                    no_signal = Some(cause);
                    None
                }
            }
        })
        .await;
        let waited = match waited {
            Ok(Some(status)) => Ok(status),
            // Ended for want of signal: stopped below as at a timeout, its outcome told apart.
            Ok(None) => Err(()),
            Err(_) => Err(()),
        };
        // Whatever the end, nothing of the model outlives it: its group (grandchildren
        // included) and what left the group.
        let marks = job.marks.clone();
        let survivors = tokio::task::spawn_blocking(move || end_model(leader, &marks))
            .await
            .unwrap_or_default();
        self.track_ended(pgid);
        let timed_out = waited.is_err();
        let status = if let Ok(status) = waited {
            status.ok()
        } else {
            let _ = child.wait().await;
            None
        };
        let mut notes = Vec::new();
        // A process out of reach (one that dropped the marks from its environment) may hold
        // the output open forever: the output is cut rather than the timeout broken.
        if !copy.ended(STOP_GRACE).await {
            copy.cut(STOP_GRACE).await;
            notes.push(
                "rl: output cut: a process outside the model's group kept it open".to_owned(),
            );
        }
        watcher.abort();
        report_progress(job, progress, &mut None).await;
        if !survivors.is_empty() {
            notes.push(format!("rl: processes left after the stop: {survivors:?}"));
        }
        // A model that finished with no group saved, every group it made without signal (its
        // items ran out, each dropped), has no signal too: not a broken environment.
        if no_signal.is_none() && status.is_some_and(|status| status.success()) {
            no_signal = nothing_saved_without_signal(job).await;
        }
        let outcome = match status {
            _ if no_signal.is_some() => ModelOutcome::NoSignal {
                cause: no_signal.clone().unwrap_or_default(),
            },
            _ if timed_out => ModelOutcome::TimedOut {
                after_secs: timeout.as_secs_f64(),
            },
            Some(status) if status.success() => ModelOutcome::Succeeded,
            _ if stop_request(&job.stop_path).is_some() => ModelOutcome::Stopped,
            status => failed(status),
        };
        match outcome {
            ModelOutcome::TimedOut { .. } => notes.push(format!(
                "rl: cut after {} s (the test's timeout)",
                timeout.as_secs()
            )),
            ModelOutcome::Stopped => notes.push("rl: stopped (rl preflight stop)".to_owned()),
            ModelOutcome::NoSignal { ref cause } => {
                notes.push(format!("rl: no signal: {cause}"));
            }
            _ => {}
        }
        append_notes(&job.log_path, &notes).await;
        Ok(outcome)
    }

    /// Stops a model just started that must not run, and gives the reason back. Its leader is
    /// not reaped before the stop, so the group's id is still its own.
    async fn abandon(
        &self,
        pgid: u32,
        mut child: tokio::process::Child,
        marks: &ModelMarks,
        reason: String,
    ) -> String {
        let marks = marks.clone();
        let _ = tokio::task::spawn_blocking(move || {
            rl_process::stop_group(pgid, STOP_GRACE);
            marks.end_processes(STOP_GRACE);
        })
        .await;
        self.track_ended(pgid);
        let _ = child.wait().await;
        reason
    }
}

/// Ends a model's processes: its group, by its leader's identity (the leader may be reaped, and
/// once the group has emptied its id may be another's), then whatever it left outside the group,
/// by its marks. Returns the processes that survived SIGKILL.
fn end_model(leader: ProcessIdentity, marks: &ModelMarks) -> Vec<u32> {
    let group = rl_process::stop_recorded_group(leader, STOP_GRACE);
    let detached = marks.end_processes(STOP_GRACE);
    group
        .map(|outcome| outcome.survivors)
        .unwrap_or_default()
        .into_iter()
        .chain(detached.survivors)
        .collect()
}

/// rl's own lines at the end of a model's log, once its output is copied (in its tail file
/// once it is capped, so that they stay its last lines).
async fn append_notes(log: &Path, notes: &[String]) {
    if notes.is_empty() {
        return;
    }
    let opened = tokio::fs::OpenOptions::new()
        .append(true)
        .open(rl_process::log_end(log))
        .await;
    if let Ok(mut log) = opened {
        for note in notes {
            let _ = log.write_all(format!("{note}\n").as_bytes()).await;
        }
        let _ = log.flush().await;
    }
}

fn failed(status: Option<ExitStatus>) -> ModelOutcome {
    use std::os::unix::process::ExitStatusExt;
    ModelOutcome::Failed {
        code: status.and_then(|status| status.code()),
        signal: status.and_then(|status| status.signal()),
    }
}

/// Returns once the model's environment made `no_signal_groups` groups none of which had
/// signal, with the cause; never when the model does not run through rl's runner.
async fn without_signal(job: &ModelJob) -> String {
    let Some(path) = job
        .groups_path
        .as_ref()
        .filter(|_| job.no_signal_groups > 0)
    else {
        return std::future::pending().await;
    };
    loop {
        tokio::time::sleep(PROGRESS_EVERY).await;
        if let Some(groups) = rl_process::EnvGroups::read(path)
            && groups.without_signal_past(job.no_signal_groups)
        {
            return groups.no_signal_cause();
        }
    }
}

async fn watch_progress(job: ModelJob, progress: ProgressSink) {
    let mut last = None;
    loop {
        tokio::time::sleep(PROGRESS_EVERY).await;
        report_progress(&job, &progress, &mut last).await;
    }
}

async fn report_progress(job: &ModelJob, progress: &ProgressSink, last: &mut Option<u32>) {
    let done = count_lines(&job.output_path).await;
    if *last != Some(done) {
        *last = Some(done);
        progress(Progress::Groups {
            model: job.model.clone(),
            done: done.min(job.total_groups),
            total: job.total_groups,
        });
    }
}

/// The cause, when the model saved no group and every group its environment made (one at
/// least) had no signal.
async fn nothing_saved_without_signal(job: &ModelJob) -> Option<String> {
    let groups = rl_process::EnvGroups::read(job.groups_path.as_ref()?)?;
    let none_saved = count_lines(&job.output_path).await == 0;
    (none_saved && groups.attempts() > 0 && groups.with_signal == 0)
        .then(|| groups.no_signal_cause())
}

async fn count_lines(path: &Path) -> u32 {
    count_groups(&tokio::fs::read(path).await.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_spawned_as_the_runner_stops_is_refused_not_tracked() {
        let runner = LocalModelRunner::default();
        let leader = |pid| ProcessIdentity {
            pid,
            start_ticks: 1,
        };
        let marks = ModelMarks {
            test_dir: "/nonexistent/preflight/0badc0de".into(),
            model: "01-m".to_owned(),
        };
        assert!(runner.track_started(leader(4242), &marks));
        runner.track_ended(4242);
        runner.stop_all();
        assert!(!runner.track_started(leader(4243), &marks));
        assert!(runner.lock_state().live_groups.is_empty());
    }
}
