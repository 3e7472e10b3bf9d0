//! `rl compare ID`: did training help? The same pre-flight of the run's environment against
//! the base model and a trained checkpoint, both sampled through the run's engine started
//! again, then each model's mean score and percent correct with 95% confidence intervals and a
//! verdict resting on the difference of the means (`rl_preflight::compare`).

use std::time::Duration;

use rl_preflight::{DrawnItems, HeldOutItems, TestPlan, TestReport, read_groups};
use rl_settings::RunId;

use crate::answers::ComparisonAnswer;
use crate::checkpoint_models::{At, RUN_PREFIX, parse_checkpoint_model};
use crate::evaluation::AsTrained;
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

/// A comparison's test, and the checkpoint its trained side is.
#[derive(Debug, Clone)]
pub struct ComparePlan {
    pub test: TestPlan,
    pub trained: TrainedCheckpoint,
}

/// The trained side of a comparison: the step chosen once, before the test, and named in the
/// test's model (`run:ID@STEP`), so the answer says exactly what was sampled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrainedCheckpoint {
    pub step: i64,
    /// What made it the best (`eval/mean_score` or `reward/mean`), when `best` was asked.
    pub best_by: Option<&'static str>,
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
        let asked = match &options.step {
            None => format!("{RUN_PREFIX}{id}"),
            Some(step) => format!("{RUN_PREFIX}{id}@{step}"),
        };
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
                    format!("{RUN_PREFIX}{id}@base"),
                    format!("{RUN_PREFIX}{id}@{step}"),
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
            .kept_out(id)
            .or_else(|| Some(settings.held_out.slice()))
            .filter(|slice| slice.fraction > 0.0);
        if let Some(slice) = slice {
            let programs = rl_python::install(self.home())
                .map_err(|error| ToolsError::Internal(error.to_string()))?;
            plan.held_out = Some(HeldOutItems { programs, slice });
        }
        Ok(ComparePlan {
            test: plan,
            trained: TrainedCheckpoint { step, best_by },
        })
    }

    /// The slice of its environment's items run `id` kept out of training, if any.
    pub(crate) fn kept_out(&self, id: &RunId) -> Option<rl_python::Slice> {
        rl_process::LaunchPlan::load(self.home(), id)
            .ok()?
            .held_out()
    }

    /// The comparison a finished compare test of `checkpoint` supports.
    pub fn comparison(
        &self,
        id: &RunId,
        checkpoint: TrainedCheckpoint,
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
        let prompts = Prompts::of(base.drawn_items()?, self.kept_out(id));
        Ok(ComparisonAnswer::new(
            id,
            checkpoint,
            report,
            comparison.as_ref(),
            &prompts,
        ))
    }
}

/// Which prompts a comparison asked, and whether the run trained on them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Prompts {
    /// `held-out slice`, `eval split` or `training items`.
    pub(crate) source: String,
    pub(crate) kept_out_of_training: bool,
    /// What the sentence of the answer says.
    pub(crate) description: String,
}

impl Prompts {
    pub(crate) fn of(drawn: Option<DrawnItems>, kept_out: Option<rl_python::Slice>) -> Self {
        let Some(drawn) = drawn else {
            return Self {
                source: "training items".to_owned(),
                kept_out_of_training: false,
                description: "the first items the environment gives, which training drew too \
                              ([held_out] fraction is 0): a gain may be memory, not skill"
                    .to_owned(),
            };
        };
        let exhausted = if drawn.exhausted {
            format!(
                "; all {} there are (ask fewer --prompts, or keep a larger fraction out)",
                drawn.drawn
            )
        } else {
            String::new()
        };
        if drawn.source == "eval split" {
            return Self {
                source: drawn.source,
                kept_out_of_training: true,
                description: format!(
                    "{} distinct items of the environment's eval split (get_next_eval_item), \
                     which training never draws{exhausted}",
                    drawn.drawn
                ),
            };
        }
        let kept = kept_out
            .is_some_and(|slice| slice.fraction == drawn.fraction && slice.seed == drawn.seed);
        let slice = format!(
            "{} distinct items of the held-out slice ({} of the items by content, seed {})",
            drawn.drawn, drawn.fraction, drawn.seed
        );
        let description = if kept {
            format!("{slice}, which the run never trained on{exhausted}")
        } else {
            format!(
                "{slice}; the run did not keep this slice out of training (it started before \
                 [held_out] or with another environment command), so a gain may be memory, \
                 not skill{exhausted}"
            )
        };
        Self {
            source: drawn.source,
            kept_out_of_training: kept,
            description,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drawn(source: &str, exhausted: bool) -> DrawnItems {
        DrawnItems {
            source: source.to_owned(),
            fraction: 0.25,
            seed: 7,
            drawn: 4,
            skipped: 9,
            exhausted,
        }
    }

    const SLICE: rl_python::Slice = rl_python::Slice {
        fraction: 0.25,
        seed: 7,
    };

    #[test]
    fn only_a_slice_the_run_kept_out_is_said_unseen() {
        let kept = Prompts::of(Some(drawn("held-out slice", false)), Some(SLICE));
        assert!(kept.kept_out_of_training);
        assert_eq!(kept.source, "held-out slice");
        assert!(kept.description.ends_with("which the run never trained on"));

        for other in [
            None,
            Some(rl_python::Slice {
                fraction: 0.25,
                seed: 8,
            }),
        ] {
            let not_kept = Prompts::of(Some(drawn("held-out slice", false)), other);
            assert!(!not_kept.kept_out_of_training);
            assert!(not_kept.description.contains("memory, not skill"));
        }
    }

    #[test]
    fn an_eval_split_is_unseen_and_training_items_are_not() {
        let eval = Prompts::of(Some(drawn("eval split", true)), None);
        assert!(eval.kept_out_of_training);
        assert!(eval.description.contains("all 4 there are"));
        let training = Prompts::of(None, Some(SLICE));
        assert_eq!(training.source, "training items");
        assert!(!training.kept_out_of_training);
    }
}
