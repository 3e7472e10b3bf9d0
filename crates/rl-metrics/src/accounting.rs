//! Where a run's tokens and seconds went, from the trainer's rows: the totals so far, the pace
//! of the latest step, and the share of each part of a step (the anatomy) over the run.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use crate::error::MetricsError;
use crate::model::{HistoryRow, MetricValue, parse_python_json};

pub(crate) const PROMPT_TOTAL: &str = "tokens/prompt_total";
pub(crate) const SAMPLED_TOTAL: &str = "tokens/sampled_total";
pub(crate) const TRAINED_TOTAL: &str = "tokens/trained_total";
const TRAINED_PER_SEC: &str = "throughput/trained_tokens_per_sec";
const SAMPLED_PER_SEC: &str = "throughput/sampled_tokens_per_sec";
const TOTAL_SECS: &str = "time/total_secs";
pub(crate) const COST_TOTAL: &str = "cost/total";
const COST_ESTIMATE: &str = "cost/estimate_at_completion";

/// The parts of a step the trainer times, in the order a step goes through them; each is
/// `time/<part>_secs` in a row.
pub const STEP_PARTS: [&str; 9] = [
    "wait",
    "logprobs",
    "rollouts",
    "forward_backward",
    "optim",
    "save",
    "sampler_update",
    "eval",
    "other",
];

/// The key of a part's seconds in a row.
pub fn part_key(part: &str) -> String {
    format!("time/{part}_secs")
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Accounting {
    /// The latest step with token totals.
    pub step: i64,
    pub prompt_tokens: u64,
    pub sampled_tokens: u64,
    pub trained_tokens: u64,
    /// The latest step's pace.
    pub trained_tokens_per_sec: Option<f64>,
    pub sampled_tokens_per_sec: Option<f64>,
    /// Seconds of the steps that were timed, and each part's share of them, in
    /// [`STEP_PARTS`] order (parts never timed left out).
    pub timed_secs: f64,
    pub shares: Vec<(&'static str, f64)>,
    /// The run's cost so far (its parent's included, like the token totals) and the estimate at
    /// its last step, in the run's currency; `None` when no price was set.
    pub cost_total: Option<f64>,
    pub cost_estimate: Option<f64>,
}

impl Accounting {
    /// `None` for a trainer that logs no token totals (an older rl's, another trainer).
    pub fn of(history: &[HistoryRow]) -> Option<Self> {
        let latest = history
            .iter()
            .rev()
            .find(|row| row.number(TRAINED_TOTAL).is_some())?;
        let count = |key: &str| {
            latest
                .number(key)
                .filter(|n| n.is_finite() && *n >= 0.0)
                .map_or(0, |n| n as u64)
        };
        let mut timed_secs = 0.0;
        let mut part_secs = [0.0; STEP_PARTS.len()];
        for row in history {
            let Some(total) = row.number(TOTAL_SECS).filter(|s| s.is_finite() && *s > 0.0) else {
                continue;
            };
            timed_secs += total;
            for (secs, part) in part_secs.iter_mut().zip(STEP_PARTS) {
                if let Some(value) = row.number(&part_key(part)).filter(|s| s.is_finite()) {
                    *secs += value.max(0.0);
                }
            }
        }
        let shares = STEP_PARTS
            .iter()
            .zip(part_secs)
            .filter(|(_, secs)| *secs > 0.0)
            .map(|(part, secs)| (*part, secs / timed_secs))
            .collect();
        Some(Self {
            step: latest.step,
            prompt_tokens: count(PROMPT_TOTAL),
            sampled_tokens: count(SAMPLED_TOTAL),
            trained_tokens: count(TRAINED_TOTAL),
            trained_tokens_per_sec: latest.number(TRAINED_PER_SEC),
            sampled_tokens_per_sec: latest.number(SAMPLED_PER_SEC),
            timed_secs,
            shares,
            cost_total: latest.number(COST_TOTAL).filter(|n| n.is_finite()),
            cost_estimate: history
                .iter()
                .rev()
                .find_map(|row| row.number(COST_ESTIMATE))
                .filter(|n| n.is_finite()),
        })
    }

    /// The part with the largest share over the run.
    pub fn bottleneck(&self) -> Option<(&'static str, f64)> {
        self.shares
            .iter()
            .copied()
            .max_by(|a, b| a.1.total_cmp(&b.1))
    }
}

/// A run's totals at one step: tokens, and cost when priced.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Totals {
    pub step: i64,
    /// Seconds since the Unix epoch the row was logged (`_timestamp`), when known.
    pub timestamp: Option<f64>,
    pub prompt_tokens: u64,
    pub sampled_tokens: u64,
    pub trained_tokens: u64,
    pub cost: Option<f64>,
}

impl Totals {
    /// The totals a row carries; `None` for a row without token totals.
    pub fn of_row(row: &HistoryRow) -> Option<Self> {
        row.number(TRAINED_TOTAL)?;
        let count = |key: &str| {
            row.number(key)
                .filter(|n| n.is_finite() && *n >= 0.0)
                .map_or(0, |n| n as u64)
        };
        Some(Self {
            step: row.step,
            timestamp: row.timestamp,
            prompt_tokens: count(PROMPT_TOTAL),
            sampled_tokens: count(SAMPLED_TOTAL),
            trained_tokens: count(TRAINED_TOTAL),
            cost: row.number(COST_TOTAL).filter(|n| n.is_finite()),
        })
    }

    /// Every row's totals, in the file's order (rows without totals left out).
    pub fn of_history(history: &[HistoryRow]) -> Vec<Self> {
        history.iter().filter_map(Self::of_row).collect()
    }
}

/// How much of a metrics file's end [`latest_totals`] reads: a row is a few kilobytes, so the
/// last rows are in it, however long the run.
pub const TAIL_BYTES: u64 = 64 * 1024;

/// The latest totals in a metrics file, read from its last [`TAIL_BYTES`] only (a list of
/// hundreds of runs reads each one's); `None` when the file is absent or its end has none.
pub fn latest_totals(path: &Path) -> Result<Option<Totals>, MetricsError> {
    Ok(tail_rows(path)?.iter().rev().find_map(Totals::of_row))
}

/// The rows in a metrics file's last [`TAIL_BYTES`], in the file's order (the first line the
/// window cuts, lines that are no row, and a line being written left out); none when the file
/// is absent.
pub fn tail_rows(path: &Path) -> Result<Vec<HistoryRow>, MetricsError> {
    let io = |source| MetricsError::Io {
        action: "read",
        path: path.to_owned(),
        source,
    };
    let mut file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(io(error)),
    };
    let length = file.metadata().map_err(io)?.len();
    let start = length.saturating_sub(TAIL_BYTES);
    file.seek(SeekFrom::Start(start)).map_err(io)?;
    let mut bytes = Vec::new();
    file.take(TAIL_BYTES).read_to_end(&mut bytes).map_err(io)?;
    let text = String::from_utf8_lossy(&bytes);
    let mut lines = text.lines();
    if start > 0 {
        // The first line read is the end of one cut by the window.
        lines.next();
    }
    Ok(lines.filter_map(row_of_line).collect())
}

/// A metrics line as a row of its numbers (the metrics file's own reader keeps everything).
fn row_of_line(line: &str) -> Option<HistoryRow> {
    let serde_json::Value::Object(object) = parse_python_json(line).ok()? else {
        return None;
    };
    let number = |key: &str| object.get(key).and_then(serde_json::Value::as_f64);
    let step = number("step").or_else(|| number("_step"))? as i64;
    Some(HistoryRow {
        step,
        timestamp: number("_timestamp"),
        values: object
            .iter()
            .map(|(key, value)| (key.clone(), MetricValue::from_json(value.clone())))
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(step: i64, values: &[(&str, f64)]) -> HistoryRow {
        HistoryRow::of_numbers(step, values)
    }

    #[test]
    fn totals_are_the_latest_and_shares_are_over_every_timed_step() {
        let history = [
            row(
                1,
                &[
                    (PROMPT_TOTAL, 100.0),
                    (SAMPLED_TOTAL, 50.0),
                    (TRAINED_TOTAL, 140.0),
                    (TOTAL_SECS, 4.0),
                    ("time/wait_secs", 3.0),
                    ("time/forward_backward_secs", 1.0),
                ],
            ),
            row(
                2,
                &[
                    (PROMPT_TOTAL, 220.0),
                    (SAMPLED_TOTAL, 90.0),
                    (TRAINED_TOTAL, 300.0),
                    (TRAINED_PER_SEC, 40.0),
                    (TOTAL_SECS, 4.0),
                    ("time/wait_secs", 1.0),
                    ("time/forward_backward_secs", 3.0),
                ],
            ),
            // A row without totals (an evaluation-only row) does not hide the latest totals.
            row(3, &[("eval/mean_score", 0.5)]),
        ];
        let accounting = Accounting::of(&history).unwrap();
        assert_eq!(accounting.step, 2);
        assert_eq!(
            (
                accounting.prompt_tokens,
                accounting.sampled_tokens,
                accounting.trained_tokens
            ),
            (220, 90, 300)
        );
        assert_eq!(accounting.trained_tokens_per_sec, Some(40.0));
        assert_eq!(accounting.timed_secs, 8.0);
        assert_eq!(
            accounting.shares,
            vec![("wait", 0.5), ("forward_backward", 0.5)]
        );
        assert!(accounting.bottleneck().is_some());
    }

    #[test]
    fn a_trainer_without_totals_has_no_accounting() {
        assert_eq!(Accounting::of(&[row(1, &[("reward/mean", 0.1)])]), None);
    }

    #[test]
    fn cost_is_the_latest_total_and_the_latest_estimate() {
        let history = [
            row(
                1,
                &[
                    (TRAINED_TOTAL, 10.0),
                    (COST_TOTAL, 0.5),
                    (COST_ESTIMATE, 5.0),
                ],
            ),
            row(2, &[(TRAINED_TOTAL, 20.0), (COST_TOTAL, 1.25)]),
        ];
        let accounting = Accounting::of(&history).unwrap();
        assert_eq!(accounting.cost_total, Some(1.25));
        assert_eq!(accounting.cost_estimate, Some(5.0));
        let unpriced = Accounting::of(&[row(1, &[(TRAINED_TOTAL, 10.0)])]).unwrap();
        assert_eq!((unpriced.cost_total, unpriced.cost_estimate), (None, None));
    }

    #[test]
    fn the_latest_totals_are_read_from_the_file_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metrics.jsonl");
        assert_eq!(latest_totals(&path).unwrap(), None);
        let mut text = String::new();
        // Far more than the window: only its end is read.
        for step in 1..=2000 {
            text.push_str(&format!(
                "{{\"step\": {step}, \"_timestamp\": 1700000000.5, \"tokens/prompt_total\": {}, \
                 \"tokens/sampled_total\": {}, \"tokens/trained_total\": {}, \"cost/total\": {}, \
                 \"loss\": NaN}}\n",
                step * 10,
                step * 5,
                step * 12,
                f64::from(step) / 4.0
            ));
        }
        text.push_str("{\"step\": 2001, \"eval/mean_score\": 0.5}\n{\"step\": 2002, \"tok");
        assert!(text.len() as u64 > 2 * TAIL_BYTES);
        std::fs::write(&path, text).unwrap();
        let totals = latest_totals(&path).unwrap().unwrap();
        assert_eq!(
            totals,
            Totals {
                step: 2000,
                timestamp: Some(1_700_000_000.5),
                prompt_tokens: 20_000,
                sampled_tokens: 10_000,
                trained_tokens: 24_000,
                cost: Some(500.0),
            }
        );
    }
}
