//! What the human config commands print with `--json` beyond `rl_get_current_config`: the
//! edits since selection (`rl config diff`) and where Python's reading of the config class
//! disagrees with the static one (`rl config show --introspect python`).

use rl_config::{DiffEntry, Disagreement, Section};
use rl_settings::Value;
use serde::Serialize;

use super::environments::ConfigView;
use super::fields::DefaultView;

/// One edit since the environment was selected.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EditEntry {
    pub field: String,
    /// The run config's section the edit goes to: `env` or `tinker`.
    pub section: &'static str,
    /// What the field would be without the edit.
    pub default: DefaultView,
    pub value: Value,
    /// RFC 3339.
    pub edited_at: String,
    /// For people: the default in words.
    #[serde(skip)]
    pub default_text: String,
}

impl From<&DiffEntry> for EditEntry {
    fn from(entry: &DiffEntry) -> Self {
        Self {
            field: entry.field.clone(),
            section: section_name(entry.section),
            default: DefaultView::from(&entry.default),
            value: entry.value.clone(),
            edited_at: entry.edited_at.clone(),
            default_text: entry.default.to_string(),
        }
    }
}

fn section_name(section: Section) -> &'static str {
    match section {
        Section::Env => "env",
        Section::Tinker => "tinker",
    }
}

/// The current config with what Python's import of the class reads differently.
#[derive(Debug, Clone, Serialize)]
pub struct IntrospectedConfig {
    #[serde(flatten)]
    pub config: ConfigView,
    pub introspection_disagreements: Vec<DisagreementView>,
}

/// A field the static reading and Python see differently (`missing` where one does not see
/// it at all).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DisagreementView {
    pub field: String,
    pub static_reading: String,
    pub python: String,
}

impl From<&Disagreement> for DisagreementView {
    fn from(disagreement: &Disagreement) -> Self {
        Self {
            field: disagreement.field.clone(),
            static_reading: disagreement.static_reading.clone(),
            python: disagreement.python.clone(),
        }
    }
}
