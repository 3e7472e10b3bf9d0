//! A whole test's verdicts and errors from models faked by a shell script (no Python): what
//! each model's verdict and `error` say must be what its groups and its log show.

use std::sync::Arc;

use rl_preflight::{LocalModelRunner, ModelReport, PreflightReport, PreflightStore, Verdict};
use rl_settings::Secrets;

use crate::ignore_progress;
use crate::runner::{PATIENCE, ShellModels, shell_plan};

/// `failed`: rl's verifiers runner failing as it does, with its one line of why, its last;
/// `silent`: exits non-zero printing nothing; `half`: every rollout 0.5; `graded`: 0 and 1.
const SCRIPT: &str = r#"case "$1" in
  failed)
    echo "rl_verifiers: verifiers-v1 environment loaded; process against failed at http://127.0.0.1:9/v1"
    echo "Error calling reward function closeness: the judge is gone"
    echo "rl_verifiers: every rollout of group 1 failed: openai.AuthenticationError: 401"
    exit 1 ;;
  silent) exit 3 ;;
  half) printf '{"scores": [0.5, 0.5]}\n{"scores": [0.5, 0.5]}\n' > "$2" ;;
  graded) printf '{"scores": [0.0, 1.0]}\n{"scores": [1.0, 0.0]}\n' > "$2" ;;
esac"#;

async fn run(models: &[&str]) -> PreflightReport {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let runner = ShellModels {
        runner: LocalModelRunner::default(),
        script: SCRIPT.to_owned(),
    };
    let plan = shell_plan(work.path(), models, models.len());
    tokio::time::timeout(
        PATIENCE,
        rl_preflight::run_test(
            &plan,
            &PreflightStore::new(home.path()),
            Arc::new(runner),
            Secrets::default(),
            ignore_progress(),
        ),
    )
    .await
    .expect("the test ends")
    .unwrap()
}

fn model<'a>(report: &'a PreflightReport, name: &str) -> &'a ModelReport {
    report.models.iter().find(|m| m.model == name).unwrap()
}

fn own_verdict(report: &PreflightReport, name: &str) -> (Verdict, String) {
    let own = report
        .summary
        .by_model
        .iter()
        .find(|verdict| verdict.model == name)
        .unwrap();
    (own.verdict, own.explanation.clone())
}

/// A failed model had `error: null` while `error_tail` held its cause; a model whose every
/// rollout scored 0.5, below another's 1.0, was called "too hard, all wrong".
#[tokio::test(flavor = "multi_thread")]
async fn a_failure_says_its_cause_and_a_constant_partial_score_is_no_signal() {
    let report = run(&["failed", "silent", "half", "graded"]).await;

    let failed = model(&report, "failed");
    let cause = "rl_verifiers: every rollout of group 1 failed: openai.AuthenticationError: 401";
    assert_eq!(failed.error.as_deref(), Some(cause), "{failed:#?}");
    assert_eq!(failed.error_tail.last().map(String::as_str), Some(cause));
    let silent = model(&report, "silent");
    assert_eq!(
        silent.error.as_deref(),
        Some("it printed nothing"),
        "{silent:#?}"
    );
    assert_eq!(model(&report, "half").error, None);

    let (verdict, explanation) = own_verdict(&report, "half");
    assert_eq!(verdict, Verdict::NoSignal, "{explanation}");
    assert_eq!(
        explanation,
        "every rollout scored 0.5, between the lowest (0.0) and the top (1.0) scores the test \
         saw: GRPO's advantages are zero"
    );
    assert_eq!(own_verdict(&report, "graded").0, Verdict::Ready);
    assert_eq!(report.correct_from, Some(1.0));

    // Alone, 0.5 everywhere is no claim of "correct" at all: the test saw no other score.
    let alone = run(&["half"]).await;
    let (verdict, explanation) = own_verdict(&alone, "half");
    assert_eq!(verdict, Verdict::NoSignal, "{explanation}");
    assert_eq!(alone.summary.verdict, Verdict::NoSignal);
    assert!(
        explanation.starts_with("every rollout scored 0.5, the only score the test saw"),
        "{explanation}"
    );
    assert_eq!(alone.correct_from, None);
    assert_eq!(model(&alone, "half").figures.accuracy, None);
}
