//! A sweep as a table: one row per point (its settings, its run's state, step, last reward,
//! held-out score with its interval, tokens and cost), ranked by the sweep's metric, the best
//! marked. Read from each run's own files (its `metrics.jsonl`), never from WandB: a sweep's
//! table is read often and must stay quick.

use std::cmp::Ordering;

use rl_metrics::{EVAL_MEAN_SCORE, HistoryRow, REWARD_MEAN, StatusMetrics, read_metrics_file};
use rl_process::{RunStore, SweepPointState, SweepRecord};
use rl_settings::{RunFolder, SweepId};
use serde::{Deserialize, Serialize};

use super::SweepSpec;
use crate::answers::{
    GridAxis, HeldOutScore, MetricView, SweepCurve, SweepPage, SweepRow, SweepView,
};
use crate::{Tools, ToolsError};

const EVAL_LOW: &str = "eval/mean_score_low";

const EVAL_HIGH: &str = "eval/mean_score_high";

/// What ranks a sweep's runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepMetric {
    /// `reward` (the last step's mean reward), `held_out` (the latest held-out score), or a
    /// key of the trainer's metrics (its last value).
    pub name: String,
    /// Whether a lower value ranks first (a loss); higher ranks first otherwise.
    pub lower_is_better: bool,
}

const REWARD: &str = "reward";
const HELD_OUT: &str = "held_out";

/// The families of the keys rl's trainer writes into a run's `metrics.jsonl` (`rl_trainer`'s
/// loop, batch and records): a sweep ranks by one of these, and a name outside them would
/// never be found in any run.
const TRAINER_FAMILIES: [&str; 11] = [
    "train/",
    "reward/",
    "eval/",
    "tokens/",
    "time/",
    "cost/",
    "batch/",
    "advantages/",
    "throughput/",
    "logprobs/",
    "engine/",
];

impl SweepMetric {
    /// `name` (`reward` when absent), checked for shape; a name ending in `loss` ranks the
    /// lowest first unless the caller says.
    pub fn parse(name: Option<&str>, lower_is_better: Option<bool>) -> Result<Self, ToolsError> {
        let name = name.map_or(REWARD, str::trim);
        if name.is_empty()
            || name.chars().count() > 128
            || name.chars().any(|c| c.is_control() || c.is_whitespace())
        {
            return Err(ToolsError::invalid(
                "metric",
                "a metric is reward, held_out, or a metric's name as the trainer logs it \
                 (e.g. train/loss): one word of at most 128 characters",
            ));
        }
        let known = name == REWARD
            || name == HELD_OUT
            || TRAINER_FAMILIES
                .iter()
                .any(|family| name.len() > family.len() && name.starts_with(family));
        if !known {
            return Err(ToolsError::invalid(
                "metric",
                format!(
                    "no run logs '{name}': a sweep ranks by reward, held_out, or a key of the \
                     trainer's metrics.jsonl ({}…, e.g. train/loss, eval/mean_score)",
                    TRAINER_FAMILIES.join("…, ")
                ),
            ));
        }
        Ok(Self {
            name: name.to_owned(),
            lower_is_better: lower_is_better.unwrap_or_else(|| name.ends_with("loss")),
        })
    }

    /// The metric's value in a run's history.
    fn of(&self, figures: &StatusMetrics, history: &[HistoryRow]) -> Option<f64> {
        match self.name.as_str() {
            REWARD => figures.reward_mean,
            HELD_OUT => figures.eval_mean_score,
            key => history.iter().rev().find_map(|row| row.number(key)),
        }
        .filter(|value| value.is_finite())
    }

    /// The order of two values, the better first.
    fn order(&self, a: f64, b: f64) -> Ordering {
        if self.lower_is_better {
            a.total_cmp(&b)
        } else {
            b.total_cmp(&a)
        }
    }
}

impl Tools {
    /// The sweep's table, ranked.
    pub fn sweep_view(&self, id: &SweepId) -> Result<SweepView, ToolsError> {
        Ok(self.sweep_read(id)?.0)
    }

    /// The sweep's page: its table and each run's curves (reward and the sweep's metric by
    /// step), to overlay.
    pub fn sweep_page(&self, id: &SweepId) -> Result<SweepPage, ToolsError> {
        let (sweep, histories) = self.sweep_read(id)?;
        let curves = sweep
            .rows
            .iter()
            .zip(&histories)
            .filter_map(|(row, history)| {
                let run_id = row.run_id.clone()?;
                let steps: Vec<i64> = history.iter().map(|entry| entry.step).collect();
                let figure = |key: &str| -> Vec<Option<f64>> {
                    history
                        .iter()
                        .map(|entry| entry.number(key).filter(|x| x.is_finite()))
                        .collect()
                };
                let metric_key = match sweep.metric.name.as_str() {
                    REWARD => REWARD_MEAN,
                    HELD_OUT => EVAL_MEAN_SCORE,
                    key => key,
                };
                Some(SweepCurve {
                    run_id,
                    point: row.point,
                    settings: row.settings.clone(),
                    reward: figure(REWARD_MEAN),
                    metric: figure(metric_key),
                    steps,
                })
            })
            .collect();
        Ok(SweepPage { sweep, curves })
    }

    /// The sweep's table, ranked, and each row's trainer history (empty without one).
    fn sweep_read(&self, id: &SweepId) -> Result<(SweepView, Vec<Vec<HistoryRow>>), ToolsError> {
        // Runs whose supervisor vanished read `lost`, not going.
        self.runs()?.list()?;
        let sweep = self.sweep_record(id)?;
        let spec = SweepSpec::of(&sweep)?;
        let store = RunStore::open(self.home())?;
        let mut rows = Vec::with_capacity(sweep.points.len());
        for point in &sweep.points {
            let mut row = SweepRow::of_point(point);
            let mut history = Vec::new();
            if let Some(run_id) = &point.run_id
                && let Ok(run_id) = rl_settings::RunId::parse(run_id)
                && let Some(run) = store.run(&run_id)?
            {
                row.state = run.state.name();
                row.error.clone_from(&run.error);
                let file =
                    RunFolder::at(run.config_path.parent().unwrap_or(&run.config_path)).metrics();
                if let Ok(metrics) = read_metrics_file(&file) {
                    let figures = StatusMetrics::of(&metrics);
                    if let Some(trainer) = metrics.trainer {
                        row.step = figures.step;
                        row.reward = figures.reward_mean.filter(|x| x.is_finite());
                        row.held_out = held_out_of(&trainer.history);
                        row.metric = spec.metric.of(&figures, &trainer.history);
                        history = trainer.history;
                    }
                }
                row.usage = crate::accounting::usage_of(&run.config_path);
            }
            rows.push((row, history));
        }
        rank_with(&mut rows, &spec.metric);
        let (rows, histories): (Vec<SweepRow>, Vec<Vec<HistoryRow>>) = rows.into_iter().unzip();
        Ok((
            SweepView::new(
                &sweep,
                MetricView {
                    name: spec.metric.name.clone(),
                    lower_is_better: spec.metric.lower_is_better,
                },
                super::axes(&spec.points)
                    .into_iter()
                    .map(|(field, values)| GridAxis { field, values })
                    .collect(),
                rows,
                counts(&sweep),
            ),
            histories,
        ))
    }
}

/// The latest held-out score with its interval.
fn held_out_of(history: &[HistoryRow]) -> Option<HeldOutScore> {
    let row = history
        .iter()
        .rev()
        .find(|row| row.number(EVAL_MEAN_SCORE).is_some())?;
    Some(HeldOutScore {
        step: row.step,
        mean_score: row.number(EVAL_MEAN_SCORE)?,
        low: row.number(EVAL_LOW),
        high: row.number(EVAL_HIGH),
    })
}

/// Rows with a value first, the better first; then the rest in the grid's order. The first
/// is the best.
fn rank_with<T>(rows: &mut [(SweepRow, T)], metric: &SweepMetric) {
    rows.sort_by(|(a, _), (b, _)| match (a.metric, b.metric) {
        (Some(x), Some(y)) => metric.order(x, y).then(a.point.cmp(&b.point)),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.point.cmp(&b.point),
    });
    for (index, (row, _)) in rows.iter_mut().enumerate() {
        row.rank = row.metric.map(|_| index + 1);
        row.best = index == 0 && row.metric.is_some();
    }
}

/// How many points are in each state: queued, going, ended, dropped, refused.
fn counts(sweep: &SweepRecord) -> [usize; 2] {
    let waiting = sweep
        .points
        .iter()
        .filter(|point| {
            matches!(
                point.state,
                SweepPointState::Queued | SweepPointState::Starting
            )
        })
        .count();
    let started = sweep
        .points
        .iter()
        .filter(|point| point.state == SweepPointState::Started)
        .count();
    [waiting, started]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(point: u32, metric: Option<f64>) -> SweepRow {
        SweepRow {
            point,
            metric,
            ..SweepRow::default()
        }
    }

    #[test]
    fn rows_are_ranked_by_the_metric_and_the_best_marked() {
        let higher = SweepMetric::parse(None, None).unwrap();
        let mut rows = vec![
            (row(0, Some(0.2)), ()),
            (row(1, None), ()),
            (row(2, Some(0.7)), ()),
            (row(3, Some(0.2)), ()),
        ];
        rank_with(&mut rows, &higher);
        let order: Vec<u32> = rows.iter().map(|(row, ())| row.point).collect();
        assert_eq!(order, [2, 0, 3, 1]);
        assert!(rows[0].0.best && !rows[1].0.best);
        assert_eq!(rows[3].0.rank, None);
        let loss = SweepMetric::parse(Some("train/loss"), None).unwrap();
        assert!(loss.lower_is_better);
        rank_with(&mut rows, &loss);
        assert_eq!(rows[0].0.point, 0);
        assert!(SweepMetric::parse(Some("two words"), None).is_err());
        assert!(SweepMetric::parse(Some(""), None).is_err());
    }
}
