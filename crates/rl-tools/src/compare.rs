//! `rl compare ID`: did training help? The same pre-flight of the run's environment against
//! the base model and a trained checkpoint, both sampled through the run's engine started
//! again, then each model's mean score, percent correct, pass@1, pass@n and best-of-n with 95%
//! confidence intervals and a verdict resting on the difference of one of them, the mean score
//! unless asked (`rl_preflight::compare`).

use std::time::Duration;

use rl_preflight::{HeldOutItems, Measure, PreflightPlan, PreflightReport, read_groups};
use rl_settings::RunId;

use crate::answers::{ComparisonAnswer, TrainedCheckpoint};
use crate::as_trained::AsTrained;
use crate::checkpoint_models::{At, checkpoint_model, parse_checkpoint_model};
use crate::checkpoint_test_size::{DEFAULT_COMPARE_GROUP_SIZE, DEFAULT_COMPARE_PROMPTS};
use crate::prompts::Prompts;
use crate::{InferenceOptions, Tools, ToolsError};

/// What a caller may choose of a comparison.
#[derive(Debug, Clone)]
pub struct CompareOptions {
    /// The trained checkpoint: a step, `best`, or `None` for the last saved state.
    pub step: Option<String>,
    pub prompts: u32,
    pub group_size: u32,
    /// Per model, from its start.
    pub timeout: Duration,
    /// What the verdict rests on.
    pub measure: Measure,
}

impl Default for CompareOptions {
    fn default() -> Self {
        Self {
            step: None,
            prompts: DEFAULT_COMPARE_PROMPTS,
            group_size: DEFAULT_COMPARE_GROUP_SIZE,
            timeout: Duration::from_secs(1800),
            measure: Measure::default(),
        }
    }
}

/// A comparison's test, and the checkpoint its trained side is.
#[derive(Debug, Clone)]
pub struct ComparePlan {
    pub test: PreflightPlan,
    pub trained: TrainedCheckpoint,
    pub measure: Measure,
}

impl Tools {
    /// The test a comparison runs: the run's base model then its checkpoint, on the
    /// environment, edits and settings the run trained with (whatever is selected now).
    pub fn compare_plan(
        &self,
        id: &RunId,
        options: &CompareOptions,
    ) -> Result<ComparePlan, ToolsError> {
        let run = self.run_status(id, i64::MAX)?.run;
        let AsTrained {
            selection,
            settings,
            ..
        } = self.as_trained(id)?;
        let asked = checkpoint_model(id, options.step.as_deref());
        let at = match parse_checkpoint_model(&asked)?.1 {
            At::Base => {
                return Err(ToolsError::invalid(
                    "step",
                    "base is the side every comparison has: give a step, best, or no --step \
                     (the last saved state)",
                ));
            }
            at => at,
        };
        let (step, best_by) = self.chosen_step(&run, &at)?;
        let mut plan = self.checkpoint_plan(
            &InferenceOptions {
                models: vec![
                    checkpoint_model(id, Some("base")),
                    checkpoint_model(id, Some(&step.to_string())),
                ],
                num_steps: Some(options.prompts),
                group_size: Some(options.group_size),
                // One after the other: the engine samples one batch at a time anyway.
                concurrency: Some(1),
                timeout: Some(options.timeout),
                ..InferenceOptions::default()
            },
            &selection,
            &settings,
        )?;
        // The run's own slice; for a run that kept none, the operator's (its items were
        // trained on, and the answer says so), unless that is none either.
        let slice = self
            .held_out_of(id)
            .or(Some(settings.held_out))
            .filter(|slice| slice.fraction > 0.0);
        if let Some(slice) = slice {
            let programs = rl_python::install(self.home())
                .map_err(|error| ToolsError::Internal(error.to_string()))?;
            plan.held_out = Some(HeldOutItems { programs, slice });
        }
        Ok(ComparePlan {
            test: plan,
            trained: TrainedCheckpoint { step, best_by },
            measure: options.measure,
        })
    }

    /// The comparison a finished compare test of `checkpoint` supports, its verdict resting on
    /// `measure`.
    pub fn comparison(
        &self,
        id: &RunId,
        checkpoint: TrainedCheckpoint,
        report: &PreflightReport,
        measure: Measure,
    ) -> Result<ComparisonAnswer, ToolsError> {
        let [base, trained] = report.models.as_slice() else {
            return Err(ToolsError::Internal(format!(
                "a comparison tests two models, the test {} has {}",
                report.test_id,
                report.models.len()
            )));
        };
        let scores = |model: &rl_preflight::ModelReport| {
            read_groups(&model.output_path).map(|groups| groups.scores)
        };
        let (base_scores, trained_scores) = (scores(base)?, scores(trained)?);
        let correct_from = report.correct_from.unwrap_or(f64::INFINITY);
        let comparison =
            rl_preflight::compare(&base_scores, &trained_scores, correct_from, measure);
        let prompts = Prompts::of(base.drawn_items()?, self.held_out_of(id));
        Ok(ComparisonAnswer::new(
            id,
            checkpoint,
            report,
            comparison.as_ref(),
            measure,
            &prompts,
        ))
    }
}
