//! The normalised view a status shows: a handful of numbers under stable names, each `None`
//! when the run has not logged it. Keys are the ones the Tinker trainer and atroposlib's envs
//! really log (the original tool read `train/reward_mean`, which nobody logs).

use crate::model::{HistoryRow, LoggedRun, RunMetrics};

pub const REWARD_MEAN: &str = "reward/mean";
pub(crate) const LOSS: &str = "train/loss";
pub(crate) const LEARNING_RATE: &str = "train/learning_rate";
pub(crate) const LOGPROBS_DIFF: &str = "logprobs/diff";
pub(crate) const ADVANTAGES_STD: &str = "advantages/std";
/// Env keys; WandB prefixes them with the env's registered name (`gsm8k_0_train/…`).
pub(crate) const PERCENT_CORRECT: &str = "train/percent_correct";
pub const EVAL_PERCENT_CORRECT: &str = "eval/percent_correct";
/// rl's evaluation during training (`eval_every`) logs these in the trainer's rows: the mean
/// score, and pass@1, pass@n and best-of-n for its `n` completions per prompt.
pub const EVAL_MEAN_SCORE: &str = "eval/mean_score";
pub const EVAL_PASS_AT_1: &str = "eval/pass_at_1";
pub const EVAL_PASS_AT_N: &str = "eval/pass_at_n";
pub const EVAL_BEST_OF_N: &str = "eval/best_of_n";
pub const EVAL_N: &str = "eval/n";
/// The 95% intervals of the mean score, pass@n and best-of-n, logged beside them.
pub const EVAL_MEAN_SCORE_LOW: &str = "eval/mean_score_low";
pub const EVAL_MEAN_SCORE_HIGH: &str = "eval/mean_score_high";
pub const EVAL_PASS_AT_N_LOW: &str = "eval/pass_at_n_low";
pub const EVAL_PASS_AT_N_HIGH: &str = "eval/pass_at_n_high";
pub const EVAL_BEST_OF_N_LOW: &str = "eval/best_of_n_low";
pub const EVAL_BEST_OF_N_HIGH: &str = "eval/best_of_n_high";
/// What the run's `max_steps_off_policy` did at a step (logged only with the bound).
pub(crate) const STALE_GROUPS: &str = "batch/stale_groups";
pub(crate) const UNKNOWN_AGE_COMPLETIONS: &str = "batch/unknown_age_completions";
pub(crate) const MAX_AGE_STEPS: &str = "batch/max_age_steps";
/// How stale a step's trained samples were, bound or not: the mean and the largest proven age.
pub(crate) const OFF_POLICY_STEPS: &str = "train/off_policy_steps";
pub(crate) const OFF_POLICY_STEPS_MAX: &str = "train/off_policy_steps_max";

#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct StatusMetrics {
    /// Training steps finished (the trainer logs step n after its n-th optimiser step).
    pub step: Option<i64>,
    pub reward_mean: Option<f64>,
    pub loss: Option<f64>,
    pub learning_rate: Option<f64>,
    pub percent_correct: Option<f64>,
    pub eval_percent_correct: Option<f64>,
    /// The held-out evaluation's mean score (rl's trainer with `eval_every`).
    pub eval_mean_score: Option<f64>,
    /// The held-out evaluation's pass@1, pass@n and best-of-n, and its `n`.
    pub eval_pass_at_1: Option<f64>,
    pub eval_pass_at_n: Option<f64>,
    pub eval_best_of_n: Option<f64>,
    pub eval_n: Option<f64>,
    /// Their 95% intervals, as logged (a `(low, high)` pair when both are).
    pub eval_mean_score_interval: Option<(f64, f64)>,
    pub eval_pass_at_n_interval: Option<(f64, f64)>,
    pub eval_best_of_n_interval: Option<(f64, f64)>,
    pub logprobs_diff: Option<f64>,
    pub advantages_std: Option<f64>,
    /// The latest step's groups dropped as stale, completions of unknown age, and the oldest
    /// trained completion's proven age (optimizer steps): rows of a run with
    /// `max_steps_off_policy` only.
    pub stale_groups: Option<f64>,
    pub unknown_age_completions: Option<f64>,
    pub max_age_steps: Option<f64>,
}

impl StatusMetrics {
    /// The trainer's numbers come from its latest row, not its summary: the trainer leaves
    /// `advantages/*` out of a step whose groups all scored alike, and the summary would show an
    /// older step's value as if it were current.
    pub fn of(metrics: &RunMetrics) -> Self {
        let mut view = metrics
            .trainer
            .as_ref()
            .map(Self::of_trainer)
            .unwrap_or_default();
        // Evaluations come every few steps: the latest one is the current figure.
        if let Some(evaluated) = metrics.trainer.as_ref().and_then(|trainer| {
            trainer
                .history
                .iter()
                .rev()
                .find(|row| row.number(EVAL_MEAN_SCORE).is_some())
        }) {
            let latest = Self::of_row(evaluated);
            view.eval_mean_score = latest.eval_mean_score;
            view.eval_percent_correct = latest.eval_percent_correct;
            view.eval_pass_at_1 = latest.eval_pass_at_1;
            view.eval_pass_at_n = latest.eval_pass_at_n;
            view.eval_best_of_n = latest.eval_best_of_n;
            view.eval_n = latest.eval_n;
            view.eval_mean_score_interval = latest.eval_mean_score_interval;
            view.eval_pass_at_n_interval = latest.eval_pass_at_n_interval;
            view.eval_best_of_n_interval = latest.eval_best_of_n_interval;
        }
        if let Some(env) = &metrics.env {
            view.percent_correct = env.summary_number(PERCENT_CORRECT);
            if view.eval_percent_correct.is_none() {
                view.eval_percent_correct = env.summary_number(EVAL_PERCENT_CORRECT);
            }
        }
        view
    }

    fn of_trainer(trainer: &LoggedRun) -> Self {
        match trainer.history.last() {
            Some(row) => Self::of_row(row),
            None => Self {
                step: trainer.last_step(),
                reward_mean: trainer.summary_number(REWARD_MEAN),
                loss: trainer.summary_number(LOSS),
                learning_rate: trainer.summary_number(LEARNING_RATE),
                logprobs_diff: trainer.summary_number(LOGPROBS_DIFF),
                advantages_std: trainer.summary_number(ADVANTAGES_STD),
                ..Self::default()
            },
        }
    }

    /// One trainer row under the normalised names (the env's own numbers stay `None`).
    pub fn of_row(row: &HistoryRow) -> Self {
        Self {
            step: Some(row.step),
            eval_mean_score: row.number(EVAL_MEAN_SCORE),
            eval_percent_correct: row.number(EVAL_PERCENT_CORRECT),
            eval_pass_at_1: row.number(EVAL_PASS_AT_1),
            eval_pass_at_n: row.number(EVAL_PASS_AT_N),
            eval_best_of_n: row.number(EVAL_BEST_OF_N),
            eval_n: row.number(EVAL_N),
            eval_mean_score_interval: interval(row, EVAL_MEAN_SCORE_LOW, EVAL_MEAN_SCORE_HIGH),
            eval_pass_at_n_interval: interval(row, EVAL_PASS_AT_N_LOW, EVAL_PASS_AT_N_HIGH),
            eval_best_of_n_interval: interval(row, EVAL_BEST_OF_N_LOW, EVAL_BEST_OF_N_HIGH),
            reward_mean: row.number(REWARD_MEAN),
            loss: row.number(LOSS),
            learning_rate: row.number(LEARNING_RATE),
            logprobs_diff: row.number(LOGPROBS_DIFF),
            advantages_std: row.number(ADVANTAGES_STD),
            stale_groups: row.number(STALE_GROUPS),
            unknown_age_completions: row.number(UNKNOWN_AGE_COMPLETIONS),
            max_age_steps: row.number(MAX_AGE_STEPS),
            ..Self::default()
        }
    }
}

/// A row's interval under `low` and `high`, when it logged both.
fn interval(row: &HistoryRow, low: &str, high: &str) -> Option<(f64, f64)> {
    Some((row.number(low)?, row.number(high)?))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::model::{MetricValue, SourceKind};

    fn row(step: i64, values: &[(&str, f64)]) -> HistoryRow {
        HistoryRow::of_numbers(step, values)
    }

    #[test]
    fn reads_the_keys_the_trainer_and_env_really_log() {
        let mut metrics = RunMetrics::empty(SourceKind::WandbFiles);
        metrics.trainer = Some(LoggedRun {
            history: vec![
                row(1, &[(REWARD_MEAN, 0.25), (ADVANTAGES_STD, 0.4)]),
                row(2, &[(REWARD_MEAN, 0.5), (LOSS, 1.5), (LEARNING_RATE, 4e-5)]),
            ],
            ..LoggedRun::default()
        });
        let mut env_summary = BTreeMap::new();
        env_summary.insert(
            "gsm8k-20261121_0_train/percent_correct".to_owned(),
            MetricValue::Number(0.75),
        );
        metrics.env = Some(LoggedRun {
            summary: env_summary,
            ..LoggedRun::default()
        });
        let view = StatusMetrics::of(&metrics);
        assert_eq!(view.step, Some(2));
        assert_eq!(view.reward_mean, Some(0.5));
        assert_eq!(view.loss, Some(1.5));
        assert_eq!(view.learning_rate, Some(4e-5));
        assert_eq!(view.percent_correct, Some(0.75));
        // Absent at the latest step means unknown now, not the older value.
        assert_eq!(view.advantages_std, None);
        assert_eq!(view.eval_percent_correct, None);
        assert_eq!(view.eval_mean_score, None);
    }

    #[test]
    fn the_off_policy_counts_are_the_latest_steps_when_it_logs_them() {
        let counted = row(
            3,
            &[
                (STALE_GROUPS, 1.0),
                (UNKNOWN_AGE_COMPLETIONS, 2.0),
                (MAX_AGE_STEPS, 1.0),
            ],
        );
        let view = StatusMetrics::of_row(&counted);
        assert_eq!(
            (
                view.stale_groups,
                view.unknown_age_completions,
                view.max_age_steps
            ),
            (Some(1.0), Some(2.0), Some(1.0))
        );
        let unbounded = StatusMetrics::of_row(&row(4, &[(REWARD_MEAN, 0.5)]));
        assert_eq!(unbounded.stale_groups, None);
    }

    #[test]
    fn the_latest_evaluation_is_current_until_the_next() {
        let mut metrics = RunMetrics::empty(SourceKind::MetricsFile);
        metrics.trainer = Some(LoggedRun {
            history: vec![
                row(
                    2,
                    &[
                        (REWARD_MEAN, 0.1),
                        (EVAL_MEAN_SCORE, 0.2),
                        (EVAL_PERCENT_CORRECT, 10.0),
                    ],
                ),
                row(3, &[(REWARD_MEAN, 0.3)]),
                row(
                    4,
                    &[
                        (REWARD_MEAN, 0.4),
                        (EVAL_MEAN_SCORE, 0.5),
                        (EVAL_PERCENT_CORRECT, 25.0),
                    ],
                ),
                row(5, &[(REWARD_MEAN, 0.6)]),
            ],
            ..LoggedRun::default()
        });
        let mut env_summary = BTreeMap::new();
        env_summary.insert(EVAL_PERCENT_CORRECT.to_owned(), MetricValue::Number(0.9));
        metrics.env = Some(LoggedRun {
            summary: env_summary,
            ..LoggedRun::default()
        });
        let view = StatusMetrics::of(&metrics);
        assert_eq!(view.step, Some(5));
        assert_eq!(view.eval_mean_score, Some(0.5));
        assert_eq!(
            view.eval_percent_correct,
            Some(25.0),
            "rl's evaluation over the env's"
        );
        let rows: Vec<Option<f64>> = metrics
            .trainer
            .unwrap()
            .history
            .iter()
            .map(|r| StatusMetrics::of_row(r).eval_mean_score)
            .collect();
        assert_eq!(rows, [Some(0.2), None, Some(0.5), None]);
    }
}
