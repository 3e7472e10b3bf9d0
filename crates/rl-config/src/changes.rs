//! Settings one run is given on top of what it would otherwise run with — a sweep's point, a
//! fork's changes: fields of its environment's config and the trainer keys a run chooses
//! (`rl_settings::trainer::PER_RUN`), each checked as an edit is, locks refused, before
//! anything starts.

use rl_settings::{RunConfig, Value, trainer};

use crate::ConfigError;
use crate::run_setting::{RunSetting, apply_env, with_settings};
use crate::schema::DefaultValue;
use crate::service::ConfigService;
use crate::store::{Section, Selection};

/// Who the settings are for: a new run of the selection, or a run continuing another's saved
/// state (where what the state fixes cannot change).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Purpose {
    NewRun,
    Fork,
}

impl ConfigService {
    /// `asked` (field, value) checked as settings of a new run of `selection` (the one
    /// selected now, or a sweep's).
    pub fn check_run_settings(
        &self,
        selection: &Selection,
        asked: &[(String, Value)],
    ) -> Result<Vec<RunSetting>, ConfigError> {
        let settings = self.checked(selection, asked, Purpose::NewRun)?;
        let after = with_settings(selection, &settings);
        let (_, schema) = self.selected_schema(&after)?;
        let current = self.current_of(after, schema);
        crate::rules::check_together(|name| current.value_of(name))?;
        Ok(settings)
    }

    /// `asked` checked as the changes of a fork of run `parent`, whose config is `parent_config`:
    /// what the saved state fixes (the model, the LoRA rank) is refused with the reason.
    pub fn check_fork_settings(
        &self,
        parent: &rl_settings::RunId,
        parent_config: &RunConfig,
        asked: &[(String, Value)],
    ) -> Result<Vec<RunSetting>, ConfigError> {
        let ran = crate::new_run::run_selection(self.home(), parent)?;
        let settings = self.checked(&ran, asked, Purpose::Fork)?;
        let mut env = parent_config.env.clone();
        apply_env(&mut env, &settings);
        crate::rules::check_together(|name| env.get(name))?;
        Ok(settings)
    }

    /// What a new run of `selection` gets for the per-run trainer key `name`: its edit, else
    /// [`Self::trainer_default`].
    pub(crate) fn trainer_value(&self, selection: &Selection, name: &str) -> DefaultValue {
        selection
            .edits
            .iter()
            .find(|e| e.section == Section::Tinker && e.field == name)
            .map_or_else(
                || self.trainer_default(name),
                |edit| DefaultValue::Value {
                    value: edit.value.clone(),
                },
            )
    }

    /// What a run gets for the per-run trainer key `name` without an edit of its own: the
    /// operator's value, else the contract's default (absent: the engine's own).
    pub(crate) fn trainer_default(&self, name: &str) -> DefaultValue {
        if let Some(value) = self.settings().locked.tinker.get(name) {
            return DefaultValue::Value {
                value: value.clone(),
            };
        }
        // Null: the key is absent from the run's config, and the engine uses its own.
        DefaultValue::Value {
            value: rl_settings::trainer::per_run(name)
                .map_or(Value::Null, |entry| entry.key.default_value()),
        }
    }

    fn checked(
        &self,
        selection: &Selection,
        asked: &[(String, Value)],
        purpose: Purpose,
    ) -> Result<Vec<RunSetting>, ConfigError> {
        let (_, schema) = self.selected_schema(selection)?;
        let mut settings: Vec<RunSetting> = Vec::with_capacity(asked.len());
        for (field, value) in asked {
            crate::service::check_name("field name", field, crate::validate::MAX_FIELD_NAME_CHARS)?;
            let bare = field
                .strip_prefix("env.")
                .or_else(|| field.strip_prefix("tinker."))
                .unwrap_or(field);
            if settings.iter().any(|setting| setting.field == bare) {
                return Err(ConfigError::InvalidInput {
                    what: format!("the setting '{bare}'"),
                    reason: "it is given twice".to_owned(),
                });
            }
            if purpose == Purpose::Fork
                && let Some(reason) = fixed_by_state(bare)
            {
                return Err(ConfigError::InvalidInput {
                    what: format!("changing '{bare}' in a fork"),
                    reason: reason.to_owned(),
                });
            }
            let per_run = trainer::per_run(field).filter(|_| !field.starts_with("env."));
            let setting = match (
                schema.field(bare).filter(|_| !field.starts_with("tinker.")),
                per_run,
            ) {
                (Some(spec), _) => {
                    if let Some(locked) = self.settings().locked_env_value(bare) {
                        return Err(ConfigError::LockedField {
                            field: bare.to_owned(),
                            value: locked.clone(),
                            table: crate::LOCKED_ENV,
                        });
                    }
                    RunSetting {
                        section: Section::Env,
                        field: bare.to_owned(),
                        value: crate::validate::check_value(spec, value)?.value,
                    }
                }
                (None, Some(entry)) => {
                    // What the saved state fixes is said first: no operator could allow it.
                    if purpose == Purpose::Fork
                        && let trainer::OnFork::Fixed(reason) = entry.on_fork
                    {
                        return Err(ConfigError::InvalidInput {
                            what: format!("changing '{bare}' in a fork"),
                            reason: reason.to_owned(),
                        });
                    }
                    if let Some(locked) = self.settings().operator_locked_trainer_value(bare) {
                        return Err(ConfigError::LockedField {
                            field: bare.to_owned(),
                            value: locked.clone(),
                            table: crate::LOCKED_TINKER,
                        });
                    }
                    RunSetting {
                        section: Section::Tinker,
                        field: bare.to_owned(),
                        value: trainer::coerce(&entry.key, value)?,
                    }
                }
                (None, None) => {
                    let per_run: Vec<&str> = trainer::PER_RUN
                        .iter()
                        .map(|entry| entry.key.name)
                        .collect();
                    let closest = crate::service::closest_fields(bare, &schema, &per_run);
                    return Err(ConfigError::UnknownField {
                        field: bare.to_owned(),
                        closest,
                    });
                }
            };
            settings.push(setting);
        }
        Ok(settings)
    }
}

/// What a saved state fixes, and why: a fork continues the parent's weights.
fn fixed_by_state(field: &str) -> Option<&'static str> {
    (field == trainer::BASE_MODEL.name || field == trainer::TOKENIZER_NAME.name).then_some(
        "a fork continues the parent's weights, which are of the parent's base model (and its \
         tokenizer); start a new run to train another model",
    )
}
