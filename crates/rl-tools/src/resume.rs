//! `rl_resume_training`: a stopped, failed or lost run continues from its last saved state
//! (weights and optimizer) as a new run that records its parent, with the parent's config, in
//! its WandB group, its steps and checkpoints numbered on from the parent's.

use rl_metrics::{CHECKPOINTS_FILE_NAME, read_checkpoints};
use rl_process::{Lineage, RunState};
use rl_settings::{HeldOut, RunConfig, RunId, Value, run_dir};

use crate::answers::Started;
use crate::runs::{started, written_config};
use crate::{Tools, ToolsError};

/// Where a resumed run starts: the parent's last saved state before its last step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResumePoint {
    pub(crate) step: u64,
    pub(crate) state_path: String,
}

impl Tools {
    /// Starts a run that continues `parent`. With `allow_changes`, also when the parent's
    /// environment file has changed since it ran.
    pub fn resume_training(
        &self,
        parent: &RunId,
        allow_changes: bool,
    ) -> Result<Started, ToolsError> {
        let status = self.run_status(parent, i64::MAX)?;
        let refuse = |reason: String| ToolsError::NotResumable {
            run_id: parent.to_string(),
            reason,
        };
        match status.run.state {
            RunState::Stopped | RunState::Failed | RunState::Lost => {}
            RunState::Completed => {
                return Err(refuse(
                    "it completed all its steps; start a new run to train further".to_owned(),
                ));
            }
            going => {
                return Err(refuse(format!(
                    "it is {}; stop it first (rl_stop_training), then resume it",
                    going.label()
                )));
            }
        }
        let parent_dir = run_dir(self.home(), parent);
        let total_steps = total_steps(&RunConfig::read(&status.run.config_path)?);
        let point = resume_point(&parent_dir, total_steps).map_err(refuse)?;
        let service = self.service()?;
        let home = self.home().to_owned();
        // The parent's slice of held-out items, whatever [held_out] says now: one run's steps
        // never train on items another of its steps kept out.
        let mut settings = service.settings().clone();
        settings.held_out = rl_process::LaunchPlan::load(self.home(), parent)
            .ok()
            .and_then(|plan| plan.held_out())
            .map_or(
                HeldOut {
                    fraction: 0.0,
                    ..settings.held_out
                },
                |slice| HeldOut {
                    fraction: slice.fraction,
                    seed: slice.seed,
                },
            );
        let status = self.launch_with(&settings, |run_id, endpoints| {
            let written = service.write_resumed_config(
                parent,
                run_id,
                endpoints,
                &point.state_path,
                point.step,
                allow_changes,
            )?;
            rl_process::carry_over(&parent_dir, &run_dir(&home, run_id), point.step)?;
            let lineage = Lineage {
                parent: parent.clone(),
                step: point.step,
            };
            Ok(written_config(
                written.path,
                &written.environment,
                Some(lineage),
            ))
        })?;
        let message = format!(
            "Run {} continues run {parent} after its step {} from {}. Follow it with \
             rl_check_status(run_id).",
            status.run.id, point.step, point.state_path
        );
        Ok(started(&status, message))
    }
}

/// `env.total_steps` of a run's config, when it is a positive integer.
pub(crate) fn total_steps(config: &RunConfig) -> Option<u64> {
    match config.env.get("total_steps") {
        Some(Value::Int(steps)) => u64::try_from(*steps).ok(),
        _ => None,
    }
}

/// The parent's last checkpoint with a saved state (weights and optimizer) before its last
/// step, or why there is none.
pub(crate) fn resume_point(
    run_dir: &std::path::Path,
    total_steps: Option<u64>,
) -> Result<ResumePoint, String> {
    let record = read_checkpoints(&run_dir.join(CHECKPOINTS_FILE_NAME))
        .map_err(|error| error.to_string())?
        .ok_or_else(|| {
            format!(
                "it saved no training state ({CHECKPOINTS_FILE_NAME} is missing: its trainer \
                 keeps none, or it ended before its first save)"
            )
        })?;
    record
        .checkpoints
        .iter()
        .filter_map(|checkpoint| {
            let step = u64::try_from(checkpoint.step?).ok()?;
            let state_path = checkpoint.state_path.clone()?;
            Some(ResumePoint { step, state_path })
        })
        .filter(|point| total_steps.is_none_or(|total| point.step < total))
        .max_by_key(|point| point.step)
        .ok_or_else(|| {
            "it saved no training state before its last step (only states saved with \
             save_state can be resumed; set save_every in [locked.tinker] to save them as it \
             trains)"
                .to_owned()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_with(lines: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(CHECKPOINTS_FILE_NAME), lines).unwrap();
        dir
    }

    #[test]
    fn the_last_state_before_the_last_step_is_where_a_run_resumes() {
        let dir = run_with(concat!(
            "{\"step\": 0, \"name\": \"step_0\", \"sampler_path\": \"s0\", \"state_path\": \"t0\"}\n",
            "{\"step\": 2, \"name\": \"step_2\", \"sampler_path\": \"s2\", \"state_path\": \"t2\"}\n",
            "{\"step\": 3, \"name\": \"step_3\", \"sampler_path\": \"s3\", \"state_path\": null}\n",
        ));
        assert_eq!(
            resume_point(dir.path(), Some(5)),
            Ok(ResumePoint {
                step: 2,
                state_path: "t2".to_owned()
            })
        );
        // The final state is the end of the run, not a place to continue from.
        assert_eq!(resume_point(dir.path(), Some(2)).unwrap().step, 0);
    }

    #[test]
    fn a_run_without_a_saved_state_is_refused_with_the_reason() {
        let empty = tempfile::tempdir().unwrap();
        assert!(
            resume_point(empty.path(), Some(5))
                .unwrap_err()
                .contains("saved no training state")
        );
        let samplers_only = run_with(
            "{\"step\": 1, \"name\": \"step_1\", \"sampler_path\": \"s1\", \"state_path\": null}\n",
        );
        assert!(
            resume_point(samplers_only.path(), Some(5))
                .unwrap_err()
                .contains("set save_every")
        );
    }
}
