//! Running one model's process: its own process group, everything it prints captured with keys
//! redacted (atroposlib prints its whole config, key included), progress read from the groups
//! file as it grows, and a timeout that stops the whole group.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use rl_process::ProcessIdentity;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

use crate::analysis::count_groups;
use crate::command::ModelJob;
use crate::report::ModelOutcome;
use crate::tracking::{record_group, stop_request};

/// How often the groups file is looked at for progress.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);
/// SIGTERM, then this long, then SIGKILL, for a model's group that is stopped.
pub(crate) const STOP_GRACE: Duration = Duration::from_secs(3);

/// What a person or agent watching the test is told.
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
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
#[cfg_attr(test, mockall::automock)]
#[async_trait]
pub trait ModelRunner: Send + Sync {
    async fn run(
        &self,
        job: ModelJob,
        timeout: Duration,
        redactor: Redactor,
        progress: ProgressSink,
    ) -> ModelRun;
}

/// Replaces key values in text with `[REDACTED NAME]`.
#[derive(Clone, Default)]
pub struct Redactor {
    secrets: Vec<(String, String)>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.secrets.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("Redactor").field("names", &names).finish()
    }
}

impl Redactor {
    /// Values shorter than this would match ordinary text; no real key is that short.
    const MIN_LEN: usize = 6;

    pub fn add(&mut self, name: &str, value: &str) {
        if value.len() >= Self::MIN_LEN {
            self.secrets.push((name.to_owned(), value.to_owned()));
        }
    }

    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for (name, value) in &self.secrets {
            if out.contains(value.as_str()) {
                out = out.replace(value.as_str(), &format!("[REDACTED {name}]"));
            }
        }
        out
    }
}

/// Runs jobs as local processes, and knows their process groups while they run, so that a
/// caller interrupted mid-test can stop them all (they are not in its group, so a Ctrl-C in a
/// terminal does not reach them).
///
/// `stop_all` is final: every clone shares one state, and once stopped the runner starts no
/// model again — each is reported not started. Every caller stops it only as its process
/// ends (`rl serve` at shutdown, `rl mcp` when its session is over, `rl test` and `rl tool
/// call` on a signal), and a permanent stop is what keeps the models of a test still waiting
/// for their turn from starting after it.
#[derive(Debug, Default, Clone)]
pub struct LocalModelRunner {
    state: Arc<std::sync::Mutex<RunnerState>>,
}

#[derive(Debug, Default)]
struct RunnerState {
    stopped: bool,
    /// Each running model's group, by its leader (the group's id is the leader's pid).
    live_groups: BTreeMap<u32, ProcessIdentity>,
}

/// Why a model was not run: the runner or its test was stopped before, or as, it started.
const STOPPED_REASON: &str = "the test was stopped before this model could run";

impl LocalModelRunner {
    /// Stops every model's process group still running (SIGTERM, grace, SIGKILL), and every
    /// model asked to run from now on is refused.
    pub fn stop_all(&self) {
        let groups: Vec<ProcessIdentity> = {
            let mut state = self.lock_state();
            state.stopped = true;
            state.live_groups.values().copied().collect()
        };
        // Side by side: each group may take its whole grace period to end.
        std::thread::scope(|scope| {
            for leader in groups {
                scope.spawn(move || rl_process::stop_recorded_group(leader, STOP_GRACE));
            }
        });
    }

    fn is_stopped(&self) -> bool {
        self.lock_state().stopped
    }

    /// Records a just-spawned group, unless the runner has been stopped: checked under the
    /// lock `stop_all` takes, so a group is either seen by `stop_all` or refused here, never
    /// missed by both. Returns whether the group may run.
    fn track_started(&self, leader: ProcessIdentity) -> bool {
        let mut state = self.lock_state();
        if state.stopped {
            return false;
        }
        state.live_groups.insert(leader.pid, leader);
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
        redactor: Redactor,
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
        let outcome = match self.run_process(&job, timeout, &redactor, &progress).await {
            Ok(outcome) => outcome,
            Err(reason) => ModelOutcome::NotStarted {
                reason: redactor.redact(&reason),
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
        redactor: &Redactor,
        progress: &ProgressSink,
    ) -> Result<ModelOutcome, String> {
        let log = tokio::fs::File::create(&job.log_path)
            .await
            .map_err(|error| format!("cannot create {}: {error}", job.log_path.display()))?;
        let log = Arc::new(Mutex::new(log));
        let mut command = tokio::process::Command::new(&job.program);
        command
            .args(&job.args)
            .current_dir(&job.working_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own group, so that a timeout stops whatever it started too.
            .process_group(0);
        for name in &job.env_remove {
            command.env_remove(name);
        }
        for (name, value) in &job.env {
            command.env(name, value);
        }
        let mut child = command
            .spawn()
            .map_err(|error| format!("cannot start {}: {error}", job.program.display()))?;
        let pgid = child.id().unwrap_or_default();
        let Some(leader) = ProcessIdentity::of(pgid) else {
            let reason = format!("its process {pgid} cannot be read in /proc");
            return Err(self.abandon(pgid, child, reason).await);
        };
        if !self.track_started(leader) {
            // `stop_all` ran between the check in `run` and the spawn: this group is ours to
            // stop, nobody else knows of it.
            return Err(self.abandon(pgid, child, STOPPED_REASON.to_owned()).await);
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
            return Err(self.abandon(pgid, child, reason).await);
        }
        let copiers = [
            child
                .stdout
                .take()
                .map(|out| copy_lines(out, log.clone(), redactor.clone())),
            child
                .stderr
                .take()
                .map(|err| copy_lines(err, log.clone(), redactor.clone())),
        ];
        let watcher = tokio::spawn(watch_progress(job.clone(), progress.clone()));

        let waited = tokio::time::timeout(timeout, child.wait()).await;
        // Whatever the end, nothing of the model's group outlives it (grandchildren included).
        // By its leader's identity: the leader is reaped by now, and once the group has emptied
        // its id may be another's.
        let stopped = tokio::task::spawn_blocking(move || {
            rl_process::stop_recorded_group(leader, STOP_GRACE)
        })
        .await
        .ok()
        .flatten();
        self.track_ended(pgid);
        let timed_out = waited.is_err();
        let status = match waited {
            Ok(status) => status.ok(),
            Err(_) => {
                let _ = child.wait().await;
                None
            }
        };
        let mut notes = Vec::new();
        // A process outside the group (started with its own session) may hold the pipes open
        // forever: the output is cut rather than the timeout broken.
        for mut copier in copiers.into_iter().flatten() {
            if tokio::time::timeout(STOP_GRACE, &mut copier).await.is_err() {
                copier.abort();
                notes.push(
                    "rl: output cut: a process outside the model's group kept it open".to_owned(),
                );
            }
        }
        watcher.abort();
        report_progress(job, progress, &mut None).await;
        if let Some(stopped) = stopped.filter(|outcome| !outcome.survivors.is_empty()) {
            notes.push(format!(
                "rl: processes left after the stop: {:?}",
                stopped.survivors
            ));
        }
        let outcome = match status {
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
            ModelOutcome::Stopped => notes.push("rl: stopped (rl test stop)".to_owned()),
            _ => {}
        }
        let mut log = log.lock().await;
        for note in notes {
            let _ = log.write_all(format!("{note}\n").as_bytes()).await;
        }
        let _ = log.flush().await;
        Ok(outcome)
    }

    /// Stops a group just started that must not run, and gives the reason back. Its leader is
    /// not reaped before the stop, so the group's id is still its own.
    async fn abandon(&self, pgid: u32, mut child: tokio::process::Child, reason: String) -> String {
        let _ = tokio::task::spawn_blocking(move || rl_process::stop_group(pgid, STOP_GRACE)).await;
        self.track_ended(pgid);
        let _ = child.wait().await;
        reason
    }
}

fn failed(status: Option<ExitStatus>) -> ModelOutcome {
    use std::os::unix::process::ExitStatusExt;
    ModelOutcome::Failed {
        code: status.and_then(|status| status.code()),
        signal: status.and_then(|status| status.signal()),
    }
}

/// Lines of a child's output, redacted, appended to its log. Output is read as bytes: a child
/// may print anything, valid UTF-8 or not.
fn copy_lines(
    stream: impl AsyncRead + Unpin + Send + 'static,
    log: Arc<Mutex<tokio::fs::File>>,
    redactor: Redactor,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut reader = BufReader::new(stream);
        let mut line = Vec::new();
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let text = redactor.redact(&String::from_utf8_lossy(&line));
                    let mut log = log.lock().await;
                    if log.write_all(text.as_bytes()).await.is_err() {
                        break;
                    }
                }
            }
        }
    })
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

async fn count_lines(path: &Path) -> u32 {
    count_groups(&tokio::fs::read(path).await.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_redacted_and_short_values_ignored() {
        let mut redactor = Redactor::default();
        redactor.add("OPENROUTER_API_KEY", "sk-or-v1-abcdef");
        redactor.add("SHORT", "abc");
        let text = redactor.redact("api_key='sk-or-v1-abcdef' abc");
        assert_eq!(text, "api_key='[REDACTED OPENROUTER_API_KEY]' abc");
        assert!(!format!("{redactor:?}").contains("sk-or"));
    }

    #[test]
    fn a_group_spawned_as_the_runner_stops_is_refused_not_tracked() {
        let runner = LocalModelRunner::default();
        let leader = |pid| ProcessIdentity {
            pid,
            start_ticks: 1,
        };
        assert!(runner.track_started(leader(4242)));
        runner.track_ended(4242);
        runner.stop_all();
        assert!(!runner.track_started(leader(4243)));
        assert!(runner.lock_state().live_groups.is_empty());
    }
}
