//! `rl compare ID`: did training help? The same pre-flight of the run's environment against
//! the base model and a trained checkpoint, both sampled through the run's engine started
//! again, then each model's mean score and percent correct with 95% confidence intervals and a
//! verdict resting on the difference of the means (`rl_preflight::compare`).

use std::time::Duration;

use rl_preflight::{TestPlan, TestReport, read_groups};
use rl_settings::RunId;

use crate::answers::ComparisonAnswer;
use crate::checkpoint_models::RUN_PREFIX;
use crate::{InferenceOptions, Tools, ToolsError};

/// Prompts per model, and completions per prompt: enough for an interval that can tell a
/// clear gain from noise, few enough for minutes on a small machine.
pub const DEFAULT_COMPARE_PROMPTS: u32 = 16;
pub const DEFAULT_COMPARE_GROUP_SIZE: u32 = 8;

/// What a caller may choose of a comparison.
#[derive(Debug, Clone)]
pub struct CompareOptions {
    /// The trained checkpoint: a step, `best`, or `None` for the last saved state.
    pub step: Option<String>,
    pub prompts: u32,
    pub group_size: u32,
    /// Per model, from its start.
    pub timeout: Duration,
}

impl Default for CompareOptions {
    fn default() -> Self {
        Self {
            step: None,
            prompts: DEFAULT_COMPARE_PROMPTS,
            group_size: DEFAULT_COMPARE_GROUP_SIZE,
            timeout: Duration::from_secs(1800),
        }
    }
}

impl Tools {
    /// The test a comparison runs: the run's base model then its checkpoint, on the run's own
    /// environment, which must be the one selected (its edits are the test's).
    pub fn compare_plan(
        &self,
        id: &RunId,
        options: &CompareOptions,
    ) -> Result<TestPlan, ToolsError> {
        let run = self.run_status(id, i64::MAX)?.run;
        let selection = self.service()?.selection()?;
        let selected = &selection.environment;
        if run.environment != selected.key && run.environment != selected.name {
            return Err(ToolsError::Invalid {
                what: format!("run {id}"),
                reason: format!(
                    "it trained {}, and {} is selected: `rl select {}` first, so the \
                     comparison runs the environment it trained on",
                    run.environment, selected.key, run.environment
                ),
            });
        }
        let trained = match &options.step {
            None => format!("{RUN_PREFIX}{id}"),
            Some(step) => format!("{RUN_PREFIX}{id}@{step}"),
        };
        self.inference_plan(&InferenceOptions {
            models: vec![format!("{RUN_PREFIX}{id}@base"), trained],
            num_steps: Some(options.prompts),
            group_size: Some(options.group_size),
            // One after the other: the engine samples one batch at a time anyway.
            concurrency: Some(1),
            timeout: Some(options.timeout),
            ..InferenceOptions::default()
        })
    }

    /// The comparison a finished compare test supports.
    pub fn comparison(
        &self,
        id: &RunId,
        report: &TestReport,
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
        let comparison = rl_preflight::compare(&base_scores, &trained_scores, correct_from);
        Ok(ComparisonAnswer::new(id, report, comparison.as_ref()))
    }
}
