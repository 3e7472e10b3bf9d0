//! The trainer's side of the next run's configuration, as an agent reads it back: every trainer
//! key a run chooses (`rl_settings::trainer::PER_RUN`) with the value the next run of the
//! selection gets and where it comes from, and the other `[locked.tinker]` keys. What
//! `new_run` writes: the operator's lock, else the edit, else rl's default; a lock wins over an
//! edit made before it.

use rl_settings::{Value, trainer};

use crate::ConfigError;
use crate::service::ConfigService;
use crate::store::Section;

/// Where a trainer key's value for the next run comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrainerOrigin {
    /// The operator wrote it in `[locked.tinker]`: no edit changes it.
    Locked,
    /// `rl_edit_config` / `rl config set` on the selection.
    Edited,
    /// rl's default: the trainer contract's, or one rl writes into every run's config.
    Default,
    /// Absent from the run's config: the engine's own default applies.
    Engine,
}

impl TrainerOrigin {
    pub const fn name(self) -> &'static str {
        match self {
            Self::Locked => "locked",
            Self::Edited => "edited",
            Self::Default => "trainer_default",
            Self::Engine => "engine_default",
        }
    }
}

/// One trainer key as the next run gets it.
#[derive(Debug, Clone)]
pub struct TrainerSetting {
    pub name: String,
    pub value: Value,
    pub origin: TrainerOrigin,
    /// A key a run may choose (an edit, a sweep, a fork may set it when not locked).
    pub per_run: Option<&'static trainer::Key>,
}

impl ConfigService {
    /// Every per-run trainer key, then the operator's other locked trainer keys, as the next
    /// run of the selection gets them.
    pub fn next_run_trainer(&self) -> Result<Vec<TrainerSetting>, ConfigError> {
        let selection = self.selection()?;
        let locked = &self.settings().locked.tinker;
        let operator_locks = &self.settings().operator_tinker_locks;
        let mut settings: Vec<TrainerSetting> = trainer::PER_RUN
            .iter()
            .map(|entry| {
                let name = entry.key.name;
                let edit = selection
                    .edits
                    .iter()
                    .find(|edit| edit.section == Section::Tinker && edit.field == name);
                let (value, origin) = match (locked.get(name), edit) {
                    (Some(value), _) if operator_locks.contains(name) => {
                        (value.clone(), TrainerOrigin::Locked)
                    }
                    (_, Some(edit)) => (edit.value.clone(), TrainerOrigin::Edited),
                    // rl's own default, written into every run's config.
                    (Some(value), None) => (value.clone(), TrainerOrigin::Default),
                    (None, None) => match entry.key.default_value() {
                        Value::Null => (Value::Null, TrainerOrigin::Engine),
                        value => (value, TrainerOrigin::Default),
                    },
                };
                TrainerSetting {
                    name: name.to_owned(),
                    value,
                    origin,
                    per_run: Some(&entry.key),
                }
            })
            .collect();
        settings.extend(
            locked
                .iter()
                .filter(|(name, _)| trainer::per_run(name).is_none())
                .map(|(name, value)| TrainerSetting {
                    name: name.clone(),
                    value: value.clone(),
                    origin: if operator_locks.contains(name) {
                        TrainerOrigin::Locked
                    } else {
                        TrainerOrigin::Default
                    },
                    per_run: None,
                }),
        );
        Ok(settings)
    }
}
