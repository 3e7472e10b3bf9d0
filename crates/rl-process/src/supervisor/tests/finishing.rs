//! A trainer still finishing its steps after the environment ended: waited for while its phase
//! file shows work, stopped (and the run failed, not completed) once it waits for nothing or hangs.

use super::*;

fn write_phase(path: &std::path::Path, phase: &str, step: u64, since: f64) {
    std::fs::write(
        path,
        format!(r#"{{"phase": "{phase}", "step": {step}, "since": {since}}}"#),
    )
    .unwrap();
}

fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// A run whose environment finishes while the trainer is `phase` of its step 4.
async fn env_finishing_during(
    phase: &str,
    timing: RunTiming,
    then: impl std::future::Future<Output = ()>,
    doubles: &Doubles,
    run: &Run,
) -> RunState {
    let phase_file = run.home.path().join("trainer-phase.json");
    write_phase(&phase_file, phase, 4, now());
    let supervisor = Supervisor::new(
        run.store(),
        LaunchPlan {
            timing,
            ..run.plan.clone()
        },
        &doubles.launcher,
        &doubles.probe,
        doubles.stop.subscribe(),
        Secrets::default(),
    )
    .watching_trainer_phase(phase_file);
    let driver = async {
        run.until(RunState::Running).await;
        doubles
            .exits
            .end(Component::Env, ComponentStatus::Exited { code: 0 });
        then.await;
    };
    let (ended, ()) = tokio::join!(supervisor.run(), driver);
    ended.unwrap()
}

/// Issue 40: a CPU step outlasting the completion grace was SIGTERMed and the run called
/// completed without its last step.
#[tokio::test]
async fn a_trainer_working_past_the_grace_is_waited_for_and_its_end_completes_the_run() {
    let run = new_run(quick());
    let doubles = doubles(3, ALL, None);
    let timing = RunTiming {
        completion_grace_secs: 0.3,
        ..quick()
    };
    let ended = env_finishing_during(
        "forward_backward",
        timing,
        async {
            // Five graces on, the trainer is still in its step: not stopped.
            tokio::time::sleep(Duration::from_millis(1500)).await;
            assert_eq!(run.store().state(&run.id).unwrap(), RunState::Running);
            doubles
                .exits
                .end(Component::Trainer, ComponentStatus::Exited { code: 0 });
        },
        &doubles,
        &run,
    )
    .await;
    assert_eq!(ended, RunState::Completed, "{:#?}", run.messages());
    assert_eq!(
        run.status(Component::Trainer),
        ComponentStatus::Exited { code: 0 }
    );
    assert!(
        run.messages()
            .iter()
            .any(|m| m.contains("still working (`forward_backward` of step 4")),
        "{:#?}",
        run.messages()
    );
}

#[tokio::test]
async fn a_trainer_waiting_for_a_batch_after_the_env_ended_is_stopped_and_the_run_fails() {
    let run = new_run(quick());
    let doubles = doubles(3, ALL, None);
    let timing = RunTiming {
        completion_grace_secs: 0.3,
        ..quick()
    };
    let ended = env_finishing_during("wait", timing, async {}, &doubles, &run).await;
    assert_eq!(ended, RunState::Failed, "{:#?}", run.messages());
    let error = run.error();
    assert!(
        error.starts_with("the trainer did not finish its steps: the trainer waited")
            && error.contains("batch of step 4"),
        "{error}"
    );
    assert_eq!(
        run.status(Component::Trainer),
        ComponentStatus::Signalled { signal: 15 }
    );
}

#[tokio::test]
async fn a_trainer_hung_in_a_step_past_its_stall_limit_is_stopped_and_the_run_fails() {
    let run = new_run(quick());
    let doubles = doubles(3, ALL, None);
    let timing = RunTiming {
        completion_grace_secs: 0.2,
        stall_floor_secs: 0.6,
        ..quick()
    };
    let ended = env_finishing_during("save", timing, async {}, &doubles, &run).await;
    assert_eq!(ended, RunState::Failed, "{:#?}", run.messages());
    assert!(
        run.error().contains("no progress for") && run.error().contains("`save` of step 4"),
        "{}",
        run.error()
    );
}

#[tokio::test]
async fn a_trainer_done_training_and_lingering_is_stopped_and_the_run_completes() {
    let run = new_run(quick());
    let doubles = doubles(3, ALL, None);
    let timing = RunTiming {
        completion_grace_secs: 0.3,
        ..quick()
    };
    let ended = env_finishing_during("linger", timing, async {}, &doubles, &run).await;
    assert_eq!(ended, RunState::Completed, "{:#?}", run.messages());
}
