//! What `rl_start_sweep`, `rl_check_sweep` and `rl sweep status|results|stop|list` answer.

use std::collections::BTreeMap;

use rl_process::{SweepPoint, SweepRecord};
use rl_settings::Value;
use serde::Serialize;

use super::UsageView;

/// A sweep, its table ranked by its metric.
#[derive(Debug, Clone, Serialize)]
pub struct SweepView {
    pub sweep_id: String,
    pub environment: String,
    /// `running` (points wait or go), `stopped` (by a caller), `done` (every run ended).
    pub state: &'static str,
    pub created_at: String,
    pub updated_at: String,
    pub max_parallel: u32,
    pub metric: MetricView,
    /// Each setting and the values it takes: the grid is their product.
    pub grid: Vec<GridAxis>,
    pub points: usize,
    /// Points not started yet (queued).
    pub waiting: usize,
    /// Points whose run was started (going or ended).
    pub started: usize,
    /// The run ranked first, when any has a value of the metric.
    pub best_run_id: Option<String>,
    /// One row per point, the best first.
    pub rows: Vec<SweepRow>,
}

#[derive(Debug, Clone, Serialize)]
pub struct GridAxis {
    pub field: String,
    pub values: Vec<Value>,
}

impl SweepView {
    pub(crate) fn new(
        sweep: &SweepRecord,
        metric: MetricView,
        grid: Vec<GridAxis>,
        rows: Vec<SweepRow>,
        [waiting, started]: [usize; 2],
    ) -> Self {
        Self {
            sweep_id: sweep.id.clone(),
            environment: sweep.environment.clone(),
            state: sweep.state.as_str(),
            created_at: sweep.created_at.clone(),
            updated_at: sweep.updated_at.clone(),
            max_parallel: sweep.max_parallel,
            metric,
            grid,
            points: sweep.points.len(),
            waiting,
            started,
            best_run_id: rows
                .iter()
                .find(|row| row.best)
                .and_then(|row| row.run_id.clone()),
            rows,
        }
    }
}

/// What ranks a sweep's runs.
#[derive(Debug, Clone, Serialize)]
pub struct MetricView {
    /// `reward`, `held_out`, or a key of the trainer's metrics.
    pub name: String,
    /// Whether the lowest value ranks first.
    pub lower_is_better: bool,
}

/// One point of a sweep and its run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SweepRow {
    /// The point's place in the grid (0 first).
    pub point: u32,
    pub settings: BTreeMap<String, Value>,
    pub run_id: Option<String>,
    /// The run's state, else the point's: `queued`, `starting`, `dropped` (by a stop),
    /// `refused` (its run could not start: `error`).
    pub state: &'static str,
    pub step: Option<i64>,
    /// The last step's mean reward.
    pub reward: Option<f64>,
    /// The latest held-out score, where the run evaluated.
    pub held_out: Option<HeldOutScore>,
    /// Tokens and cost so far, where the run logged them.
    pub usage: Option<UsageView>,
    /// The value of the sweep's metric the row is ranked by.
    pub metric: Option<f64>,
    /// 1 for the best; absent without a value.
    pub rank: Option<usize>,
    pub best: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl SweepRow {
    pub(crate) fn of_point(point: &SweepPoint) -> Self {
        Self {
            point: point.index,
            settings: point.settings.clone(),
            run_id: point.run_id.clone(),
            state: point.state.as_str(),
            error: point.error.clone(),
            ..Self::default()
        }
    }
}

/// What the sweep page draws: the table, and each run's curves to overlay.
#[derive(Debug, Clone, Serialize)]
pub struct SweepPage {
    pub sweep: SweepView,
    /// One per started run, in the table's order.
    pub curves: Vec<SweepCurve>,
}

/// A run's reward and metric by step.
#[derive(Debug, Clone, Serialize)]
pub struct SweepCurve {
    pub run_id: String,
    pub point: u32,
    pub settings: BTreeMap<String, Value>,
    pub steps: Vec<i64>,
    pub reward: Vec<Option<f64>>,
    /// The sweep's metric (the same as `reward` when it ranks by reward).
    pub metric: Vec<Option<f64>>,
}

/// A held-out evaluation's mean score with its 95% interval.
#[derive(Debug, Clone, Serialize)]
pub struct HeldOutScore {
    pub step: i64,
    pub mean_score: f64,
    pub low: Option<f64>,
    pub high: Option<f64>,
}

/// The answer to a sweep's start.
#[derive(Debug, Clone, Serialize)]
pub struct SweepStarted {
    pub sweep_id: String,
    /// False when the same request's sweep was going already: this is that one.
    pub started: bool,
    pub message: String,
    /// What went wrong after the sweep was recorded (it goes on regardless).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    pub sweep: SweepView,
}

impl SweepStarted {
    pub(crate) fn new(sweep: SweepView, notes: Vec<String>) -> Self {
        Self {
            sweep_id: sweep.sweep_id.clone(),
            started: true,
            message: format!(
                "Sweep {} has {} points, each a run: {} started, {} queued, at most {} at once. \
                 Follow it with rl_check_sweep(sweep_id).",
                sweep.sweep_id, sweep.points, sweep.started, sweep.waiting, sweep.max_parallel,
            ),
            notes,
            sweep,
        }
    }

    /// The sweep an identical request started, still going.
    pub(crate) fn again(sweep: SweepView) -> Self {
        Self {
            sweep_id: sweep.sweep_id.clone(),
            started: false,
            message: format!(
                "The same sweep is going already: {} ({} points, {} started, {} queued). \
                 Nothing new was started; follow it with rl_check_sweep(sweep_id).",
                sweep.sweep_id, sweep.points, sweep.started, sweep.waiting,
            ),
            notes: Vec::new(),
            sweep,
        }
    }
}

/// The answer to a sweep's stop.
#[derive(Debug, Clone, Serialize)]
pub struct SweepStopped {
    pub sweep_id: String,
    pub message: String,
    /// The runs stopped now.
    pub stopped: Vec<String>,
    /// Runs that could not be stopped, with why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<String>,
    pub sweep: SweepView,
}

impl SweepStopped {
    /// `ended_before`: the sweep had ended (stopped or done) and no run of it went.
    pub(crate) fn new(
        sweep: SweepView,
        stopped: Vec<String>,
        failures: Vec<String>,
        ended_before: bool,
    ) -> Self {
        let dropped = sweep
            .rows
            .iter()
            .filter(|row| row.state == "dropped")
            .count();
        let message = if ended_before {
            format!(
                "Sweep {} had ended already ({}); nothing was stopped.",
                sweep.sweep_id, sweep.state
            )
        } else {
            format!(
                "Sweep {} is {}: {} runs stopped, {dropped} queued points dropped.",
                sweep.sweep_id,
                sweep.state,
                stopped.len()
            )
        };
        Self {
            sweep_id: sweep.sweep_id.clone(),
            message,
            stopped,
            failures,
            sweep,
        }
    }
}

/// Every sweep, newest first.
#[derive(Debug, Clone, Serialize)]
pub struct SweepList {
    pub count: usize,
    pub sweeps: Vec<SweepEntry>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SweepEntry {
    pub sweep_id: String,
    pub environment: String,
    pub state: &'static str,
    pub created_at: String,
    pub points: usize,
    pub max_parallel: u32,
    /// Each point's run, where it has one.
    pub run_ids: Vec<String>,
}

impl SweepList {
    pub(crate) fn new(sweeps: &[SweepRecord]) -> Self {
        let sweeps: Vec<SweepEntry> = sweeps
            .iter()
            .map(|sweep| SweepEntry {
                sweep_id: sweep.id.clone(),
                environment: sweep.environment.clone(),
                state: sweep.state.as_str(),
                created_at: sweep.created_at.clone(),
                points: sweep.points.len(),
                max_parallel: sweep.max_parallel,
                run_ids: sweep
                    .points
                    .iter()
                    .filter_map(|point| point.run_id.clone())
                    .collect(),
            })
            .collect();
        Self {
            count: sweeps.len(),
            sweeps,
        }
    }
}

/// `rl_check_sweep` called again before the operator's interval has passed: an answer, not an
/// error, as `rl_check_status`'s.
#[derive(Debug, Clone, Serialize)]
pub struct SweepRateLimited {
    pub rate_limited: bool,
    pub sweep_id: String,
    pub message: String,
    pub next_check_in_seconds: f64,
    pub hint: &'static str,
}

impl SweepRateLimited {
    pub(crate) fn new(id: &rl_settings::SweepId, left: f64) -> Self {
        let minutes = (left / 60.0).ceil();
        Self {
            rate_limited: true,
            sweep_id: id.to_string(),
            message: format!(
                "Sweep {id} was checked less than the allowed interval ago; the next check is \
                 allowed in {minutes:.0} minute(s). Training changes slowly. With a shell, `rl \
                 sweep status {id}` is not limited; otherwise call rl_check_sweep again after \
                 next_check_in_seconds."
            ),
            next_check_in_seconds: left.ceil(),
            hint: "Call again after next_check_in_seconds, or follow a run of it with rl_wait_training (not limited)",
        }
    }
}
