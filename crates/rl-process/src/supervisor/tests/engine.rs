//! Runs on the local engine: a fourth component, started first and stopped last.

use super::*;

#[tokio::test]
async fn a_local_engine_starts_first_and_is_stopped_last() {
    let run = new_run_of(quick(), false, &Component::START_ORDER);
    assert_eq!(
        run.store().state(&run.id).unwrap(),
        RunState::Starting(Phase::Engine)
    );
    let doubles = doubles(4, &Component::START_ORDER, None);
    let supervisor = run.supervisor(&doubles, Secrets::default());
    let driver = async {
        run.until(RunState::Running).await;
        doubles
            .exits
            .end(Component::Env, ComponentStatus::Exited { code: 0 });
        doubles
            .exits
            .end(Component::Trainer, ComponentStatus::Exited { code: 0 });
    };
    let (ended, ()) = tokio::join!(supervisor.run(), driver);
    assert_eq!(ended.unwrap(), RunState::Completed);
    let messages = run.messages();
    let position = |prefix: &str| {
        messages
            .iter()
            .position(|m| m.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} in {messages:#?}"))
    };
    assert!(position("ready: engine ready after") < position("ready: api ready after"));
    assert!(
        position("stop: api ") < position("stop: engine "),
        "the engine outlives everything that talks to it: {messages:#?}"
    );
    assert_eq!(
        run.status(Component::Engine),
        ComponentStatus::Signalled { signal: 15 }
    );
}

#[tokio::test]
async fn the_engine_ending_fails_the_run_naming_it_and_stops_the_rest() {
    let run = new_run_of(quick(), false, &Component::START_ORDER);
    let doubles = doubles(4, &Component::START_ORDER, None);
    let ended = run
        .run_ending(
            &doubles,
            Secrets::default(),
            RunState::Running,
            Duration::from_millis(50),
            Component::Engine,
            ComponentStatus::Signalled { signal: 9 },
        )
        .await;
    assert_eq!(ended, RunState::Failed);
    assert!(run.error().contains("engine"), "{}", run.error());
    for component in [Component::Api, Component::Trainer, Component::Env] {
        assert_eq!(
            run.status(component),
            ComponentStatus::Signalled { signal: 15 },
            "{component}"
        );
    }
}

#[tokio::test]
async fn an_engine_that_never_answers_fails_the_run_before_anything_else_starts() {
    let run = new_run_of(
        RunTiming {
            engine_ready_timeout_secs: 0.3,
            ..quick()
        },
        false,
        &Component::START_ORDER,
    );
    let doubles = doubles(1, &[], None);
    let supervisor = run.supervisor(&doubles, Secrets::default());
    assert_eq!(supervisor.run().await.unwrap(), RunState::Failed);
    assert!(
        run.error().contains("engine was not ready"),
        "{}",
        run.error()
    );
    assert_eq!(run.status(Component::Api), ComponentStatus::NotStarted);
}
