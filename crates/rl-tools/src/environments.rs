//! Discovering environments, selecting one, reading and editing its configuration.

use std::path::PathBuf;

use rl_config::{CurrentField, DefaultValue, FieldType, ValueOrigin};
use rl_discovery::{DuplicateName, Environment, FileWarning, Scan, SkippedFile};
use rl_settings::Value;
use serde::Serialize;

use crate::{Tools, ToolsError};

/// `rl_list_environments`.
#[derive(Debug, Clone, Serialize)]
pub struct EnvironmentList {
    pub environments: Vec<EnvironmentEntry>,
    pub count: usize,
    pub tips: Vec<String>,
    /// The environments folder scanned.
    pub root: PathBuf,
    /// Names shared by several environments: select those by key.
    pub duplicate_names: Vec<DuplicateName>,
    /// Python files that could not be read, with why.
    pub skipped: Vec<SkippedFile>,
    /// Files that break the environments beside them (a `json.py` shadowing the standard
    /// library), or hold classes too deep to follow, with why.
    pub warnings: Vec<FileWarning>,
    pub files_scanned: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct EnvironmentEntry {
    /// What to pass to `rl_select_environment`: the name where it is unique, else the key.
    pub name: String,
    pub class_name: String,
    /// Absolute path of the environment's file.
    pub file_path: PathBuf,
    pub description: String,
    pub key: String,
    pub line: u32,
    pub config_class: String,
    /// The file starts the environment with `cli()`, so it can be served and tested.
    pub runnable: bool,
}

/// `rl_select_environment`.
#[derive(Debug, Clone, Serialize)]
pub struct Selected {
    pub message: String,
    pub environment: String,
    pub file_path: PathBuf,
    pub key: String,
    pub class_name: String,
    pub config_class: String,
    pub field_count: usize,
    pub locked_fields: Vec<String>,
    pub wandb_name: String,
    pub notes: Vec<String>,
}

/// `rl_get_current_config`.
#[derive(Debug, Clone, Serialize)]
pub struct ConfigView {
    pub environment: String,
    pub key: String,
    pub config_class: String,
    pub wandb_name: String,
    pub wandb_project: String,
    pub configurable_fields: Vec<FieldView>,
    pub locked_fields: Vec<FieldView>,
    pub notes: Vec<String>,
    pub tip: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct FieldView {
    pub name: String,
    /// The annotation as written (`int`, `Optional[str]`, `Literal['a', 'b']`).
    #[serde(rename = "type")]
    pub type_text: String,
    /// The environment's default where it sets one, else the config class's; `null` when
    /// only Python can compute it (see `default_expression`).
    pub default: Option<Value>,
    pub description: String,
    pub current_value: Option<Value>,
    /// Where the current value comes from.
    pub origin: ValueOrigin,
    /// Values the field accepts, when it is a `Literal` or an enum.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allowed_values: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_expression: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub locked_value: Option<Value>,
    /// Full detail: declared type, constraints, declaring class.
    pub spec: rl_config::FieldSpec,
}

/// `rl_edit_config`.
#[derive(Debug, Clone, Serialize)]
pub struct Edited {
    pub message: String,
    pub field: String,
    pub value: Value,
    pub previous: Option<Value>,
    /// The input as given, when it was converted (`"16"` read as `16`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coerced_from: Option<Value>,
    /// `false` when the field's type is not known statically and the value is not checked.
    pub checked: bool,
    /// Every field a run would now use, with its value.
    pub config: std::collections::BTreeMap<String, Option<Value>>,
}

pub(crate) const LIST_TIPS: [&str; 4] = [
    "Select one with rl_select_environment(name), then read its settings with rl_get_current_config",
    "Read file_path to see how an environment loads data, builds prompts and scores answers",
    "Before a long training run, try the environment with rl_test_inference",
    "A new environment starts from rl's template: rl envs new <name>",
];

impl Tools {
    pub fn scan(&self, recursive: bool) -> Result<Scan, ToolsError> {
        Ok(rl_config::scan_environments(self.settings()?, recursive)?)
    }

    pub fn list_environments(&self, recursive: bool) -> Result<EnvironmentList, ToolsError> {
        let scan = self.scan(recursive)?;
        let environments: Vec<EnvironmentEntry> = scan
            .environments
            .iter()
            .map(|env| EnvironmentEntry {
                name: selectable_name(&scan, env),
                class_name: env.class_name.clone(),
                file_path: env.path_in(&scan.root),
                description: env.description.clone(),
                key: env.key.clone(),
                line: env.line,
                config_class: env.config_class.clone(),
                runnable: env.runnable,
            })
            .collect();
        Ok(EnvironmentList {
            count: environments.len(),
            environments,
            tips: LIST_TIPS.iter().map(|tip| (*tip).to_owned()).collect(),
            root: scan.root.clone(),
            duplicate_names: scan.duplicate_names.clone(),
            skipped: scan.skipped.clone(),
            warnings: scan.warnings.clone(),
            files_scanned: scan.files_scanned,
        })
    }

    pub fn select_environment(&self, name: &str) -> Result<Selected, ToolsError> {
        let report = self.service()?.select(name)?;
        let selected = &report.environment;
        Ok(Selected {
            message: format!("Selected environment: {}", selected.name),
            environment: selected.name.clone(),
            file_path: selected.environments_dir.join(&selected.file),
            key: selected.key.clone(),
            class_name: selected.class_name.clone(),
            config_class: report.config_class,
            field_count: report.field_count,
            locked_fields: report.locked_fields,
            wandb_name: report.wandb_name,
            notes: report.notes,
        })
    }

    pub fn current_config(&self) -> Result<ConfigView, ToolsError> {
        let current = self.service()?.current()?;
        let (locked, configurable): (Vec<&CurrentField>, Vec<&CurrentField>) =
            current.fields.iter().partition(|field| field.locked);
        Ok(ConfigView {
            environment: current.environment.name.clone(),
            key: current.environment.key.clone(),
            config_class: current.config_class,
            wandb_name: current.wandb_name,
            wandb_project: current.wandb_project,
            configurable_fields: configurable.into_iter().map(field_view).collect(),
            locked_fields: locked.into_iter().map(field_view).collect(),
            notes: current.notes,
            tip: "Change a configurable field with rl_edit_config(field, value); values are \
                  checked against the field's type, so \"16\" becomes 16 for an integer field"
                .to_owned(),
        })
    }

    pub fn edit_config(&self, field: &str, value: &Value) -> Result<Edited, ToolsError> {
        let (report, current) = self.service()?.edit_and_show(field, value)?;
        let config = current
            .fields
            .iter()
            .map(|f| (f.spec.name.clone(), f.current.value().cloned()))
            .collect();
        Ok(Edited {
            message: format!("Updated {} = {}", report.field, report.value),
            field: report.field,
            value: report.value,
            previous: report.previous.value().cloned(),
            coerced_from: report.coerced_from,
            checked: report.checked,
            config,
        })
    }
}

fn field_view(field: &CurrentField) -> FieldView {
    let spec = &field.spec;
    let default = spec.effective_default();
    let allowed_values = match &spec.field_type {
        FieldType::Literal { values } => values.clone(),
        FieldType::Enum { members, .. } => members.iter().map(|m| m.value.clone()).collect(),
        _ => Vec::new(),
    };
    FieldView {
        name: spec.name.clone(),
        type_text: spec.type_text.clone(),
        default: default.value().cloned(),
        description: spec.description.clone().unwrap_or_default(),
        current_value: field.current.value().cloned(),
        origin: field.origin,
        allowed_values,
        default_expression: match default {
            DefaultValue::Computed { expression } => Some(expression.clone()),
            _ => None,
        },
        locked_value: field
            .locked
            .then(|| field.current.value().cloned())
            .flatten(),
        spec: spec.clone(),
    }
}

/// The name where it is unique, the key where it is not, so every entry can be selected by
/// what it shows.
pub fn selectable_name(scan: &Scan, env: &Environment) -> String {
    if scan.duplicate_names.iter().any(|d| d.name == env.name) {
        env.key.clone()
    } else {
        env.name.clone()
    }
}
