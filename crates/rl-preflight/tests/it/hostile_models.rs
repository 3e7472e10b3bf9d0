//! Models that misbehave towards the process running them: output that is not text, an endless
//! line, a process that leaves its group for a session of its own.

use rl_preflight::{LocalModelRunner, ModelOutcome, ModelRunner};
use rl_test_support::{peak_memory, reset_peak_memory};

use crate::runner::{KillOnDrop, PATIENCE, secrets, shell_job, wait_until};
use crate::{ignore_progress, processes_mentioning};

/// 200 MB with no newline: read as it comes, in pieces, it never needs more than a piece of
/// memory. Read line by line, the runner would hold it all (twice) before writing a byte.
#[tokio::test]
async fn an_endless_line_does_not_grow_the_runners_memory() {
    const PRINTED: u64 = 200 * 1024 * 1024;
    let dir = tempfile::tempdir().unwrap();
    let mut job = shell_job(
        dir.path(),
        &format!("head -c {PRINTED} /dev/zero | tr '\\0' x"),
    );
    // The memory is the point, not the disk.
    job.log_path = "/dev/null".into();
    reset_peak_memory();
    let run = LocalModelRunner::default()
        .run(job, PATIENCE * 4, secrets(), ignore_progress())
        .await;
    let peak = peak_memory();
    eprintln!("peak resident memory: {} MB", peak >> 20);
    assert_eq!(
        run.outcome,
        ModelOutcome::Succeeded,
        "its output was not all read"
    );
    assert!(
        peak < PRINTED / 4,
        "the runner's memory reached {} MB for a model that printed {} MB",
        peak >> 20,
        PRINTED >> 20
    );
}

/// Output is logged as printed, bytes that are not UTF-8 included, and a key printed in pieces
/// is redacted all the same.
#[tokio::test]
async fn output_is_logged_byte_for_byte_but_for_keys() {
    let dir = tempfile::tempdir().unwrap();
    let job = shell_job(
        dir.path(),
        "printf '\\377\\376 key=sk-runner-'; sleep 0.3; printf 'test-key-1234 \\r50%%'",
    );
    let run = LocalModelRunner::default()
        .run(job.clone(), PATIENCE, secrets(), ignore_progress())
        .await;
    assert_eq!(run.outcome, ModelOutcome::Succeeded);
    let log = std::fs::read(&job.log_path).unwrap();
    assert_eq!(log, b"\xff\xfe key=[REDACTED OPENAI_API_KEY] \r50%");
}

/// A model that starts `setsid sh …` and exits: the detached process carries its test in its
/// environment, and ends with the model.
#[tokio::test]
async fn what_a_model_detached_ends_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let guard = KillOnDrop::new("detached-end");
    let marker = &guard.marker;
    let job = shell_job(
        dir.path(),
        &format!(
            "setsid sh -c 'touch detached; sleep 300; : {marker}' & \
             while [ ! -e detached ]; do sleep 0.05; done"
        ),
    );
    let run = LocalModelRunner::default()
        .run(job.clone(), PATIENCE, secrets(), ignore_progress())
        .await;
    assert_eq!(run.outcome, ModelOutcome::Succeeded);
    let left = processes_mentioning(marker);
    assert!(left.is_empty(), "left running: {left:?}");
    let log = std::fs::read_to_string(&job.log_path).unwrap();
    assert!(!log.contains("rl: output cut"), "{log}");
}

/// `stop_all` (`rl serve` shutting down) ends what a model detached too.
#[tokio::test]
async fn stop_all_ends_what_a_model_detached() {
    let dir = tempfile::tempdir().unwrap();
    let guard = KillOnDrop::new("detached-stop-all");
    let marker = guard.marker.clone();
    let runner = LocalModelRunner::default();
    let job = shell_job(
        dir.path(),
        &format!("setsid sh -c 'touch detached; sleep 300; : {marker}' & sleep 300"),
    );
    let running = tokio::spawn({
        let runner = runner.clone();
        async move {
            runner
                .run(job, PATIENCE * 4, secrets(), ignore_progress())
                .await
        }
    });
    let detached = dir.path().join("detached");
    wait_until("the model detaches", || detached.exists()).await;
    tokio::task::spawn_blocking({
        let runner = runner.clone();
        move || runner.stop_all()
    })
    .await
    .unwrap();
    let left = processes_mentioning(&marker);
    assert!(left.is_empty(), "left running: {left:?}");
    tokio::time::timeout(PATIENCE, running)
        .await
        .unwrap()
        .unwrap();
}
