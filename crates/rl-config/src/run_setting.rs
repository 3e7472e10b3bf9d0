//! A setting one run gets on top of what it would otherwise run with (a sweep's point, a
//! fork's change), checked already (`changes.rs`), and how a run's selection or config takes it.

use std::collections::BTreeMap;

use rl_settings::{RunConfig, Value};
use serde::{Deserialize, Serialize};

use crate::store::{Edit, Section, Selection};

/// One setting of one run, checked: its section, the field's bare name, the value as the run
/// holds it (a string read as the field's type).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSetting {
    pub section: Section,
    pub field: String,
    pub value: Value,
}

impl RunSetting {
    /// `field=value` as a person writes it back.
    pub fn spelled(&self) -> String {
        format!("{}={}", self.field, self.value)
    }

    fn as_edit(&self) -> Edit {
        Edit {
            field: self.field.clone(),
            section: self.section,
            value: self.value.clone(),
            edited_at: jiff::Timestamp::now().to_string(),
        }
    }
}

/// The selection with `settings` as its edits (replacing edits of the same fields).
pub(crate) fn with_settings(selection: &Selection, settings: &[RunSetting]) -> Selection {
    let mut selection = selection.clone();
    for setting in settings {
        let edit = setting.as_edit();
        match selection
            .edits
            .iter_mut()
            .find(|e| e.field == edit.field && e.section == edit.section)
        {
            Some(existing) => *existing = edit,
            None => selection.edits.push(edit),
        }
    }
    selection
}

pub(crate) fn apply_env(env: &mut BTreeMap<String, Value>, settings: &[RunSetting]) {
    for setting in settings.iter().filter(|s| s.section == Section::Env) {
        env.insert(setting.field.clone(), setting.value.clone());
    }
}

/// Writes `settings` into a run's config (a fork's, over its parent's).
pub(crate) fn apply(config: &mut RunConfig, settings: &[RunSetting]) {
    apply_env(&mut config.env, settings);
    for setting in settings.iter().filter(|s| s.section == Section::Tinker) {
        config
            .tinker
            .insert(setting.field.clone(), setting.value.clone());
    }
}
