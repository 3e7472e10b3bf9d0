//! What `rl compare --json` prints.

use serde::Serialize;

use rl_preflight::{Comparison, Estimate, Measure, ModelEstimate, PreflightReport};
use rl_settings::RunId;

use crate::prompts::Prompts;

/// The trained side of a comparison: the step chosen once, before the test, and named in the
/// test's model (`run:ID@STEP`), so the answer says exactly what was sampled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrainedCheckpoint {
    pub step: i64,
    /// What made it the best (`eval/mean_score` or `reward/mean`), when `best` was asked.
    pub best_by: Option<&'static str>,
}

/// A 95% interval; an end is `null` when too few prompts bound it.
#[derive(Debug, Serialize)]
pub struct EstimateView {
    pub value: f64,
    pub low: Option<f64>,
    pub high: Option<f64>,
}

impl From<Estimate> for EstimateView {
    fn from(estimate: Estimate) -> Self {
        let finite = |x: f64| x.is_finite().then_some(x);
        Self {
            value: estimate.value,
            low: finite(estimate.low),
            high: finite(estimate.high),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct ComparedModel {
    pub model: String,
    /// How its process ended (`succeeded`, `failed`, `timed_out`, `not_started`, …).
    pub status: &'static str,
    pub prompts: usize,
    pub completions: usize,
    pub mean_score: Option<EstimateView>,
    pub percent_correct: Option<EstimateView>,
    /// The `n` of `pass_at_n` and `best_of_n`: the fewest completions a prompt of either model
    /// got (the group size when none was lost).
    pub n: Option<usize>,
    /// The chance that one completion is correct (0 to 1; unbiased, per prompt, then averaged).
    pub pass_at_1: Option<EstimateView>,
    /// The chance that at least one of `n` completions is correct (0 to 1).
    pub pass_at_n: Option<EstimateView>,
    /// The expected best score of `n` completions.
    pub best_of_n: Option<EstimateView>,
    /// Why its side produced nothing, when it failed: as a pre-flight's model answers it.
    pub error: Option<String>,
    /// The last lines of its log, when it failed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub error_tail: Vec<String>,
    pub log_path: std::path::PathBuf,
}

#[derive(Debug, Serialize)]
pub struct ComparisonAnswer {
    pub run_id: String,
    pub environment: String,
    /// The pre-flight the numbers come from (`rl preflight show ID`).
    pub test_id: String,
    pub base: ComparedModel,
    pub trained: ComparedModel,
    /// The step of the trained checkpoint compared (its model is `run:ID@STEP`, or its
    /// sampler path at a Tinker service).
    pub step: i64,
    /// When the best was asked: what it is the best by (`eval/mean_score` when the run was
    /// evaluated during training, else `reward/mean`), among the checkpoints with a saved
    /// state not pruned, the one `rl checkpoints list` marks; `null` otherwise.
    pub best_by: Option<&'static str>,
    /// What the verdict rests on: `mean_score`, `pass@1`, `pass@n` or `best_of_n`.
    pub measure: &'static str,
    /// Trained minus base, in `measure`.
    pub difference: Option<EstimateView>,
    /// `better`, `no detectable difference`, `worse`; `null` when a model produced no score.
    pub verdict: Option<&'static str>,
    pub explanation: String,
    /// Which prompts the numbers rest on.
    pub prompts: String,
    /// `held-out slice`, `eval split` (the environment's own) or `training items`.
    pub prompt_source: String,
    /// Whether training never drew these prompts: only then does a gain show skill, not memory.
    pub kept_out_of_training: bool,
    /// A completion counts as correct from this score on (the top score the test saw).
    pub correct_from: Option<f64>,
}

/// Why a comparison has no verdict when a side scored nothing: each such side, how it ended
/// and its error, so the answer itself says what went wrong.
fn no_scores(report: &PreflightReport) -> String {
    let sides: Vec<String> = report
        .models
        .iter()
        .zip(["base", "trained"])
        .map(|(tested, side)| (super::ModelAnswer::from(tested), side))
        .filter(|(answered, _)| answered.scores.is_none())
        .map(|(answered, side)| match &answered.error {
            Some(error) => format!("the {side} model {}: {error}", answered.status),
            None => format!(
                "the {side} model {} with no scored completion",
                answered.status
            ),
        })
        .collect();
    if sides.is_empty() {
        return "no verdict: a model produced no scored completion (each side's `error` and \
                `log_path` say why)"
            .to_owned();
    }
    format!(
        "no verdict: {} (its `error_tail` and `log_path` hold the rest)",
        sides.join("; ")
    )
}

impl ComparisonAnswer {
    pub(crate) fn new(
        id: &RunId,
        trained: TrainedCheckpoint,
        report: &PreflightReport,
        comparison: Option<&Comparison>,
        measure: Measure,
        prompts: &Prompts,
    ) -> Self {
        let model = |index: usize, estimate: Option<&ModelEstimate>| {
            let tested = &report.models[index.min(report.models.len().saturating_sub(1))];
            // No threshold (one score everywhere, which may or may not be full marks): what
            // share was correct is unknown, not 0 % or 100 %.
            let correct = estimate.filter(|_| report.correct_from.is_some());
            let answered = super::ModelAnswer::from(tested);
            ComparedModel {
                model: tested.model.clone(),
                status: answered.status,
                error: answered.error,
                error_tail: answered.error_tail,
                log_path: answered.log_path,
                prompts: estimate.map_or(0, |e| e.prompts),
                completions: estimate.map_or(0, |e| e.completions),
                mean_score: estimate.map(|e| e.mean_score.into()),
                percent_correct: correct.map(|e| e.percent_correct.into()),
                n: estimate.map(|e| e.n),
                pass_at_1: correct.map(|e| e.pass_at_1.into()),
                pass_at_n: correct.map(|e| e.pass_at_n.into()),
                best_of_n: estimate.map(|e| e.best_of_n.into()),
            }
        };
        // A chance of being correct needs a notion of correct: without one, no verdict by it.
        let unjudged = measure.is_chance() && report.correct_from.is_none();
        let judged = comparison.filter(|_| !unjudged);
        let explanation = match judged {
            Some(c) => c.explanation.clone(),
            None if unjudged => format!(
                "no verdict by {measure}: every completion scored alike, so which are correct is \
                 unknown; ask for mean_score or best_of_n"
            ),
            None => no_scores(report),
        };
        Self {
            run_id: id.to_string(),
            environment: report.environment.clone(),
            test_id: report.test_id.clone(),
            base: model(0, comparison.map(|c| &c.base)),
            trained: model(1, comparison.map(|c| &c.trained)),
            step: trained.step,
            best_by: trained.best_by,
            measure: measure.name(),
            difference: judged.map(|c| c.difference.into()),
            verdict: judged.map(|c| c.verdict.label()),
            explanation,
            prompts: format!(
                "{}; up to {} per model, the same environment and settings for both (the same \
                 items when the environment's order is deterministic)",
                prompts.description, report.steps
            ),
            prompt_source: prompts.source.clone(),
            kept_out_of_training: prompts.kept_out_of_training,
            correct_from: report.correct_from,
        }
    }
}
