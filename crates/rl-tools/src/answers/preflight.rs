//! `rl_test_inference`'s answer: the pre-flight's report (`report.json`, rl-preflight's
//! file) read key by key, with the original tool's keys beside it — `models_tested` (one entry
//! per model), `summary` (`steps_requested`, `models_tested`, `models_succeeded`,
//! `best_model`, `avg_accuracy`, `environment_working`, `output_directory`, and the verdict
//! with its explanation) and `test_config`.

use std::path::PathBuf;

use rl_preflight::{
    CorrectRule, ModelOutcome, ModelReport, PreflightReport, ScoreStats, Verdict, VerdictBasis,
};
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct PreflightAnswer {
    pub test_id: String,
    pub environment: String,
    /// The environment's file as tested (absent in reports of earlier versions).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub environment_file: Option<PathBuf>,
    pub base_url: String,
    /// The variable the key came from; never its value.
    pub key_variable: String,
    pub steps: u32,
    pub group_size: u32,
    pub correct_rule: CorrectRule,
    /// The score a completion needed to count as correct in this test.
    pub correct_from: Option<f64>,
    pub started_at: String,
    /// When a stop was asked: the test did not run to its end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped_at: Option<String>,
    pub duration_secs: f64,
    pub output_dir: PathBuf,
    pub models: Vec<ModelAnswer>,
    pub models_succeeded: usize,
    /// The succeeded model with the highest accuracy.
    pub best_model: Option<String>,
    /// Mean of the succeeded models' accuracies.
    pub average_accuracy: Option<f64>,
    /// Some model produced scored groups.
    pub environment_working: bool,
    pub verdict: Verdict,
    /// The numbers the verdict was drawn from.
    pub basis: VerdictBasis,
    pub explanation: String,
    /// The original's list, one entry per model (its count is in `summary`).
    pub models_tested: Vec<ModelTested>,
    pub summary: OriginalSummary,
    pub test_config: PreflightConfig,
}

/// One model's run and its figures.
#[derive(Debug, Clone, Serialize)]
pub struct ModelAnswer {
    pub model: String,
    /// succeeded, failed, timed_out, stopped, not_started or no_signal (ended early: `reason`).
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<Option<i32>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<Option<i32>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after_secs: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub duration_secs: f64,
    pub steps_tested: usize,
    pub completions: usize,
    pub scores: Option<ScoreStats>,
    /// Share of completions that are correct under the test's rule.
    pub accuracy: Option<f64>,
    /// The original tool's measure: share of completions scoring above 0.
    pub accuracy_score_above_zero: Option<f64>,
    pub steps_with_correct: usize,
    pub step_success_rate: Option<f64>,
    /// Groups whose scores are all equal: GRPO gets no signal from them.
    pub zero_variance_groups: usize,
    pub all_correct_groups: usize,
    pub all_wrong_groups: usize,
    pub parse_failures: usize,
    pub error: Option<String>,
    pub error_tail: Vec<String>,
    pub log_path: PathBuf,
    /// Its log reached the size limit (`run.log_limit_bytes`): `log_path` keeps the head, the
    /// latest output is in `log_tail_path`. Both only when so.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub log_capped: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_tail_path: Option<PathBuf>,
    pub output_path: PathBuf,
    /// This model's own verdict (ready, too easy, ...), from its groups alone.
    pub verdict: Option<Verdict>,
    pub verdict_explanation: Option<String>,
}

/// A model as the original tool listed it.
#[derive(Debug, Clone, Serialize)]
pub struct ModelTested {
    pub model: String,
    pub steps_tested: usize,
    pub total_completions: usize,
    pub correct_completions: Option<usize>,
    pub accuracy: Option<f64>,
    pub steps_with_correct: usize,
    pub step_success_rate: Option<f64>,
    pub error: Option<String>,
    pub output_file: PathBuf,
    pub log_file: PathBuf,
}

/// The original tool's summary.
#[derive(Debug, Clone, Serialize)]
pub struct OriginalSummary {
    pub steps_requested: u32,
    pub models_tested: usize,
    pub models_succeeded: usize,
    pub best_model: Option<String>,
    pub avg_accuracy: Option<f64>,
    pub environment_working: bool,
    pub output_directory: PathBuf,
    pub verdict: Verdict,
    pub explanation: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct PreflightConfig {
    pub num_steps: u32,
    pub group_size: u32,
    pub rollouts_per_model: u64,
    pub total_rollouts: u64,
}

impl From<&PreflightReport> for PreflightAnswer {
    fn from(report: &PreflightReport) -> Self {
        let summary = &report.summary;
        let rollouts_per_model = u64::from(report.steps) * u64::from(report.group_size);
        Self {
            test_id: report.test_id.clone(),
            environment: report.environment.clone(),
            environment_file: report.environment_file.clone(),
            base_url: report.base_url.clone(),
            key_variable: report.key_variable.clone(),
            steps: report.steps,
            group_size: report.group_size,
            correct_rule: report.correct_rule,
            correct_from: report.correct_from,
            started_at: report.started_at.clone(),
            stopped_at: report.stopped_at.clone(),
            duration_secs: report.duration_secs,
            output_dir: report.output_dir.clone(),
            models: report
                .models
                .iter()
                .map(|model| {
                    let mut answer = ModelAnswer::from(model);
                    if let Some(own) = summary.by_model.iter().find(|v| v.model == model.model) {
                        answer.verdict = Some(own.verdict);
                        answer.verdict_explanation = Some(own.explanation.clone());
                    }
                    answer
                })
                .collect(),
            models_succeeded: summary.models_succeeded,
            best_model: summary.best_model.clone(),
            average_accuracy: summary.average_accuracy,
            environment_working: summary.environment_working,
            verdict: summary.verdict,
            basis: summary.basis,
            explanation: summary.explanation.clone(),
            models_tested: report.models.iter().map(ModelTested::from).collect(),
            summary: OriginalSummary {
                steps_requested: report.steps,
                models_tested: summary.models_tested,
                models_succeeded: summary.models_succeeded,
                best_model: summary.best_model.clone(),
                avg_accuracy: summary.average_accuracy,
                environment_working: summary.environment_working,
                output_directory: report.output_dir.clone(),
                verdict: summary.verdict,
                explanation: summary.explanation.clone(),
            },
            test_config: PreflightConfig {
                num_steps: report.steps,
                group_size: report.group_size,
                rollouts_per_model,
                total_rollouts: rollouts_per_model * report.models.len() as u64,
            },
        }
    }
}

impl From<&ModelReport> for ModelAnswer {
    fn from(model: &ModelReport) -> Self {
        let (status, code, signal, after_secs, reason) = match &model.outcome {
            ModelOutcome::Succeeded => ("succeeded", None, None, None, None),
            ModelOutcome::Failed { code, signal } => {
                ("failed", Some(*code), Some(*signal), None, None)
            }
            ModelOutcome::TimedOut { after_secs } => {
                ("timed_out", None, None, Some(*after_secs), None)
            }
            ModelOutcome::Stopped => ("stopped", None, None, None, None),
            ModelOutcome::NotStarted { reason } => {
                ("not_started", None, None, None, Some(reason.clone()))
            }
            ModelOutcome::NoSignal { cause } => {
                ("no_signal", None, None, None, Some(cause.clone()))
            }
        };
        let figures = &model.figures;
        let log_capped = rl_process::is_capped(&model.log_path);
        Self {
            model: model.model.clone(),
            status,
            code,
            signal,
            after_secs,
            reason,
            duration_secs: model.duration_secs,
            steps_tested: figures.steps_tested,
            completions: figures.completions,
            scores: figures.scores.clone(),
            accuracy: figures.accuracy,
            accuracy_score_above_zero: figures.accuracy_score_above_zero,
            steps_with_correct: figures.steps_with_correct,
            step_success_rate: figures.step_success_rate,
            zero_variance_groups: figures.zero_variance_groups,
            all_correct_groups: figures.all_correct_groups,
            all_wrong_groups: figures.all_wrong_groups,
            parse_failures: figures.parse_failures,
            error: model.error.clone(),
            error_tail: model.error_tail.clone(),
            log_path: model.log_path.clone(),
            log_capped,
            log_tail_path: log_capped.then(|| rl_process::tail_path(&model.log_path)),
            output_path: model.output_path.clone(),
            verdict: None,
            verdict_explanation: None,
        }
    }
}

impl From<&ModelReport> for ModelTested {
    fn from(model: &ModelReport) -> Self {
        let figures = &model.figures;
        let correct = figures
            .accuracy
            .map(|share| (share * figures.completions as f64).round() as usize);
        Self {
            model: model.model.clone(),
            steps_tested: figures.steps_tested,
            total_completions: figures.completions,
            correct_completions: correct,
            accuracy: figures.accuracy,
            steps_with_correct: figures.steps_with_correct,
            step_success_rate: figures.step_success_rate,
            error: model.error.clone(),
            output_file: model.output_path.clone(),
            log_file: model.log_path.clone(),
        }
    }
}
