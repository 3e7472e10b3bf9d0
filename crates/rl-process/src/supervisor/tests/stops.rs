//! How a run stops: asked while it starts, before the supervisor began, by another process,
//! during the completion grace; and what the components left outside their groups.

use super::*;

#[tokio::test]
async fn a_stop_while_the_trainer_starts_launches_nothing_more() {
    let run = new_run(quick());
    let doubles = doubles(2, &[Component::Api], None);
    let supervisor = run.supervisor(&doubles, Secrets::default());
    let driver = async {
        run.until(RunState::Starting(Phase::Trainer)).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        doubles.stop.send(true).unwrap();
    };
    let (ended, ()) = tokio::join!(supervisor.run(), driver);
    assert_eq!(ended.unwrap(), RunState::Stopped);
    assert_eq!(run.status(Component::Env), ComponentStatus::NotStarted);
    assert_eq!(
        run.status(Component::Trainer),
        ComponentStatus::Signalled { signal: 15 }
    );
    let messages = run.messages();
    let stop_at = |c: &str| {
        messages
            .iter()
            .position(|m| m.starts_with(&format!("stop: {c} ")))
            .unwrap()
    };
    assert!(
        stop_at("trainer") < stop_at("api"),
        "reverse order: {messages:#?}"
    );
}

#[tokio::test]
async fn a_stop_recorded_by_another_process_is_seen_without_its_signal() {
    let run = new_run(quick());
    let doubles = doubles(3, ALL, None);
    let supervisor = run.supervisor(&doubles, Secrets::default());
    let driver = async {
        run.until(RunState::Running).await;
        run.store()
            .transition(&run.id, RunState::Stopping, "stop requested")
            .unwrap();
    };
    let (ended, ()) = tokio::join!(supervisor.run(), driver);
    assert_eq!(ended.unwrap(), RunState::Stopped);
    for component in HOSTED {
        assert_eq!(
            run.status(component),
            ComponentStatus::Signalled { signal: 15 }
        );
    }
}

/// What the components left outside their groups is ended after the groups, and named in
/// the run's events; a process that survives even SIGKILL fails the run.
#[tokio::test]
async fn what_components_leave_outside_their_groups_is_ended_and_named() {
    let left = |survivors: Vec<u32>| StrayOutcome {
        ended: vec![Stray {
            identity: ProcessIdentity {
                pid: FAKE_PID + 100,
                start_ticks: 1,
            },
            name: "sleep".to_owned(),
        }],
        graceful: survivors.is_empty(),
        survivors,
    };
    for (strays, expected) in [
        (left(Vec::new()), RunState::Stopped),
        (left(vec![FAKE_PID + 100]), RunState::Failed),
    ] {
        let run = new_run(quick());
        let mut doubles = doubles(0, ALL, None);
        doubles.launcher = launcher_leaving(&doubles.exits, 3, None, strays);
        let supervisor = run.supervisor(&doubles, Secrets::default());
        let driver = async {
            run.until(RunState::Running).await;
            doubles.stop.send(true).unwrap();
        };
        let (ended, ()) = tokio::join!(supervisor.run(), driver);
        assert_eq!(ended.unwrap(), expected);
        let messages = run.messages();
        let named = messages
            .iter()
            .position(|m| {
                m.starts_with(&format!(
                    "strays: processes the components left outside their process groups: {} (sleep)",
                    FAKE_PID + 100
                ))
            })
            .unwrap_or_else(|| panic!("{messages:#?}"));
        let last_group = messages
            .iter()
            .rposition(|m| m.starts_with("stop: "))
            .unwrap();
        assert!(last_group < named, "after the groups: {messages:#?}");
    }
}

#[tokio::test]
async fn a_stop_recorded_before_the_supervisor_began_launches_nothing() {
    let run = new_run(quick());
    run.store()
        .transition(&run.id, RunState::Stopping, "stop requested")
        .unwrap();
    let doubles = doubles(0, ALL, None);
    let supervisor = run.supervisor(&doubles, Secrets::default());
    assert_eq!(supervisor.run().await.unwrap(), RunState::Stopped);
    for component in HOSTED {
        assert_eq!(run.status(component), ComponentStatus::NotStarted);
    }
}

#[tokio::test]
async fn a_stop_while_the_trainer_finishes_after_the_env_ends_the_run_stopped() {
    let run = new_run(quick());
    let doubles = doubles(3, ALL, None);
    let supervisor = run.supervisor(&doubles, Secrets::default());
    let driver = async {
        run.until(RunState::Running).await;
        doubles
            .exits
            .end(Component::Env, ComponentStatus::Exited { code: 0 });
        tokio::time::sleep(Duration::from_millis(100)).await;
        // What `rl runs stop` does: record the request, then signal.
        run.store()
            .transition(&run.id, RunState::Stopping, "stop requested")
            .unwrap();
        doubles.stop.send(true).unwrap();
    };
    let (ended, ()) = tokio::join!(supervisor.run(), driver);
    // The trainer had not finished its steps: the run did not complete.
    assert_eq!(ended.unwrap(), RunState::Stopped);
    assert_eq!(
        run.status(Component::Trainer),
        ComponentStatus::Signalled { signal: 15 }
    );
}
