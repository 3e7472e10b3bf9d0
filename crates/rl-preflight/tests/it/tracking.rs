//! Tests known beyond the process running them: a test whose owner died is found interrupted and
//! the models it left are ended; a test is stopped from outside and its owner reports the stop.

use std::os::unix::process::CommandExt;
use std::sync::Arc;

use rl_preflight::{
    LocalModelRunner, ModelMarks, ModelOutcome, PreflightStatus, PreflightStore, PreflightView,
};
use rl_process::ProcessIdentity;
use rl_settings::Secrets;
use serde_json::json;

use crate::runner::{KillOnDrop, PATIENCE, ShellModels, shell_plan, started_models, wait_until};
use crate::{ignore_progress, processes_mentioning};

/// The identity of a process that has ended and been reaped.
fn dead_process() -> ProcessIdentity {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let identity = ProcessIdentity::of(child.id()).unwrap();
    child.wait().unwrap();
    identity
}

fn write(path: &std::path::Path, value: &serde_json::Value) {
    std::fs::write(path, serde_json::to_vec(value).unwrap()).unwrap();
}

/// What a runner killed with SIGKILL leaves: the test's folder with its owner and a model's
/// process group recorded, the group still running with no parent but init.
#[test]
fn a_dead_owners_test_is_interrupted_and_its_models_ended_when_listed() {
    let home = tempfile::tempdir().unwrap();
    let guard = KillOnDrop::new("dead-owner");
    let id = "0badc0de";
    let dir = home.path().join("preflight").join(id);
    std::fs::create_dir_all(&dir).unwrap();
    let owner = dead_process();
    write(
        &dir.join("plan.json"),
        &json!({
            "test_id": id, "environment": "shell@shell.py", "models": ["m1"],
            "base_url": "http://127.0.0.1:9/v1", "started_at": "2026-01-01T00:00:00Z",
            "steps": 2,
            "owner": {"process": owner, "boot_id": rl_process::boot_id()},
        }),
    );
    let mut model = std::process::Command::new("/bin/sh")
        .args(["-c", &format!("sleep 120; echo {}", guard.marker)])
        .process_group(0)
        .spawn()
        .unwrap();
    let leader = ProcessIdentity::of(model.id()).unwrap();
    write(
        &dir.join("01-m1.group.json"),
        &json!({"model": "m1", "leader": leader}),
    );
    // Until sh has exec'd, its command line is still this binary's.
    let started = std::time::Instant::now();
    while processes_mentioning(&guard.marker).is_empty() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "sh never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }

    let store = PreflightStore::new(home.path());
    let listed = store.list().unwrap();
    assert_eq!(listed[0].status, PreflightStatus::Interrupted, "{listed:?}");
    assert!(
        processes_mentioning(&guard.marker).is_empty(),
        "the dead owner's model is still running"
    );
    let _ = model.wait();

    let PreflightView::Unfinished(progress) = store.view(id).unwrap() else {
        panic!("a report appeared");
    };
    let interruption = progress.interruption.unwrap();
    assert!(
        interruption.reason.contains(&format!("pid {}", owner.pid)),
        "{interruption:?}"
    );
    assert_eq!(interruption.ended, "model m1: ended on SIGTERM");
    assert!(!progress.models[0].running);
    assert_eq!(progress.models[0].total_groups, Some(2));

    let stopped = store.stop(id).unwrap();
    assert!(!stopped.stopped, "{stopped:?}");
    assert_eq!(stopped.status, PreflightStatus::Interrupted);
    assert!(stopped.message.contains("interrupted"), "{stopped:?}");
}

/// `rl preflight stop` from another process: the running models' groups are ended with what they
/// left in sessions of their own, the waiting ones never start, and the owner writes a report that says it was stopped.
#[tokio::test(flavor = "multi_thread")]
async fn a_test_stopped_from_outside_ends_its_models_and_its_owner_reports_the_stop() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let guard = KillOnDrop::new("stop-from-outside");
    let marker = guard.marker.clone();
    // Each model leaves a process in a session of its own before it counts as started.
    let models = ShellModels {
        runner: LocalModelRunner::default(),
        script: format!(
            "setsid sh -c 'touch \"detached-$1\"; sleep 300; : {marker}' sh \"$1\" & \
             while [ ! -e \"detached-$1\" ]; do sleep 0.05; done; \
             touch \"started-$1\"; sleep 120; echo {marker}"
        ),
    };
    let plan = shell_plan(work.path(), &["m1", "m2", "m3"], 2);
    let store = PreflightStore::new(home.path());
    let test = tokio::spawn({
        let store = store.clone();
        async move {
            rl_preflight::run_test(
                &plan,
                &store,
                Arc::new(models),
                Secrets::default(),
                ignore_progress(),
            )
            .await
        }
    });
    wait_until("two models start", || {
        started_models(work.path()).len() == 2
    })
    .await;
    let id = store.list().unwrap()[0].test_id.clone();
    // Followed from the store while it runs, as another process would.
    let PreflightView::Unfinished(progress) = store.view(&id).unwrap() else {
        panic!("a report before the end");
    };
    assert_eq!(progress.status, PreflightStatus::Running);
    assert_eq!(progress.owner_pid, Some(std::process::id()));
    let running: Vec<bool> = progress.models.iter().map(|m| m.running).collect();
    assert_eq!(running.iter().filter(|r| **r).count(), 2, "{progress:?}");

    let stopping = store.clone();
    let stop_id = id.clone();
    let stopped = tokio::task::spawn_blocking(move || stopping.stop(&stop_id))
        .await
        .unwrap()
        .unwrap();
    assert!(stopped.stopped, "{stopped:?}");
    assert_eq!(stopped.status, PreflightStatus::Stopped, "{stopped:?}");
    let left = processes_mentioning(&marker);
    assert!(left.is_empty(), "left running: {left:?}");

    let report = tokio::time::timeout(PATIENCE, test)
        .await
        .expect("the owner ends its test once stopped")
        .unwrap()
        .unwrap();
    assert!(report.stopped_at.is_some());
    assert!(report.summary.explanation.contains("stopped"));
    let started = started_models(work.path());
    for model in &report.models {
        if started.contains(&model.model) {
            assert_eq!(model.outcome, ModelOutcome::Stopped, "{model:#?}");
            assert_eq!(
                model.error.as_deref(),
                Some("rl: stopped (rl preflight stop)"),
                "{model:#?}"
            );
        } else {
            assert!(
                matches!(&model.outcome, ModelOutcome::NotStarted { reason } if reason.contains("stopped")),
                "{model:#?}"
            );
        }
    }
    assert_eq!(started.len(), 2, "a waiting model started: {started:?}");
    assert_eq!(store.list().unwrap()[0].status, PreflightStatus::Stopped);
    let again = store.stop(&id).unwrap();
    assert!(!again.stopped);
    assert!(again.message.contains("already finished"), "{again:?}");
}

/// A model of a killed owner that left a process in a session of its own (`setsid`), outside its
/// recorded group: found by the test's folder in its environment, and ended with the group.
#[test]
fn a_dead_owners_test_ends_what_its_models_detached() {
    let home = tempfile::tempdir().unwrap();
    let guard = KillOnDrop::new("dead-owner-detached");
    let marker = &guard.marker;
    let id = "0badc0df";
    let dir = home.path().join("preflight").join(id);
    std::fs::create_dir_all(&dir).unwrap();
    write(
        &dir.join("plan.json"),
        &json!({
            "test_id": id, "environment": "shell@shell.py", "models": ["m1"],
            "base_url": "http://127.0.0.1:9/v1", "started_at": "2026-01-01T00:00:00Z",
            "steps": 2,
            "owner": {"process": dead_process(), "boot_id": rl_process::boot_id()},
        }),
    );
    // As the runner starts a model: a group of its own, the test in its environment.
    let mut model = std::process::Command::new("/bin/sh")
        .args([
            "-c",
            &format!("setsid sh -c 'touch detached; sleep 300; : {marker}' & sleep 120"),
        ])
        .current_dir(&dir)
        .envs(
            ModelMarks {
                test_dir: dir.clone(),
                model: "01-m1".to_owned(),
            }
            .environment(),
        )
        .process_group(0)
        .spawn()
        .unwrap();
    let leader = ProcessIdentity::of(model.id()).unwrap();
    write(
        &dir.join("01-m1.group.json"),
        &json!({"model": "m1", "leader": leader}),
    );
    let started = std::time::Instant::now();
    while !dir.join("detached").exists() {
        assert!(started.elapsed() < PATIENCE, "the model never detached");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }

    let listed = PreflightStore::new(home.path()).list().unwrap();
    assert_eq!(listed[0].status, PreflightStatus::Interrupted, "{listed:?}");
    let left = processes_mentioning(marker);
    assert!(left.is_empty(), "left running: {left:?}");
    let _ = model.wait();
    let PreflightView::Unfinished(progress) = PreflightStore::new(home.path()).view(id).unwrap()
    else {
        panic!("a report appeared");
    };
    let ended = progress.interruption.unwrap().ended;
    assert!(ended.contains("(sh)"), "{ended}");
}
