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
    Checkpoint, FlagKind, HealthDigest, HealthFlag, MetricValue, Results, RunIdentity,
    SourceFailure, StatusMetrics, StepWindow, non_finite_spelling,
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
    #[serde(serialize_with = "number")]
    pub logprobs_diff: Option<f64>,
    #[serde(serialize_with = "number")]
    pub advantages_std: Option<f64>,
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
            logprobs_diff: metrics.logprobs_diff,
            advantages_std: metrics.advantages_std,
        }
    }
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
    /// `stalled`, `non_finite`, `reward_flat`, `zero_group_variance`, `logprob_drift_rising`,
    /// or `no_signal` (from the environment's group counts: `window` is then all 0).
    pub kind: &'static str,
    pub metric: String,
    pub window: WindowView,
    pub detail: String,
}

impl From<&HealthFlag> for FlagView {
    fn from(flag: &HealthFlag) -> Self {
        Self {
            kind: FlagKind::as_str(flag.kind),
            metric: flag.metric.clone(),
            window: WindowView::from(flag.window),
            detail: flag.detail.clone(),
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
    /// Calls that returned no group (the environment's own check of equal scores, or a
    /// failure it swallowed).
    pub none: u64,
    /// Calls that raised.
    pub failed: u64,
    /// `12 of 12 groups scored alike (all 0.0)`.
    pub summary: String,
    /// Whether the run's first `run.no_signal_warn_groups` groups all lacked signal.
    pub no_signal: bool,
    /// The run's bounds: warned at, failed at (0: never).
    pub warn_groups: u64,
    pub fail_groups: u64,
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
            failed: groups.failed,
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

#[cfg(test)]
mod tests {
    use super::*;

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
