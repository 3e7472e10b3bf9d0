//! What `rl runs evaluate --json` prints: the figures of one checkpoint on the run's held-out
//! prompts, and the `eval/*` numbers the trainer logs at that step.

use std::collections::BTreeMap;

use serde::Serialize;

use rl_preflight::{ModelEstimate, PreflightReport};
use rl_settings::RunId;

use super::EstimateView;
use crate::prompts::Prompts;

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
            ("eval/mean_score_low", figures.mean_score.low),
            ("eval/mean_score_high", figures.mean_score.high),
            (EVAL_PERCENT_CORRECT, figures.percent_correct.value),
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
            correct_from,
            prompt_source: prompts.source.clone(),
            kept_out_of_training: prompts.kept_out_of_training,
            message: format!(
                "step {step}: mean score {:.4}, {:.1}% correct on {} ({} completions)",
                figures.mean_score.value,
                figures.percent_correct.value,
                prompts.description,
                figures.completions
            ),
            metrics,
        }
    }
}
