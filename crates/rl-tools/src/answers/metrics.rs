//! The metrics parts of `rl_check_status` and `rl_get_results`: the normalised numbers, the
//! health digest, the checkpoints and the logged runs, every key named here and built from
//! rl-metrics' typed values (which serialise nothing: they write no file).
//!
//! JSON has no NaN or infinity, and a diverging run is exactly what shows them: they are
//! answered as the strings WandB and Python's `json` write (`"NaN"`, `"Infinity"`,
//! `"-Infinity"`), never silently as `null`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use rl_metrics::{
    Accounting, Checkpoint, FlagKind, HealthDigest, HealthFlag, MetricValue, Results, RunIdentity,
    SourceFailure, StatusMetrics, StepWindow, Totals, non_finite_spelling,
};
use serde::{Serialize, Serializer};

/// The latest numbers under stable names, each `null` until the run logs it.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct MetricsView {
    /// Training steps finished (the trainer logs step n after its n-th optimiser step).
    pub step: Option<i64>,
    #[serde(serialize_with = "number")]
    pub reward_mean: Option<f64>,
    #[serde(serialize_with = "number")]
    pub loss: Option<f64>,
    #[serde(serialize_with = "number")]
    pub learning_rate: Option<f64>,
    #[serde(serialize_with = "number")]
    pub percent_correct: Option<f64>,
    #[serde(serialize_with = "number")]
    pub eval_percent_correct: Option<f64>,
    /// The held-out evaluation's mean score (`eval_every`), the best checkpoint's measure.
    #[serde(serialize_with = "number")]
    pub eval_mean_score: Option<f64>,
    /// The held-out evaluation's chance that one of its completions is correct, that one of
    /// its `eval_n` completions per prompt is, and the expected best score of `eval_n`.
    #[serde(serialize_with = "number")]
    pub eval_pass_at_1: Option<f64>,
    #[serde(serialize_with = "number")]
    pub eval_pass_at_n: Option<f64>,
    #[serde(serialize_with = "number")]
    pub eval_best_of_n: Option<f64>,
    pub eval_n: Option<u64>,
    /// The 95% intervals of the mean score, pass@n and best-of-n, when the evaluation logged
    /// them (left out otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eval_mean_score_low: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eval_mean_score_high: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eval_pass_at_n_low: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eval_pass_at_n_high: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eval_best_of_n_low: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eval_best_of_n_high: Option<f64>,
    #[serde(serialize_with = "number")]
    pub logprobs_diff: Option<f64>,
    #[serde(serialize_with = "number")]
    pub advantages_std: Option<f64>,
    /// The run's `max_steps_off_policy` at the latest step: groups dropped as stale,
    /// completions of unknown age (kept), the oldest trained completion's proven age in
    /// optimizer steps. Left out of a run without the bound.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stale_groups: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unknown_age_completions: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_age_steps: Option<u64>,
}

impl From<&StatusMetrics> for MetricsView {
    fn from(metrics: &StatusMetrics) -> Self {
        Self {
            step: metrics.step,
            reward_mean: metrics.reward_mean,
            loss: metrics.loss,
            learning_rate: metrics.learning_rate,
            percent_correct: metrics.percent_correct,
            eval_percent_correct: metrics.eval_percent_correct,
            eval_mean_score: metrics.eval_mean_score,
            eval_pass_at_1: metrics.eval_pass_at_1,
            eval_pass_at_n: metrics.eval_pass_at_n,
            eval_best_of_n: metrics.eval_best_of_n,
            eval_n: count(metrics.eval_n),
            eval_mean_score_low: finite(metrics.eval_mean_score_interval.map(|(low, _)| low)),
            eval_mean_score_high: finite(metrics.eval_mean_score_interval.map(|(_, high)| high)),
            eval_pass_at_n_low: finite(metrics.eval_pass_at_n_interval.map(|(low, _)| low)),
            eval_pass_at_n_high: finite(metrics.eval_pass_at_n_interval.map(|(_, high)| high)),
            eval_best_of_n_low: finite(metrics.eval_best_of_n_interval.map(|(low, _)| low)),
            eval_best_of_n_high: finite(metrics.eval_best_of_n_interval.map(|(_, high)| high)),
            logprobs_diff: metrics.logprobs_diff,
            advantages_std: metrics.advantages_std,
            stale_groups: count(metrics.stale_groups),
            unknown_age_completions: count(metrics.unknown_age_completions),
            max_age_steps: count(metrics.max_age_steps),
        }
    }
}

/// A logged count as a whole number (`None` when absent or not one).
fn count(value: Option<f64>) -> Option<u64> {
    value
        .filter(|n| n.is_finite() && *n >= 0.0 && n.fract() == 0.0)
        .map(|n| n as u64)
}

/// A finite number; an interval bound that is not one (NaN, ±inf) is left out.
fn finite(value: Option<f64>) -> Option<f64> {
    value.filter(|number| number.is_finite())
}

/// `None` → null; a number as [`LoggedValue`] answers it.
#[expect(
    clippy::ref_option,
    reason = "serde's `serialize_with` hands the field by reference"
)]
fn number<S: Serializer>(value: &Option<f64>, serializer: S) -> Result<S::Ok, S::Error> {
    match value {
        None => serializer.serialize_none(),
        Some(number) => serialize_number(*number, serializer),
    }
}

/// A value as the run logged it.
#[derive(Debug, Clone, PartialEq)]
pub struct LoggedValue(pub MetricValue);

impl Serialize for LoggedValue {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            MetricValue::Number(number) => serialize_number(*number, serializer),
            MetricValue::Other(value) => value.serialize(serializer),
        }
    }
}

fn serialize_number<S: Serializer>(number: f64, serializer: S) -> Result<S::Ok, S::Error> {
    if let Some(spelling) = non_finite_spelling(number) {
        return serializer.serialize_str(spelling);
    }
    // Integers logged as integers (step counts, group sizes) stay integers.
    if number.fract() == 0.0 && number.abs() < 9.0e15 {
        serializer.serialize_i64(number as i64)
    } else {
        serializer.serialize_f64(number)
    }
}

fn logged_values(values: &BTreeMap<String, MetricValue>) -> BTreeMap<String, LoggedValue> {
    values
        .iter()
        .map(|(key, value)| (key.clone(), LoggedValue(value.clone())))
        .collect()
}

/// Whether the run is learning: the rows judged and the warning signs found in them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HealthView {
    pub healthy: bool,
    /// The rows judged; `null` before the first step.
    pub window: Option<WindowView>,
    pub flags: Vec<FlagView>,
}

impl From<&HealthDigest> for HealthView {
    fn from(digest: &HealthDigest) -> Self {
        Self {
            healthy: digest.healthy,
            window: digest.window.map(WindowView::from),
            flags: digest.flags.iter().map(FlagView::from).collect(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct WindowView {
    pub first_step: i64,
    pub last_step: i64,
    pub rows: usize,
}

impl From<StepWindow> for WindowView {
    fn from(window: StepWindow) -> Self {
        Self {
            first_step: window.first_step,
            last_step: window.last_step,
            rows: window.rows,
        }
    }
}

/// One warning sign.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlagView {
    /// A sign's name (`rl_metrics::FlagKind::as_str`: `stalled`, `off_policy_high`, …), or
    /// `no_signal` (from the environment's group counts: `window` is then all 0).
    pub kind: &'static str,
    pub metric: String,
    pub window: WindowView,
    pub detail: String,
    /// For `stalled`: the part of the run that is busy or waiting — `environment` (sends no
    /// groups), `api` (groups arrive, no batch), `engine` (does not answer the trainer),
    /// `evaluation`, or `trainer` (busy, or silent on where it is).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub component: Option<&'static str>,
}

impl From<&HealthFlag> for FlagView {
    fn from(flag: &HealthFlag) -> Self {
        Self {
            kind: FlagKind::as_str(flag.kind),
            metric: flag.metric.clone(),
            window: WindowView::from(flag.window),
            detail: flag.detail.clone(),
            component: flag.component.map(rl_metrics::StallComponent::as_str),
        }
    }
}

/// The groups the run's environment made, as `rl_env` counts them: a run none of whose groups
/// has scores that differ cannot learn.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupsView {
    /// Groups the environment returned.
    pub made: u64,
    /// Of those, groups whose scores differ (the only ones GRPO learns from).
    pub with_signal: u64,
    /// Of those, groups whose scores were all equal (dropped before the trainer).
    pub alike: u64,
    /// The alike groups by the score they shared (`"0.0"`, `"nan"`, `"other"`).
    pub alike_scores: BTreeMap<String, u64>,
    /// Calls that returned no group after asking the model (the environment's own check of
    /// equal scores, or a failure it swallowed).
    pub none: u64,
    /// Calls that returned no group without asking the model.
    pub unsampled: u64,
    /// Of those, calls whose prompt reached `token_limit` (an environment skipping long prompts).
    pub prompt_too_long: u64,
    /// The longest such prompt, in tokens.
    pub longest_prompt: u64,
    /// Scored groups atroposlib drops for a sequence reaching `token_limit`.
    pub too_long: u64,
    /// The longest sequence of a scored group, in tokens.
    pub longest_sequence: u64,
    /// The token limit groups are dropped at, when the environment said it.
    pub token_limit: Option<u64>,
    /// The environment's own `max_token_length`, which long prompts are skipped by.
    pub prompt_limit: Option<u64>,
    /// Results that are no scored group, and what the first was.
    pub invalid: u64,
    pub invalid_first: Option<String>,
    /// Calls that raised.
    pub failed: u64,
    /// Exceptions by the handler that raised them, with the first message.
    pub errors: BTreeMap<String, HandlerErrorsView>,
    /// `12 of 12 groups scored alike (all 0.0)`.
    pub summary: String,
    /// Whether the run's first `run.no_signal_warn_groups` groups all lacked signal.
    pub no_signal: bool,
    /// The run's bounds: warned at, failed at (0: never).
    pub warn_groups: u64,
    pub fail_groups: u64,
}

/// The exceptions one of the environment's handlers raised.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HandlerErrorsView {
    pub count: u64,
    pub first: Option<String>,
}

impl From<&rl_process::RunGroups> for GroupsView {
    fn from(run: &rl_process::RunGroups) -> Self {
        let groups = &run.groups;
        Self {
            made: groups.made,
            with_signal: groups.with_signal,
            alike: groups.alike,
            alike_scores: groups.alike_scores.clone(),
            none: groups.none,
            unsampled: groups.unsampled,
            prompt_too_long: groups.prompt_too_long,
            longest_prompt: groups.longest_prompt,
            too_long: groups.too_long,
            longest_sequence: groups.longest_sequence,
            token_limit: groups.token_limit,
            prompt_limit: groups.prompt_limit,
            invalid: groups.invalid,
            invalid_first: groups.invalid_first.clone(),
            failed: groups.failed,
            errors: groups
                .errors
                .iter()
                .map(|(handler, errors)| {
                    (
                        handler.clone(),
                        HandlerErrorsView {
                            count: errors.count,
                            first: errors.first.clone(),
                        },
                    )
                })
                .collect(),
            summary: groups.describe(),
            no_signal: run.no_signal(),
            warn_groups: run.warn_groups,
            fail_groups: run.fail_groups,
        }
    }
}

impl GroupsView {
    /// The health flag of a run that cannot learn.
    pub(crate) fn flag(&self, groups: &rl_process::RunGroups) -> Option<FlagView> {
        self.no_signal.then(|| FlagView {
            kind: "no_signal",
            metric: "env_groups".to_owned(),
            window: WindowView {
                first_step: 0,
                last_step: 0,
                rows: 0,
            },
            detail: groups.groups.no_signal_cause(),
            component: None,
        })
    }
}

/// A metrics source that failed, beside whatever another source found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SourceFailureView {
    /// `metrics_file`, `wandb_files`, `wandb_api`, `trainer_log` or `checkpoints_file`.
    pub source: &'static str,
    pub error: String,
}

impl From<&SourceFailure> for SourceFailureView {
    fn from(failure: &SourceFailure) -> Self {
        Self {
            source: failure.source.as_str(),
            error: failure.error.clone(),
        }
    }
}

/// A set of weights the trainer saved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckpointView {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<i64>,
    /// The sampler weights (`tinker://…/sampler_weights/<name>`): what sampling needs.
    pub path: String,
    /// `step_<n>` or `final`, as the trainer named it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The weights and optimizer state (`save_state`): what resuming needs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state_path: Option<String>,
    /// When it was saved (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
}

impl From<&Checkpoint> for CheckpointView {
    fn from(checkpoint: &Checkpoint) -> Self {
        Self {
            step: checkpoint.step,
            path: checkpoint.path.clone(),
            name: checkpoint.name.clone(),
            state_path: checkpoint.state_path.clone(),
            time: checkpoint.time.clone(),
        }
    }
}

/// Where to find a logged run again (its WandB page or its file).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LoggedRunView {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

impl From<&RunIdentity> for LoggedRunView {
    fn from(run: &RunIdentity) -> Self {
        Self {
            name: run.name.clone(),
            url: run.url.clone(),
            path: run.path.clone(),
            state: run.state.clone(),
        }
    }
}

/// What the run's metrics say, once a source has any.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResultsPart {
    /// `metrics_file`, `wandb_files`, `wandb_api`, `trainer_log` or `checkpoints_file`.
    pub source: &'static str,
    pub metrics: MetricsView,
    /// The trainer run's summary as logged (last value of every key).
    pub final_metrics: BTreeMap<String, LoggedValue>,
    /// The env run's summary, keys as the env logged them.
    pub env_final_metrics: BTreeMap<String, LoggedValue>,
    /// Every trainer step's normalised numbers, in step order.
    pub history: Vec<MetricsView>,
    /// `tinker://…/sampler_weights/final` when the trainer reported it.
    pub final_weights: Option<String>,
    pub checkpoints: Vec<CheckpointView>,
    pub health: HealthView,
    pub trainer_run: Option<LoggedRunView>,
    pub env_run: Option<LoggedRunView>,
    pub warnings: Vec<String>,
}

impl From<&Results> for ResultsPart {
    fn from(results: &Results) -> Self {
        Self {
            source: results.source.as_str(),
            metrics: MetricsView::from(&results.metrics),
            final_metrics: logged_values(&results.final_metrics),
            env_final_metrics: logged_values(&results.env_final_metrics),
            history: results.history.iter().map(MetricsView::from).collect(),
            final_weights: results.final_weights.clone(),
            checkpoints: results
                .checkpoints
                .iter()
                .map(CheckpointView::from)
                .collect(),
            health: HealthView::from(&results.health),
            trainer_run: results.trainer_run.as_ref().map(LoggedRunView::from),
            env_run: results.env_run.as_ref().map(LoggedRunView::from),
            warnings: results.warnings.clone(),
        }
    }
}

/// What a run said when no price is set.
pub const NO_PRICE_NOTE: &str = "no price set ([prices] in config.toml): tokens only";

/// Where a run's tokens, seconds and money went (rl's trainer logs it; `null` for another).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AccountingView {
    /// The latest step with token totals.
    pub step: i64,
    /// Tokens so far (a resumed run's include its parent's up to the step it resumed after).
    pub tokens: TokensView,
    /// The latest step's pace, tokens per second.
    pub throughput: ThroughputView,
    /// Seconds of the timed steps.
    pub timed_secs: f64,
    /// Each part's share of the timed seconds, largest first (parts never timed left out).
    pub shares: Vec<ShareView>,
    /// The part with the largest share.
    pub bottleneck: Option<ShareView>,
    /// `null` when no price is set (then `cost_note` says so).
    pub cost: Option<CostView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_note: Option<&'static str>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct TokensView {
    pub prompt: u64,
    pub sampled: u64,
    pub trained: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ThroughputView {
    #[serde(serialize_with = "number")]
    pub trained_tokens_per_sec: Option<f64>,
    #[serde(serialize_with = "number")]
    pub sampled_tokens_per_sec: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ShareView {
    /// wait, logprobs, rollouts, forward_backward, optim, save, sampler_update, eval, other.
    pub part: &'static str,
    /// Of 1.
    pub share: f64,
}

/// A run's cost, in its currency.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CostView {
    /// So far (a resumed run's includes its parent's).
    #[serde(serialize_with = "number")]
    pub total: Option<f64>,
    /// At the pace so far, once the run reaches its last step.
    #[serde(serialize_with = "number")]
    pub estimate_at_completion: Option<f64>,
    pub currency: String,
}

impl AccountingView {
    /// `currency` is the run's when a price is set (`None`: no price, tokens only).
    pub fn new(accounting: &Accounting, currency: Option<&str>) -> Self {
        let mut shares: Vec<ShareView> = accounting
            .shares
            .iter()
            .map(|(part, share)| ShareView {
                part,
                share: *share,
            })
            .collect();
        shares.sort_by(|a, b| b.share.total_cmp(&a.share));
        let priced = currency.is_some() || accounting.cost_total.is_some();
        Self {
            step: accounting.step,
            tokens: TokensView {
                prompt: accounting.prompt_tokens,
                sampled: accounting.sampled_tokens,
                trained: accounting.trained_tokens,
            },
            throughput: ThroughputView {
                trained_tokens_per_sec: accounting.trained_tokens_per_sec,
                sampled_tokens_per_sec: accounting.sampled_tokens_per_sec,
            },
            timed_secs: accounting.timed_secs,
            bottleneck: accounting
                .bottleneck()
                .map(|(part, share)| ShareView { part, share }),
            shares,
            cost: priced.then(|| CostView {
                total: accounting.cost_total,
                estimate_at_completion: accounting.cost_estimate,
                currency: currency.unwrap_or_default().to_owned(),
            }),
            cost_note: (!priced).then_some(NO_PRICE_NOTE),
        }
    }
}

/// A run's tokens and cost so far, as a list shows them (its metrics file's last totals).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UsageView {
    pub step: i64,
    pub tokens: TokensView,
    /// `null` when no price is set.
    #[serde(serialize_with = "number")]
    pub cost: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
}

impl UsageView {
    pub fn new(totals: &Totals, currency: Option<&str>) -> Self {
        Self {
            step: totals.step,
            tokens: TokensView {
                prompt: totals.prompt_tokens,
                sampled: totals.sampled_tokens,
                trained: totals.trained_tokens,
            },
            cost: totals.cost,
            currency: currency.map(str::to_owned),
        }
    }
}

/// `rl runs cost`: each run's own tokens and cost (a resumed run's without its parent's),
/// summed per environment and per day (UTC, the day each step was logged).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CostReport {
    /// `YYYY-MM-DD`: steps logged before it left out.
    pub since: Option<String>,
    pub by_environment: Vec<CostLine>,
    pub by_day: Vec<CostLine>,
    pub total: CostLine,
    /// The currencies of the priced runs (one, unless the operator changed it between runs).
    pub currencies: Vec<String>,
    /// Runs without token totals (another trainer, or no step yet) or without a price.
    pub unpriced_runs: usize,
    pub untracked_runs: usize,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct CostLine {
    /// The environment, the day, or `total`.
    pub key: String,
    pub runs: usize,
    pub tokens: TokensView,
    /// `null` when none of its steps was priced.
    #[serde(serialize_with = "number")]
    pub cost: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stall_names_its_component_and_other_flags_have_none() {
        let flag = |kind, component| HealthFlag {
            kind,
            metric: "_step".to_owned(),
            window: StepWindow {
                first_step: 2,
                last_step: 2,
                rows: 1,
            },
            detail: "d".to_owned(),
            component,
        };
        let stalled = serde_json::to_value(FlagView::from(&flag(
            FlagKind::Stalled,
            Some(rl_metrics::StallComponent::Environment),
        )))
        .unwrap_or_default();
        assert_eq!(stalled["kind"], "stalled");
        assert_eq!(stalled["component"], "environment");
        let flat = serde_json::to_value(FlagView::from(&flag(FlagKind::RewardFlat, None)))
            .unwrap_or_default();
        assert!(flat.get("component").is_none(), "{flat}");
    }

    #[test]
    fn non_finite_numbers_stay_visible_in_json() {
        let view = MetricsView {
            loss: Some(f64::NAN),
            reward_mean: Some(f64::NEG_INFINITY),
            learning_rate: Some(f64::INFINITY),
            ..MetricsView::default()
        };
        let json = serde_json::to_value(view).unwrap_or_default();
        assert_eq!(json["loss"], "NaN");
        assert_eq!(json["reward_mean"], "-Infinity");
        assert_eq!(json["learning_rate"], "Infinity");
        assert_eq!(json["step"], serde_json::Value::Null);
    }

    #[test]
    fn logged_values_keep_integers_and_their_other_json() {
        let json = |value| serde_json::to_value(LoggedValue(value)).unwrap_or_default();
        assert_eq!(json(MetricValue::Number(4.0)), serde_json::json!(4));
        assert_eq!(json(MetricValue::Number(0.5)), serde_json::json!(0.5));
        assert_eq!(json(MetricValue::Number(f64::NAN)), "NaN");
        let other = serde_json::json!({"a": [1, "b"]});
        assert_eq!(json(MetricValue::Other(other.clone())), other);
    }
}
