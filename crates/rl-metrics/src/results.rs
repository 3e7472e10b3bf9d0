//! What a run hands over: the normalised numbers, the raw summaries, every step's key numbers,
//! the weights the trainer saved, and whether it was learning.

use std::collections::BTreeMap;

use crate::health::{Activity, HealthDigest, HealthPolicy};
use crate::model::{Checkpoint, LoggedRun, MetricValue, RunMetrics, SourceKind};
use crate::view::StatusMetrics;

#[derive(Debug, Clone, PartialEq)]
pub struct Results {
    pub source: SourceKind,
    pub metrics: StatusMetrics,
    /// The trainer run's summary as logged (last value of every key).
    pub final_metrics: BTreeMap<String, MetricValue>,
    /// The env run's summary, keys as the env logged them.
    pub env_final_metrics: BTreeMap<String, MetricValue>,
    /// Every trainer step's normalised numbers, in step order (all steps, not a sample).
    pub history: Vec<StatusMetrics>,
    /// `tinker://…/sampler_weights/final` when the trainer reported it.
    pub final_weights: Option<String>,
    pub checkpoints: Vec<Checkpoint>,
    pub health: HealthDigest,
    pub trainer_run: Option<RunIdentity>,
    pub env_run: Option<RunIdentity>,
    pub warnings: Vec<String>,
}

/// Where to find a logged run again (its WandB page or its file).
#[derive(Debug, Clone, PartialEq)]
pub struct RunIdentity {
    pub name: Option<String>,
    pub url: Option<String>,
    pub path: Option<std::path::PathBuf>,
    pub state: Option<String>,
}

impl RunIdentity {
    fn of(run: &LoggedRun) -> Self {
        Self {
            name: run.name.clone(),
            url: run.url.clone(),
            path: run.path.clone(),
            state: run.state.clone(),
        }
    }
}

impl Results {
    pub fn of(metrics: &RunMetrics, activity: &Activity, policy: &HealthPolicy) -> Self {
        let trainer = metrics.trainer.clone().unwrap_or_default();
        Self {
            source: metrics.source,
            metrics: StatusMetrics::of(metrics),
            final_metrics: trainer.summary.clone(),
            env_final_metrics: metrics
                .env
                .as_ref()
                .map(|env| env.summary.clone())
                .unwrap_or_default(),
            history: trainer.history.iter().map(StatusMetrics::of_row).collect(),
            final_weights: metrics.final_weights.clone(),
            checkpoints: metrics.checkpoints.clone(),
            health: HealthDigest::assess(&trainer, activity, policy),
            trainer_run: metrics.trainer.as_ref().map(RunIdentity::of),
            env_run: metrics.env.as_ref().map(RunIdentity::of),
            warnings: metrics.warnings.clone(),
        }
    }
}
