//! The data of `rl serve`'s run pages (`answers/page.rs`).

use rl_metrics::{
    HistoryRow, STEP_PARTS, StatusMetrics, Totals, part_key, read_metrics_file, read_rollouts,
    rollout_steps, tail_rows,
};
use rl_settings::{RunConfig, RunFolder, RunId, run_dir};

use crate::accounting::{accounting_from, priced_currency};
use crate::answers::{
    Anatomy, MetricsView, RolloutsView, RunPage, RunRow, RunRows, SeriesLabel, StepAnatomy,
    UsageView,
};
use crate::metrics::SourceChoice;
use crate::resume_point::total_steps;
use crate::{Tools, ToolsError};

/// Lines of each component's log on a run page.
const LOG_LINES: usize = 60;

/// The charts' series: a `history` row's field and its label (the key the trainer logs). A
/// series no row holds is not drawn (the off-policy counts: runs with `max_steps_off_policy`).
const SERIES: [(&str, &str); 12] = [
    ("reward_mean", "reward/mean"),
    ("loss", "train/loss"),
    ("percent_correct", "train/percent_correct"),
    ("eval_percent_correct", "eval/percent_correct"),
    ("eval_mean_score", "eval/mean_score"),
    ("eval_pass_at_n", "eval/pass_at_n"),
    ("eval_best_of_n", "eval/best_of_n"),
    ("learning_rate", "train/learning_rate"),
    ("logprobs_diff", "logprobs/diff"),
    ("advantages_std", "advantages/std"),
    ("stale_groups", "batch/stale_groups"),
    ("max_age_steps", "batch/max_age_steps"),
];

impl Tools {
    /// Every run with its latest step and reward, newest first.
    pub fn run_rows(&self) -> Result<RunRows, ToolsError> {
        let runs = self.runs()?.list()?;
        let rows = runs
            .into_iter()
            .map(|run| {
                // The end of each run's metrics file only: a list of hundreds of runs stays
                // cheap however long they trained.
                let dir = RunId::parse(&run.id).map(|id| run_dir(self.home(), &id));
                let rows = dir
                    .as_ref()
                    .ok()
                    .and_then(|dir| tail_rows(&RunFolder::at(dir).metrics()).ok())
                    .unwrap_or_default();
                let latest = rows
                    .last()
                    .map(|row| MetricsView::from(&StatusMetrics::of_row(row)))
                    .unwrap_or_default();
                let usage = rows.iter().rev().find_map(Totals::of_row).map(|totals| {
                    UsageView::new(&totals, priced_currency(&run.config_path).as_deref())
                });
                RunRow {
                    run_id: run.id.clone(),
                    environment: run.environment.clone(),
                    environment_kind: crate::answers::environment_kind_of(&run),
                    state: run.state.name(),
                    phase: run.state.phase().map(rl_process::Phase::as_str),
                    created_at: run.created_at.clone(),
                    updated_at: run.updated_at.clone(),
                    step: latest.step,
                    reward_mean: latest.reward_mean,
                    total_steps: RunConfig::read(&run.config_path)
                        .ok()
                        .as_ref()
                        .and_then(total_steps),
                    usage,
                }
            })
            .collect();
        Ok(RunRows { runs: rows })
    }

    /// A run's page, its events after `since`.
    pub async fn run_page(&self, id: &RunId, since: i64) -> Result<RunPage, ToolsError> {
        let status = self.check_status(id, since, SourceChoice::Auto).await?;
        let owned = id.clone();
        let config = status.run.config_path.clone();
        let (checkpoints, logs, accounting, anatomy) = self
            .blocking(move |tools| {
                let checkpoints = tools
                    .list_checkpoints(Some(&owned))?
                    .runs
                    .into_iter()
                    .next()
                    .map(|run| run.checkpoints)
                    .unwrap_or_default();
                let logs = tools.logs(&owned, None, LOG_LINES)?;
                let rows = config
                    .parent()
                    .and_then(|dir| read_metrics_file(&RunFolder::at(dir).metrics()).ok())
                    .and_then(|metrics| metrics.trainer)
                    .map(|trainer| trainer.history)
                    .unwrap_or_default();
                Ok((
                    checkpoints,
                    logs,
                    accounting_from(&rows, &config),
                    anatomy_of(&rows),
                ))
            })
            .await?;
        Ok(RunPage {
            total_steps: status.total_steps,
            eta_secs: status.eta_secs,
            metrics_source: status.metrics_source,
            history: status.history,
            health: status.health,
            groups: status.groups,
            algorithm: status.algorithm,
            checkpoints,
            logs,
            rollout_steps: rollout_steps(&run_dir(self.home(), id)),
            series: SERIES
                .into_iter()
                .map(|(field, label)| SeriesLabel { field, label })
                .collect(),
            run: status.run,
            accounting,
            anatomy,
        })
    }

    /// The rollouts of one step of a run.
    pub fn rollouts(&self, id: &RunId, step: i64) -> Result<RolloutsView, ToolsError> {
        self.run_status(id, i64::MAX)?;
        let read = read_rollouts(&run_dir(self.home(), id), step)?.ok_or_else(|| {
            ToolsError::invalid("step", format!("run {id} kept no rollouts of step {step}"))
        })?;
        Ok(RolloutsView::from(&read))
    }
}

const TOTAL_SECS: &str = "time/total_secs";

/// Each timed step's parts and pace.
fn anatomy_of(rows: &[HistoryRow]) -> Anatomy {
    let steps = rows
        .iter()
        .filter(|row| row.number(TOTAL_SECS).is_some())
        .map(|row| StepAnatomy {
            step: row.step,
            timestamp: row.timestamp,
            total_secs: row.number(TOTAL_SECS).filter(|s| s.is_finite()),
            secs: STEP_PARTS
                .iter()
                .map(|part| {
                    row.number(&part_key(part))
                        .filter(|s| s.is_finite())
                        .map_or(0.0, |s| s.max(0.0))
                })
                .collect(),
            trained_tokens_per_sec: row
                .number("throughput/trained_tokens_per_sec")
                .filter(|n| n.is_finite()),
            sampled_tokens_per_sec: row
                .number("throughput/sampled_tokens_per_sec")
                .filter(|n| n.is_finite()),
        })
        .collect();
    Anatomy {
        parts: STEP_PARTS.to_vec(),
        steps,
    }
}
