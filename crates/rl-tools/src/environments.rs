//! Discovering environments, selecting one, reading and editing its configuration.

use rl_config::{CurrentField, DefaultValue, FieldType, SelectedEnvironment};
use rl_discovery::{Environment, Scan};
use rl_settings::Value;

use crate::answers::{
    ConfigView, DisagreementView, DuplicateNameView, EditEntry, Edited, EnvironmentDetail,
    EnvironmentEntry, EnvironmentList, FieldSpecView, FieldView, FileWarningView,
    IntrospectedConfig, LossTable, Selected, SkippedFileView, TrainerSettingView,
};
use crate::env_dependencies::{self, Dependencies};
use crate::{Tools, ToolsError};
use std::path::Path;

pub(crate) const LIST_TIPS: [&str; 4] = [
    "Select one with rl_select_environment(name), then read its settings with rl_get_current_config",
    "Read file_path to see how an environment loads data, builds prompts and scores answers",
    "Before a long training run, try the environment with rl_test_inference",
    "A new environment starts from rl's template: rl envs new <name>",
];

impl Tools {
    pub(crate) fn scan(&self, recursive: bool) -> Result<Scan, ToolsError> {
        Ok(rl_config::scan_environments(&*self.settings()?, recursive)?)
    }

    /// One environment in full, by name or key (`rl envs show`).
    pub fn environment(
        &self,
        name: &str,
        recursive: bool,
    ) -> Result<EnvironmentDetail, ToolsError> {
        let found = rl_config::find_environment(self.home(), &*self.settings()?, name, recursive)?;
        let (scan, env) = (&found.scan, found.environment());
        let mut detail = EnvironmentDetail::new(env, &scan.root);
        detail.dependencies = self
            .dependencies(&detail.file_path, &selectable_name(scan, env), env.kind)
            .and_then(|deps| deps.view());
        Ok(detail)
    }

    /// The environment in `file` against the Python it runs in: `None` when there is nothing
    /// to judge by (see [`env_dependencies::examine`]).
    pub fn dependencies(
        &self,
        file: &Path,
        name: &str,
        kind: rl_settings::EnvironmentKind,
    ) -> Option<Dependencies> {
        env_dependencies::examine(self.home(), &*self.settings().ok()?, file, name, kind)
    }

    /// The Python `selected` runs in (a verifiers environment's own), or the refusal naming
    /// `rl setup --env NAME`.
    pub(crate) fn environment_python(
        &self,
        selected: &SelectedEnvironment,
    ) -> Result<std::path::PathBuf, ToolsError> {
        rl_settings::environment_python(
            self.home(),
            &*self.settings()?,
            selected.kind,
            &selected.name,
            &selected.environments_dir.join(&selected.file),
        )
        .ok_or_else(|| ToolsError::MissingDependencies {
            environment: selected.name.clone(),
            missing: format!(
                "it is a {} environment and has no Python of its own yet",
                selected.kind
            ),
            fix: crate::env_dependencies::install_call(&selected.name),
        })
    }

    /// The Python a verifiers environment runs in (`None`: an Atropos environment runs in the
    /// run's), or the refusal naming `rl setup --env NAME`.
    pub(crate) fn own_python(
        &self,
        selected: &SelectedEnvironment,
    ) -> Result<Option<std::path::PathBuf>, ToolsError> {
        if !selected.kind.has_own_python() {
            return Ok(None);
        }
        self.environment_python(selected).map(Some)
    }

    /// Refuses an environment whose imports the Python it runs in cannot find (a run's start,
    /// a resume, a pre-flight), naming them and the fix.
    pub(crate) fn importable(&self, selected: &SelectedEnvironment) -> Result<(), ToolsError> {
        match self.dependencies(
            &selected.environments_dir.join(&selected.file),
            &selected.name,
            selected.kind,
        ) {
            Some(deps) if !deps.ready() => Err(ToolsError::MissingDependencies {
                environment: selected.name.clone(),
                missing: deps.describe(),
                fix: deps.fix(),
            }),
            _ => Ok(()),
        }
    }

    pub fn list_environments(&self, recursive: bool) -> Result<EnvironmentList, ToolsError> {
        let scan = self.scan(recursive)?;
        let unlisted = rl_config::unlisted_in_subfolders(&*self.settings()?, &scan).unwrap_or(0);
        // The folder's environments, then those of the packages installed from the registry.
        let installed = rl_config::installed_scans(self.home());
        let settings = self.settings()?;
        let environments: Vec<EnvironmentEntry> = std::iter::once(&scan)
            .chain(&installed)
            .flat_map(|scan| scan.environments.iter().map(move |env| (scan, env)))
            .map(|(scan, env)| {
                let name = selectable_name(scan, env);
                let python = rl_settings::environment_python(
                    self.home(),
                    &settings,
                    env.kind,
                    &name,
                    &env.path_in(&scan.root),
                );
                let install_first = python.is_none().then(|| {
                    format!(
                        "it has no Python of its own yet: {}",
                        crate::env_dependencies::install_call(&name)
                    )
                });
                EnvironmentEntry {
                    name,
                    python,
                    install_first,
                    class_name: env.class_name.clone(),
                    file_path: env.path_in(&scan.root),
                    description: env.description.clone(),
                    key: env.key.clone(),
                    line: env.line,
                    config_class: env.config_class.clone(),
                    runnable: env.runnable,
                    kind: env.kind,
                }
            })
            .collect();
        let mut tips: Vec<String> = LIST_TIPS.iter().map(|tip| (*tip).to_owned()).collect();
        if unlisted > 0 {
            tips.insert(0, crate::answers::unlisted_note(unlisted));
        }
        Ok(EnvironmentList {
            count: environments.len(),
            environments,
            unlisted_in_subfolders: unlisted,
            tips,
            root: scan.root.clone(),
            duplicate_names: scan
                .duplicate_names
                .iter()
                .map(DuplicateNameView::from)
                .collect(),
            skipped: scan.skipped.iter().map(SkippedFileView::from).collect(),
            warnings: scan.warnings.iter().map(FileWarningView::from).collect(),
            files_scanned: scan.files_scanned,
        })
    }

    pub fn select_environment(&self, name: &str) -> Result<Selected, ToolsError> {
        let report = self.service()?.select(name)?;
        let selected = &report.environment;
        let file_path = selected.environments_dir.join(&selected.file);
        let dependencies = self
            .dependencies(&file_path, &selected.name, selected.kind)
            .and_then(|deps| deps.view());
        let first_run_advice =
            crate::first_run::advise(&*self.settings()?, &self.service()?.current()?);
        Ok(Selected {
            message: format!("Selected environment: {}", selected.name),
            environment: selected.name.clone(),
            file_path: selected.environments_dir.join(&selected.file),
            key: selected.key.clone(),
            class_name: selected.class_name.clone(),
            kind: selected.kind,
            config_class: report.config_class,
            field_count: report.field_count,
            locked_fields: report.locked_fields,
            wandb_name: report.wandb_name,
            notes: report.notes,
            dependencies,
            first_run_advice,
        })
    }

    /// The edits made since selection, next to the defaults they replace.
    pub fn config_diff(&self) -> Result<Vec<EditEntry>, ToolsError> {
        Ok(self
            .service()?
            .diff()?
            .iter()
            .map(EditEntry::from)
            .collect())
    }

    /// The selected environment's config class imported by the operator's Python, compared
    /// with the static reading: where the two disagree (`rl config show --introspect python`).
    pub fn introspect_config(
        &self,
        current: ConfigView,
        timeout: std::time::Duration,
    ) -> Result<IntrospectedConfig, ToolsError> {
        let service = self.service()?;
        let selection = service.selection()?;
        let scan = service.scan_reaching(&selection.environment)?;
        let env = scan.find(&current.key)?;
        let mut schema = rl_config::config_schema(&scan, env)?;
        // Imported in the Python it runs in (a verifiers environment's own).
        let python = rl_config::introspect(
            &self.environment_python(&selection.environment)?,
            &env.path_in(&scan.root),
            &env.class_name,
            timeout,
        )?;
        if env.kind.has_own_python() {
            // The run-level fields are rl's, not the environment's: Python has none of them.
            schema
                .fields
                .retain(|field| field.declared_in != rl_config::BASE_ENV_CONFIG);
        }
        let disagreements = rl_config::compare(&schema, &python);
        Ok(IntrospectedConfig {
            config: current,
            introspection_disagreements: disagreements.iter().map(DisagreementView::from).collect(),
        })
    }

    pub fn current_config(&self) -> Result<ConfigView, ToolsError> {
        let service = self.service()?;
        let current = service.current()?;
        let settings = self.settings()?;
        let first_run_advice = crate::first_run::advise(&settings, &current);
        let (locked, configurable): (Vec<&CurrentField>, Vec<&CurrentField>) =
            current.fields.iter().partition(|field| field.locked);
        Ok(ConfigView {
            environment: current.environment.name.clone(),
            key: current.environment.key.clone(),
            kind: current.environment.kind,
            config_class: current.config_class,
            wandb_name: current.wandb_name,
            wandb_project: current.wandb_project,
            configurable_fields: configurable.into_iter().map(field_view).collect(),
            locked_fields: locked.into_iter().map(field_view).collect(),
            notes: current.notes,
            tip: "Change a configurable field with rl_edit_config(field, value); values are \
                  checked against the field's type, so \"16\" becomes 16 for an integer field"
                .to_owned(),
            first_run_advice,
            losses: LossTable::of(&settings),
            trainer_settings: service
                .next_run_trainer()?
                .into_iter()
                .map(TrainerSettingView::from)
                .collect(),
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
        spec: FieldSpecView::from(spec),
    }
}

/// The name where it is unique, the key where it is not, so every entry can be selected by
/// what it shows.
impl crate::answers::KnownNames for Tools {
    fn environment_names(&self) -> Option<Vec<String>> {
        let scan = self.scan(false).ok()?;
        Some(
            scan.environments
                .iter()
                .map(|env| selectable_name(&scan, env))
                .collect(),
        )
    }

    fn field_names(&self) -> Option<Vec<String>> {
        let mut names: Vec<String> = self
            .service()
            .ok()?
            .current()
            .ok()?
            .fields
            .into_iter()
            .filter(|field| !field.locked)
            .map(|field| field.spec.name)
            .collect();
        names.push(rl_config::WANDB_PROJECT_FIELD.to_owned());
        Some(names)
    }
}

pub(crate) fn selectable_name(scan: &Scan, env: &Environment) -> String {
    if scan.duplicate_names.iter().any(|d| d.name == env.name) {
        env.key.clone()
    } else {
        env.name.clone()
    }
}
