//! How a run fails: a component crashing, ending too early or never ready, a launch refused,
//! a port taken; each failure names the component, and the others are stopped.

use super::*;

#[tokio::test]
async fn a_trainer_failing_after_the_env_finished_fails_the_run() {
    let run = new_run(quick());
    let doubles = doubles(3, ALL, None);
    let supervisor = run.supervisor(&doubles, Secrets::default());
    let driver = async {
        run.until(RunState::Running).await;
        doubles
            .exits
            .end(Component::Env, ComponentStatus::Exited { code: 0 });
        tokio::time::sleep(Duration::from_millis(200)).await;
        doubles
            .exits
            .end(Component::Trainer, ComponentStatus::Exited { code: 1 });
    };
    let (ended, ()) = tokio::join!(supervisor.run(), driver);
    assert_eq!(
        ended.unwrap(),
        RunState::Failed,
        "its last step or final save failed: {:#?}",
        run.messages()
    );
    assert!(run.error().contains("trainer"), "{}", run.error());
}

#[tokio::test]
async fn a_crash_fails_the_run_naming_the_component_with_its_log_and_no_secret() {
    let run = new_run(quick());
    let trainer_log = run.home.path().join("trainer.log");
    std::fs::write(
        &trainer_log,
        "step 3\nauth with tk-very-secret-value\nTraceback: boom\n",
    )
    .unwrap();
    let secrets = Secrets::load(
        run.home.path(),
        &BTreeMap::from([(
            "TINKER_API_KEY".to_owned(),
            "tk-very-secret-value".to_owned(),
        )]),
    );
    let doubles = doubles(3, ALL, None);
    let ended = run
        .run_ending(
            &doubles,
            secrets,
            RunState::Running,
            Duration::from_millis(0),
            Component::Trainer,
            ComponentStatus::Signalled { signal: 9 },
        )
        .await;
    assert_eq!(ended, RunState::Failed);
    let error = run.error();
    assert!(error.starts_with("trainer was ended by SIGKILL"), "{error}");
    assert!(error.contains("Traceback: boom"), "{error}");
    assert!(!error.contains("tk-very-secret-value"), "{error}");
    assert_eq!(
        run.status(Component::Env),
        ComponentStatus::Signalled { signal: 15 },
        "the others are stopped"
    );
}

#[tokio::test]
async fn the_api_ending_fails_the_run_even_with_code_zero() {
    let run = new_run(quick());
    let doubles = doubles(3, ALL, None);
    let ended = run
        .run_ending(
            &doubles,
            Secrets::default(),
            RunState::Running,
            Duration::from_millis(0),
            Component::Api,
            ComponentStatus::Exited { code: 0 },
        )
        .await;
    assert_eq!(ended, RunState::Failed);
    assert!(
        run.error().starts_with("api exited with code 0"),
        "{}",
        run.error()
    );
}

#[tokio::test]
async fn a_component_that_never_answers_fails_the_run_after_its_timeout() {
    let run = new_run(RunTiming {
        trainer_ready_timeout_secs: 0.3,
        ..quick()
    });
    let doubles = doubles(2, &[Component::Api], None);
    let supervisor = run.supervisor(&doubles, Secrets::default());
    assert_eq!(supervisor.run().await.unwrap(), RunState::Failed);
    let expected = format!(
        "trainer was not ready within 0.3 s: GET http://127.0.0.1:{}/health never answered",
        run.plan.trainer_port
    );
    assert!(run.error().starts_with(&expected), "{}", run.error());
    assert_eq!(run.status(Component::Env), ComponentStatus::NotStarted);
}

#[tokio::test]
async fn a_component_ending_before_it_is_ready_fails_the_run() {
    let run = new_run(quick());
    let doubles = doubles(2, &[Component::Api], None);
    let ended = run
        .run_ending(
            &doubles,
            Secrets::default(),
            RunState::Starting(Phase::Trainer),
            Duration::from_millis(50),
            Component::Trainer,
            ComponentStatus::Exited { code: 0 },
        )
        .await;
    assert_eq!(ended, RunState::Failed);
    assert!(
        run.error()
            .starts_with("trainer exited with code 0 before it was ready"),
        "{}",
        run.error()
    );
}

#[tokio::test]
async fn a_launch_error_fails_the_run_and_stops_what_started() {
    let run = new_run(quick());
    let doubles = doubles(2, ALL, Some(Component::Trainer));
    let supervisor = run.supervisor(&doubles, Secrets::default());
    assert_eq!(supervisor.run().await.unwrap(), RunState::Failed);
    assert_eq!(run.error(), "cannot start trainer: no such program");
    assert_eq!(
        run.status(Component::Api),
        ComponentStatus::Signalled { signal: 15 }
    );
}

#[tokio::test]
async fn a_port_taken_after_allocation_fails_clearly_without_launching() {
    let run = new_run(quick());
    let _thief = std::net::TcpListener::bind(("127.0.0.1", run.plan.api_port)).unwrap();
    let doubles = doubles(0, ALL, None);
    let supervisor = run.supervisor(&doubles, Secrets::default());
    assert_eq!(supervisor.run().await.unwrap(), RunState::Failed);
    let expected = format!(
        "cannot start api: port {} was free when the run was created but another process listens on it now",
        run.plan.api_port
    );
    assert!(run.error().starts_with(&expected), "{}", run.error());
}

#[tokio::test]
async fn a_ready_component_ending_is_not_said_to_end_before_it_was_ready() {
    let run = new_run(quick());
    let doubles = doubles(2, &[Component::Api], None);
    let ended = run
        .run_ending(
            &doubles,
            Secrets::default(),
            RunState::Starting(Phase::Trainer),
            Duration::from_millis(50),
            Component::Api,
            ComponentStatus::Exited { code: 1 },
        )
        .await;
    assert_eq!(ended, RunState::Failed);
    assert!(
        run.error().starts_with("api exited with code 1"),
        "{}",
        run.error()
    );
    assert!(
        !run.error().contains("before it was ready"),
        "{}",
        run.error()
    );
}
