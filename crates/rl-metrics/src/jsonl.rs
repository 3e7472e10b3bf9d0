//! The metrics file a trainer may write into its run folder (`metrics.jsonl`): one JSON object
//! per line. A metrics line has `step` (or `_step`), optionally `_timestamp`, and the trainer's
//! WandB keys; an event line is `{"event": "final_weights", "path": …}` or
//! `{"event": "checkpoint", "step": …, "path": …}`. Lines are written by Python's `json`, so
//! `NaN` and `Infinity` appear bare.

use std::collections::BTreeMap;
use std::path::Path;

use async_trait::async_trait;

use crate::error::MetricsError;
use crate::model::{
    Checkpoint, HistoryRow, LoggedRun, MetricValue, RunMetrics, SourceKind, parse_python_json,
    summary_of,
};
use crate::source::{MetricsSource, RunTarget, read_off_thread};

const STEP_KEYS: [&str; 2] = ["step", "_step"];
const TIMESTAMP_KEYS: [&str; 2] = ["_timestamp", "timestamp"];
const RUNTIME_KEY: &str = "_runtime";
const EVENT_KEY: &str = "event";

/// The source over `runs/<id>/metrics.jsonl`.
#[derive(Debug, Clone, Copy, Default)]
pub struct MetricsFile;

#[async_trait]
impl MetricsSource for MetricsFile {
    fn kind(&self) -> SourceKind {
        SourceKind::MetricsFile
    }

    async fn fetch(&self, target: &RunTarget) -> Result<Option<RunMetrics>, MetricsError> {
        let path = target.metrics_file();
        read_off_thread(path.clone(), move || {
            if path.is_file() {
                read_metrics_file(&path).map(Some)
            } else {
                Ok(None)
            }
        })
        .await
    }
}

/// Reads a whole metrics file. Lines that are not JSON objects are reported and skipped; a last
/// line without its newline is a write in progress, reported as truncated.
pub fn read_metrics_file(path: &Path) -> Result<RunMetrics, MetricsError> {
    let bytes = std::fs::read(path).map_err(|source| MetricsError::Io {
        action: "read",
        path: path.to_owned(),
        source,
    })?;
    let text = String::from_utf8_lossy(&bytes);
    let mut metrics = RunMetrics::empty(SourceKind::MetricsFile);
    let mut history: Vec<HistoryRow> = Vec::new();
    let ends_with_newline = text.ends_with('\n');
    let lines: Vec<&str> = text.lines().collect();
    for (index, line) in lines.iter().enumerate() {
        let number = index + 1;
        if line.trim().is_empty() {
            continue;
        }
        let is_unfinished_tail = number == lines.len() && !ends_with_newline;
        let object = match parse_python_json(line) {
            Ok(serde_json::Value::Object(object)) => object,
            Ok(_) => {
                metrics
                    .warnings
                    .push(format!("line {number} is not a JSON object; skipped"));
                continue;
            }
            Err(_) if is_unfinished_tail => {
                metrics.warnings.push(format!(
                    "line {number} is truncated (the trainer was writing it?); skipped"
                ));
                continue;
            }
            Err(error) => {
                metrics
                    .warnings
                    .push(format!("line {number} is not JSON ({error}); skipped"));
                continue;
            }
        };
        read_object(object, number, &mut history, &mut metrics);
    }
    history.sort_by_key(|row| row.step);
    metrics.trainer = Some(LoggedRun {
        path: Some(path.to_owned()),
        summary: summary_of(&history),
        history,
        ..LoggedRun::default()
    });
    Ok(metrics)
}

fn read_object(
    mut object: serde_json::Map<String, serde_json::Value>,
    number: usize,
    history: &mut Vec<HistoryRow>,
    metrics: &mut RunMetrics,
) {
    if let Some(event) = object.remove(EVENT_KEY) {
        let path = object.get("path").and_then(serde_json::Value::as_str);
        match (event.as_str(), path) {
            (Some("final_weights"), Some(path)) => metrics.final_weights = Some(path.to_owned()),
            (Some("checkpoint"), Some(path)) => metrics.checkpoints.push(Checkpoint::sampler(
                object.get("step").and_then(serde_json::Value::as_i64),
                path.to_owned(),
            )),
            // A run's cap is said by its state (`capped`) and its events, with the figures.
            (Some("capped"), _) => {}
            _ => metrics.warnings.push(format!(
                "line {number}: event {event} is not one this reader knows; skipped"
            )),
        }
        return;
    }
    let step = STEP_KEYS
        .iter()
        .find_map(|key| object.remove(*key))
        .map(MetricValue::from_json);
    let Some(step) = step
        .and_then(|step| step.as_f64())
        .filter(|step| step.is_finite() && step.fract() == 0.0)
        .map(|step| step as i64)
    else {
        metrics
            .warnings
            .push(format!("line {number} has no whole-number step; skipped"));
        return;
    };
    let timestamp = TIMESTAMP_KEYS
        .iter()
        .find_map(|key| object.remove(*key))
        .and_then(|value| MetricValue::from_json(value).as_f64());
    object.remove(RUNTIME_KEY);
    let values: BTreeMap<String, MetricValue> = object
        .into_iter()
        .map(|(key, value)| (key, MetricValue::from_json(value)))
        .collect();
    history.push(HistoryRow {
        step,
        timestamp,
        values,
    });
}
