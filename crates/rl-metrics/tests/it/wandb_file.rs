//! WandB run files written by the real wandb SDK (offline mode, in the test setup) read back
//! exactly, whole and damaged.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use rl_metrics::{
    MetricValue, MetricsSource, RunTarget, SourceKind, StatusMetrics, WandbFiles, WandbNames,
    parse_python_json, read_wandb_file,
};

/// What the fixture script logged: per run, per step, every key's value.
struct Logged {
    dir: PathBuf,
    trainer_file: PathBuf,
    trainer: BTreeMap<i64, BTreeMap<String, MetricValue>>,
    env: BTreeMap<i64, BTreeMap<String, MetricValue>>,
}

/// The runs are written once per test binary (the SDK takes a few seconds), into cargo's
/// scratch directory for integration tests.
fn logged() -> &'static Logged {
    static LOGGED: OnceLock<Logged> = OnceLock::new();
    LOGGED.get_or_init(|| {
        let python = rl_test_support::test_python();
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("wandb-offline-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let status = Command::new(python)
            .arg(rl_test_support::workspace_root().join("fixtures/wandb/log_offline_runs.py"))
            .arg(&dir)
            .env("WANDB_CONFIG_DIR", dir.join("config"))
            .env("WANDB_CACHE_DIR", dir.join("cache"))
            .env("WANDB_DATA_DIR", dir.join("data"))
            .env_remove("WANDB_API_KEY")
            .env_remove("WANDB_DIR")
            .status()
            .unwrap();
        assert!(status.success(), "the wandb fixture script failed");
        let expected = std::fs::read_to_string(dir.join("expected.json")).unwrap();
        let expected = parse_python_json(&expected).unwrap();
        Logged {
            trainer_file: dir.join(expected["trainer_run_file"].as_str().unwrap()),
            trainer: rows_of(&expected["trainer"]),
            env: rows_of(&expected["env"]),
            dir,
        }
    })
}

fn rows_of(runs: &serde_json::Value) -> BTreeMap<i64, BTreeMap<String, MetricValue>> {
    runs.as_object()
        .unwrap()
        .iter()
        .map(|(step, row)| {
            let values = row
                .as_object()
                .unwrap()
                .iter()
                .map(|(key, value)| (key.clone(), MetricValue::from_json(value.clone())))
                .collect();
            (step.parse().unwrap(), values)
        })
        .collect()
}

/// NaN is not equal to itself; the test compares what was logged, so NaN must match NaN.
fn same(a: &MetricValue, b: &MetricValue) -> bool {
    match (a, b) {
        (MetricValue::Number(x), MetricValue::Number(y)) => {
            (x.is_nan() && y.is_nan()) || x.to_bits() == y.to_bits()
        }
        _ => a == b,
    }
}

fn assert_rows_match(
    read: &[rl_metrics::HistoryRow],
    logged: &BTreeMap<i64, BTreeMap<String, MetricValue>>,
) {
    for row in read {
        let expected = &logged[&row.step];
        assert_eq!(
            row.values.keys().collect::<Vec<_>>(),
            expected.keys().collect::<Vec<_>>(),
            "keys at step {}",
            row.step
        );
        for (key, value) in expected {
            assert!(
                same(&row.values[key], value),
                "step {} {key}: read {:?}, logged {:?}",
                row.step,
                row.values[key],
                value
            );
        }
        assert!(row.timestamp.is_some(), "step {} has no time", row.step);
    }
}

#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn a_run_file_reads_back_exactly_what_the_sdk_logged() {
    let logged = logged();
    let file = read_wandb_file(&logged.trainer_file).unwrap();
    assert!(file.problems.is_empty(), "{:?}", file.problems);
    assert_eq!(file.run.name.as_deref(), Some("fixture-run-trainer-wxyz"));
    assert_eq!(file.run.group.as_deref(), Some("fixture-group"));
    assert_eq!(file.project.as_deref(), Some("atropos-tinker"));
    assert_eq!(file.tags, vec!["trainer".to_owned()]);
    assert_eq!(file.exit_code, Some(0));
    assert_eq!(file.run.state.as_deref(), Some("finished"));
    assert_eq!(
        file.config.get("learning_rate"),
        Some(&MetricValue::Number(4e-5))
    );
    let steps: Vec<i64> = file.run.history.iter().map(|row| row.step).collect();
    assert_eq!(steps, (1..=50).collect::<Vec<_>>());
    assert_rows_match(&file.run.history, &logged.trainer);
    assert_eq!(
        file.run.summary.get("final_weights"),
        Some(&MetricValue::Other(
            "tinker://fixture/sampler_weights/final".into()
        ))
    );
    assert_eq!(file.run.last_step(), Some(50));
}

fn damaged_copy(name: &str, damage: impl FnOnce(&mut Vec<u8>)) -> PathBuf {
    let logged = logged();
    let mut bytes = std::fs::read(&logged.trainer_file).unwrap();
    damage(&mut bytes);
    let path = logged.dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn a_truncated_file_keeps_every_whole_record_and_says_where_it_ends() {
    logged();
    let path = damaged_copy("truncated.wandb", |bytes| {
        let keep = bytes.len() * 6 / 10;
        bytes.truncate(keep);
    });
    let file = read_wandb_file(&path).unwrap();
    assert!(
        file.problems.iter().any(|p| p.starts_with("truncated")),
        "{:?}",
        file.problems
    );
    let steps: Vec<i64> = file.run.history.iter().map(|row| row.step).collect();
    assert!(!steps.is_empty() && steps.len() < 50, "{steps:?}");
    assert_eq!(steps, (1..=steps.len() as i64).collect::<Vec<_>>());
    assert_rows_match(&file.run.history, &logged().trainer);
    assert_eq!(file.exit_code, None);
    assert_eq!(file.run.state, None);
}

#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn a_flipped_byte_is_reported_and_the_other_records_are_kept() {
    logged();
    let path = damaged_copy("flipped.wandb", |bytes| {
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x01;
    });
    let file = read_wandb_file(&path).unwrap();
    assert!(
        file.problems
            .iter()
            .any(|p| p.contains("checksum mismatch")),
        "{:?}",
        file.problems
    );
    assert!(file.run.history.len() < 50);
    assert!(!file.run.history.is_empty());
    assert_rows_match(&file.run.history, &logged().trainer);
}

#[test]
fn a_file_that_is_not_a_run_file_is_refused_with_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run-x.wandb");
    std::fs::write(&path, b"{\"not\": \"wandb\"}").unwrap();
    let error = read_wandb_file(&path).unwrap_err().to_string();
    assert!(error.contains("run-x.wandb"), "{error}");
    assert!(error.contains("not a WandB run file"), "{error}");
}

#[tokio::test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
async fn the_run_folder_source_tells_the_trainer_from_the_env() {
    let logged = logged();
    // The fixture's runs are in <dir>/wandb, as a run's are in runs/<id>/wandb.
    let names = WandbNames::new(
        "atropos-tinker",
        Some("fixture-group".to_owned()),
        "fixture-run",
        Some("fixture-env"),
    );
    let target = RunTarget::new(logged.dir.clone(), Vec::new(), Some(names));
    let metrics = WandbFiles.fetch(&target).await.unwrap().unwrap();
    assert_eq!(metrics.source, SourceKind::WandbFiles);
    assert!(metrics.warnings.is_empty(), "{:?}", metrics.warnings);
    let trainer = metrics.trainer.as_ref().unwrap();
    assert_eq!(trainer.name.as_deref(), Some("fixture-run-trainer-wxyz"));
    let env = metrics.env.as_ref().unwrap();
    assert_eq!(env.name.as_deref(), Some("fixture-env-2026-11-21-abcdef"));
    assert_rows_match(&env.history, &logged.env);

    let view = StatusMetrics::of(&metrics);
    assert_eq!(view.step, Some(50));
    let last = &logged.trainer[&50];
    assert_eq!(view.reward_mean, last["reward/mean"].as_f64());
    assert_eq!(view.loss, last["train/loss"].as_f64());
    assert_eq!(view.percent_correct, Some(0.1));
    assert_eq!(view.eval_percent_correct, Some(0.5));
}

#[tokio::test]
async fn a_run_folder_without_wandb_files_has_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let target = RunTarget::new(dir.path().to_owned(), Vec::new(), None);
    assert_eq!(WandbFiles.fetch(&target).await.unwrap(), None);
}
