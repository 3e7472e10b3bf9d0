//! The runner on plain shell processes: how a run ends, what its log holds, what is left.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rl_inference_test::{
    LocalModelRunner, ModelJob, ModelOutcome, ModelRunner, Progress, Redactor,
};

use crate::{ignore_progress, processes_mentioning};

fn shell_job(dir: &std::path::Path, script: &str) -> ModelJob {
    ModelJob {
        model: "shell".to_owned(),
        program: "/bin/sh".into(),
        args: vec!["-c".to_owned(), script.to_owned()],
        working_dir: dir.to_owned(),
        env: vec![(
            "OPENAI_API_KEY".to_owned(),
            "sk-runner-test-key-1234".to_owned(),
        )],
        env_remove: vec!["OPENROUTER_API_KEY".to_owned()],
        log_path: dir.join("shell.log"),
        output_path: dir.join("shell.jsonl"),
        total_groups: 2,
    }
}

fn redactor() -> Redactor {
    let mut redactor = Redactor::default();
    redactor.add("OPENAI_API_KEY", "sk-runner-test-key-1234");
    redactor
}

#[tokio::test]
async fn output_is_logged_with_keys_redacted_and_an_exit_code_is_a_failure() {
    let dir = tempfile::tempdir().unwrap();
    let job = shell_job(
        dir.path(),
        "echo \"api_key=$OPENAI_API_KEY\"; echo oops >&2; exit 3",
    );
    let run = LocalModelRunner::default()
        .run(
            job.clone(),
            Duration::from_secs(30),
            redactor(),
            ignore_progress(),
        )
        .await;
    assert_eq!(
        run.outcome,
        ModelOutcome::Failed {
            code: Some(3),
            signal: None
        }
    );
    let log = std::fs::read_to_string(&job.log_path).unwrap();
    assert!(log.contains("api_key=[REDACTED OPENAI_API_KEY]"), "{log}");
    assert!(log.contains("oops"), "{log}");
    assert!(!log.contains("sk-runner-test-key-1234"));
}

#[tokio::test]
async fn groups_are_reported_as_the_file_grows_and_success_is_exit_zero() {
    let dir = tempfile::tempdir().unwrap();
    let job = shell_job(
        dir.path(),
        "echo '{\"scores\":[1]}' >> shell.jsonl; sleep 0.6; echo '{\"scores\":[1]}' >> shell.jsonl",
    );
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = {
        let seen = seen.clone();
        Arc::new(move |event: Progress| seen.lock().unwrap().push(event))
    };
    let run = LocalModelRunner::default()
        .run(job, Duration::from_secs(30), redactor(), sink)
        .await;
    assert_eq!(run.outcome, ModelOutcome::Succeeded);
    let seen = seen.lock().unwrap();
    assert!(matches!(
        seen.first(),
        Some(Progress::Started {
            total_groups: 2,
            ..
        })
    ));
    assert!(matches!(seen.last(), Some(Progress::Finished { .. })));
    let done: Vec<u32> = seen
        .iter()
        .filter_map(|event| match event {
            Progress::Groups { done, .. } => Some(*done),
            _ => None,
        })
        .collect();
    assert_eq!(done.last(), Some(&2), "{done:?}");
    assert!(done.windows(2).all(|pair| pair[0] <= pair[1]), "{done:?}");
}

#[tokio::test]
async fn a_timeout_stops_the_whole_group_grandchildren_included() {
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("rl-runner-marker-{}", std::process::id());
    let job = shell_job(
        dir.path(),
        &format!("sh -c 'sleep 300; echo {marker}' & sleep 300; echo {marker}"),
    );
    let run = LocalModelRunner::default()
        .run(
            job.clone(),
            Duration::from_secs(1),
            redactor(),
            ignore_progress(),
        )
        .await;
    assert_eq!(run.outcome, ModelOutcome::TimedOut { after_secs: 1.0 });
    assert!(processes_mentioning(&marker).is_empty());
    let log = std::fs::read_to_string(&job.log_path).unwrap();
    assert!(log.contains("rl: cut after 1 s"), "{log}");
}

#[tokio::test]
async fn a_program_that_cannot_start_is_an_outcome_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut job = shell_job(dir.path(), "true");
    job.program = dir.path().join("no-such-python");
    let run = LocalModelRunner::default()
        .run(job, Duration::from_secs(5), redactor(), ignore_progress())
        .await;
    match run.outcome {
        ModelOutcome::NotStarted { reason } => assert!(reason.contains("no-such-python")),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_process_outside_the_group_holding_the_output_does_not_hold_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("rl-setsid-marker-{}", std::process::id());
    // `setsid` puts the first sleep in a session of its own, out of reach of the group stop,
    // with the model's stdout still open.
    let job = shell_job(
        dir.path(),
        &format!("setsid sh -c 'sleep 60; echo {marker}' & sleep 60"),
    );
    let run = tokio::time::timeout(
        Duration::from_secs(45),
        LocalModelRunner::default().run(
            job.clone(),
            Duration::from_secs(1),
            redactor(),
            ignore_progress(),
        ),
    )
    .await
    .expect("the run returns although its output is held open");
    assert_eq!(run.outcome, ModelOutcome::TimedOut { after_secs: 1.0 });
    let log = std::fs::read_to_string(&job.log_path).unwrap();
    assert!(log.contains("rl: output cut"), "{log}");
    for (pid, _) in processes_mentioning(&marker) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap()),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

#[tokio::test]
async fn stop_all_ends_every_running_model() {
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("rl-stop-all-marker-{}", std::process::id());
    let runner = LocalModelRunner::default();
    let job = shell_job(dir.path(), &format!("sleep 120; echo {marker}"));
    let running = tokio::spawn({
        let runner = runner.clone();
        async move {
            runner
                .run(job, Duration::from_secs(120), redactor(), ignore_progress())
                .await
        }
    });
    for _ in 0..100 {
        if !processes_mentioning(&marker).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!processes_mentioning(&marker).is_empty(), "never started");
    runner.stop_all();
    assert!(processes_mentioning(&marker).is_empty());
    let run = tokio::time::timeout(Duration::from_secs(30), running)
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(
            run.outcome,
            ModelOutcome::Failed {
                signal: Some(15),
                ..
            }
        ),
        "{:?}",
        run.outcome
    );
}
