//! Selecting an environment, reading and editing its configuration, and writing a run config:
//! the operations the tools expose, over the persisted state.

use std::path::{Path, PathBuf};

use rl_discovery::{Environment, Scan};
use rl_settings::{Caps, RunConfig, RunEndpoints, RunId, Settings, Value};

use crate::new_run::RunEnvironment;
use crate::store::{Edit, Section, SelectedEnvironment, Selection, Store};
use crate::validate::{MAX_FIELD_NAME_CHARS, check_value};
use crate::{ConfigError, ConfigSchema, DefaultValue, FieldSpec, config_schema};

/// Not a BaseEnvConfig field, but the original tool told agents to set it; it goes to the
/// `tinker` section of the run config.
pub const WANDB_PROJECT_FIELD: &str = "wandb_project";

/// WandB refuses these in project names.
const WANDB_PROJECT_FORBIDDEN: &[char] = &['/', '\\', '#', '?', '%', ':'];

pub struct ConfigService {
    settings: Settings,
    store: Store,
}

#[derive(Debug, Clone)]
pub struct SelectionReport {
    pub environment: SelectedEnvironment,
    pub wandb_name: String,
    pub config_class: String,
    pub field_count: usize,
    pub locked_fields: Vec<String>,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct CurrentConfig {
    pub environment: SelectedEnvironment,
    pub config_class: String,
    pub wandb_name: String,
    pub wandb_project: String,
    pub fields: Vec<CurrentField>,
    pub notes: Vec<String>,
}

impl CurrentConfig {
    /// The value a run would use now for `field`, when it has one.
    pub fn value_of(&self, field: &str) -> Option<&Value> {
        self.fields
            .iter()
            .find(|f| f.spec.name == field)
            .and_then(|f| f.current.value())
    }
}

#[derive(Debug, Clone)]
pub struct CurrentField {
    pub spec: FieldSpec,
    /// The value a run would use now.
    pub current: DefaultValue,
    pub origin: ValueOrigin,
    pub locked: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueOrigin {
    ClassDefault,
    EnvironmentDefault,
    Selection,
    Edited,
    Locked,
}

#[derive(Debug, Clone)]
pub struct EditReport {
    pub field: String,
    pub section: Section,
    pub value: Value,
    /// The value before this edit.
    pub previous: DefaultValue,
    /// The input as given, when it was converted.
    pub coerced_from: Option<Value>,
    /// `false` when the field's type is not known statically and the value is unchecked.
    pub checked: bool,
}

#[derive(Debug, Clone)]
pub struct DiffEntry {
    pub field: String,
    pub section: Section,
    pub default: DefaultValue,
    pub value: Value,
    pub edited_at: String,
}

#[derive(Debug, Clone)]
pub struct RunConfigFile {
    pub path: PathBuf,
    pub config: RunConfig,
    /// The selection it was written from (which environment file to run).
    pub selection: Selection,
}

impl ConfigService {
    pub fn open(home: &Path, settings: Settings) -> Result<Self, ConfigError> {
        Ok(Self {
            store: Store::open(home)?,
            settings,
        })
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    pub fn home(&self) -> &Path {
        self.store.home()
    }

    pub fn scan(&self) -> Result<Scan, ConfigError> {
        scan_environments(&self.settings, false)
    }

    /// A scan that reaches the environment file `file` (relative to the environments folder):
    /// one of the sub-folders too when it lies in one, whatever `recursive_discovery` says.
    /// A fresh scan that reaches `selected`: the environments folder (its sub-folders when
    /// the file lies in one), or the package installed from the registry it was selected from.
    pub fn scan_reaching(&self, selected: &SelectedEnvironment) -> Result<Scan, ConfigError> {
        let installed = rl_settings::installed_packages(self.store.home())
            .into_iter()
            .any(|package| package.roots.contains(&selected.environments_dir));
        if installed {
            return crate::lookup::installed_scan(&selected.environments_dir).map_err(|_| {
                ConfigError::InvalidInput {
                    what: format!("the selected environment '{}'", selected.key),
                    reason: format!(
                        "its package folder {} cannot be read; install it again ({})",
                        selected.environments_dir.display(),
                        install_call(&selected.name)
                    ),
                }
            });
        }
        // The folder it was selected in, as recorded: a selection (or a run's) made with
        // `--envs-dir` is found again without it. The configured folder when that one is gone.
        let recorded = &selected.environments_dir;
        let recursive = selected.file.contains('/');
        if recorded.is_dir() {
            return scan_folder(&self.settings, recorded, recursive);
        }
        scan_environments(&self.settings, recursive)
    }

    /// Selects an environment by name, key or class name; clears earlier edits, as a new
    /// selection did in the original tool.
    pub fn select(&self, name: &str) -> Result<SelectionReport, ConfigError> {
        check_name("environment name", name, 200)?;
        // Found as every command finds it: a name `rl envs list --recursive` shows is
        // selectable whatever `recursive_discovery` says.
        let found = crate::find_environment(self.store.home(), &self.settings, name, false)?;
        let (scan, env) = (&found.scan, found.environment());
        let schema = config_schema(scan, env)?;
        let now = jiff::Zoned::now();
        let selection = Selection {
            environment: SelectedEnvironment {
                key: env.key.clone(),
                name: env.name.clone(),
                class_name: env.class_name.clone(),
                file: env.file.clone(),
                environments_dir: scan.root.clone(),
                kind: env.kind,
            },
            wandb_name: format!("{}-{}", env.name, now.strftime("%Y%m%d-%H%M%S")),
            selected_at: now.timestamp().to_string(),
            edits: Vec::new(),
        };
        let report = SelectionReport {
            environment: selection.environment.clone(),
            wandb_name: selection.wandb_name.clone(),
            config_class: schema.config_class.clone(),
            field_count: schema.fields.len(),
            locked_fields: self.settings.locked.env.keys().cloned().collect(),
            notes: schema.notes,
        };
        self.store.update(|_| Ok((Some(selection), ())))?;
        Ok(report)
    }

    pub fn selection(&self) -> Result<Selection, ConfigError> {
        self.store.selection()?.ok_or(ConfigError::NothingSelected)
    }

    /// The selected environment's fields with the values a run would use now.
    pub fn current(&self) -> Result<CurrentConfig, ConfigError> {
        let selection = self.selection()?;
        let (_, schema) = self.selected_schema(&selection)?;
        Ok(self.current_of(selection, schema))
    }

    pub(crate) fn current_of(&self, selection: Selection, schema: ConfigSchema) -> CurrentConfig {
        let fields = schema
            .fields
            .iter()
            .map(|spec| {
                let (current, origin) = self.current_value(spec, &selection);
                CurrentField {
                    locked: self.settings.locked_env_value(&spec.name).is_some(),
                    spec: spec.clone(),
                    current,
                    origin,
                }
            })
            .collect();
        CurrentConfig {
            wandb_project: self.wandb_project(&selection),
            environment: selection.environment,
            config_class: schema.config_class,
            wandb_name: selection.wandb_name,
            fields,
            notes: schema.notes,
        }
    }

    fn current_value(
        &self,
        spec: &FieldSpec,
        selection: &Selection,
    ) -> (DefaultValue, ValueOrigin) {
        if let Some(locked) = self.settings.locked_env_value(&spec.name) {
            return (
                DefaultValue::Value {
                    value: locked.clone(),
                },
                ValueOrigin::Locked,
            );
        }
        if let Some(edit) = selection
            .edits
            .iter()
            .find(|e| e.field == spec.name && e.section == Section::Env)
        {
            return (
                DefaultValue::Value {
                    value: edit.value.clone(),
                },
                ValueOrigin::Edited,
            );
        }
        if spec.name == "wandb_name" {
            return (
                DefaultValue::Value {
                    value: selection.wandb_name.as_str().into(),
                },
                ValueOrigin::Selection,
            );
        }
        match &spec.env_default {
            Some(default) => (default.clone(), ValueOrigin::EnvironmentDefault),
            None => (spec.class_default.clone(), ValueOrigin::ClassDefault),
        }
    }

    fn wandb_project(&self, selection: &Selection) -> String {
        selection
            .edits
            .iter()
            .find(|e| e.section == Section::Tinker && e.field == WANDB_PROJECT_FIELD)
            .and_then(|e| match &e.value {
                Value::Str(s) => Some(s.clone()),
                _ => None,
            })
            .unwrap_or_else(|| self.settings.wandb_project.clone())
    }

    /// The selected environment, found again in a fresh scan, and its schema.
    pub(crate) fn selected_schema(
        &self,
        selection: &Selection,
    ) -> Result<(Environment, ConfigSchema), ConfigError> {
        let scan = self.scan_reaching(&selection.environment)?;
        let env = scan
            .environments
            .iter()
            .find(|e| e.key == selection.environment.key)
            .ok_or_else(|| ConfigError::InvalidInput {
                what: format!("the selected environment '{}'", selection.environment.key),
                reason:
                    "it is no longer found in the environments folder; select an environment again"
                        .to_owned(),
            })?;
        let schema = config_schema(&scan, env)?;
        Ok((env.clone(), schema))
    }

    /// Validates and stores one edit. Nothing is stored when the edit is refused.
    pub fn edit(&self, field: &str, value: &Value) -> Result<EditReport, ConfigError> {
        Ok(self.edit_and_show(field, value)?.0)
    }

    /// [`Self::edit`], and the configuration after it (read from the same scan).
    pub fn edit_and_show(
        &self,
        field: &str,
        value: &Value,
    ) -> Result<(EditReport, CurrentConfig), ConfigError> {
        check_name("field name", field, MAX_FIELD_NAME_CHARS)?;
        let selection = self.selection()?;
        let (_, schema) = self.selected_schema(&selection)?;
        let (section, checked, previous) = if field == WANDB_PROJECT_FIELD {
            let checked = check_wandb_project(value)?;
            let previous = DefaultValue::Value {
                value: self.wandb_project(&selection).into(),
            };
            (Section::Tinker, checked, previous)
        } else if schema.field(field).is_none()
            && let Some(entry) = rl_settings::trainer::per_run(field)
        {
            // A trainer key a run chooses (the algorithm, the learning rate, ...): checked as a
            // sweep's point is (`check_run_settings`: the key's kind and bounds, the operator's
            // locks), kept in the selection's `tinker` edits that each new run takes.
            let previous = self.trainer_value(&selection, entry.key.name);
            let setting = self
                .check_run_settings(&selection, &[(field.to_owned(), value.clone())])?
                .remove(0);
            let coerced_from = (setting.value != *value).then(|| value.clone());
            (
                Section::Tinker,
                crate::validate::Checked {
                    value: setting.value,
                    coerced_from,
                    checked: true,
                },
                previous,
            )
        } else {
            let Some(spec) = schema.field(field) else {
                let mut extra = vec![WANDB_PROJECT_FIELD];
                extra.extend(
                    rl_settings::trainer::PER_RUN
                        .iter()
                        .map(|entry| entry.key.name),
                );
                return Err(ConfigError::UnknownField {
                    field: field.to_owned(),
                    closest: closest_fields(field, &schema, &extra),
                });
            };
            if let Some(locked) = self.settings.locked_env_value(field) {
                return Err(ConfigError::LockedField {
                    field: field.to_owned(),
                    value: locked.clone(),
                    table: crate::LOCKED_ENV,
                });
            }
            let checked = check_value(spec, value)?;
            (
                Section::Env,
                checked,
                self.current_value(spec, &selection).0,
            )
        };
        let key = selection.environment.key;
        let field = rl_settings::trainer::per_run(field)
            .filter(|_| section == Section::Tinker)
            .map_or(field, |entry| entry.key.name);
        let edit = Edit {
            field: field.to_owned(),
            section,
            value: checked.value.clone(),
            edited_at: jiff::Timestamp::now().to_string(),
        };
        let updated = self.store.update(|stored| {
            // Another process may have selected a different environment meanwhile.
            let mut stored = match stored {
                Some(stored) if stored.environment.key == key => stored,
                _ => {
                    return Err(ConfigError::InvalidInput {
                        what: format!("edit of '{field}'"),
                        reason: "the selection changed while editing; check rl_get_current_config and try again"
                            .to_owned(),
                    });
                }
            };
            match stored.edits.iter_mut().find(|e| e.field == edit.field && e.section == edit.section) {
                Some(existing) => *existing = edit.clone(),
                None => stored.edits.push(edit.clone()),
            }
            // Fine alone, the value must also fit the fields it is used with, as they are now
            // (checked under the store's lock, so two editors cannot each make half a conflict).
            let after = self.current_of(stored.clone(), schema.clone());
            crate::rules::check_together(|name| after.value_of(name))?;
            Ok((Some(stored.clone()), stored))
        })?;
        let report = EditReport {
            field: field.to_owned(),
            section,
            value: checked.value,
            previous,
            coerced_from: checked.coerced_from,
            checked: checked.checked,
        };
        Ok((report, self.current_of(updated, schema)))
    }

    /// Every edit next to the default it replaced.
    pub fn diff(&self) -> Result<Vec<DiffEntry>, ConfigError> {
        let selection = self.selection()?;
        let (_, schema) = self.selected_schema(&selection)?;
        Ok(selection
            .edits
            .iter()
            .map(|edit| DiffEntry {
                field: edit.field.clone(),
                section: edit.section,
                default: match edit.section {
                    Section::Tinker if edit.field == WANDB_PROJECT_FIELD => DefaultValue::Value {
                        value: self.settings.wandb_project.as_str().into(),
                    },
                    Section::Tinker => self.trainer_default(&edit.field),
                    Section::Env => schema
                        .field(&edit.field)
                        .map_or(DefaultValue::Required, |spec| {
                            spec.effective_default().clone()
                        }),
                },
                value: edit.value.clone(),
                edited_at: edit.edited_at.clone(),
            })
            .collect())
    }

    /// Writes `<home>/runs/<run_id>/config.yaml` for the selection and returns it.
    /// Writes `runs/<id>/config.yaml` from the selection; `endpoints` are the run's own ports
    /// (without them the locked addresses stay, as for a preview); `caps` are the run's caps
    /// (the operator's merged with its own, `Caps::for_run`), written with its prices.
    pub fn write_run_config(
        &self,
        run_id: &RunId,
        endpoints: Option<RunEndpoints>,
        caps: &Caps,
        settings: &[crate::RunSetting],
    ) -> Result<RunConfigFile, ConfigError> {
        self.write_run_config_of(&self.selection()?, run_id, endpoints, caps, settings)
    }

    /// Refuses `caps` (merged with the operator's already) that a run of `selection` could
    /// not hold to, without writing anything: what a sweep checks before it is recorded, as
    /// each of its runs would be checked at its start.
    pub fn check_caps(&self, selection: &Selection, caps: &Caps) -> Result<(), ConfigError> {
        let config = self.preview_config(selection);
        crate::new_run::run_prices(&self.settings, &config, caps).map(|_| ())
    }

    /// The config a run of the current selection would start with, before its own addresses
    /// and caps: what it trains (`tinker.base_model`, its rank and lengths), for a pre-flight
    /// of the model the next run trains.
    pub fn next_run_config(&self) -> Result<RunConfig, ConfigError> {
        Ok(self.preview_config(&self.selection()?))
    }

    fn preview_config(&self, selection: &Selection) -> RunConfig {
        crate::new_run::build(
            &self.settings,
            selection,
            &self.wandb_project(selection),
            &RunId::generate(),
            None,
        )
    }

    /// [`Self::write_run_config`] of a selection recorded earlier (a sweep's, whose points
    /// start later with the environment and edits they were planned with).
    pub fn write_run_config_of(
        &self,
        selection: &Selection,
        run_id: &RunId,
        endpoints: Option<RunEndpoints>,
        caps: &Caps,
        settings: &[crate::RunSetting],
    ) -> Result<RunConfigFile, ConfigError> {
        let selection = crate::run_setting::with_settings(selection, settings);
        let mut config = crate::new_run::build(
            &self.settings,
            &selection,
            &self.wandb_project(&selection),
            run_id,
            endpoints,
        );
        let (_, schema) = self.selected_schema(&selection)?;
        let current = self.current_of(selection.clone(), schema);
        // What atroposlib or the trainer would refuse seconds after the start is refused now,
        // wherever the value came from (an edit, the operator's lock, the environment's code).
        for field in &current.fields {
            let Some(value) = field.current.value() else {
                continue;
            };
            if field.locked {
                // Only now is the environment's own type of the field known.
                check_value(&field.spec, value).map_err(|error| {
                    ConfigError::Settings(rl_settings::SettingsError::Invalid(format!(
                        "[locked.env] is refused: {error}"
                    )))
                })?;
            }
            crate::rules::check_field(&field.spec.name, value)?;
        }
        crate::rules::check_together(|name| current.value_of(name))?;
        for field in current.fields.iter().filter(|field| {
            rl_settings::trainer::ENVIRONMENT_VALUES
                .iter()
                .any(|key| key.name == field.spec.name)
        }) {
            if let Some(value) = field.current.value() {
                config
                    .env
                    .entry(field.spec.name.clone())
                    .or_insert_with(|| value.clone());
            }
        }
        crate::new_run::set_costs(&self.settings, &mut config, caps)?;
        crate::new_run::check_engine_fits(&self.settings, &config)?;
        let environment = RunEnvironment::of(&selection.environment, &selection.edits)?;
        let path = crate::new_run::write(self.store.home(), run_id, &environment, &config)?;
        Ok(RunConfigFile {
            path,
            config,
            selection,
        })
    }
}

/// Where a continuing run starts and what it changes: the parent's saved state at `step`, the
/// settings a fork changes (checked by `check_fork_settings`), and the run's new last step when
/// it is extended (the steps it continues to, past the parent's).
#[derive(Debug, Clone)]
pub struct ResumeFrom<'a> {
    pub state_path: &'a str,
    pub step: u64,
    pub settings: &'a [crate::RunSetting],
    pub total_steps: Option<u64>,
}

/// A resumed run's config: where it was written, and the environment it runs (its parent's).
#[derive(Debug, Clone)]
pub struct ResumedConfig {
    pub path: PathBuf,
    pub environment: SelectedEnvironment,
}

impl ConfigService {
    /// Writes `runs/<run_id>/config.yaml` for a run that continues `parent` (whose folder is
    /// `parent_dir`) after its `step`, from `state_path`: the parent's config as it ran, with
    /// the new run's addresses. Refused when the parent's environment file has changed since it
    /// ran, unless `allow_changes`. Its prices are the operator's now and its caps `caps`: the
    /// parent's are replaced, not inherited (the parent's cap is what stopped a capped parent;
    /// the resume says which caps the continuation has).
    pub fn write_resumed_config(
        &self,
        parent: &RunId,
        run_id: &RunId,
        endpoints: RunEndpoints,
        from: &ResumeFrom<'_>,
        allow_changes: bool,
        caps: &Caps,
    ) -> Result<ResumedConfig, ConfigError> {
        let home = self.store.home();
        let parent_folder = rl_settings::RunFolder::of(home, parent);
        let ran = RunEnvironment::read(&parent_folder, parent.as_str())?;
        let now = RunEnvironment::of(&ran.environment, &ran.edits)?;
        if now.sha256 != ran.sha256 && !allow_changes {
            return Err(ConfigError::EnvironmentChanged {
                run_id: parent.to_string(),
                file: ran.environment.environments_dir.join(&ran.environment.file),
            });
        }
        let config = RunConfig::read(&parent_folder.config())?;
        crate::new_run::check_same_base_model(&self.settings, parent, &config)?;
        let mut config = crate::new_run::resumed(
            config,
            &ran.environment,
            run_id,
            endpoints,
            from.state_path,
            from.step,
        );
        crate::run_setting::apply(&mut config, from.settings);
        if let Some(total) = from.total_steps {
            config.set(
                &rl_settings::trainer::TOTAL_STEPS,
                Value::Int(i64::try_from(total).unwrap_or(i64::MAX)),
            );
        }
        crate::new_run::set_costs(&self.settings, &mut config, caps)?;
        crate::new_run::check_engine_fits(&self.settings, &config)?;
        let path = crate::new_run::write(home, run_id, &now, &config)?;
        Ok(ResumedConfig {
            path,
            environment: now.environment,
        })
    }
}

/// Names from outside (environment names, field names) are short, printable and one line.
pub(crate) fn check_name(what: &str, name: &str, max_chars: usize) -> Result<(), ConfigError> {
    let reason = if name.trim().is_empty() {
        "it is empty".to_owned()
    } else if name.chars().count() > max_chars {
        format!("it is longer than {max_chars} characters")
    } else if name.chars().any(char::is_control) {
        "it contains control characters".to_owned()
    } else {
        return Ok(());
    };
    Err(ConfigError::InvalidInput {
        what: what.to_owned(),
        reason,
    })
}

fn check_wandb_project(value: &Value) -> Result<crate::validate::Checked, ConfigError> {
    let Value::Str(raw) = value else {
        return Err(ConfigError::WrongType {
            field: WANDB_PROJECT_FIELD.to_owned(),
            expected: "string".to_owned(),
            got: value.kind().to_owned(),
        });
    };
    let project = raw.trim();
    if project.is_empty()
        || project.chars().count() > 128
        || project.contains(WANDB_PROJECT_FORBIDDEN)
        || project.chars().any(char::is_control)
    {
        return Err(ConfigError::InvalidInput {
            what: format!(
                "{WANDB_PROJECT_FIELD} '{}'",
                project.chars().take(60).collect::<String>()
            ),
            reason: "a WandB project name has 1 to 128 characters and none of / \\ # ? % :"
                .to_owned(),
        });
    }
    Ok(crate::validate::Checked {
        coerced_from: (project != raw).then(|| value.clone()),
        value: Value::Str(project.to_owned()),
        checked: true,
    })
}

/// The names nearest `field` among the schema's fields and `others`.
pub(crate) fn closest_fields(field: &str, schema: &ConfigSchema, others: &[&str]) -> Vec<String> {
    let wanted = field.to_lowercase();
    let mut scored: Vec<(f64, &str)> = schema
        .fields
        .iter()
        .map(|f| f.name.as_str())
        .chain(others.iter().copied())
        .map(|name| (strsim::jaro_winkler(&wanted, name), name))
        .filter(|(score, _)| *score >= 0.8)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    scored
        .into_iter()
        .take(3)
        .map(|(_, name)| name.to_owned())
        .collect()
}

/// The environments in [`Settings::environments_dir`], its subfolders too when the operator
/// set `recursive_discovery` or the caller asks for them.
pub fn scan_environments(
    settings: &Settings,
    recursive: bool,
) -> Result<rl_discovery::Scan, ConfigError> {
    scan_folder(settings, &settings.environments_dir()?, recursive)
}

/// A scan of `folder`, its sub-folders too when asked or when `recursive_discovery` says so.
fn scan_folder(
    settings: &Settings,
    folder: &Path,
    recursive: bool,
) -> Result<rl_discovery::Scan, ConfigError> {
    let options = rl_discovery::ScanOptions {
        recursive: recursive || settings.recursive_discovery,
        ..Default::default()
    };
    Ok(rl_discovery::scan(folder, &options)?)
}

/// The tool call that installs environment `name`'s dependencies, as every message that names
/// it spells it (the command line tells it as `rl setup --env NAME`).
pub fn install_call(name: &str) -> String {
    format!(
        "rl_install_environment {{\"name\": {}}}",
        serde_json::Value::from(name)
    )
}
