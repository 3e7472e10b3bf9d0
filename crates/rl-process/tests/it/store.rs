use std::collections::BTreeMap;
use std::path::PathBuf;

use rl_process::{
    Component, ComponentStatus, Lineage, LineageKind, NewRun, Phase, ProcessError, ProcessIdentity,
    RunState, RunStore,
};
use rl_settings::RunId;

fn new_run(id: &str) -> NewRun {
    NewRun {
        id: RunId::parse(id).unwrap(),
        environment: "arithmetic@arithmetic_env.py".into(),
        config_path: PathBuf::from(format!("/state/runs/{id}/config.yaml")),
        api_port: Some(41000),
        trainer_port: Some(41001),
        logs: [Component::Api, Component::Trainer, Component::Env]
            .map(|c| (c, PathBuf::from(format!("/state/runs/{id}/{c}.log"))))
            .to_vec(),
        queued: false,
        max_active: None,
        resumed_from: None,
        sweep: None,
    }
}

/// What schema 5 added, taken away again: a store as an older rl left it.
const BEFORE_VERSION_5: &str = "ALTER TABLE runs DROP COLUMN lineage; \
     ALTER TABLE runs DROP COLUMN changes; ALTER TABLE runs DROP COLUMN sweep_id; \
     DROP TABLE sweep_points; DROP TABLE sweeps;";

/// Several processes (a start and a list, a server's concurrent calls) may open a store that
/// does not exist yet at the same moment; none of them may fail for it.
#[test]
fn a_new_store_opened_by_many_at_once_opens_for_all() {
    const OPENERS: usize = 8;
    for _round in 0..10 {
        let home = tempfile::tempdir().unwrap();
        let start = std::sync::Barrier::new(OPENERS);
        std::thread::scope(|scope| {
            let openers: Vec<_> = (0..OPENERS)
                .map(|_| {
                    scope.spawn(|| {
                        start.wait();
                        RunStore::open(home.path()).map(|_| ())
                    })
                })
                .collect();
            for opener in openers {
                let opened = opener.join().unwrap();
                assert!(opened.is_ok(), "{opened:?}");
            }
        });
    }
}

#[test]
fn a_run_is_seen_by_every_connection_with_its_events() {
    let home = tempfile::tempdir().unwrap();
    let mut writer = RunStore::open(home.path()).unwrap();
    let id = RunId::parse("00c0ffee").unwrap();
    writer.create_run(&new_run("00c0ffee")).unwrap();
    let reader = RunStore::open(home.path()).unwrap();
    let run = reader.run(&id).unwrap().unwrap();
    assert_eq!(run.state, RunState::Starting(Phase::Api));
    assert_eq!(run.components.len(), 3);
    assert!(
        run.components
            .iter()
            .all(|c| c.status == ComponentStatus::NotStarted)
    );

    let me = ProcessIdentity::of(std::process::id()).unwrap();
    writer
        .record_component(&id, Component::Api, Some(me), ComponentStatus::Running)
        .unwrap();
    writer
        .transition(&id, RunState::Starting(Phase::Trainer), "api ready")
        .unwrap();
    writer
        .transition(&id, RunState::Starting(Phase::Env), "")
        .unwrap();
    writer
        .transition(&id, RunState::Running, "env registered")
        .unwrap();
    writer
        .record_component(
            &id,
            Component::Env,
            None,
            ComponentStatus::Exited { code: 0 },
        )
        .unwrap();

    let run = reader.run(&id).unwrap().unwrap();
    assert_eq!(run.state, RunState::Running);
    let api = run
        .components
        .iter()
        .find(|c| c.component == Component::Api)
        .unwrap();
    assert_eq!(api.process, Some(me));
    let env = run
        .components
        .iter()
        .find(|c| c.component == Component::Env)
        .unwrap();
    assert_eq!(env.status, ComponentStatus::Exited { code: 0 });

    let all = reader.events(&id, 0, 100).unwrap();
    let messages: Vec<&str> = all.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "created; starting: api",
            &format!("api started (pid {})", me.pid),
            "starting: trainer: api ready",
            "starting: env",
            "running: env registered",
            "env exited with code 0",
        ]
    );
    // The cursor: only what came after the last event seen.
    let newer = reader.events(&id, all[3].seq, 100).unwrap();
    assert_eq!(newer.len(), 2);
    assert_eq!(newer[0].message, "running: env registered");
}

#[test]
fn invalid_transitions_are_refused_and_leave_no_event() {
    let home = tempfile::tempdir().unwrap();
    let mut store = RunStore::open(home.path()).unwrap();
    let id = RunId::parse("0000beef").unwrap();
    store.create_run(&new_run("0000beef")).unwrap();
    assert_eq!(
        store.transition(&id, RunState::Stopped, "").unwrap(),
        None,
        "stopped needs stopping first"
    );
    assert!(
        store
            .transition(&id, RunState::Failed, "api exited")
            .unwrap()
            .is_some()
    );
    assert_eq!(
        store.transition(&id, RunState::Running, "").unwrap(),
        None,
        "failed is final"
    );
    assert_eq!(store.events(&id, 0, 100).unwrap().len(), 2);
}

#[test]
fn duplicate_and_unknown_runs_are_clear_errors() {
    let home = tempfile::tempdir().unwrap();
    let mut store = RunStore::open(home.path()).unwrap();
    store.create_run(&new_run("12345678")).unwrap();
    assert!(matches!(
        store.create_run(&new_run("12345678")),
        Err(ProcessError::DuplicateRun(_))
    ));
    let unknown = RunId::parse("87654321").unwrap();
    assert!(matches!(
        store.transition(&unknown, RunState::Running, ""),
        Err(ProcessError::UnknownRun(_))
    ));
    assert!(store.run(&unknown).unwrap().is_none());
    assert_eq!(store.runs().unwrap().len(), 1);
}

#[test]
fn concurrent_writers_each_get_one_valid_transition() {
    let home = tempfile::tempdir().unwrap();
    let id = RunId::parse("0facade0").unwrap();
    RunStore::open(home.path())
        .unwrap()
        .create_run(&new_run("0facade0"))
        .unwrap();
    // A stop and a crash race: exactly one of them ends the starting run.
    let outcomes: Vec<bool> = std::thread::scope(|scope| {
        let handles: Vec<_> = [RunState::Stopping, RunState::Failed]
            .into_iter()
            .map(|next| {
                let home = home.path().to_owned();
                let id = id.clone();
                scope.spawn(move || {
                    RunStore::open(&home)
                        .unwrap()
                        .transition(&id, next, "")
                        .unwrap()
                        .is_some()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    // Both may apply only in the order stopping → failed; never failed → stopping.
    let run = RunStore::open(home.path())
        .unwrap()
        .run(&id)
        .unwrap()
        .unwrap();
    assert!(outcomes.iter().any(|applied| *applied));
    assert!(
        matches!(run.state, RunState::Failed | RunState::Stopping),
        "{:?}",
        run.state
    );
}

#[test]
fn a_newer_schema_is_refused() {
    let home = tempfile::tempdir().unwrap();
    drop(RunStore::open(home.path()).unwrap());
    let connection = rusqlite_connection(&home.path().join("runs.db"));
    connection.pragma_update(None, "user_version", 99).unwrap();
    drop(connection);
    let Err(error) = RunStore::open(home.path()) else {
        panic!("opened a newer schema")
    };
    assert!(error.to_string().contains("upgrade rl"), "{error}");
}

fn rusqlite_connection(path: &std::path::Path) -> rusqlite::Connection {
    rusqlite::Connection::open(path).unwrap()
}

#[test]
fn a_live_run_whose_supervisor_is_another_process_now_reads_as_lost() {
    let home = tempfile::tempdir().unwrap();
    let mut store = RunStore::open(home.path()).unwrap();
    let lost = new_run("0badc0de");
    store.create_run(&lost).unwrap();
    // Our own pid with another start time: what a reused pid looks like.
    let me = ProcessIdentity::of(std::process::id()).unwrap();
    let impostor = ProcessIdentity {
        start_ticks: me.start_ticks + 1,
        ..me
    };
    store.set_supervisor(&lost.id, impostor).unwrap();
    let mut runs = rl_process::Runs::open(home.path()).unwrap();
    let status = runs.status(&lost.id, 0).unwrap();
    assert_eq!(status.run.state, RunState::Lost);
    let error = status.run.error.unwrap();
    assert!(
        error.contains("is gone without recording an end"),
        "{error}"
    );

    // With the real identity the run is live.
    let live = new_run("0badc0df");
    store.create_run(&live).unwrap();
    store.set_supervisor(&live.id, me).unwrap();
    assert_eq!(
        runs.status(&live.id, 0).unwrap().run.state,
        RunState::Starting(Phase::Api)
    );
}

#[test]
fn a_version_1_store_is_migrated_and_keeps_its_runs() {
    let home = tempfile::tempdir().unwrap();
    let mut store = RunStore::open(home.path()).unwrap();
    store.create_run(&new_run("0badc0de")).unwrap();
    drop(store);
    // What rl wrote before runs knew their boot.
    let connection = rusqlite_connection(&home.path().join("runs.db"));
    connection.execute_batch(BEFORE_VERSION_5).unwrap();
    connection
        .execute_batch(
            "ALTER TABLE runs DROP COLUMN boot_id; ALTER TABLE runs DROP COLUMN slurm_job; \
             ALTER TABLE runs DROP COLUMN parent_id; ALTER TABLE runs DROP COLUMN start_step; \
             PRAGMA user_version = 1;",
        )
        .unwrap();
    drop(connection);

    let mut store = RunStore::open(home.path()).unwrap();
    let id = RunId::parse("0badc0de").unwrap();
    let old = store.run(&id).unwrap().unwrap();
    assert_eq!(old.boot_id, None);
    assert!(
        !old.from_another_boot(),
        "an unknown boot is not taken for another"
    );
    store.create_run(&new_run("0badc0df")).unwrap();
    let new = store
        .run(&RunId::parse("0badc0df").unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(new.boot_id, rl_process::boot_id());
    assert!(!new.from_another_boot());
}

#[test]
fn a_queued_run_moves_on_to_its_api_and_keeps_its_slurm_job() {
    let home = tempfile::tempdir().unwrap();
    let mut store = RunStore::open(home.path()).unwrap();
    let id = RunId::parse("1234abcd").unwrap();
    store
        .create_run(&NewRun {
            queued: true,
            ..new_run("1234abcd")
        })
        .unwrap();
    assert_eq!(store.state(&id).unwrap(), RunState::Starting(Phase::Queued));
    store.set_slurm_job(&id, "4242").unwrap();
    store
        .transition(&id, RunState::Starting(Phase::Api), "placed")
        .unwrap()
        .unwrap();
    let run = store.run(&id).unwrap().unwrap();
    assert_eq!(run.slurm_job.as_deref(), Some("4242"));
    assert_eq!(run.state.label(), "starting: api");
    assert_eq!(run.state, RunState::Starting(Phase::Api));
}

/// A store written by version 2 (no SLURM job column) is migrated on open, its runs kept.
/// A store from before resumed runs gains their parent and step; its runs have none.
#[test]
fn a_version_3_store_is_migrated_and_records_a_resumed_run() {
    let home = tempfile::tempdir().unwrap();
    {
        let mut store = RunStore::open(home.path()).unwrap();
        store.create_run(&new_run("1234abcd")).unwrap();
    }
    let connection = rusqlite::Connection::open(home.path().join("runs.db")).unwrap();
    connection.execute_batch(BEFORE_VERSION_5).unwrap();
    connection
        .execute_batch(
            "ALTER TABLE runs DROP COLUMN parent_id; ALTER TABLE runs DROP COLUMN start_step; \
             PRAGMA user_version = 3;",
        )
        .unwrap();
    drop(connection);
    let mut store = RunStore::open(home.path()).unwrap();
    let parent = RunId::parse("1234abcd").unwrap();
    assert_eq!(store.run(&parent).unwrap().unwrap().resumed_from, None);
    store
        .transition(&parent, RunState::Failed, "failed in a test")
        .unwrap();
    let child = NewRun {
        resumed_from: Some(Lineage {
            parent: parent.clone(),
            step: 4,
            kind: LineageKind::Resume,
            changes: BTreeMap::new(),
        }),
        ..new_run("5678abcd")
    };
    store.create_run(&child).unwrap();
    let record = store.run(&child.id).unwrap().unwrap();
    assert_eq!(record.resumed_from, child.resumed_from);

    // While that child is going, the parent cannot be resumed a second time.
    let twice = store
        .create_run(&NewRun {
            resumed_from: Some(Lineage {
                parent: parent.clone(),
                step: 4,
                kind: LineageKind::Extension,
                changes: BTreeMap::new(),
            }),
            ..new_run("9abcdef0")
        })
        .unwrap_err();
    assert!(
        twice
            .to_string()
            .contains("being resumed already, as run 5678abcd"),
        "{twice}"
    );
    // Forks branch off: a parent may have many going at once, with what they changed.
    let changes = BTreeMap::from([("learning_rate".to_owned(), rl_settings::Value::Float(1e-4))]);
    for id in ["9abcdef1", "9abcdef2"] {
        let fork = NewRun {
            resumed_from: Some(Lineage {
                parent: parent.clone(),
                step: 2,
                kind: LineageKind::Fork,
                changes: changes.clone(),
            }),
            ..new_run(id)
        };
        store.create_run(&fork).unwrap();
        assert_eq!(
            store.run(&fork.id).unwrap().unwrap().resumed_from,
            fork.resumed_from
        );
    }
}

#[test]
fn a_version_2_store_is_migrated() {
    let home = tempfile::tempdir().unwrap();
    {
        let mut store = RunStore::open(home.path()).unwrap();
        store.create_run(&new_run("1234abcd")).unwrap();
    }
    let connection = rusqlite::Connection::open(home.path().join("runs.db")).unwrap();
    connection.execute_batch(BEFORE_VERSION_5).unwrap();
    connection
        .execute_batch(
            "ALTER TABLE runs DROP COLUMN slurm_job; ALTER TABLE runs DROP COLUMN parent_id; \
             ALTER TABLE runs DROP COLUMN start_step; PRAGMA user_version = 2;",
        )
        .unwrap();
    drop(connection);
    let mut store = RunStore::open(home.path()).unwrap();
    let id = RunId::parse("1234abcd").unwrap();
    store.set_slurm_job(&id, "7").unwrap();
    assert_eq!(
        store.run(&id).unwrap().unwrap().slurm_job.as_deref(),
        Some("7")
    );
}

/// Two callers starting a run at once cannot both take the last place: the count and the
/// insert are one transaction. A finished run frees its place.
#[test]
fn the_unfinished_runs_are_capped_across_concurrent_callers() {
    let home = tempfile::tempdir().unwrap();
    RunStore::open(home.path())
        .unwrap()
        .create_run(&NewRun {
            max_active: Some(2),
            ..new_run("00000001")
        })
        .unwrap();
    let outcomes: Vec<Result<(), ProcessError>> = std::thread::scope(|scope| {
        let callers: Vec<_> = ["0000000a", "0000000b", "0000000c"]
            .into_iter()
            .map(|id| {
                let home = home.path();
                scope.spawn(move || {
                    RunStore::open(home).unwrap().create_run(&NewRun {
                        max_active: Some(2),
                        ..new_run(id)
                    })
                })
            })
            .collect();
        callers.into_iter().map(|c| c.join().unwrap()).collect()
    });
    let started = outcomes.iter().filter(|o| o.is_ok()).count();
    assert_eq!(started, 1, "{outcomes:?}");
    for refused in outcomes.iter().filter_map(|o| o.as_ref().err()) {
        assert!(
            matches!(refused, ProcessError::TooManyRuns { active: 2, max: 2 }),
            "{refused:?}"
        );
        assert!(refused.to_string().contains("max_active_runs"), "{refused}");
    }
    let mut store = RunStore::open(home.path()).unwrap();
    let first = RunId::parse("00000001").unwrap();
    store
        .transition(&first, RunState::Failed, "ended")
        .unwrap()
        .unwrap();
    store
        .create_run(&NewRun {
            max_active: Some(2),
            ..new_run("0000000d")
        })
        .unwrap();
}

/// A `runs.db` (or its journal) that is a FIFO is named as one, not met with SQLite's "disk
/// I/O error" or a wait.
#[test]
fn a_store_that_is_a_fifo_is_refused_saying_so() {
    for file in ["runs.db", "runs.db-wal"] {
        let home = tempfile::tempdir().unwrap();
        nix::unistd::mkfifo(
            &home.path().join(file),
            nix::sys::stat::Mode::from_bits_truncate(0o644),
        )
        .unwrap();
        let Err(refused) = RunStore::open(home.path()) else {
            panic!("{file}: a FIFO opened as a store");
        };
        let said = refused.to_string();
        assert!(said.contains("FIFO (named pipe)"), "{file}: {said}");
        assert!(said.contains(file), "{file}: {said}");
    }
}
