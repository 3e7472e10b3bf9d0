//! `rl_fork_training`: a new run from a run's saved state at a step of the caller's choosing
//! (weights and optimizer), with changed settings where the state allows them, its steps and
//! checkpoints numbered on from that step, its lineage (parent, step, changes) recorded. The
//! parent may still be going: forking a run whose reward flattened, from a step it saved, is
//! what one wants while it goes on.

use std::collections::BTreeMap;

use rl_process::LineageKind;
use rl_settings::{Caps, RunConfig, RunId, Value, run_dir, trainer};

use crate::answers::Started;
use crate::limits::MAX_FORK_SETTINGS;
use crate::resume::Continuation;
use crate::resume_point::forkable_states;
use crate::runs::started;
use crate::{Tools, ToolsError};

impl Tools {
    /// Starts a run continuing `parent` from its state saved at `step`, with `asked` (field,
    /// value) over the parent's settings (checked as `rl config set` checks them; what the
    /// state fixes, the model and the LoRA rank, refused with the reason) and its own caps
    /// under the operator's. With `allow_changes`, also when the parent's environment file
    /// changed since it ran.
    pub fn fork_training(
        &self,
        parent: &RunId,
        step: u64,
        asked: &[(String, Value)],
        allow_changes: bool,
        caps: &Caps,
    ) -> Result<Started, ToolsError> {
        let refuse = |reason: String| ToolsError::NotForkable {
            run_id: parent.to_string(),
            reason,
        };
        if asked.len() > MAX_FORK_SETTINGS {
            return Err(refuse(format!(
                "{} settings were given; a fork changes at most {MAX_FORK_SETTINGS}",
                asked.len()
            )));
        }
        let status = self.run_status(parent, i64::MAX)?;
        let parent_config = RunConfig::read(&status.run.config_path)?;
        let settings = self
            .service()?
            .check_fork_settings(parent, &parent_config, asked)?;
        // The parent's total, or the one the fork sets: a fork from its last step trains
        // nothing unless it raises it.
        let asked_total = settings
            .iter()
            .find(|setting| {
                setting.section == rl_config::Section::Env
                    && setting.field == trainer::TOTAL_STEPS.name
            })
            .and_then(|setting| match setting.value {
                Value::Int(total) => u64::try_from(total).ok(),
                _ => None,
            });
        let Some(child_total) =
            asked_total.or_else(|| crate::resume_point::total_steps(&parent_config))
        else {
            return Err(refuse(
                "the parent's config's trainer settings cannot be read (see rl_check_status)"
                    .to_owned(),
            ));
        };
        if step >= child_total {
            let service = self.service()?;
            // Raising total_steps is advice only where the operator has not locked it.
            let raise = match service
                .settings()
                .locked_env_value(trainer::TOTAL_STEPS.name)
            {
                Some(locked) => format!(
                    "total_steps is the operator's ({locked}, [locked.env] in the state \
                     directory's config.toml), so no fork or extension trains past it"
                ),
                None => format!(
                    "or raise total_steps too (total_steps={} or more), or give the run more \
                     steps (rl_resume_training with `steps`)",
                    step.saturating_add(1)
                ),
            };
            return Err(refuse(format!(
                "step {step} is not before the fork's last step ({child_total}): it would have \
                 nothing to train; fork from an earlier step, {raise}"
            )));
        }
        let parent_dir = run_dir(self.home(), parent);
        let states = forkable_states(&parent_dir).map_err(&refuse)?;
        let Some((_, state_path)) = states.iter().find(|(saved, _)| *saved == step) else {
            let steps: Vec<String> = states.iter().map(|(saved, _)| saved.to_string()).collect();
            return Err(refuse(if steps.is_empty() {
                format!("it has no saved training state at step {step}, nor at any other step")
            } else {
                format!(
                    "it has no saved training state at step {step}; the steps it can be forked \
                     from are {} (rl checkpoints list {parent} shows them)",
                    steps.join(", ")
                )
            }));
        };
        self.check_continuable(&status.run, &refuse)?;
        let changes: BTreeMap<String, Value> = settings
            .iter()
            .map(|setting| (setting.field.clone(), setting.value.clone()))
            .collect();
        let child = self.start_continuation(&Continuation {
            parent,
            step,
            state_path,
            settings: &settings,
            total_steps: None,
            kind: LineageKind::Fork,
            changes,
            allow_changes,
            caps,
        })?;
        let changed = if settings.is_empty() {
            "with its settings unchanged".to_owned()
        } else {
            let spelled: Vec<String> = settings
                .iter()
                .map(rl_config::RunSetting::spelled)
                .collect();
            format!("with {}", spelled.join(", "))
        };
        let message = format!(
            "Run {} forks run {parent} at its step {step} from {state_path}, {changed}; its \
             steps continue from {}. Its trainer checks that the state loaded as it was saved \
             before it trains. Follow it with rl_check_status(run_id).",
            child.run.id,
            step + 1
        );
        Ok(started(&child, message))
    }
}
