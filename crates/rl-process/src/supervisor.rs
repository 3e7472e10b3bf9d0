//! The supervisor: the one process that owns a run. It launches the components in order behind
//! readiness gates, waits on them, records every transition and exit in the store, and ends the
//! run — stopped, completed or failed — leaving no process of it behind.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use rl_settings::{RunId, Secrets};
use tokio::sync::{mpsc, watch};

use crate::ProcessError;
use crate::capped_log::LogLimit;
use crate::env_groups::{EnvGroups, GROUPS_FILE_VARIABLE};
use crate::identity::ProcessIdentity;
use crate::launcher::{ClusterEnd, Launcher, LocalLauncher, Placement};
use crate::plan::LaunchPlan;
use crate::probe::Probe;
use crate::slurm::{SlurmCli, SlurmLauncher};
use crate::state::{Component, ComponentStatus, RunState, outcome_of_exit};
use crate::store::RunStore;

/// How often readiness is asked and the store is checked for a stop recorded by another process
/// whose signal was lost. Exits and signalled stops wake the supervisor at once.
const TICK: Duration = Duration::from_millis(100);
const STORE_CHECK_EVERY: u32 = 5;
/// Ticks between two reads of the environment's group counts.
const GROUPS_CHECK_EVERY: u32 = 10;
/// After a group is empty its leader is reaped by the wait task; this bounds that wait.
const REAP_WAIT: Duration = Duration::from_secs(2);
/// What starts the trainer's last line when it capped the run (rl_trainer/__main__.py).
const CAPPED_LINE: &str = "rl-trainer: capped:";
/// Lines of a component's log quoted in the error of a failed run.
const LOG_TAIL_LINES: usize = 15;
/// A log line longer than this is shown by its end in a run's error.
const LOG_LINE_CHARS: usize = 500;

/// A component the supervisor has launched. Kept after its leader ends: what the leader started
/// may still run in its group, and is stopped with the run.
struct Launched {
    component: Component,
    /// Its process, the leader of its group.
    identity: ProcessIdentity,
}

/// How the run is going to end, once that is known.
#[derive(Debug)]
enum Ending {
    Stop,
    Failed {
        message: String,
    },
    Completed {
        finished: Component,
    },
    /// The trainer stopped before a step that would pass a cap, its state saved.
    Capped {
        message: String,
    },
}

pub struct Supervisor<'a> {
    run_id: RunId,
    store: RunStore,
    plan: LaunchPlan,
    launcher: &'a dyn Launcher,
    probe: &'a dyn Probe,
    stop_requested: watch::Receiver<bool>,
    secrets: Secrets,
    launched: Vec<Launched>,
    ended: BTreeMap<Component, ComponentStatus>,
    exits_tx: mpsc::UnboundedSender<(Component, ComponentStatus)>,
    exits: mpsc::UnboundedReceiver<(Component, ComponentStatus)>,
    ticks: u32,
    placement: Placement,
    /// When the run warned that none of its groups had signal.
    warned_no_signal: Option<Instant>,
    /// rl's trainer as its phase file shows it.
    trainer: TrainerWatch,
    /// The go file of an environment started first, until it is written: the environment is
    /// then in its setup and may not yet register.
    env_held: Option<std::path::PathBuf>,
}

enum Gate {
    Ready(String),
    End(Ending),
}

impl<'a> Supervisor<'a> {
    pub fn new(
        store: RunStore,
        plan: LaunchPlan,
        launcher: &'a dyn Launcher,
        probe: &'a dyn Probe,
        stop_requested: watch::Receiver<bool>,
        secrets: Secrets,
    ) -> Self {
        let (exits_tx, exits) = mpsc::unbounded_channel();
        Self {
            run_id: plan.run_id.clone(),
            store,
            plan,
            launcher,
            probe,
            stop_requested,
            secrets,
            launched: Vec::new(),
            ended: BTreeMap::new(),
            exits_tx,
            exits,
            ticks: 0,
            placement: Placement::here(),
            warned_no_signal: None,
            trainer: TrainerWatch::default(),
            env_held: None,
        }
    }

    /// Follows the trainer through the phase file at `path` (`trainer-phase.json`).
    #[must_use]
    pub fn watching_trainer_phase(mut self, path: std::path::PathBuf) -> Self {
        self.trainer = TrainerWatch::new(Some(path));
        self
    }

    /// Runs the run to its end and returns the state it ended in.
    pub async fn run(mut self) -> Result<RunState, ProcessError> {
        let ending = match self.start_and_watch().await {
            Ok(ending) => ending,
            // The store failed under us; still stop what we started rather than orphan it.
            Err(error) => Ending::Failed {
                message: format!("the supervisor lost its store: {error}"),
            },
        };
        self.finish(ending).await
    }

    async fn start_and_watch(&mut self) -> Result<Ending, ProcessError> {
        match self.allocate().await? {
            Ok(placement) => self.placement = placement,
            Err(ending) => return Ok(ending),
        }
        let started = Instant::now();
        if let Some(ending) = self.launch_env_first().await? {
            return Ok(ending);
        }
        for (index, component) in self.plan.start_order().into_iter().enumerate() {
            // The run was created in its first component's phase.
            if index > 0 {
                let id = self.run_id.clone();
                if self
                    .store
                    .transition(&id, RunState::Starting(component.into()), "")?
                    .is_none()
                {
                    // Refused: a stop was recorded before this component was launched.
                    return Ok(Ending::Stop);
                }
            }
            if self.stop_is_requested()? {
                return Ok(Ending::Stop);
            }
            let launched = if self.env_in_setup(component) {
                self.release_env()
            } else {
                self.launch(component).await?
            };
            if let Some(ending) = launched {
                return Ok(ending);
            }
            match self.await_ready(component).await? {
                Gate::Ready(note) => {
                    self.store.note(&self.run_id, "ready", &note)?;
                }
                Gate::End(ending) => return Ok(ending),
            }
        }
        let id = self.run_id.clone();
        let message = format!(
            "all components ready {:.1} s after launch",
            started.elapsed().as_secs_f64()
        );
        if self
            .store
            .transition(&id, RunState::Running, &message)?
            .is_none()
        {
            return Ok(Ending::Stop);
        }
        loop {
            tokio::select! {
                Some((component, status)) = self.exits.recv() => {
                    return self.ended_by_itself(component, status, true).await;
                }
                () = stop_signal(&mut self.stop_requested) => return Ok(Ending::Stop),
                () = tokio::time::sleep(TICK) => {
                    if self.stop_is_requested()? {
                        return Ok(Ending::Stop);
                    }
                    if let Some(ending) = self.signal_ending()? {
                        return Ok(ending);
                    }
                }
            }
        }
    }

    /// The file the environment's variable `name` names (its group counts, its go file).
    fn env_file_named(&self, name: &str) -> Option<std::path::PathBuf> {
        let spec = self.plan.spec(Component::Env)?;
        spec.variable(name).map(std::path::PathBuf::from)
    }

    /// Whether `component` is the environment started first, still in its setup: it may not
    /// register yet, so its end, whatever its exit code, is a failure before its gate.
    fn env_in_setup(&self, component: Component) -> bool {
        component == Component::Env && self.env_held.is_some()
    }

    /// Reads the environment's group counts now and then: warns once the first
    /// `no_signal_warn_groups` had no signal, and ends the run past `no_signal_fail_groups`.
    fn signal_ending(&mut self) -> Result<Option<Ending>, ProcessError> {
        if !self.ticks.is_multiple_of(GROUPS_CHECK_EVERY) {
            return Ok(None);
        }
        // Each step's start, seen as it happens: the step times a finishing trainer is judged by.
        self.trainer.observe();
        let Some(path) = self.env_file_named(GROUPS_FILE_VARIABLE) else {
            return Ok(None);
        };
        let Some(groups) = EnvGroups::read(&path) else {
            return Ok(None);
        };
        let timing = &self.plan.timing;
        // Warned first, also when both bounds passed between two reads: the warning is part
        // of the run's history.
        if self.warned_no_signal.is_none()
            && groups.without_signal_past(timing.no_signal_warn_groups)
        {
            self.warned_no_signal = Some(Instant::now());
            let fail = timing.no_signal_fail_groups;
            let bound = if fail > 0 {
                format!(
                    "; the run fails at {fail} such groups (run.no_signal_fail_groups), no sooner \
                     than {} from now (run.no_signal_fail_secs)",
                    seconds(timing.no_signal_fail_secs)
                )
            } else {
                String::new()
            };
            let id = self.run_id.clone();
            self.store.note(
                &id,
                "no_signal",
                &format!("{}{bound}", groups.no_signal_cause()),
            )?;
        }
        let waited_long_enough = self.warned_no_signal.is_some_and(|warned| {
            warned.elapsed().as_secs_f64() >= self.plan.timing.no_signal_fail_secs
        });
        if waited_long_enough && groups.without_signal_past(self.plan.timing.no_signal_fail_groups)
        {
            return Ok(Some(Ending::Failed {
                message: groups.no_signal_cause(),
            }));
        }
        Ok(None)
    }

    /// What the cluster's end of the run's work makes of the run, noted in its events: stopped
    /// when cancelled, failed (`detail` added to the cluster's reason) on a time limit, a node
    /// failure and the like; `None` when the job completed and the components' exits decide.
    fn cluster_ending(
        &mut self,
        end: &ClusterEnd,
        detail: &str,
    ) -> Result<Option<Ending>, ProcessError> {
        let id = self.run_id.clone();
        self.store.note(&id, "cluster", &end.message)?;
        Ok(match end.outcome {
            RunState::Stopped => Some(Ending::Stop),
            RunState::Failed => Some(Ending::Failed {
                message: format!("{}{detail}", end.message),
            }),
            _ => None,
        })
    }

    /// A component ended without being asked to: record it and decide what the run becomes.
    async fn ended_by_itself(
        &mut self,
        component: Component,
        status: ComponentStatus,
        passed_gate: bool,
    ) -> Result<Ending, ProcessError> {
        self.record_end(component, status)?;
        // A cluster that ended the run's work (a time limit, a cancel) says more than the exit.
        if let Some(end) = self.launcher.cluster_end().await {
            let detail = format!(
                "; {component} {}{}",
                describe_end(status, passed_gate),
                self.log_tail(component)
            );
            if let Some(ending) = self.cluster_ending(&end, &detail)? {
                return Ok(ending);
            }
        }
        // The trainer's capped exit is a cap wherever the start was: a cap can pass before the
        // first step (a resume whose parents spent it), as soon as the trainer has set up.
        let outcome = match outcome_of_exit(component, status) {
            RunState::Capped => RunState::Capped,
            outcome if passed_gate => outcome,
            _ => RunState::Failed,
        };
        Ok(match outcome {
            RunState::Completed => Ending::Completed {
                finished: component,
            },
            RunState::Capped => Ending::Capped {
                message: self.capped_reason(),
            },
            _ => {
                let end = if self.env_in_setup(component) {
                    format!(
                        "{} during its setup (started first, before the other components were \
                         ready)",
                        describe_end(status, true)
                    )
                } else {
                    describe_end(status, passed_gate)
                };
                Ending::Failed {
                    message: format!(
                        "{component} {end}{}{}",
                        self.cause_line(component),
                        self.log_tail(component)
                    ),
                }
            }
        })
    }

    fn record_end(
        &mut self,
        component: Component,
        status: ComponentStatus,
    ) -> Result<(), ProcessError> {
        self.ended.insert(component, status);
        let id = self.run_id.clone();
        self.store.record_component(&id, component, None, status)
    }

    /// Whether a stop was asked for by signal or recorded in the store by another process.
    fn stop_is_requested(&mut self) -> Result<bool, ProcessError> {
        if *self.stop_requested.borrow() {
            return Ok(true);
        }
        // The first call always reads the store: a stop may have been recorded before the
        // supervisor existed.
        let check = self.ticks.is_multiple_of(STORE_CHECK_EVERY);
        self.ticks = self.ticks.wrapping_add(1);
        if !check {
            return Ok(false);
        }
        // `lost` is no request: it may be the verdict of a reader that cannot see this process
        // (another pid namespace); the run's processes are not ended on such a guess.
        let state = self.store.state(&self.run_id)?;
        Ok(matches!(state, RunState::Stopping | RunState::Stopped))
    }
}

/// The body of a detached supervisor (`rl supervise <id>`): runs the run in `home` to its end.
/// SIGTERM and SIGINT stop the run; SIGHUP is ignored, as the terminal that started the run
/// may close.
pub fn supervise(home: &Path, run_id: &RunId) -> Result<RunState, ProcessError> {
    use tokio::signal::unix::{SignalKind, signal};
    crate::current_thread_runtime()?.block_on(async {
        let (stop, stop_requested) = watch::channel(false);
        let mut hangup = signal(SignalKind::hangup()).map_err(ProcessError::Signal)?;
        for kind in [SignalKind::terminate(), SignalKind::interrupt()] {
            let mut stream = signal(kind).map_err(ProcessError::Signal)?;
            let stop = stop.clone();
            tokio::spawn(async move {
                while stream.recv().await.is_some() {
                    let _ = stop.send(true);
                }
            });
        }
        tokio::spawn(async move { while hangup.recv().await.is_some() {} });
        let mut store = RunStore::open(home)?;
        let me = ProcessIdentity::of(std::process::id()).ok_or_else(|| {
            ProcessError::Store("cannot read this process's own identity in /proc".to_owned())
        })?;
        store.claim_supervisor(run_id, me)?;
        let environment: BTreeMap<String, String> = std::env::vars().collect();
        let secrets = Secrets::load(home, &environment);
        let setup = LaunchPlan::load(home, run_id).and_then(|plan| {
            let probe = crate::probe::HttpProbe::new()?;
            let local = LocalLauncher::for_supervisor(
                secrets.clone(),
                LogLimit(plan.timing.log_limit_bytes),
            )?;
            Ok((plan, probe, local))
        });
        let (plan, probe, local) = match setup {
            Ok(setup) => setup,
            Err(error) => {
                // Nothing was launched; say why rather than leave a run that later reads `lost`.
                let message = format!("the supervisor could not start the run: {error}");
                report(store.set_error(run_id, &message));
                report(
                    store
                        .transition(run_id, RunState::Failed, &message)
                        .map(drop),
                );
                return Err(error);
            }
        };
        let launcher: Box<dyn Launcher> = match plan.slurm.clone() {
            None => Box::new(local),
            Some(slurm) => Box::new(SlurmLauncher::new(
                run_id.clone(),
                slurm,
                rl_settings::run_dir(home, run_id),
                Box::new(SlurmCli),
                local,
            )),
        };
        Supervisor::new(
            store,
            plan,
            launcher.as_ref(),
            &probe,
            stop_requested,
            secrets,
        )
        .watching_trainer_phase(rl_settings::RunFolder::of(home, run_id).trainer_phase())
        .run()
        .await
    })
}

/// A store write that failed while the run is being ended: said in the supervisor's log (its
/// stderr), never allowed to stop the clean-up.
fn report(result: Result<(), ProcessError>) {
    use std::io::Write;
    if let Err(error) = result {
        let _ = writeln!(std::io::stderr(), "rl supervise: could not record: {error}");
    }
}

/// Resolves when a stop has been requested; never when the sender is gone.
async fn stop_signal(stop_requested: &mut watch::Receiver<bool>) {
    if stop_requested.wait_for(|stop| *stop).await.is_err() {
        std::future::pending::<()>().await;
    }
}

mod ending;
mod starting;
mod trainer_watch;
mod wording;

use trainer_watch::{Finishing, TrainerWatch};

use wording::{describe_end, first_line, seconds};
#[cfg(test)]
mod tests;
