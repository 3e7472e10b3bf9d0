//! `rl_resume_training`: a stopped, failed, lost or capped run continues from its last saved state
//! (weights and optimizer) as a new run that records its parent, with the parent's config, in
//! its WandB group, its steps and checkpoints numbered on from the parent's.

use rl_process::{Lineage, LineageKind, RunState};
use rl_settings::{Caps, HeldOut, RunConfig, RunId, run_dir};

use crate::answers::Started;
use crate::resume_point::{resume_point, total_steps};
use crate::runs::{started, written_config};
use crate::{Tools, ToolsError};

impl Tools {
    /// Starts a run that continues `parent`, with the operator's caps only. With
    /// `allow_changes`, also when the parent's environment file has changed since it ran.
    pub fn resume_training(
        &self,
        parent: &RunId,
        allow_changes: bool,
    ) -> Result<Started, ToolsError> {
        self.resume_training_with(parent, allow_changes, &Caps::default())
    }

    /// As `resume_training`, with the continuation's own caps `asked` under the operator's.
    /// The parent's caps are not inherited: a capped parent stopped at its cap, and carrying
    /// it over would cap the child at once; the child's prices are the operator's now.
    pub fn resume_training_with(
        &self,
        parent: &RunId,
        allow_changes: bool,
        asked: &Caps,
    ) -> Result<Started, ToolsError> {
        let status = self.run_status(parent, i64::MAX)?;
        let refuse = |reason: String| ToolsError::NotResumable {
            run_id: parent.to_string(),
            reason,
        };
        match status.run.state {
            RunState::Stopped | RunState::Failed | RunState::Lost | RunState::Capped => {}
            RunState::Completed => {
                return Err(refuse(
                    "it completed all its steps; start a new run to train further".to_owned(),
                ));
            }
            RunState::Stopping => {
                return Err(refuse(
                    "it is stopping; once it has stopped (rl_check_status(run_id) says so), \
                     resume it"
                        .to_owned(),
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
        let service = self.service()?;
        let caps = service.settings().caps.for_run(asked)?;
        // The environment it ran must still import, as for a new run.
        if let Ok(ran) = rl_config::run_selection(self.home(), parent) {
            self.importable(&ran.environment)?;
        }
        // Where the parent trained, from its launch record (a missing engine folder is refused
        // there): a child that trains elsewhere would send its key to the parent's old address
        // or load states that are not there.
        let local_now = service.settings().engine.is_local();
        match (self.trained_on(&status.run)?, local_now) {
            (crate::hosted::TrainedOn::LocalEngine, false) => {
                return Err(refuse(
                    "it trained on the local engine, and config.toml now trains at a Tinker \
                     service: resume it where it trained ([engine] kind = \"local\")"
                        .to_owned(),
                ));
            }
            (crate::hosted::TrainedOn::Service(_), true) => {
                return Err(refuse(
                    "it trained at a Tinker service, and config.toml now trains on the local \
                     engine, which has none of its states: resume it where it trained"
                        .to_owned(),
                ));
            }
            _ => {}
        }
        let total_steps = total_steps(&RunConfig::read(&status.run.config_path)?);
        let point = resume_point(&parent_dir, total_steps).map_err(refuse)?;
        let home = self.home().to_owned();
        // The parent's slice of held-out items, whatever [held_out] says now: one run's steps
        // never train on items another of its steps kept out.
        let mut settings = service.settings().clone();
        settings.held_out = self.held_out_of(parent).unwrap_or(HeldOut {
            fraction: 0.0,
            ..settings.held_out
        });
        let status = self.launch_with(&settings, |run_id, endpoints| {
            let written = service.write_resumed_config(
                parent,
                run_id,
                endpoints,
                &rl_config::ResumeFrom {
                    state_path: &point.state_path,
                    step: point.step,
                    settings: &[],
                    total_steps: None,
                },
                allow_changes,
                &caps,
            )?;
            rl_process::carry_over(&parent_dir, &run_dir(&home, run_id), point.step)?;
            let lineage = Lineage {
                parent: parent.clone(),
                step: point.step,
                kind: LineageKind::Resume,
                changes: std::collections::BTreeMap::new(),
            };
            Ok(written_config(
                written.path,
                &written.environment,
                Some(lineage),
            ))
        })?;
        let passed_over = if point.missing.is_empty() {
            String::new()
        } else {
            let steps: Vec<String> = point.missing.iter().map(u64::to_string).collect();
            format!(
                " The saved state of step {} is missing from the run's engine folder: it \
                 continues from the last state that is there.",
                steps.join(", ")
            )
        };
        let message = format!(
            "Run {} continues run {parent} after its step {} from {}.{passed_over} Its trainer \
             checks that the state loaded as it was saved before it trains. Follow it with \
             rl_check_status(run_id).",
            status.run.id, point.step, point.state_path
        );
        Ok(started(&status, message))
    }
}
