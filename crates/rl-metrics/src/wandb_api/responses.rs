//! What WandB's GraphQL API answers, as read: the envelope, the pages of runs, a run's summary
//! and history rows (values that may arrive JSON-encoded, with Python's bare `NaN`).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use crate::model::{HistoryRow, MetricValue, parse_python_json};

#[derive(Deserialize)]
pub(super) struct Envelope {
    pub(super) data: Option<Value>,
    pub(super) errors: Option<Vec<GraphQlError>>,
}

#[derive(Deserialize)]
pub(super) struct GraphQlError {
    pub(super) message: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct ViewerData {
    pub(super) viewer: Option<Viewer>,
}

#[derive(Deserialize)]
pub(super) struct Viewer {
    pub(super) entity: Option<String>,
}

/// A missing project is `null`, not an error.
#[derive(Deserialize)]
pub(super) struct ProjectData<P> {
    pub(super) project: Option<P>,
}

#[derive(Deserialize)]
pub(super) struct RunsProject {
    pub(super) runs: Option<RunConnection>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RunConnection {
    pub(super) edges: Vec<RunEdge>,
    pub(super) page_info: PageInfo,
}

#[derive(Deserialize)]
pub(super) struct RunEdge {
    pub(super) node: RunNode,
    pub(super) cursor: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PageInfo {
    pub(super) end_cursor: Option<String>,
    pub(super) has_next_page: bool,
}

/// `summaryMetrics` is a JSON string and `historyKeys` a JSON object, but the SDK accepts
/// either form for both, and so do we.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RunNode {
    /// The run id, as in its URL.
    pub(super) name: String,
    pub(super) display_name: Option<String>,
    pub(super) state: Option<String>,
    pub(super) group: Option<String>,
    pub(super) summary_metrics: Option<Value>,
    pub(super) history_keys: Option<Value>,
}

#[derive(Deserialize)]
pub(super) struct HistoryProject {
    pub(super) run: Option<HistoryRun>,
}

#[derive(Deserialize)]
pub(super) struct HistoryRun {
    pub(super) history: Option<Vec<Value>>,
}

/// A JSON value that may arrive as a JSON-encoded string (with Python's bare `NaN`) instead.
pub(super) fn decode_embedded(value: &Value) -> Option<Value> {
    match value {
        Value::String(text) => parse_python_json(text).ok(),
        other => Some(other.clone()),
    }
}

pub(super) fn parse_summary(
    raw: Option<&Value>,
    run_id: &str,
    warnings: &mut Vec<String>,
) -> BTreeMap<String, MetricValue> {
    let Some(raw) = raw.filter(|raw| !raw.is_null()) else {
        return BTreeMap::new();
    };
    if let Some(Value::Object(map)) = decode_embedded(raw) {
        map.into_iter()
            .map(|(key, value)| (key, MetricValue::from_json(value)))
            .collect()
    } else {
        warnings.push(format!(
            "the summary of WandB run {run_id} could not be read; it is left empty"
        ));
        BTreeMap::new()
    }
}

pub(super) fn last_step(history_keys: Option<&Value>) -> Option<i64> {
    let keys = decode_embedded(history_keys?)?;
    let step = keys.get("lastStep")?;
    step.as_i64()
        .or_else(|| step.as_f64().map(|step| step as i64))
}

pub(super) enum RowOutcome {
    Row(HistoryRow),
    /// WandB's own bookkeeping rows have no step; they are not metrics.
    NoStep,
    Unreadable,
}

pub(super) fn parse_row(line: &Value) -> RowOutcome {
    let Some(Value::Object(mut map)) = decode_embedded(line) else {
        return RowOutcome::Unreadable;
    };
    let step = map.get("_step").and_then(|step| {
        step.as_i64()
            .or_else(|| step.as_f64().map(|step| step as i64))
    });
    let Some(step) = step else {
        return RowOutcome::NoStep;
    };
    let timestamp = map
        .get("_timestamp")
        .map(|value| MetricValue::from_json(value.clone()))
        .and_then(|value| value.as_f64());
    for internal in ["_step", "_timestamp", "_runtime"] {
        map.remove(internal);
    }
    let values = map
        .into_iter()
        .map(|(key, value)| (key, MetricValue::from_json(value)))
        .collect();
    RowOutcome::Row(HistoryRow {
        step,
        timestamp,
        values,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_keep_logged_keys_and_drop_wandb_bookkeeping() {
        let line = Value::String(
            r#"{"_step": 3, "_timestamp": 1700000000.5, "_runtime": 12, "train/loss": NaN, "reward/mean": 0.25}"#
                .to_owned(),
        );
        let RowOutcome::Row(row) = parse_row(&line) else {
            panic!("not a row");
        };
        assert_eq!(row.step, 3);
        assert_eq!(row.timestamp, Some(1_700_000_000.5));
        assert_eq!(
            row.values.keys().collect::<Vec<_>>(),
            ["reward/mean", "train/loss"]
        );
        assert!(row.number("train/loss").is_some_and(f64::is_nan));
        assert!(matches!(
            parse_row(&Value::String(r#"{"x": 1}"#.to_owned())),
            RowOutcome::NoStep
        ));
        assert!(matches!(
            parse_row(&Value::String("{broken".to_owned())),
            RowOutcome::Unreadable
        ));
    }
}
