//! A run's saved states as rl reads them: what its `checkpoints.jsonl` records (`checkpoint_at`),
//! which steps' files were pruned (`pruned.json`), their scores (`Scores`: held-out evaluation,
//! else the training reward), the best (`best_saved`, the one rule) and where a resume would
//! start — together `Saved`, what `rl checkpoints list`, pruning, `run:ID@…` models and
//! `rl compare` all read.

use std::path::{Path, PathBuf};

use rl_metrics::{read_checkpoints, read_metrics_file};
use rl_process::{RunRecord, RunState};
use rl_settings::{RunConfig, RunFolder, RunId, run_dir};

use crate::resume_point::{resume_point, total_steps};
use crate::{Tools, ToolsError};

/// What the best checkpoint is chosen by: the held-out evaluation's mean score when the run
/// evaluated during training (`eval_every`), else the training reward at the step.
const BEST_BY_EVALUATION: &str = crate::answers::EVAL_MEAN_SCORE;
const BEST_BY_REWARD: &str = "reward/mean";

impl Tools {
    /// What run `run` saved, which of it is best, where a resume would start, what was pruned.
    pub(crate) fn saved(&self, run: &RunRecord) -> Result<Saved, ToolsError> {
        let dir = run_dir(self.home(), &RunId::parse(&run.id)?);
        let record = read_checkpoints(&RunFolder::at(&dir).checkpoints())?.unwrap_or_default();
        let scores = scores_by_step(&dir);
        let pruned = read_pruned(&dir);
        let best_step = best_saved(&record, &pruned, &scores);
        let total = RunConfig::read(&run.config_path)
            .ok()
            .as_ref()
            .and_then(total_steps);
        let resume = (!matches!(run.state, RunState::Completed))
            .then(|| resume_point(&dir, total).ok())
            .flatten();
        Ok(Saved {
            dir,
            record,
            best_step,
            scores,
            resume,
            pruned,
        })
    }

    /// Run `run`'s checkpoint at `step`, as its `checkpoints.jsonl` records it.
    pub(crate) fn checkpoint_at(
        &self,
        run: &RunRecord,
        step: i64,
    ) -> Result<rl_metrics::Checkpoint, ToolsError> {
        let dir = run_dir(self.home(), &RunId::parse(&run.id)?);
        let record = read_checkpoints(&RunFolder::at(&dir).checkpoints())?.unwrap_or_default();
        if let Some(checkpoint) = record
            .checkpoints
            .iter()
            .rev()
            .find(|checkpoint| checkpoint.step == Some(step))
        {
            return Ok(checkpoint.clone());
        }
        let steps: Vec<String> = record
            .checkpoints
            .iter()
            .filter_map(|c| c.step.map(|s| s.to_string()))
            .collect();
        Err(ToolsError::invalid(
            "step",
            format!(
                "run {} has no checkpoint at step {step}; its checkpoints: {}",
                run.id,
                if steps.is_empty() {
                    "none".to_owned()
                } else {
                    steps.join(", ")
                }
            ),
        ))
    }
}

/// A run's checkpoints as [`Tools::saved`] reads them.
pub(crate) struct Saved {
    pub(crate) dir: PathBuf,
    pub(crate) record: rl_metrics::CheckpointRecord,
    pub(crate) best_step: Option<i64>,
    /// What the best is chosen by, by step.
    pub(crate) scores: Scores,
    pub(crate) resume: Option<crate::resume_point::ResumePoint>,
    pub(crate) pruned: Vec<i64>,
}

/// The steps `rl checkpoints prune` deleted the files of, so far (none when the file is missing or unreadable: nothing is claimed
/// deleted that was not).
pub(crate) fn read_pruned(dir: &Path) -> Vec<i64> {
    std::fs::read(RunFolder::at(dir).pruned())
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

pub(crate) fn write_pruned(dir: &Path, steps: &[i64]) -> Result<(), ToolsError> {
    let text = serde_json::to_vec(steps)
        .map_err(|error| ToolsError::Internal(format!("cannot encode pruned steps: {error}")))?;
    rl_settings::write_atomically(&RunFolder::at(dir).pruned(), &text)?;
    Ok(())
}

/// The name of what a best step is the best by, as `Scores::by` has it.
pub(crate) fn best_by_named(name: &str) -> Option<&'static str> {
    [BEST_BY_EVALUATION, BEST_BY_REWARD]
        .into_iter()
        .find(|by| *by == name)
}

/// A score of a run's steps, as its `metrics.jsonl` has it.
pub(crate) struct Scores {
    /// The metric's name.
    pub(crate) by: &'static str,
    pub(crate) values: Vec<(i64, f64)>,
}

/// The one rule of "best", which `rl checkpoints list` marks, `run:ID@best` samples and
/// `rl compare --step best` compares, and which pruning keeps: among the checkpoints that can
/// be compared and resumed (a saved state whose files were not pruned), the step with the
/// highest score (`scores.by`: held-out evaluation when the run has any, else `reward/mean`),
/// the later of equals (it trained longer for the same score); none without a score logged at
/// any of them. A better step without a saved state is no candidate: nothing could load it.
pub(crate) fn best_saved(
    record: &rl_metrics::CheckpointRecord,
    pruned: &[i64],
    scores: &Scores,
) -> Option<i64> {
    record
        .checkpoints
        .iter()
        .filter(|checkpoint| is_comparable(checkpoint, pruned))
        .filter_map(|checkpoint| {
            let step = checkpoint.step?;
            Some((step, scores.values.iter().find(|(at, _)| *at == step)?.1))
        })
        .max_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)))
        .map(|(step, _)| step)
}

/// Whether `checkpoint` can be loaded again: it has a step and a saved state, not pruned.
pub(crate) fn is_comparable(checkpoint: &rl_metrics::Checkpoint, pruned: &[i64]) -> bool {
    checkpoint.state_path.is_some() && checkpoint.step.is_some_and(|step| !pruned.contains(&step))
}

/// The held-out evaluations' mean scores when the run has any, else the training rewards.
fn scores_by_step(dir: &Path) -> Scores {
    let Ok(metrics) = read_metrics_file(&RunFolder::at(dir).metrics()) else {
        return Scores {
            by: BEST_BY_REWARD,
            values: Vec::new(),
        };
    };
    let of = |by: &'static str| Scores {
        by,
        values: metrics
            .trainer
            .iter()
            .flat_map(|run| &run.history)
            .filter_map(|row| Some((row.step, row.number(by).filter(|x| x.is_finite())?)))
            .collect(),
    };
    let evaluated = of(BEST_BY_EVALUATION);
    if evaluated.values.is_empty() {
        of(BEST_BY_REWARD)
    } else {
        evaluated
    }
}
