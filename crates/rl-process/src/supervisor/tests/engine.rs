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

/// The engine crashing fails the run for that cause, also when something of the run outlives
/// the clean-up after it: `rl runs status` (the run's error) and the events name the crash and
/// its log's last error; what survived is a warning beside it (it was the run's error, and the
/// crash was named nowhere but in the first state event).
#[tokio::test]
async fn an_engine_crash_stays_the_cause_when_something_survives_the_clean_up() {
    let run = new_run_of(quick(), false, &Component::START_ORDER);
    std::fs::write(
        run.home.path().join("engine.log"),
        "INFO: started\nTraceback (most recent call last):\n  File \"engine.py\", line 1\n\
         jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: out of memory\n",
    )
    .unwrap();
    let left = StrayOutcome {
        ended: vec![Stray {
            identity: ProcessIdentity {
                pid: FAKE_PID + 100,
                start_ticks: 1,
            },
            name: "python".to_owned(),
        }],
        graceful: false,
        survivors: vec![FAKE_PID + 100],
    };
    let mut doubles = doubles(0, &Component::START_ORDER, None);
    doubles.launcher = launcher_leaving(&doubles.exits, 4, None, left);
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
    let error = run.error();
    assert!(
        error.starts_with("engine was ended by SIGKILL")
            && error.contains("XlaRuntimeError: RESOURCE_EXHAUSTED: out of memory"),
        "{error}"
    );
    assert!(!error.contains("survived"), "{error}");
    let messages = run.messages();
    let states: Vec<&String> = messages
        .iter()
        .filter(|m| m.starts_with("state: failed"))
        .collect();
    assert_eq!(states.len(), 1, "{messages:#?}");
    assert!(
        states[0].starts_with("state: failed: engine was ended by SIGKILL"),
        "{messages:#?}"
    );
    let survived = format!(
        "warning: processes [{}] of the run survived SIGKILL",
        FAKE_PID + 100
    );
    assert!(messages.contains(&survived), "{messages:#?}");
}
