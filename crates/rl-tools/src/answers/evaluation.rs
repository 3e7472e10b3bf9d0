//! What `rl runs evaluate --json` prints: the figures of one checkpoint on the run's held-out
//! prompts, and the `eval/*` numbers the trainer logs at that step.

use std::collections::BTreeMap;

use serde::Serialize;

use rl_preflight::{ModelEstimate, PreflightReport};
use rl_settings::RunId;

use super::EstimateView;
use crate::prompts::Prompts;

use rl_metrics::{
    EVAL_BEST_OF_N, EVAL_BEST_OF_N_HIGH, EVAL_BEST_OF_N_LOW, EVAL_MEAN_SCORE_HIGH,
    EVAL_MEAN_SCORE_LOW, EVAL_N, EVAL_PASS_AT_1, EVAL_PASS_AT_N, EVAL_PASS_AT_N_HIGH,
    EVAL_PASS_AT_N_LOW,
};
pub use rl_metrics::{EVAL_MEAN_SCORE, EVAL_PERCENT_CORRECT};

#[derive(Debug, Serialize)]
pub struct Evaluated {
    pub run_id: String,
    pub step: u64,
    /// The test the numbers come from, in the run's `evaluations/` folder.
    pub test_id: String,
    pub prompts: usize,
    pub completions: usize,
    pub mean_score: EstimateView,
    pub percent_correct: EstimateView,
    /// The `n` of `pass_at_n` and `best_of_n`: the fewest completions a prompt got.
    pub n: usize,
    /// The chance that one completion is correct, and that one of `n` is (0 to 1).
    pub pass_at_1: EstimateView,
    pub pass_at_n: EstimateView,
    /// The expected best score of `n` completions.
    pub best_of_n: EstimateView,
    /// A completion counts as correct from this score on (`eval_correct_from`).
    pub correct_from: f64,
    /// `held-out slice`, `eval split` (the environment's own) or `training items`.
    pub prompt_source: String,
    pub kept_out_of_training: bool,
    /// What the trainer logs at the step, under these names (finite numbers only).
    pub metrics: BTreeMap<&'static str, f64>,
    pub message: String,
}

impl Evaluated {
    pub(crate) fn new(
        id: &RunId,
        step: u64,
        report: &PreflightReport,
        figures: &ModelEstimate,
        correct_from: f64,
        prompts: &Prompts,
    ) -> Self {
        let mut metrics = BTreeMap::new();
        let count = |n: usize| f64::from(u32::try_from(n).unwrap_or(u32::MAX));
        for (name, value) in [
            (EVAL_MEAN_SCORE, figures.mean_score.value),
            (EVAL_MEAN_SCORE_LOW, figures.mean_score.low),
            (EVAL_MEAN_SCORE_HIGH, figures.mean_score.high),
            (EVAL_PERCENT_CORRECT, figures.percent_correct.value),
            (EVAL_PASS_AT_1, figures.pass_at_1.value),
            (EVAL_PASS_AT_N, figures.pass_at_n.value),
            (EVAL_PASS_AT_N_LOW, figures.pass_at_n.low),
            (EVAL_PASS_AT_N_HIGH, figures.pass_at_n.high),
            (EVAL_BEST_OF_N, figures.best_of_n.value),
            (EVAL_BEST_OF_N_LOW, figures.best_of_n.low),
            (EVAL_BEST_OF_N_HIGH, figures.best_of_n.high),
            (EVAL_N, count(figures.n)),
            ("eval/prompts", count(figures.prompts)),
            ("eval/completions", count(figures.completions)),
        ] {
            if value.is_finite() {
                metrics.insert(name, value);
            }
        }
        Self {
            run_id: id.to_string(),
            step,
            test_id: report.test_id.clone(),
            prompts: figures.prompts,
            completions: figures.completions,
            mean_score: figures.mean_score.into(),
            percent_correct: figures.percent_correct.into(),
            n: figures.n,
            pass_at_1: figures.pass_at_1.into(),
            pass_at_n: figures.pass_at_n.into(),
            best_of_n: figures.best_of_n.into(),
            correct_from,
            prompt_source: prompts.source.clone(),
            kept_out_of_training: prompts.kept_out_of_training,
            message: format!(
                "step {step}: mean score {:.4}, {:.1}% correct, pass@{n} {:.3}, best-of-{n} {:.4} \
                 on {} ({} completions)",
                figures.mean_score.value,
                figures.percent_correct.value,
                figures.pass_at_n.value,
                figures.best_of_n.value,
                prompts.description,
                figures.completions,
                n = figures.n,
            ),
            metrics,
        }
    }
}
