//! Starting a component: the `Launcher` trait, so the supervisor can be tested with doubles,
//! and its local implementation (one process group per component, output redacted into a log
//! file).

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use rl_settings::Secrets;
use serde::{Deserialize, Serialize};

use crate::ProcessError;
use crate::capped_log::LogLimit;
use crate::groups::{StopOutcome, group_is_ours, stop_recorded_group};
use crate::identity::ProcessIdentity;
use crate::output::{OutputCopy, redacted_output};
use crate::state::{Component, ComponentStatus};
use crate::strays::{StrayOutcome, descendants_of, end_strays, reap_adopted};

/// After a component's process ended, how long what it printed may take to reach its log.
const OUTPUT_DRAIN_LIMIT: Duration = Duration::from_secs(1);
/// At the end of a run, how long its output may take to be written out once its processes
/// are gone.
const OUTPUT_END_LIMIT: Duration = Duration::from_secs(2);
/// How often a supervisor collects the orphans it adopted that have ended.
const REAP_EVERY: Duration = Duration::from_secs(5);

/// Everything needed to start one component. Persisted in the run's launch plan, so it never
/// holds a secret: keys reach the component through the environment it inherits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchSpec {
    pub component: Component,
    pub program: PathBuf,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    /// Added to the inherited environment. Secrets travel here, never in `args`.
    pub env: Vec<(String, String)>,
    /// Removed from the inherited environment (keys this component does not need).
    pub env_remove: Vec<String>,
    /// stdout and stderr both go here, appended, with every key redacted; past the plan's
    /// `log_limit_bytes` its head is kept and its latest output goes to its tail files.
    pub log_path: PathBuf,
}

impl LaunchSpec {
    /// The value this component gets for the variable `name` (the last one set, as the
    /// process sees it); `None` when it gets none from rl.
    pub fn variable(&self, name: &str) -> Option<&str> {
        self.env
            .iter()
            .rev()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// Where a run's components run, once the launcher has a place for them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// Where the supervisor reaches the components' ports.
    pub host: String,
    /// On this machine: the supervisor may check its own ports.
    pub local: bool,
    /// For the run's events (`SLURM job 12 on node7`).
    pub description: String,
}

impl Placement {
    pub fn here() -> Self {
        Self {
            host: "127.0.0.1".to_owned(),
            local: true,
            description: "this machine".to_owned(),
        }
    }
}

/// What a launcher says while it waits for a place (a scheduler's queue).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllocationNote {
    Submitted { job: String },
    Waiting { job: String, reason: String },
}

/// How a cluster ended the run's work, when that says more than a component's exit status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterEnd {
    /// Completed, Stopped (cancelled outside rl) or Failed.
    pub outcome: crate::state::RunState,
    pub message: String,
}

#[cfg_attr(test, mockall::automock)]
#[async_trait]
pub trait Launcher: Send + Sync {
    /// Finds the place the components will run in before the first is launched, saying what
    /// it waits for on the way. Locally there is nothing to wait for.
    async fn allocate(
        &self,
        notes: tokio::sync::mpsc::UnboundedSender<AllocationNote>,
    ) -> Result<Placement, ProcessError> {
        let _ = notes;
        Ok(Placement::here())
    }

    /// Starts the component in a process group of its own.
    async fn launch(&self, spec: &LaunchSpec) -> Result<Box<dyn RunningComponent>, ProcessError>;

    /// Stops the whole process group `leader` started (its pid is the group's id): SIGTERM, up
    /// to `grace`, then SIGKILL, each only while the group is still the one it started
    /// (`group_is_ours`): once its leader is reaped and the group empty, the id may be another
    /// group's, which must get no signal.
    async fn stop_group(&self, leader: ProcessIdentity, grace: Duration) -> StopOutcome;

    /// Once every component's group is stopped: ends whatever the components started that is
    /// still there outside their groups (SIGTERM, up to `grace`, SIGKILL), and waits for the
    /// components' output to be written out.
    async fn end_strays(&self, grace: Duration) -> StrayOutcome {
        let _ = grace;
        StrayOutcome::default()
    }

    /// After a component ended by itself: whether the cluster ended the run's work (a time
    /// limit, a cancel, a failed node), and how.
    async fn cluster_end(&self) -> Option<ClusterEnd> {
        None
    }

    /// Gives back what `allocate` took, once every component is stopped; errs when it cannot
    /// (a job SLURM still holds), so the run says so.
    async fn release(&self) -> Result<(), ProcessError> {
        Ok(())
    }
}

/// A started component.
#[async_trait]
pub trait RunningComponent: Send {
    /// Its process: the leader of a process group of its own (the group's id is its pid),
    /// which holds everything it started.
    fn identity(&self) -> ProcessIdentity;
    /// Waits until the process ends.
    async fn wait(&mut self) -> ComponentStatus;
}

/// A log file opened for appending, twice: one handle for stdout, one for stderr.
pub(crate) fn open_log(path: &std::path::Path) -> std::io::Result<(Stdio, Stdio)> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    let log_err = log.try_clone()?;
    Ok((Stdio::from(log), Stdio::from(log_err)))
}

/// Runs components as child processes of the calling process (the supervisor), their output
/// redacted of `secrets` on its way to their logs.
#[derive(Clone, Default)]
pub struct LocalLauncher {
    secrets: Secrets,
    /// What each component's log keeps at most.
    log_limit: LogLimit,
    /// The calling process is a run's supervisor and nothing else: every process below it is
    /// the run's.
    owns_descendants: bool,
    launched: Arc<Mutex<Launched>>,
}

#[derive(Default)]
struct Launched {
    /// The components' own processes, which their waiting tasks reap.
    leaders: Vec<u32>,
    outputs: Vec<OutputCopy>,
}

impl LocalLauncher {
    pub fn new(secrets: Secrets) -> Self {
        Self {
            secrets,
            ..Self::default()
        }
    }

    /// The launcher of a run's supervisor, which is made the child subreaper of what it starts:
    /// a process a component leaves (one that called `setsid` and outlived its parent) stays
    /// below the supervisor, which ends it with the run and collects its exit.
    pub fn for_supervisor(secrets: Secrets, log_limit: LogLimit) -> Result<Self, ProcessError> {
        nix::sys::prctl::set_child_subreaper(true).map_err(|errno| {
            ProcessError::SupervisorSetup(format!(
                "cannot become the subreaper of the run's processes: {errno}"
            ))
        })?;
        let launcher = Self {
            owns_descendants: true,
            log_limit,
            ..Self::new(secrets)
        };
        let launched = launcher.launched.clone();
        // Adopted orphans that end would stay zombies until the run does.
        std::thread::Builder::new()
            .name("rl-reaper".to_owned())
            .spawn(move || {
                loop {
                    std::thread::sleep(REAP_EVERY);
                    reap_adopted(&lock(&launched).leaders);
                }
            })
            .map_err(|error| {
                ProcessError::SupervisorSetup(format!("cannot start its reaper thread: {error}"))
            })?;
        Ok(launcher)
    }
}

fn lock(launched: &Mutex<Launched>) -> MutexGuard<'_, Launched> {
    launched
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[async_trait]
impl Launcher for LocalLauncher {
    async fn launch(&self, spec: &LaunchSpec) -> Result<Box<dyn RunningComponent>, ProcessError> {
        let fail = |reason: String| ProcessError::Launch {
            component: spec.component,
            reason,
        };
        let (output, copy) = redacted_output(&spec.log_path, self.secrets.clone(), self.log_limit)
            .map_err(|e| fail(format!("cannot open log {}: {e}", spec.log_path.display())))?;
        let output_err = output
            .try_clone()
            .map_err(|e| fail(format!("cannot share its output pipe: {e}")))?;
        let mut command = tokio::process::Command::new(&spec.program);
        command
            .args(&spec.args)
            .current_dir(&spec.cwd)
            .stdin(Stdio::null())
            .stdout(output)
            .stderr(output_err)
            .process_group(0)
            // The supervisor owns the group's end explicitly; dropping a handle must not kill.
            .kill_on_drop(false);
        // The plan names the keys this component must not get; rl's own secrets, known to
        // this process alone, no component gets either.
        rl_settings::withhold(command.as_std_mut(), &rl_settings::SECRET_NAMES);
        for name in &spec.env_remove {
            command.env_remove(name);
        }
        command.envs(spec.env.iter().map(|(k, v)| (k, v)));
        let (child, pid) = {
            let mut launched = lock(&self.launched);
            // Spawned and recorded under the lock: the reaper never takes it for an orphan.
            let spawned = command.spawn();
            // The command holds the pipe's write end: only the component may keep it open.
            drop(command);
            let child = spawned.map_err(|e| fail(format!("{}: {e}", spec.program.display())))?;
            let pid = child
                .id()
                .ok_or_else(|| fail("the process ended before it could be observed".to_owned()))?;
            launched.leaders.push(pid);
            launched.outputs.push(copy.clone());
            (child, pid)
        };
        let identity = ProcessIdentity::of(pid)
            .ok_or_else(|| fail(format!("process {pid} vanished right after it started")))?;
        Ok(Box::new(LocalProcess {
            child,
            identity,
            output: copy,
        }))
    }

    async fn stop_group(&self, leader: ProcessIdentity, grace: Duration) -> StopOutcome {
        // Polling /proc and sleeping between signals would stall the supervisor's event loop.
        tokio::task::spawn_blocking(move || {
            stop_recorded_group(leader, grace).unwrap_or_else(StopOutcome::nothing_to_stop)
        })
        .await
        .unwrap_or_else(|_| StopOutcome {
            was_empty: false,
            graceful: false,
            survivors: if group_is_ours(leader) {
                crate::identity::members_of_group(i32::try_from(leader.pid).unwrap_or(0))
            } else {
                Vec::new()
            },
        })
    }

    async fn end_strays(&self, grace: Duration) -> StrayOutcome {
        let mut outcome = StrayOutcome::default();
        if self.owns_descendants {
            let me = std::process::id();
            let ended =
                tokio::task::spawn_blocking(move || end_strays(|| descendants_of(me), grace)).await;
            outcome = ended.unwrap_or_else(|_| StrayOutcome {
                survivors: descendants_of(me)
                    .into_iter()
                    .map(|stray| stray.identity.pid)
                    .collect(),
                ..StrayOutcome::default()
            });
            reap_adopted(&lock(&self.launched).leaders);
        }
        let outputs = lock(&self.launched).outputs.clone();
        for mut output in outputs {
            output.ended(OUTPUT_END_LIMIT).await;
        }
        outcome
    }
}

struct LocalProcess {
    child: tokio::process::Child,
    identity: ProcessIdentity,
    output: OutputCopy,
}

#[async_trait]
impl RunningComponent for LocalProcess {
    fn identity(&self) -> ProcessIdentity {
        self.identity
    }

    async fn wait(&mut self) -> ComponentStatus {
        use std::os::unix::process::ExitStatusExt;
        let status = match self.child.wait().await {
            Ok(status) => match (status.code(), status.signal()) {
                (Some(code), _) => ComponentStatus::Exited { code },
                (None, Some(signal)) => ComponentStatus::Signalled { signal },
                (None, None) => ComponentStatus::Exited { code: -1 },
            },
            // The child was already reaped elsewhere: nothing more can be known of it.
            Err(_) => ComponentStatus::Exited { code: -1 },
        };
        // Whoever reads its log for why it ended finds its last words there.
        self.output.drained(OUTPUT_DRAIN_LIMIT).await;
        status
    }
}
