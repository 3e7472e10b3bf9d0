//! Where a run's tokens and seconds went, from the trainer's rows: the totals so far, the pace
//! of the latest step, and the share of each part of a step (the anatomy) over the run.

use crate::model::HistoryRow;

pub(crate) const PROMPT_TOTAL: &str = "tokens/prompt_total";
pub(crate) const SAMPLED_TOTAL: &str = "tokens/sampled_total";
pub(crate) const TRAINED_TOTAL: &str = "tokens/trained_total";
const TRAINED_PER_SEC: &str = "throughput/trained_tokens_per_sec";
const SAMPLED_PER_SEC: &str = "throughput/sampled_tokens_per_sec";
const TOTAL_SECS: &str = "time/total_secs";

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
}
