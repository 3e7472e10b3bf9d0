//! The resume point: where a stopped, failed or lost run would continue — its last saved state
//! (weights and optimizer) before its last step whose files are there — or why it cannot.
//! `rl_resume_training` starts from it, and `rl_list_checkpoints` marks it (and pruning keeps it).
//! A fork may start from any saved state whose files are there (`forkable_states`).

use rl_metrics::read_checkpoints;
use rl_settings::RunConfig;
use rl_settings::RunFolder;

/// Where a resumed run starts: the parent's last saved state before its last step whose
/// files are there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResumePoint {
    pub(crate) step: u64,
    pub(crate) state_path: String,
    /// Later steps whose saved state is gone from the run's engine folder, passed over.
    pub(crate) missing: Vec<u64>,
}

/// The steps a run's trainer takes, as it reads them (`None` for a config it would refuse).
pub(crate) fn total_steps(config: &RunConfig) -> Option<u64> {
    config.trainer().ok().map(|trainer| trainer.total_steps)
}

/// The parent's last checkpoint with a saved state (weights and optimizer) before its last
/// step, or why there is none.
pub(crate) fn resume_point(
    run_dir: &std::path::Path,
    total_steps: Option<u64>,
) -> Result<ResumePoint, String> {
    let every = recorded_states(run_dir)?;
    if every.is_empty() {
        return Err(
            "it ended before its first saved training state (rl's trainer saves step \
             0's as it starts: this run never got that far); start a new run"
                .to_owned(),
        );
    }
    let mut saved: Vec<(u64, String)> = every
        .into_iter()
        .filter(|(step, _)| total_steps.is_none_or(|total| *step < total))
        .collect();
    saved.sort_by_key(|(step, _)| *step);
    if saved.is_empty() {
        return Err(
            "it saved no training state before its last step (only states saved with \
             save_state can be resumed; set save_every in [locked.tinker] to save them as it \
             trains)"
                .to_owned(),
        );
    }
    let mut missing = Vec::new();
    while let Some((step, state_path)) = saved.pop() {
        if state_is_missing(run_dir, &state_path) {
            missing.push(step);
            continue;
        }
        return Ok(ResumePoint {
            step,
            state_path,
            missing,
        });
    }
    Err(format!(
        "the files of every training state it saved (steps {}) are missing from its engine \
         folder",
        missing
            .iter()
            .rev()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// Every saved state (weights and optimizer) `checkpoints.jsonl` records, step and path, in
/// the order saved; or why it cannot be read.
fn recorded_states(run_dir: &std::path::Path) -> Result<Vec<(u64, String)>, String> {
    let record = read_checkpoints(&RunFolder::at(run_dir).checkpoints())
        .map_err(|error| error.to_string())?
        .ok_or_else(|| {
            format!(
                "it saved no training state ({} is missing: its trainer \
                 keeps none, or it ended before its first save)",
                RunFolder::CHECKPOINTS
            )
        })?;
    Ok(record
        .checkpoints
        .iter()
        .filter_map(|checkpoint| {
            let step = u64::try_from(checkpoint.step?).ok()?;
            Some((step, checkpoint.state_path.clone()?))
        })
        .collect())
}

/// The saved states a fork can start from: each step's state whose files are there (the
/// last saved of a step, when it was saved twice), by step.
pub(crate) fn forkable_states(run_dir: &std::path::Path) -> Result<Vec<(u64, String)>, String> {
    let mut by_step = std::collections::BTreeMap::new();
    for (step, state_path) in recorded_states(run_dir)? {
        if !state_is_missing(run_dir, &state_path) {
            by_step.insert(step, state_path);
        }
    }
    Ok(by_step.into_iter().collect())
}

/// Whether a run that trained on the local engine (its engine folder is there) has lost the
/// files of the state `state_path` names. A hosted run's states are at the service: never
/// missing as far as rl can tell (its trainer checks what it loads).
pub(crate) fn state_is_missing(run_dir: &std::path::Path, state_path: &str) -> bool {
    RunFolder::at(run_dir).engine().is_dir()
        && rl_metrics::engine_archive(run_dir, state_path).is_none_or(|files| !files.exists())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_with(lines: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(RunFolder::at(dir.path()).checkpoints(), lines).unwrap();
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
                state_path: "t2".to_owned(),
                missing: Vec::new(),
            })
        );
        // The final state is the end of the run, not a place to continue from.
        assert_eq!(resume_point(dir.path(), Some(2)).unwrap().step, 0);
    }

    #[test]
    fn a_local_runs_state_whose_files_are_gone_is_passed_over_and_named() {
        let dir = run_with(concat!(
            "{\"step\": 0, \"name\": \"step_0\", \"sampler_path\": \"tinker://m/step_0\", \"state_path\": \"tinker://m/weights/step_0\"}\n",
            "{\"step\": 2, \"name\": \"step_2\", \"sampler_path\": \"tinker://m/step_2\", \"state_path\": \"tinker://m/weights/step_2\"}\n",
            "{\"step\": 4, \"name\": \"step_4\", \"sampler_path\": \"tinker://m/step_4\", \"state_path\": \"tinker://m/weights/step_4\"}\n",
        ));
        let states = dir.path().join("engine/checkpoints/m");
        std::fs::create_dir_all(states.join("step_0.tar.gz")).unwrap();
        std::fs::create_dir_all(states.join("step_2.tar.gz")).unwrap();
        assert_eq!(
            resume_point(dir.path(), Some(6)),
            Ok(ResumePoint {
                step: 2,
                state_path: "tinker://m/weights/step_2".to_owned(),
                missing: vec![4],
            })
        );
        std::fs::remove_dir_all(states).unwrap();
        let refused = resume_point(dir.path(), Some(6)).unwrap_err();
        assert!(refused.contains("steps 0, 2, 4"), "{refused}");
        // Without an engine folder (a hosted run) the service holds the states.
        std::fs::remove_dir_all(RunFolder::at(dir.path()).engine()).unwrap();
        assert_eq!(resume_point(dir.path(), Some(6)).unwrap().step, 4);
    }

    #[test]
    fn a_fork_starts_from_any_state_whose_files_are_there_the_last_included() {
        let dir = run_with(concat!(
            "{\"step\": 0, \"name\": \"step_0\", \"sampler_path\": \"tinker://m/step_0\", \"state_path\": \"tinker://m/weights/step_0\"}\n",
            "{\"step\": 2, \"name\": \"step_2\", \"sampler_path\": \"tinker://m/step_2\", \"state_path\": \"tinker://m/weights/step_2\"}\n",
            "{\"step\": 3, \"name\": \"step_3\", \"sampler_path\": \"tinker://m/step_3\", \"state_path\": null}\n",
            "{\"step\": 4, \"name\": \"final\", \"sampler_path\": \"tinker://m/final\", \"state_path\": \"tinker://m/weights/final\"}\n",
        ));
        let steps = |dir: &std::path::Path| -> Vec<u64> {
            forkable_states(dir)
                .unwrap()
                .into_iter()
                .map(|(step, _)| step)
                .collect()
        };
        // A hosted run's states are at the service.
        assert_eq!(steps(dir.path()), [0, 2, 4]);
        let states = dir.path().join("engine/checkpoints/m");
        std::fs::create_dir_all(states.join("step_0.tar.gz")).unwrap();
        std::fs::create_dir_all(states.join("final.tar.gz")).unwrap();
        assert_eq!(steps(dir.path()), [0, 4]);
        assert!(forkable_states(tempfile::tempdir().unwrap().path()).is_err());
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
                .contains("ended before its first saved training state")
        );
        let final_only = run_with(concat!(
            "{\"step\": 1, \"name\": \"step_1\", \"sampler_path\": \"s1\", \"state_path\": null}\n",
            "{\"step\": 5, \"name\": \"final\", \"sampler_path\": \"s5\", \"state_path\": \"t5\"}\n",
        ));
        assert!(
            resume_point(final_only.path(), Some(5))
                .unwrap_err()
                .contains("set save_every")
        );
    }
}
