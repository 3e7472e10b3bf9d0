//! Sweeps in the store: points taken within the sweep's bound (counted with the take), a run
//! settling its point as it is created, a stop dropping the queue, a killed driver's points
//! back in the queue, one driver at a time.

use std::collections::BTreeMap;
use std::path::PathBuf;

use rl_process::{
    Component, NewRun, NewSweep, PointOutcome, ProcessError, ProcessIdentity, RunState, RunStore,
    SweepCreated, SweepMember, SweepPointState, SweepState,
};
use rl_settings::{RunId, SweepId, Value};

fn sweep(id: &SweepId, points: usize, max_parallel: u32) -> NewSweep {
    NewSweep {
        id: id.clone(),
        environment: "arithmetic@arithmetic_env.py".into(),
        max_parallel,
        spec: "{}".into(),
        points: (0..points)
            .map(|index| {
                BTreeMap::from([(
                    "learning_rate".to_owned(),
                    Value::Float(1e-4 * (index + 1) as f64),
                )])
            })
            .collect(),
    }
}

fn run_of(id: &str, sweep: &SweepId, point: u32) -> NewRun {
    NewRun {
        id: RunId::parse(id).unwrap(),
        environment: "arithmetic@arithmetic_env.py".into(),
        config_path: PathBuf::from(format!("/state/runs/{id}/config.yaml")),
        api_port: None,
        trainer_port: None,
        logs: vec![(
            Component::Api,
            PathBuf::from(format!("/state/runs/{id}/api.log")),
        )],
        queued: false,
        max_active: None,
        resumed_from: None,
        sweep: Some(SweepMember {
            sweep: sweep.clone(),
            point,
        }),
    }
}

/// The same request while its sweep goes is that sweep; another beyond the operator's bound is
/// refused, and is taken once a sweep has ended.
#[test]
fn an_identical_sweep_is_the_one_going_and_sweeps_going_are_bounded() {
    let home = tempfile::tempdir().unwrap();
    let mut store = RunStore::open(home.path()).unwrap();
    let first = SweepId::parse("sw-0000abcd").unwrap();
    let again = SweepId::parse("sw-0000abce").unwrap();
    assert_eq!(
        store.create_sweep(&sweep(&first, 2, 1), Some(1)).unwrap(),
        SweepCreated::New
    );
    assert_eq!(
        store.create_sweep(&sweep(&again, 2, 1), Some(1)).unwrap(),
        SweepCreated::Same(first.clone())
    );
    assert!(store.sweep(&again).unwrap().is_none());
    // Another parallelism is another request: beyond the bound.
    let other = SweepId::parse("sw-0000abcf").unwrap();
    let refused = store
        .create_sweep(&sweep(&other, 2, 2), Some(1))
        .unwrap_err();
    assert!(
        matches!(refused, ProcessError::TooManySweeps { going: 1, max: 1 }),
        "{refused}"
    );
    assert!(
        refused.to_string().contains("max_active_sweeps"),
        "{refused}"
    );
    store.stop_sweep(&first).unwrap();
    assert_eq!(
        store.create_sweep(&sweep(&other, 2, 2), Some(1)).unwrap(),
        SweepCreated::New
    );
}

#[test]
fn points_start_within_the_bound_and_the_sweep_ends_with_its_runs() {
    let home = tempfile::tempdir().unwrap();
    let mut store = RunStore::open(home.path()).unwrap();
    let id = SweepId::parse("sw-0000abcd").unwrap();
    store.create_sweep(&sweep(&id, 4, 2), None).unwrap();

    let first = store.take_sweep_point(&id).unwrap().unwrap();
    let second = store.take_sweep_point(&id).unwrap().unwrap();
    assert_eq!((first.index, second.index), (0, 1));
    // Two starting: no third place.
    assert!(store.take_sweep_point(&id).unwrap().is_none());
    store.create_run(&run_of("00000001", &id, 0)).unwrap();
    // A point that could not start goes back to the queue and is taken again first.
    store
        .settle_sweep_point(&id, 1, PointOutcome::Requeued)
        .unwrap();
    let again = store.take_sweep_point(&id).unwrap().unwrap();
    assert_eq!(again.index, 1);
    store.create_run(&run_of("00000002", &id, 1)).unwrap();
    assert!(store.take_sweep_point(&id).unwrap().is_none());
    assert!(!store.finish_sweep_if_done(&id).unwrap());

    // A run ends: its place frees.
    let one = RunId::parse("00000001").unwrap();
    store
        .transition(&one, RunState::Failed, "failed in a test")
        .unwrap();
    let third = store.take_sweep_point(&id).unwrap().unwrap();
    assert_eq!(third.index, 2);
    store
        .settle_sweep_point(&id, 2, PointOutcome::Refused("its run could not start"))
        .unwrap();
    let fourth = store.take_sweep_point(&id).unwrap().unwrap();
    store
        .create_run(&run_of("00000004", &id, fourth.index))
        .unwrap();

    let recorded = store.sweep(&id).unwrap().unwrap();
    let states: Vec<SweepPointState> = recorded.points.iter().map(|p| p.state).collect();
    assert_eq!(
        states,
        [
            SweepPointState::Started,
            SweepPointState::Started,
            SweepPointState::Refused,
            SweepPointState::Started
        ]
    );
    assert_eq!(recorded.points[3].run_id.as_deref(), Some("00000004"));
    assert_eq!(
        store
            .run(&RunId::parse("00000004").unwrap())
            .unwrap()
            .unwrap()
            .sweep
            .as_deref(),
        Some(id.as_str())
    );
    for run in ["00000002", "00000004"] {
        store
            .transition(&RunId::parse(run).unwrap(), RunState::Completed, "done")
            .unwrap();
    }
    assert!(store.finish_sweep_if_done(&id).unwrap());
    assert_eq!(store.sweep(&id).unwrap().unwrap().state, SweepState::Done);
    assert!(store.take_sweep_point(&id).unwrap().is_none());
}

#[test]
fn a_stop_drops_the_queue_and_names_the_going_runs() {
    let home = tempfile::tempdir().unwrap();
    let mut store = RunStore::open(home.path()).unwrap();
    let id = SweepId::parse("sw-0000abce").unwrap();
    store.create_sweep(&sweep(&id, 3, 1), None).unwrap();
    store.take_sweep_point(&id).unwrap().unwrap();
    store.create_run(&run_of("00000011", &id, 0)).unwrap();
    let going = store.stop_sweep(&id).unwrap().unwrap();
    assert_eq!(going, [RunId::parse("00000011").unwrap()]);
    let recorded = store.sweep(&id).unwrap().unwrap();
    assert_eq!(recorded.state, SweepState::Stopped);
    assert!(
        recorded.points[1..]
            .iter()
            .all(|point| point.state == SweepPointState::Dropped)
    );
    assert!(store.take_sweep_point(&id).unwrap().is_none());
    // Stopping again names what still goes, and nothing once it has ended.
    assert_eq!(store.stop_sweep(&id).unwrap().unwrap().len(), 1);
    store
        .transition(
            &RunId::parse("00000011").unwrap(),
            RunState::Failed,
            "failed",
        )
        .unwrap()
        .unwrap();
    assert_eq!(store.stop_sweep(&id).unwrap(), None);
}

#[test]
fn a_killed_drivers_point_is_queued_again_and_one_driver_drives() {
    let home = tempfile::tempdir().unwrap();
    let mut store = RunStore::open(home.path()).unwrap();
    let id = SweepId::parse("sw-0000abcf").unwrap();
    store.create_sweep(&sweep(&id, 2, 2), None).unwrap();
    let taken = store.take_sweep_point(&id).unwrap().unwrap();
    store.requeue_orphaned_points(&id).unwrap();
    assert_eq!(
        store.take_sweep_point(&id).unwrap().unwrap().index,
        taken.index
    );
    // A run for a point that is no longer waiting for one (the sweep was stopped meanwhile)
    // is refused with the run's insert: nothing is recorded.
    store.stop_sweep(&id).unwrap();
    assert!(store.create_run(&run_of("00000021", &id, 1)).is_err());
    assert!(
        store
            .run(&RunId::parse("00000021").unwrap())
            .unwrap()
            .is_none()
    );

    let me = ProcessIdentity::of(std::process::id()).unwrap();
    assert!(store.claim_sweep_driver(&id, me).unwrap());
    assert!(store.claim_sweep_driver(&id, me).unwrap());
    let other = ProcessIdentity {
        pid: me.pid,
        start_ticks: me.start_ticks + 1,
    };
    // The recorded driver (this process) is alive: another is refused.
    assert!(!store.claim_sweep_driver(&id, other).unwrap());
    assert!(
        store
            .sweep(&SweepId::parse("sw-ffffffff").unwrap())
            .unwrap()
            .is_none()
    );
}
