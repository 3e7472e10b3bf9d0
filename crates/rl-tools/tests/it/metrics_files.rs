//! The metrics part of `rl_get_results` for each of the trainer's metrics files in
//! `fixtures/metrics` (whole, cut off mid-line, with NaN, empty, with lines that are not
//! metrics): rl-metrics reads them, the answer names the keys.

use std::path::Path;

use rl_metrics::{Activity, HealthPolicy, Results, read_metrics_file};
use rl_tools::ResultsPart;

fn results_of(path: &Path) -> ResultsPart {
    let metrics = read_metrics_file(path).unwrap();
    let finished = Activity {
        running: false,
        running_since: None,
        now: 0.0,
        ..Activity::default()
    };
    ResultsPart::from(&Results::of(&metrics, &finished, &HealthPolicy::default()))
}

/// One snapshot per fixture file: the results an agent would be handed for it.
#[test]
fn results_of_each_fixture_file() {
    insta::glob!("../../../../fixtures/metrics", "*.jsonl", |path| {
        insta::assert_json_snapshot!(results_of(path), { ".trainer_run.path" => "[fixture]" });
    });
}

/// JSON has no NaN or infinity: they are answered as WandB writes them, in the latest numbers,
/// in every step's, and in the summary as logged.
#[test]
fn non_finite_numbers_are_answered_as_wandb_writes_them() {
    let path = rl_test_support::workspace_root().join("fixtures/metrics/nan-values.jsonl");
    let json = serde_json::to_value(results_of(&path)).unwrap();
    assert_eq!(json["metrics"]["reward_mean"], "Infinity");
    assert_eq!(json["history"][2]["loss"], "NaN");
    assert_eq!(json["final_metrics"]["reward/mean"], "Infinity");
}
