//! The trainer's metrics file: whole, cut off mid-line, with NaN, empty, with lines that are
//! not metrics. (The answer an agent gets for each file is snapshot in rl-tools.)

use std::path::{Path, PathBuf};

use rl_metrics::{
    Activity, HealthPolicy, MetricValue, MetricsFile, MetricsSource, Results, RunTarget,
    SourceKind, StatusMetrics, read_metrics_file,
};

fn fixture(name: &str) -> PathBuf {
    rl_test_support::workspace_root()
        .join("fixtures/metrics")
        .join(name)
}

fn finished() -> Activity {
    Activity {
        running: false,
        running_since: None,
        now: 0.0,
        ..Activity::default()
    }
}

fn results_of(path: &Path) -> Results {
    let metrics = read_metrics_file(path).unwrap();
    Results::of(&metrics, &finished(), &HealthPolicy::default())
}

#[test]
fn a_complete_file_gives_every_step_the_weights_and_the_latest_numbers() {
    let results = results_of(&fixture("complete.jsonl"));
    assert_eq!(results.source, SourceKind::MetricsFile);
    assert_eq!(results.history.len(), 6);
    assert_eq!(results.metrics.step, Some(6));
    assert_eq!(results.metrics.reward_mean, Some(0.85));
    assert!(results.metrics.loss.is_some());
    assert_eq!(results.metrics.percent_correct, None);
    assert_eq!(
        results.final_weights.as_deref(),
        Some("tinker://fixture-run/sampler_weights/final")
    );
    assert_eq!(results.checkpoints.len(), 6);
    assert_eq!(results.checkpoints[5].step, Some(6));
    assert!(results.warnings.is_empty(), "{:?}", results.warnings);
}

#[test]
fn a_line_cut_off_mid_write_is_reported_and_the_rest_kept() {
    let results = results_of(&fixture("truncated-last-line.jsonl"));
    assert_eq!(results.metrics.step, Some(3));
    assert_eq!(results.warnings.len(), 1);
    assert!(results.warnings[0].contains("line 4 is truncated"));
}

#[test]
fn nan_and_infinity_are_kept_and_flagged() {
    let results = results_of(&fixture("nan-values.jsonl"));
    assert!(results.metrics.reward_mean.unwrap().is_infinite());
    assert!(results.history[2].loss.unwrap().is_nan());
    assert!(!results.health.healthy);
    let metrics: Vec<&str> = results
        .health
        .flags
        .iter()
        .map(|flag| flag.metric.as_str())
        .collect();
    assert_eq!(metrics, vec!["train/loss", "reward/mean"]);
    assert_eq!(
        results.final_metrics["reward/mean"],
        MetricValue::Number(f64::INFINITY)
    );
}

#[test]
fn an_empty_file_is_a_run_without_steps_yet() {
    let results = results_of(&fixture("empty.jsonl"));
    assert_eq!(results.metrics, StatusMetrics::default());
    assert!(results.history.is_empty());
    assert!(results.warnings.is_empty());
    assert!(results.health.healthy);
}

#[test]
fn lines_that_are_not_metrics_are_named_and_skipped() {
    let results = results_of(&fixture("bad-lines.jsonl"));
    assert_eq!(results.history.len(), 2);
    let warnings = results.warnings.join("\n");
    assert!(warnings.contains("line 2 is not JSON"), "{warnings}");
    assert!(
        warnings.contains("line 3 is not a JSON object"),
        "{warnings}"
    );
    assert!(
        warnings.contains("line 4 has no whole-number step"),
        "{warnings}"
    );
    assert!(warnings.contains("line 5: event"), "{warnings}");
}

#[tokio::test]
async fn the_source_reads_the_run_folders_file_and_has_nothing_without_one() {
    let dir = tempfile::tempdir().unwrap();
    let target = RunTarget::new(dir.path().to_owned(), Vec::new(), None);
    assert_eq!(MetricsFile.fetch(&target).await.unwrap(), None);
    std::fs::copy(fixture("complete.jsonl"), target.metrics_file()).unwrap();
    let metrics = MetricsFile.fetch(&target).await.unwrap().unwrap();
    assert_eq!(metrics.trainer.unwrap().history.len(), 6);
}
