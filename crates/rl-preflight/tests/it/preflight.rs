//! Whole tests: the arithmetic environment in atroposlib's real `process` mode against the
//! fixture server's policies (models). Figures are computed from what each policy answers: the
//! arithmetic dataset's first three questions come out, under `mixed`, all wrong, all right, and
//! half right (see fixtures/openai-server/openai_server.py).

use std::collections::BTreeMap;
use std::time::Duration;

use rl_preflight::{CorrectRule, ModelOutcome, ModelReport, PreflightReport, Verdict};
use rl_settings::Secrets;

use crate::{FixtureServer, Stack, processes_mentioning, request, test_python};

fn model<'a>(report: &'a PreflightReport, name: &str) -> &'a ModelReport {
    report
        .models
        .iter()
        .find(|model| model.model == name)
        .unwrap_or_else(|| panic!("no {name} in {report:#?}"))
}

fn distribution(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
async fn three_models_at_once_give_every_figure_and_the_verdict() {
    let python = test_python();
    let server = FixtureServer::start(&python, None);
    let stack = Stack::new(&python);
    let plan = stack.plan(request(&server, &["always-right", "always-wrong", "mixed"]));
    let report = stack.run(&plan, Secrets::default()).await;

    assert_eq!(report.correct_from, Some(1.0));
    let right = model(&report, "always-right");
    assert_eq!(right.outcome, ModelOutcome::Succeeded, "{right:#?}");
    let f = &right.figures;
    assert_eq!((f.steps_tested, f.completions), (3, 12));
    assert_eq!(f.accuracy, Some(1.0));
    assert_eq!(f.accuracy_score_above_zero, Some(1.0));
    assert_eq!((f.steps_with_correct, f.step_success_rate), (3, Some(1.0)));
    assert_eq!(
        (
            f.zero_variance_groups,
            f.all_correct_groups,
            f.all_wrong_groups
        ),
        (3, 3, 0)
    );
    let scores = f.scores.as_ref().unwrap();
    assert_eq!((scores.mean, scores.min, scores.max), (1.0, 1.0, 1.0));
    assert_eq!(scores.distribution, distribution(&[("1.0", 12)]));
    assert_eq!(f.parse_failures, 0);

    let wrong = &model(&report, "always-wrong").figures;
    assert_eq!(wrong.accuracy, Some(0.0));
    assert_eq!(wrong.accuracy_score_above_zero, Some(0.0));
    assert_eq!(
        (wrong.steps_with_correct, wrong.step_success_rate),
        (0, Some(0.0))
    );
    assert_eq!(
        (
            wrong.zero_variance_groups,
            wrong.all_correct_groups,
            wrong.all_wrong_groups
        ),
        (3, 0, 3)
    );
    assert_eq!(
        wrong.scores.as_ref().unwrap().distribution,
        distribution(&[("-1.0", 12)])
    );

    let mixed = &model(&report, "mixed").figures;
    assert_eq!(mixed.completions, 12);
    assert_eq!(mixed.accuracy, Some(0.5));
    assert_eq!(mixed.steps_with_correct, 2);
    assert_eq!(mixed.step_success_rate, Some(2.0 / 3.0));
    assert_eq!(
        (
            mixed.zero_variance_groups,
            mixed.all_correct_groups,
            mixed.all_wrong_groups
        ),
        (2, 1, 1)
    );
    let scores = mixed.scores.as_ref().unwrap();
    assert_eq!((scores.mean, scores.min, scores.max), (0.0, -1.0, 1.0));
    assert_eq!(
        scores.distribution,
        distribution(&[("-1.0", 6), ("1.0", 6)])
    );

    let summary = &report.summary;
    assert_eq!((summary.models_tested, summary.models_succeeded), (3, 3));
    assert_eq!(summary.best_model.as_deref(), Some("always-right"));
    assert_eq!(summary.average_accuracy, Some(0.5));
    assert!(summary.environment_working);
    // 8 of the 9 groups score alike: no signal for GRPO.
    assert_eq!(summary.verdict, Verdict::NoSignal);
    assert_eq!(summary.basis.groups, 9);
    assert_eq!(summary.basis.zero_variance_share, Some(8.0 / 9.0));

    // Each model wrote its own file in the test's folder; the report is kept and listed.
    for model in &report.models {
        assert!(model.output_path.starts_with(&report.output_dir));
        assert!(model.output_path.exists());
        assert!(model.log_path.exists());
    }
    let store = stack.store();
    assert_eq!(store.read(&report.test_id).unwrap(), report);
    let listed = store.list().unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].verdict, Some(Verdict::NoSignal));
    let asked: Vec<String> = server
        .requests()
        .iter()
        .map(|request| request["model"].as_str().unwrap_or_default().to_owned())
        .collect();
    for name in ["always-right", "always-wrong", "mixed"] {
        assert_eq!(asked.iter().filter(|m| *m == name).count(), 3, "{asked:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
async fn each_verdict_from_a_model_that_shows_it() {
    let python = test_python();
    let server = FixtureServer::start(&python, None);
    let stack = Stack::new(&python);
    let cases = [
        ("half-right", Verdict::Ready),
        ("always-right", Verdict::TooEasy),
        ("garbage", Verdict::TooHard),
        ("http-500", Verdict::Broken),
    ];
    let plans: Vec<_> = cases
        .iter()
        .map(|(model, _)| {
            let mut asked = request(&server, &[model]);
            // Alone, a model scoring 1.0 throughout gives the top-score rule nothing to tell full
            // marks by (it would be no signal, "every rollout scored 1.0"): a threshold does.
            if *model == "always-right" {
                asked.correct_rule = CorrectRule::AtLeast { threshold: 1.0 };
            }
            stack.plan(asked)
        })
        .collect();
    // At once: the failing endpoint alone takes ~25 s of atroposlib's retries.
    let (ready, easy, hard, broken) = tokio::join!(
        stack.run(&plans[0], Secrets::default()),
        stack.run(&plans[1], Secrets::default()),
        stack.run(&plans[2], Secrets::default()),
        stack.run(&plans[3], Secrets::default()),
    );
    let reports = [ready, easy, hard, broken];
    for ((model, verdict), report) in cases.iter().zip(&reports) {
        assert_eq!(report.summary.verdict, *verdict, "{model}: {report:#?}");
    }
    // Garbage parses to no number: every completion is wrong, and the test has no full marks.
    let garbage = &reports[2];
    assert_eq!(garbage.correct_from, None);
    assert_eq!(garbage.models[0].figures.accuracy, Some(0.0));
    assert_eq!(garbage.models[0].figures.all_wrong_groups, 3);
    // A failing endpoint: the cause under atroposlib's retry wrappers, and nothing scored.
    let failed = &reports[3].models[0];
    assert_eq!(
        failed.outcome,
        ModelOutcome::Failed {
            code: Some(1),
            signal: None
        }
    );
    assert!(
        failed
            .error
            .as_deref()
            .is_some_and(|error| error.contains("InternalServerError")),
        "{failed:#?}"
    );
    assert_eq!(failed.figures.steps_tested, 0);
    assert!(!reports[3].summary.environment_working);
    assert_eq!(reports[0].models[0].figures.accuracy, Some(0.5));
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
async fn a_hanging_model_is_cut_at_its_timeout_while_the_others_finish() {
    let python = test_python();
    let server = FixtureServer::start(&python, None);
    let stack = Stack::new(&python);
    let mut request = request(&server, &["slow", "half-right"]);
    // Long enough for a process-mode run on a loaded machine, far shorter than `slow`'s hour.
    request.timeout = Duration::from_secs(40);
    let plan = stack.plan(request);
    let report = stack.run(&plan, Secrets::default()).await;
    let slow = model(&report, "slow");
    assert_eq!(slow.outcome, ModelOutcome::TimedOut { after_secs: 40.0 });
    assert!(
        slow.error
            .as_deref()
            .unwrap_or_default()
            .contains("cut after 40 s")
    );
    assert_eq!(slow.figures.steps_tested, 0);
    assert_eq!(
        model(&report, "half-right").outcome,
        ModelOutcome::Succeeded
    );
    assert_eq!(report.summary.verdict, Verdict::Ready);
    let left = processes_mentioning(&report.output_dir.display().to_string());
    assert!(left.is_empty(), "left running: {left:?}");
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
async fn the_key_reaches_the_endpoint_and_no_argv_log_or_output() {
    const KEY: &str = "sk-fixture-preflight-key-5d1f0c";
    const KEY_SHA256: &str = "bf56b7e9db7a91b5450c89250fe025d94e9ddb3ba0d01dffbc352e8e2a8c856e";
    let python = test_python();
    // The server refuses any other key: a success proves the key arrived.
    let server = FixtureServer::start(&python, Some(KEY_SHA256));
    let stack = Stack::new(&python);
    let mut request = request(&server, &["always-right"]);
    request.endpoint.key = Some(KEY.to_owned());
    let plan = stack.plan(request);
    let mut secrets = Secrets::default();
    secrets.also_redact("FIXTURE_KEY", KEY);

    // Watch every command line while the test runs.
    let watching = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let watcher = {
        let watching = watching.clone();
        std::thread::spawn(move || {
            let mut seen = Vec::new();
            while watching.load(std::sync::atomic::Ordering::Relaxed) {
                seen.extend(processes_mentioning("process"));
                std::thread::sleep(Duration::from_millis(50));
            }
            seen
        })
    };
    let report = stack.run(&plan, secrets).await;
    watching.store(false, std::sync::atomic::Ordering::Relaxed);
    let command_lines = watcher.join().unwrap();

    assert_eq!(
        model(&report, "always-right").outcome,
        ModelOutcome::Succeeded
    );
    assert!(
        command_lines
            .iter()
            .any(|(_, line)| line.contains("--openai.api_key None")),
        "the process was never seen"
    );
    assert!(command_lines.iter().all(|(_, line)| !line.contains(KEY)));
    let requests = server.requests();
    assert!(!requests.is_empty());
    assert!(
        requests
            .iter()
            .all(|r| r["auth_sha256"] == KEY_SHA256 && r["status"] == 200)
    );
    for entry in std::fs::read_dir(&report.output_dir).unwrap() {
        let path = entry.unwrap().path();
        let content = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
        assert!(!content.contains(KEY), "key in {}", path.display());
    }
    assert!(!serde_json::to_string(&report).unwrap().contains(KEY));
}

/// The plan itself refuses a test larger than any face may ask for (it allowed 1 000 steps of
/// 1 024 completions while the tools refused over 100 and 256), at the limits and one past.
#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn a_plan_over_the_limits_is_refused() {
    use rl_preflight::{MAX_GROUP_SIZE, MAX_STEPS, PreflightError, PreflightPlan};

    let python = test_python();
    let server = FixtureServer::start(&python, None);
    let stack = Stack::new(&python);
    let settings = stack.service.settings();
    let selection = stack.service.selection().unwrap();
    let plan = |steps, group_size| {
        let mut asked = request(&server, &["half-right"]);
        asked.steps = steps;
        asked.group_size = group_size;
        let working_dir = settings.tinker_atropos_root.clone().unwrap();
        PreflightPlan::new(asked, &selection, settings, working_dir)
    };
    assert!(plan(MAX_STEPS, MAX_GROUP_SIZE).is_ok());
    for (steps, group_size, what, value) in [
        (
            MAX_STEPS,
            MAX_GROUP_SIZE + 1,
            "group_size",
            MAX_GROUP_SIZE + 1,
        ),
        (MAX_STEPS, 1024, "group_size", 1024),
        (MAX_STEPS + 1, MAX_GROUP_SIZE, "num_steps", MAX_STEPS + 1),
        (1000, 4, "num_steps", 1000),
    ] {
        match plan(steps, group_size) {
            Err(PreflightError::OutOfRange {
                what: refused,
                value: given,
                ..
            }) => assert_eq!((refused, given), (what, value)),
            other => panic!("{steps} steps of {group_size}: {other:?}"),
        }
    }
}
