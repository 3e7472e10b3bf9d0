//! The supervisor's state machine against a mocked launcher and probe: no process is started,
//! no signal is sent. The real processes are exercised by rl-cli's end-to-end tests.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use rl_settings::{RunId, RunTiming, Secrets};
use tokio::sync::{oneshot, watch};

use super::Supervisor;
use crate::groups::StopOutcome;
use crate::identity::ProcessIdentity;
use crate::launcher::{
    AllocationNote, ClusterEnd, LaunchSpec, MockLauncher, Placement, RunningComponent,
};
use crate::plan::LaunchPlan;
use crate::probe::{MockProbe, Readiness};
use crate::state::{Component, ComponentStatus, Phase, RunState};
use crate::store::{NewRun, RunStore};
use crate::strays::{Stray, StrayOutcome};
use crate::{ProcessError, free_loopback_ports};

/// Far above any real pid (`pid_max` is at most 2^22), so nothing real is ever named.
const FAKE_PID: u32 = 90_000_000;

struct FakeProcess {
    identity: ProcessIdentity,
    exit: oneshot::Receiver<ComponentStatus>,
}

#[async_trait]
impl RunningComponent for FakeProcess {
    fn identity(&self) -> ProcessIdentity {
        self.identity
    }
    async fn wait(&mut self) -> ComponentStatus {
        (&mut self.exit)
            .await
            .unwrap_or(ComponentStatus::Exited { code: -1 })
    }
}

fn fake_pid(component: Component) -> u32 {
    FAKE_PID + component as u32
}

/// The ends of the fake processes: the test ends one by sending its status.
#[derive(Clone, Default)]
struct Exits(Arc<Mutex<BTreeMap<Component, oneshot::Sender<ComponentStatus>>>>);

impl Exits {
    fn end(&self, component: Component, status: ComponentStatus) {
        let sender = self.0.lock().unwrap().remove(&component);
        sender.expect("component not running").send(status).unwrap();
    }
}

/// A launcher double whose processes end when the test says, or when stopped (SIGTERM), on
/// this machine.
fn launcher(exits: &Exits, launches: usize, fail_on: Option<Component>) -> MockLauncher {
    launcher_leaving(exits, launches, fail_on, StrayOutcome::default())
}

/// `launcher`, whose components leave `strays` outside their groups.
fn launcher_leaving(
    exits: &Exits,
    launches: usize,
    fail_on: Option<Component>,
    strays: StrayOutcome,
) -> MockLauncher {
    let mut launcher = MockLauncher::new();
    fake_processes(&mut launcher, exits, Some(launches), fail_on);
    launcher
        .expect_end_strays()
        .returning(move |_| strays.clone());
    launcher
        .expect_allocate()
        .returning(|_| Ok(Placement::here()));
    launcher.expect_cluster_end().returning(|| None);
    launcher.expect_release().returning(|| Ok(()));
    launcher
}

/// Launches and stops of fake processes: `launches` of them if given (the one named `fail_on`
/// fails), each ending when the test says or when its group is stopped.
fn fake_processes(
    launcher: &mut MockLauncher,
    exits: &Exits,
    launches: Option<usize>,
    fail_on: Option<Component>,
) {
    let started = exits.clone();
    let launch = launcher.expect_launch();
    if let Some(launches) = launches {
        launch.times(launches);
    }
    launch.returning(move |spec| {
        if Some(spec.component) == fail_on {
            return Err(ProcessError::Launch {
                component: spec.component,
                reason: "no such program".to_owned(),
            });
        }
        let (sender, exit) = oneshot::channel();
        started.0.lock().unwrap().insert(spec.component, sender);
        let identity = ProcessIdentity {
            pid: fake_pid(spec.component),
            start_ticks: 1,
        };
        Ok(Box::new(FakeProcess { identity, exit }))
    });
    let stopped = exits.clone();
    launcher.expect_stop_group().returning(move |leader, _| {
        let component = Component::START_ORDER
            .into_iter()
            .find(|c| fake_pid(*c) == leader.pid && leader.start_ticks == 1)
            .expect("stop of a group the run does not own");
        if let Some(sender) = stopped.0.lock().unwrap().remove(&component) {
            let _ = sender.send(ComponentStatus::Signalled { signal: 15 });
        }
        StopOutcome {
            was_empty: false,
            graceful: true,
            survivors: Vec::new(),
        }
    });
}

/// A probe that answers for the components in `ready`.
fn probe(ready: &'static [Component]) -> MockProbe {
    let mut probe = MockProbe::new();
    probe.expect_is_ready().returning(move |_, readiness| {
        let component = match readiness {
            Readiness::EngineHealthy { .. } => Component::Engine,
            Readiness::ApiAnswers { .. } => Component::Api,
            Readiness::TrainerHealthy { .. } => Component::Trainer,
            Readiness::EnvSending { .. } => Component::Env,
        };
        ready.contains(&component)
    });
    probe
}

/// A launch spec whose log lives in `dir`; the program never runs.
fn spec_for(component: Component, dir: &std::path::Path) -> LaunchSpec {
    LaunchSpec {
        component,
        program: "true".into(),
        args: Vec::new(),
        cwd: dir.to_path_buf(),
        env: Vec::new(),
        env_remove: Vec::new(),
        log_path: dir.join(format!("{component}.log")),
    }
}

struct Run {
    home: tempfile::TempDir,
    id: RunId,
    plan: LaunchPlan,
}

/// The components of a run that trains on the hosted Tinker (no local engine).
const HOSTED: [Component; 3] = [Component::Api, Component::Trainer, Component::Env];

fn new_run(timing: RunTiming) -> Run {
    new_run_queued(timing, false)
}

/// A run as a scheduler backend creates it: `starting: queued` when `queued`.
fn new_run_queued(timing: RunTiming, queued: bool) -> Run {
    new_run_of(timing, queued, &HOSTED)
}

/// A run of `components` (in start order), `starting: queued` when `queued`.
fn new_run_of(timing: RunTiming, queued: bool, components: &[Component]) -> Run {
    let home = tempfile::tempdir().unwrap();
    let id = RunId::parse("0badc0de").unwrap();
    let [api_port, trainer_port, engine_port] = free_loopback_ports::<3>().unwrap();
    let plan = LaunchPlan {
        run_id: id.clone(),
        api_port,
        trainer_port,
        engine_port: components
            .contains(&Component::Engine)
            .then_some(engine_port),
        components: components
            .iter()
            .map(|c| spec_for(*c, home.path()))
            .collect(),
        timing,
        slurm: None,
    };
    RunStore::open(home.path())
        .unwrap()
        .create_run(&NewRun {
            id: id.clone(),
            environment: "arithmetic".to_owned(),
            config_path: home.path().join("config.yaml"),
            api_port: Some(api_port),
            trainer_port: Some(trainer_port),
            logs: components
                .iter()
                .map(|c| (*c, home.path().join(format!("{c}.log"))))
                .collect(),
            queued,
            max_active: None,
            resumed_from: None,
            sweep: None,
        })
        .unwrap();
    Run { home, id, plan }
}

fn quick() -> RunTiming {
    RunTiming {
        engine_ready_timeout_secs: 5.0,
        api_ready_timeout_secs: 5.0,
        trainer_ready_timeout_secs: 5.0,
        env_settle_secs: 5.0,
        stop_grace_secs: 1.0,
        completion_grace_secs: 5.0,
        ..RunTiming::default()
    }
}

impl Run {
    fn store(&self) -> RunStore {
        RunStore::open(self.home.path()).unwrap()
    }

    async fn until(&self, wanted: RunState) {
        let store = self.store();
        for _ in 0..200 {
            if store.state(&self.id).unwrap() == wanted {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!(
            "never reached {wanted}; at {}",
            store.state(&self.id).unwrap()
        );
    }

    fn status(&self, component: Component) -> ComponentStatus {
        let run = self.store().run(&self.id).unwrap().unwrap();
        run.components
            .iter()
            .find(|c| c.component == component)
            .unwrap()
            .status
    }

    fn error(&self) -> String {
        self.store()
            .run(&self.id)
            .unwrap()
            .unwrap()
            .error
            .unwrap_or_default()
    }

    fn messages(&self) -> Vec<String> {
        self.store()
            .events(&self.id, 0, 1000)
            .unwrap()
            .into_iter()
            .map(|e| format!("{}: {}", e.kind, e.message))
            .collect()
    }

    fn supervisor<'a>(&self, doubles: &'a Doubles, secrets: Secrets) -> Supervisor<'a> {
        Supervisor::new(
            self.store(),
            self.plan.clone(),
            &doubles.launcher,
            &doubles.probe,
            doubles.stop.subscribe(),
            secrets,
        )
    }

    /// Runs the supervisor, ending `component` with `status` once the run is `at` (after
    /// `pause`, so that a component of a starting phase has been launched).
    async fn run_ending(
        &self,
        doubles: &Doubles,
        secrets: Secrets,
        at: RunState,
        pause: Duration,
        component: Component,
        status: ComponentStatus,
    ) -> RunState {
        let supervisor = self.supervisor(doubles, secrets);
        let driver = async {
            self.until(at).await;
            tokio::time::sleep(pause).await;
            doubles.exits.end(component, status);
        };
        let (ended, ()) = tokio::join!(supervisor.run(), driver);
        ended.unwrap()
    }
}

/// The launcher and probe doubles of one test, and the stop signal a supervisor would get.
struct Doubles {
    exits: Exits,
    launcher: MockLauncher,
    probe: MockProbe,
    stop: watch::Sender<bool>,
}

/// `launches` components may be launched (the one named `fail_on` fails); those in `ready`
/// pass their gate.
fn doubles(launches: usize, ready: &'static [Component], fail_on: Option<Component>) -> Doubles {
    let exits = Exits::default();
    Doubles {
        launcher: launcher(&exits, launches, fail_on),
        probe: probe(ready),
        exits,
        stop: watch::channel(false).0,
    }
}

const ALL: &[Component] = &[Component::Api, Component::Trainer, Component::Env];

#[tokio::test]
async fn a_run_starts_in_order_runs_and_completes_when_env_and_trainer_finish() {
    let run = new_run(quick());
    let doubles = doubles(3, ALL, None);
    let supervisor = run.supervisor(&doubles, Secrets::default());
    let driver = async {
        run.until(RunState::Running).await;
        doubles
            .exits
            .end(Component::Env, ComponentStatus::Exited { code: 0 });
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(
            run.store().state(&run.id).unwrap(),
            RunState::Running,
            "the trainer may still be saving its weights"
        );
        doubles
            .exits
            .end(Component::Trainer, ComponentStatus::Exited { code: 0 });
    };
    let (ended, ()) = tokio::join!(supervisor.run(), driver);
    assert_eq!(ended.unwrap(), RunState::Completed);
    let states: Vec<String> = run
        .messages()
        .into_iter()
        .filter(|m| m.starts_with("state: "))
        .map(|m| m.split([':', ' ']).nth(2).unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        states,
        ["created;", "starting", "starting", "running", "completed"],
        "{:#?}",
        run.messages()
    );
    assert_eq!(
        run.status(Component::Api),
        ComponentStatus::Signalled { signal: 15 }
    );
    assert_eq!(
        run.status(Component::Trainer),
        ComponentStatus::Exited { code: 0 }
    );
    assert!(
        run.messages()
            .iter()
            .any(|m| m.starts_with("ready: api ready after"))
    );
}

#[tokio::test]
async fn an_env_that_never_registers_counts_as_running_once_settled() {
    let run = new_run(RunTiming {
        env_settle_secs: 0.3,
        ..quick()
    });
    let doubles = doubles(3, &[Component::Api, Component::Trainer], None);
    let supervisor = run.supervisor(&doubles, Secrets::default());
    let driver = async {
        run.until(RunState::Running).await;
        doubles.stop.send(true).unwrap();
    };
    let (ended, ()) = tokio::join!(supervisor.run(), driver);
    assert_eq!(ended.unwrap(), RunState::Stopped);
    assert!(
        run.messages()
            .iter()
            .any(|m| m.contains("no scored group after 0.3 s but is alive")),
        "{:#?}",
        run.messages()
    );
}

#[tokio::test]
async fn a_trainer_finishing_while_the_env_settles_completes_the_run() {
    let run = new_run(quick());
    let doubles = doubles(3, &[Component::Api, Component::Trainer], None);
    let ended = run
        .run_ending(
            &doubles,
            Secrets::default(),
            RunState::Starting(Phase::Env),
            Duration::from_millis(50),
            Component::Trainer,
            ComponentStatus::Exited { code: 0 },
        )
        .await;
    assert_eq!(ended, RunState::Completed, "{:#?}", run.messages());
}

/// The trainer leaving with the contract's capped code caps the run at once: the environment is
/// stopped as after a completion (no grace: it would wait for steps that never come), no error
/// is recorded, and the trainer's own line is the reason.
#[tokio::test]
async fn a_trainer_that_exits_capped_caps_the_run_and_stops_the_rest() {
    let run = new_run(RunTiming {
        completion_grace_secs: 30.0,
        ..quick()
    });
    std::fs::write(
        run.home.path().join("trainer.log"),
        "[rl-trainer] step 2/6: ...\nrl-trainer: capped: max_cost 0.02 USD would be passed by step 3\n",
    )
    .unwrap();
    let doubles = doubles(3, ALL, None);
    let began = std::time::Instant::now();
    let ended = run
        .run_ending(
            &doubles,
            Secrets::default(),
            RunState::Running,
            Duration::ZERO,
            Component::Trainer,
            ComponentStatus::Exited {
                code: rl_settings::trainer::EXIT_CAPPED,
            },
        )
        .await;
    assert_eq!(ended, RunState::Capped, "{:#?}", run.messages());
    assert!(
        began.elapsed() < Duration::from_secs(20),
        "no completion grace"
    );
    assert_eq!(run.error(), "", "a capped run has no error");
    assert_eq!(
        run.status(Component::Env),
        ComponentStatus::Signalled { signal: 15 }
    );
    let messages = run.messages();
    assert!(
        messages
            .iter()
            .any(|m| m == "state: capped: max_cost 0.02 USD would be passed by step 3"),
        "{messages:#?}"
    );
}

mod early_env;
mod engine;
mod failures;
mod finishing;
mod queued;
mod stops;
