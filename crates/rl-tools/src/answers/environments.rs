//! The answers about environments and their configuration.

use std::path::{Path, PathBuf};

use rl_config::ValueOrigin;
use rl_discovery::{ConfigClassSource, Environment, EnvironmentKind, NameSource};
use rl_settings::Value;
use serde::{Serialize, Serializer};

use super::algorithm::LossTable;
use super::fields::{FieldSpecView, origin_name};
use super::scan::{DuplicateNameView, FileWarningView, SkippedFileView};
use crate::FirstRunAdvice;

/// `rl_list_environments`.
#[derive(Debug, Clone, Serialize)]
pub struct EnvironmentList {
    pub environments: Vec<EnvironmentEntry>,
    pub count: usize,
    /// Environments in sub-folders that a list of the top folder leaves out (`recursive` lists
    /// them; every lookup finds them by name).
    #[serde(skip_serializing_if = "is_zero")]
    pub unlisted_in_subfolders: usize,
    pub tips: Vec<String>,
    /// The environments folder scanned.
    pub root: PathBuf,
    /// Names shared by several environments: select those by key.
    pub duplicate_names: Vec<DuplicateNameView>,
    /// Python files that could not be read, with why.
    pub skipped: Vec<SkippedFileView>,
    /// Files that break the environments beside them (a `json.py` shadowing the standard
    /// library), or hold classes too deep to follow, with why.
    pub warnings: Vec<FileWarningView>,
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
    /// The file starts the environment with `cli()`, so it can be served and tested (a
    /// verifiers environment always can: rl's runner starts it).
    pub runnable: bool,
    /// `atropos`, `verifiers-v1` or `verifiers-v0`: the API it is written against.
    pub kind: EnvironmentKind,
    /// The Python it runs in, where there is one yet: an Atropos environment's is the run's, a
    /// verifiers one needs its own (or the operator's `[verifiers]` one). Whether that Python
    /// imports everything it needs is asked when it is selected (rl_health_check) and before a
    /// run starts, not here.
    pub python: Option<PathBuf>,
    /// What to do before it can run, when it has no Python yet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub install_first: Option<String>,
}

/// One environment in full, as `rl envs show --json` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EnvironmentDetail {
    /// The `name` class attribute, else the file stem (`name_source` says which).
    pub name: String,
    pub name_source: NameSourceView,
    /// Unique in the scan: `name@relative/path.py`.
    pub key: String,
    pub class_name: String,
    /// Path relative to the environments folder.
    pub file: String,
    pub line: u32,
    pub description: String,
    pub has_docstring: bool,
    pub config_class: String,
    pub config_class_source: ConfigClassSourceView,
    pub has_config_init: bool,
    pub runnable: bool,
    /// Ancestors up to the atroposlib base reached.
    pub bases: Vec<String>,
    /// `atropos`, `verifiers-v1` or `verifiers-v0`.
    pub kind: EnvironmentKind,
    /// The verifiers package holding it (`pyproject.toml`'s folder, name and its verifiers
    /// requirement).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub package: Option<PackageView>,
    /// For people: the file's absolute path.
    #[serde(skip)]
    pub file_path: PathBuf,
    /// As in [`Selected`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dependencies: Option<DependenciesView>,
}

impl EnvironmentDetail {
    /// `env` of the scan of `root`.
    pub(crate) fn new(env: &Environment, root: &Path) -> Self {
        Self {
            name: env.name.clone(),
            name_source: match env.name_source {
                NameSource::Attribute => NameSourceView::Attribute,
                NameSource::FileStem => NameSourceView::FileStem,
            },
            key: env.key.clone(),
            class_name: env.class_name.clone(),
            file: env.file.clone(),
            line: env.line,
            description: env.description.clone(),
            has_docstring: env.has_docstring,
            config_class: env.config_class.clone(),
            config_class_source: match &env.config_class_source {
                ConfigClassSource::EnvConfigCls => ConfigClassSourceView::EnvConfigCls,
                ConfigClassSource::ConfigInitAnnotation => {
                    ConfigClassSourceView::ConfigInitAnnotation
                }
                ConfigClassSource::Inherited { from } => {
                    ConfigClassSourceView::Inherited { from: from.clone() }
                }
                ConfigClassSource::TasksetArgument => ConfigClassSourceView::TasksetArgument,
                ConfigClassSource::Default => ConfigClassSourceView::Default,
            },
            has_config_init: env.has_config_init,
            runnable: env.runnable,
            bases: env.bases.clone(),
            kind: env.kind,
            package: env.project.as_ref().map(|project| PackageView {
                folder: root.join(&project.folder),
                name: project.name.clone(),
                verifiers: project.verifiers.clone(),
            }),
            file_path: env.path_in(root),
            dependencies: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NameSourceView {
    Attribute,
    FileStem,
}

/// How the config class was found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ConfigClassSourceView {
    /// `env_config_cls = X` in the class body.
    EnvConfigCls,
    /// `config_init`'s return annotation.
    ConfigInitAnnotation,
    Inherited {
        from: String,
    },
    /// The second argument of `vf.Taskset[Task, Config]`.
    TasksetArgument,
    /// atroposlib's `BaseEnvConfig` (a taskset's: verifiers' `TasksetConfig`; a v0
    /// environment's: `load_environment`).
    Default,
}

/// A verifiers environment's package.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PackageView {
    pub folder: PathBuf,
    pub name: String,
    /// Its verifiers requirement as written (`verifiers>=0.1.9`).
    pub verifiers: String,
}

/// `rl_select_environment`.
#[derive(Debug, Clone, Serialize)]
pub struct Selected {
    pub message: String,
    pub environment: String,
    pub file_path: PathBuf,
    pub key: String,
    pub class_name: String,
    /// `atropos`, `verifiers-v1` or `verifiers-v0`: the API it is written against.
    pub kind: EnvironmentKind,
    pub config_class: String,
    pub field_count: usize,
    pub locked_fields: Vec<String>,
    pub wandb_name: String,
    pub notes: Vec<String>,
    /// What the environment needs beyond atroposlib, when the run's Python lacks any of it or
    /// it has a `requirements.txt`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dependencies: Option<DependenciesView>,
    /// On the local engine: the settings that would make a first run take hours or skip every
    /// group, with the values to try.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub first_run_advice: Vec<FirstRunAdvice>,
}

/// An environment's own dependencies against the run's Python (issue 32).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DependenciesView {
    /// Top-level modules its source imports (outside its tree, not optional) that the run's
    /// Python cannot find.
    pub missing_imports: Vec<String>,
    /// Modules it imports only where it goes on without them (a `try` whose handler warns or
    /// falls back) that the run's Python cannot find: a run may start, with less.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing_optional_imports: Vec<String>,
    /// Its `requirements.txt`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requirements: Option<PathBuf>,
    /// The file's lines the Python does not hold: `name==version (found …)`.
    pub unmet_requirements: Vec<String>,
    /// The Python the environment runs in (a verifiers environment's own).
    pub python: PathBuf,
    /// Why that Python cannot run it at all (a verifiers environment without its own).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub python_problem: Option<String>,
    /// The command that installs them; absent when nothing is missing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// `rl_get_current_config`.
#[derive(Debug, Clone, Serialize)]
pub struct ConfigView {
    pub environment: String,
    pub key: String,
    /// `atropos`, `verifiers-v1` or `verifiers-v0`: the API the selected environment is
    /// written against.
    pub kind: EnvironmentKind,
    pub config_class: String,
    pub wandb_name: String,
    pub wandb_project: String,
    pub configurable_fields: Vec<FieldView>,
    pub locked_fields: Vec<FieldView>,
    pub notes: Vec<String>,
    pub tip: String,
    /// On the local engine: the settings that would make a first run take hours or skip every
    /// group, with the values to try.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub first_run_advice: Vec<FirstRunAdvice>,
    /// The losses the configured engine takes (the `loss` key's choices).
    pub losses: LossTable,
    /// The trainer's side of the next run: every key a run chooses, then the operator's other
    /// locked trainer keys, each with its value and where it comes from.
    pub trainer_settings: Vec<TrainerSettingView>,
}

/// One trainer key as the next run gets it.
#[derive(Debug, Clone, Serialize)]
pub struct TrainerSettingView {
    pub name: String,
    /// `null`: absent from the run's config, the engine's default applies.
    pub current_value: Value,
    /// `locked`, `edited`, `trainer_default` or `engine_default`.
    pub origin: &'static str,
    /// Whether rl_edit_config may set it (a per-run key the operator has not locked).
    pub editable: bool,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub description: &'static str,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub allowed_values: &'static [&'static str],
}

impl From<rl_config::TrainerSetting> for TrainerSettingView {
    fn from(setting: rl_config::TrainerSetting) -> Self {
        Self {
            editable: setting.per_run.is_some()
                && setting.origin != rl_config::TrainerOrigin::Locked,
            description: setting.per_run.map_or("", |key| key.doc),
            allowed_values: setting.per_run.map_or(&[], |key| key.choices),
            origin: setting.origin.name(),
            current_value: setting.value,
            name: setting.name,
        }
    }
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
    /// Where the current value comes from: `class_default`, `environment_default`,
    /// `selection`, `edited` or `locked`.
    #[serde(serialize_with = "origin")]
    pub origin: ValueOrigin,
    /// Values the field accepts, when it is a `Literal` or an enum.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allowed_values: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_expression: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub locked_value: Option<Value>,
    /// Full detail: declared type, constraints, declaring class.
    pub spec: FieldSpecView,
}

#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's `serialize_with` hands the field by reference"
)]
fn origin<S: Serializer>(origin: &ValueOrigin, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(origin_name(*origin))
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

impl EnvironmentList {
    /// What the list says of the environments its folder's sub-folders add, if any.
    pub fn unlisted_note(&self) -> Option<String> {
        (self.unlisted_in_subfolders > 0).then(|| unlisted_note(self.unlisted_in_subfolders))
    }
}

/// `unlisted` environments in sub-folders that a list of the top folder leaves out, in words:
/// how to list them, and that they are found anyway.
pub(crate) fn unlisted_note(unlisted: usize) -> String {
    format!(
        "{unlisted} more environment{} in sub-folders: rl_list_environments \
         {{\"recursive\": true}} lists them; every command finds them by name",
        if unlisted == 1 { "" } else { "s" }
    )
}

#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if passes a reference"
)]
fn is_zero(count: &usize) -> bool {
    *count == 0
}

/// `rl_install_environment`: what an environment now has in the Python it runs in.
#[derive(Debug, Clone, Serialize)]
pub struct EnvironmentInstalled {
    pub environment: String,
    /// The Python it runs in: the run's, or a verifiers environment's own.
    pub python: PathBuf,
    /// `name==version` of each package installed now.
    pub installed: Vec<String>,
    /// Everything was there already: nothing installed, nothing written.
    pub nothing_to_do: bool,
    /// The file recording what was installed for it.
    pub record: Option<PathBuf>,
    /// `uv` or `venv + pip`, when anything was installed.
    pub installer: Option<&'static str>,
    pub message: String,
}
