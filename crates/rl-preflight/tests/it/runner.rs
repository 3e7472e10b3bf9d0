//! The runner on plain shell processes: how a run ends, what its log holds, what is left.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rl_preflight::{
    CorrectRule, Endpoint, LocalModelRunner, ModelJob, ModelMarks, ModelOutcome, ModelRun,
    ModelRunner, PreflightPlan, PreflightStore, Progress, ProgressSink, TEST_DIR_VARIABLE,
    TEST_MODEL_VARIABLE, VerdictPolicy,
};
use rl_settings::Secrets;

pub(crate) use rl_test_support::KillOnDrop;

use crate::{ignore_progress, processes_mentioning};

/// Generous: these only fail when something never happens, and a loaded CI machine is slow.
pub(crate) const PATIENCE: Duration = Duration::from_secs(30);

pub(crate) async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not after {PATIENCE:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub(crate) fn shell_job(dir: &std::path::Path, script: &str) -> ModelJob {
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
        group_path: dir.join("shell.group.json"),
        stop_path: dir.join("stop.json"),
        total_groups: 2,
        marks: ModelMarks {
            test_dir: dir.to_owned(),
            model: "01-shell".to_owned(),
        },
        log_limit: rl_process::LogLimit::default(),
        groups_path: None,
        no_signal_groups: 0,
    }
}

pub(crate) fn secrets() -> Secrets {
    let environment = [(
        "OPENAI_API_KEY".to_owned(),
        "sk-runner-test-key-1234".to_owned(),
    )]
    .into_iter()
    .collect();
    Secrets::load(Path::new("/nonexistent"), &environment)
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
            secrets(),
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
        .run(job, Duration::from_secs(30), secrets(), sink)
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
    let guard = KillOnDrop::new("runner");
    let marker = &guard.marker;
    let job = shell_job(
        dir.path(),
        &format!("sh -c 'sleep 300; echo {marker}' & sleep 300; echo {marker}"),
    );
    let run = LocalModelRunner::default()
        .run(
            job.clone(),
            Duration::from_secs(1),
            secrets(),
            ignore_progress(),
        )
        .await;
    assert_eq!(run.outcome, ModelOutcome::TimedOut { after_secs: 1.0 });
    assert!(processes_mentioning(marker).is_empty());
    let log = std::fs::read_to_string(&job.log_path).unwrap();
    assert!(log.contains("rl: cut after 1 s"), "{log}");
}

/// A model whose environment's counts (`rl_env`) show its first groups all without signal is
/// ended then, with its whole group, rather than at the timeout.
#[tokio::test]
async fn groups_without_signal_end_a_model_early() {
    let dir = tempfile::tempdir().unwrap();
    let guard = KillOnDrop::new("runner");
    let marker = &guard.marker;
    let counts = dir.path().join("shell.groups.json");
    let mut job = shell_job(
        dir.path(),
        &format!(
            "echo '{{\"made\": 4, \"alike\": 4, \"alike_scores\": {{\"0.0\": 4}}}}' > {}; \
             sh -c 'sleep 300; echo {marker}' & sleep 300; echo {marker}",
            counts.display()
        ),
    );
    job.groups_path = Some(counts);
    job.no_signal_groups = 4;
    let started = Instant::now();
    let run = LocalModelRunner::default()
        .run(job.clone(), PATIENCE, secrets(), ignore_progress())
        .await;
    assert!(started.elapsed() < PATIENCE);
    let ModelOutcome::NoSignal { cause } = &run.outcome else {
        panic!("{:?}", run.outcome);
    };
    assert!(
        cause.starts_with("no training signal: 4 of 4 groups scored alike (all 0.0)"),
        "{cause}"
    );
    assert!(processes_mentioning(marker).is_empty());
    let log = std::fs::read_to_string(&job.log_path).unwrap();
    assert!(log.contains("rl: no signal: no training signal"), "{log}");
}

#[tokio::test]
async fn a_program_that_cannot_start_is_an_outcome_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut job = shell_job(dir.path(), "true");
    job.program = dir.path().join("no-such-python");
    let run = LocalModelRunner::default()
        .run(job, Duration::from_secs(5), secrets(), ignore_progress())
        .await;
    match run.outcome {
        ModelOutcome::NotStarted { reason } => assert!(reason.contains("no-such-python")),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_process_outside_the_group_holding_the_output_does_not_hold_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let guard = KillOnDrop::new("setsid");
    let marker = &guard.marker;
    // `setsid` puts the inner shell in a session of its own, out of reach of the group stop,
    // and without the marks in its environment out of reach of the end of what the model
    // detached, with the model's stdout still open. The model waits for it to be there, so that
    // the timeout, however slow the machine, cuts a model whose output is held from outside.
    let job = shell_job(
        dir.path(),
        &format!(
            "env -u {TEST_DIR_VARIABLE} -u {TEST_MODEL_VARIABLE} \
             setsid sh -c 'touch detached; sleep 60; echo {marker}' & \
             while [ ! -e detached ]; do sleep 0.05; done; sleep 60"
        ),
    );
    let run = tokio::time::timeout(
        Duration::from_secs(45),
        LocalModelRunner::default().run(
            job.clone(),
            Duration::from_secs(5),
            secrets(),
            ignore_progress(),
        ),
    )
    .await
    .expect("the run returns although its output is held open");
    assert!(
        dir.path().join("detached").exists(),
        "the detached process never started: the test proves nothing"
    );
    assert_eq!(run.outcome, ModelOutcome::TimedOut { after_secs: 5.0 });
    let log = std::fs::read_to_string(&job.log_path).unwrap();
    assert!(log.contains("rl: output cut"), "{log}");
    assert!(log.contains("rl: cut after 5 s"), "{log}");
}

#[tokio::test]
async fn stop_all_ends_every_running_model() {
    let dir = tempfile::tempdir().unwrap();
    let guard = KillOnDrop::new("stop-all");
    let marker = guard.marker.clone();
    let runner = LocalModelRunner::default();
    let job = shell_job(dir.path(), &format!("sleep 120; echo {marker}"));
    let running = tokio::spawn({
        let runner = runner.clone();
        async move {
            runner
                .run(job, Duration::from_secs(120), secrets(), ignore_progress())
                .await
        }
    });
    wait_until("the model starts", || {
        !processes_mentioning(&marker).is_empty()
    })
    .await;
    runner.stop_all();
    assert!(processes_mentioning(&marker).is_empty());
    let run = tokio::time::timeout(PATIENCE, running)
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

#[tokio::test]
async fn after_stop_all_no_model_starts() {
    let dir = tempfile::tempdir().unwrap();
    let runner = LocalModelRunner::default();
    // The CLI stops the runner its tools hold, a clone of the one the test runs with.
    let held_by_the_cli = runner.clone();
    held_by_the_cli.stop_all();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink: ProgressSink = {
        let seen = seen.clone();
        Arc::new(move |event: Progress| seen.lock().unwrap().push(event))
    };
    let job = shell_job(dir.path(), "touch ran");
    let run = tokio::time::timeout(
        PATIENCE,
        runner.run(job, Duration::from_secs(30), secrets(), sink),
    )
    .await
    .unwrap();
    match &run.outcome {
        ModelOutcome::NotStarted { reason } => assert!(reason.contains("stopped"), "{reason}"),
        other => panic!("{other:?}"),
    }
    assert!(!dir.path().join("ran").exists(), "the model ran");
    let seen = seen.lock().unwrap();
    assert!(
        matches!(seen.as_slice(), [Progress::Finished { outcome, .. }] if *outcome == run.outcome),
        "{seen:?}"
    );
}

/// Pre-flight models faked by a shell script (`$1` is the model, `$2` the file its groups go
/// to), run by the real runner.
pub(crate) struct ShellModels {
    pub(crate) runner: LocalModelRunner,
    pub(crate) script: String,
}

#[async_trait::async_trait]
impl ModelRunner for ShellModels {
    async fn run(
        &self,
        mut job: ModelJob,
        timeout: Duration,
        secrets: Secrets,
        progress: ProgressSink,
    ) -> ModelRun {
        job.program = "/bin/sh".into();
        job.args = vec![
            "-c".to_owned(),
            self.script.clone(),
            "sh".to_owned(),
            job.model.clone(),
            job.output_path.to_string_lossy().into_owned(),
        ];
        self.runner.run(job, timeout, secrets, progress).await
    }
}

/// A plan for the shell models: nothing in it is read but the models, the concurrency, the
/// timeout and the working directory.
pub(crate) fn shell_plan(working_dir: &Path, models: &[&str], concurrency: usize) -> PreflightPlan {
    PreflightPlan {
        environment: "shell@shell.py".to_owned(),
        env_file: working_dir.join("shell.py"),
        kind: rl_settings::EnvironmentKind::Atropos,
        python: "/bin/false".into(),
        working_dir: working_dir.to_owned(),
        models: models.iter().map(|m| (*m).to_owned()).collect(),
        endpoint: Endpoint {
            base_url: "http://127.0.0.1:9/v1".to_owned(),
            key_variable: "FIXTURE_KEY".to_owned(),
            key: None,
        },
        steps: 1,
        group_size: 1,
        use_wandb: false,
        wandb_key: None,
        environment_keys: Vec::new(),
        env_args: Vec::new(),
        child_environment: std::collections::BTreeMap::new(),
        concurrency,
        timeout: Duration::from_secs(120),
        correct_rule: CorrectRule::TopScore,
        verdict_policy: VerdictPolicy::default(),
        server: None,
        held_out: None,
        log_limit: rl_process::LogLimit::default(),
        runner: None,
        no_signal_groups: 0,
    }
}

pub(crate) fn started_models(dir: &Path) -> Vec<String> {
    let mut started: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().to_string_lossy().into_owned();
            name.strip_prefix("started-").map(str::to_owned)
        })
        .collect();
    started.sort();
    started
}

#[tokio::test(flavor = "multi_thread")]
async fn stop_all_during_a_preflight_starts_none_of_the_models_still_waiting() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let guard = KillOnDrop::new("preflight-stop");
    let marker = guard.marker.clone();
    let runner = LocalModelRunner::default();
    let models = ShellModels {
        runner: runner.clone(),
        script: format!("touch \"started-$1\"; sleep 120; echo {marker}"),
    };
    let plan = shell_plan(work.path(), &["m1", "m2", "m3", "m4", "m5"], 2);
    let test = tokio::spawn(async move {
        rl_preflight::run_test(
            &plan,
            &PreflightStore::new(home.path()),
            Arc::new(models),
            Secrets::default(),
            ignore_progress(),
        )
        .await
    });
    wait_until("two models start", || {
        started_models(work.path()).len() == 2
    })
    .await;
    // Blocking (it waits for the groups to end), as in `rl serve`'s shutdown.
    tokio::task::spawn_blocking(move || runner.stop_all())
        .await
        .unwrap();
    let report = tokio::time::timeout(PATIENCE, test)
        .await
        .expect("the test ends once its running models are stopped")
        .unwrap()
        .unwrap();

    let started = started_models(work.path());
    assert_eq!(started.len(), 2, "{started:?}");
    for model in &report.models {
        if started.contains(&model.model) {
            // Stopped by `stop_all`, or — when its shell ran before the runner recorded its
            // group — refused as the runner recorded it: never left running.
            assert!(
                matches!(
                    &model.outcome,
                    ModelOutcome::Failed {
                        signal: Some(15),
                        ..
                    }
                ) || matches!(&model.outcome, ModelOutcome::NotStarted { reason } if reason.contains("stopped")),
                "{model:#?}"
            );
        } else {
            assert!(
                matches!(&model.outcome, ModelOutcome::NotStarted { reason } if reason.contains("stopped")),
                "{model:#?}"
            );
        }
    }
    let left = processes_mentioning(&marker);
    assert!(left.is_empty(), "left running: {left:?}");
}
