//! The operations behind every face, typed: the registry turns their results into JSON for
//! agents, the CLI into tables. State lives in the state directory, never here, so a selection
//! made over MCP is what `rl config show` reads and a run started over HTTP is one `rl runs stop`
//! can stop.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use rl_config::ConfigService;
use rl_preflight::LocalModelRunner;
use rl_process::{EvaluateCommand, Runs, SupervisorCommand};
use rl_settings::{Secrets, Settings, SettingsError};

use crate::ToolsError;

/// Everything a tool call needs from the world, read once when a face starts.
#[derive(Clone)]
pub struct ToolContext {
    pub home: PathBuf,
    /// The operator's settings as read when the face opened the tools, or why they could not
    /// be read; [`Tools::settings`] is what they are now (see `reread`). Only the operations
    /// that need them (environments, configuration, start, pre-flight) fail for it: a broken
    /// `config.toml` must never keep anyone from watching, stopping or collecting a run.
    pub settings: Result<Settings, String>,
    pub secrets: Secrets,
    /// The process environment: WandB's base URL and entity, and keys not in `<home>/.env`.
    pub environment: BTreeMap<String, String>,
    /// How a run's detached supervisor is started (normally `rl supervise`).
    pub supervisor: SupervisorCommand,
    /// How a run's trainer asks for an evaluation (normally `rl --home H --json runs
    /// evaluate`): the face's own command line, which the process layer never spells.
    pub evaluate: EvaluateCommand,
    /// The command line's tree over the settings, when they were read from `config.toml`:
    /// they are read again when that file changes, so a face that runs for days (`rl serve`,
    /// `rl mcp`) follows the operator's edits. `None` for settings given as they are.
    pub reread: Option<TreeOverride>,
}

/// The command line's choice of environments tree, over the operator's settings.
#[derive(Debug, Clone, Default)]
pub struct TreeOverride {
    /// `--root`: the tinker-atropos tree (its environments folder with it).
    pub root: Option<PathBuf>,
    /// `--envs-dir`: the environments folder alone.
    pub envs_dir: Option<PathBuf>,
}

impl ToolContext {
    /// Reads the operator's settings and keys for a face opening the tools on `home`. Settings
    /// that cannot be read are kept as the reason, not an error: only the operations that need
    /// them fail for it (`rl runs stop` works with a broken config.toml). With no tree set
    /// anywhere, the current folder is taken as the tinker-atropos tree. The keys' warnings
    /// (a `.env` others can read, a line that cannot be read) are `secrets.warnings`, to show.
    pub fn load(
        home: PathBuf,
        tree: &TreeOverride,
        environment: BTreeMap<String, String>,
        supervisor: SupervisorCommand,
        evaluate: EvaluateCommand,
    ) -> Self {
        let settings = read_settings(&home, tree, &environment);
        let secrets = Secrets::load(&home, &environment);
        Self {
            home,
            settings,
            secrets,
            environment,
            supervisor,
            evaluate,
            reread: Some(tree.clone()),
        }
    }
}

/// The operator's settings in `home` under the command line's tree, or why they cannot be read.
fn read_settings(
    home: &Path,
    tree: &TreeOverride,
    environment: &BTreeMap<String, String>,
) -> Result<Settings, String> {
    rl_config::load_settings(home, environment.clone())
        .map(|mut settings| {
            if let Some(root) = &tree.root {
                settings.tinker_atropos_root = Some(root.clone());
                settings.environments_dir = None;
            }
            if let Some(dir) = &tree.envs_dir {
                settings.environments_dir = Some(dir.clone());
            }
            if settings.tinker_atropos_root.is_none() && settings.environments_dir.is_none() {
                settings.tinker_atropos_root = Some(PathBuf::from("."));
            }
            settings
        })
        .map_err(|error| match error {
            rl_config::ConfigError::Settings(SettingsError::Invalid(reason)) => reason,
            other => other.to_string(),
        })
}

/// What tells one version of `config.toml` from another without reading it: its modification
/// time, size and inode (an editor that writes a new file and renames it changes the inode).
type FileStamp = Option<(Option<SystemTime>, u64, u64)>;

fn settings_stamp(home: &Path) -> FileStamp {
    std::fs::metadata(home.join(rl_settings::SETTINGS_FILE))
        .ok()
        .map(|metadata| (metadata.modified().ok(), metadata.len(), metadata.ino()))
}

/// The settings as last read, and the file's stamp then.
struct CurrentSettings {
    stamp: FileStamp,
    settings: Result<Arc<Settings>, String>,
}

/// The operations. Cheap to clone; clones share the pre-flight models they started, so a face
/// that shuts down can stop them all.
#[derive(Clone)]
pub struct Tools {
    pub(crate) context: Arc<ToolContext>,
    current: Arc<Mutex<CurrentSettings>>,
    models: LocalModelRunner,
    pub(crate) probes: crate::python_probe::Probes,
}

impl Tools {
    pub fn new(context: ToolContext) -> Self {
        let current = CurrentSettings {
            stamp: settings_stamp(&context.home),
            settings: context.settings.clone().map(Arc::new),
        };
        Self {
            current: Arc::new(Mutex::new(current)),
            context: Arc::new(context),
            models: LocalModelRunner::default(),
            probes: crate::python_probe::Probes::default(),
        }
    }

    pub fn context(&self) -> &ToolContext {
        &self.context
    }

    pub fn home(&self) -> &Path {
        &self.context.home
    }

    /// The operator's settings as `config.toml` holds them now (read again when it changed,
    /// for a context that reads them: [`ToolContext::reread`]), or why they cannot be read.
    pub fn settings(&self) -> Result<Arc<Settings>, ToolsError> {
        self.current_settings()
            .map_err(|reason| SettingsError::Invalid(reason).into())
    }

    pub(crate) fn current_settings(&self) -> Result<Arc<Settings>, String> {
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(tree) = &self.context.reread {
            let stamp = settings_stamp(&self.context.home);
            if stamp != current.stamp {
                current.settings =
                    read_settings(&self.context.home, tree, &self.context.environment)
                        .map(Arc::new);
                current.stamp = stamp;
            }
        }
        current.settings.clone()
    }

    /// The environment the operator's settings give a run's components (none when the
    /// settings cannot be read).
    pub(crate) fn child_environment(&self) -> BTreeMap<String, String> {
        self.settings()
            .map(|settings| settings.child_environment.clone())
            .unwrap_or_default()
    }

    pub fn secrets(&self) -> &Secrets {
        &self.context.secrets
    }

    /// The runner of pre-flight models; `stop_all` ends every model a test started.
    pub fn model_runner(&self) -> &LocalModelRunner {
        &self.models
    }

    pub(crate) fn service(&self) -> Result<ConfigService, ToolsError> {
        Ok(ConfigService::open(
            &self.context.home,
            Settings::clone(&*self.settings()?),
        )?)
    }

    pub(crate) fn runs(&self) -> Result<Runs, ToolsError> {
        Ok(Runs::open(&self.context.home)?)
    }

    /// A secret from the keys rl knows (environment and `<home>/.env`), else the process
    /// environment (for a key under another name); an empty value counts as unset.
    pub(crate) fn key(&self, name: &str) -> Option<String> {
        self.context
            .secrets
            .get(name)
            .map(str::to_owned)
            .or_else(|| self.context.environment.get(name).cloned())
            .filter(|value| !value.is_empty())
    }

    /// The key a Tinker service is reached with (the one its runs train with), or the error
    /// that names it missing.
    pub(crate) fn tinker_key(&self) -> Result<String, rl_preflight::PreflightError> {
        self.key(crate::hosted::TINKER_KEY_VARIABLE).ok_or_else(|| {
            rl_preflight::PreflightError::MissingServiceKey {
                variable: crate::hosted::TINKER_KEY_VARIABLE.to_owned(),
            }
        })
    }

    /// The keys the operator allows environments (`environment_keys`) that rl holds, with
    /// their values: what a pre-flight's environment is handed, as a run's is.
    pub(crate) fn environment_keys(
        &self,
        settings: &rl_settings::Settings,
    ) -> Vec<(String, rl_preflight::Key)> {
        settings
            .environment_keys
            .iter()
            .filter_map(|name| Some((name.clone(), rl_preflight::Key(self.key(name)?))))
            .collect()
    }

    /// Runs blocking work (SQLite, process checks, file scans) off the async runtime.
    pub(crate) async fn blocking<T, F>(&self, work: F) -> Result<T, ToolsError>
    where
        T: Send + 'static,
        F: FnOnce(&Tools) -> Result<T, ToolsError> + Send + 'static,
    {
        let tools = self.clone();
        tokio::task::spawn_blocking(move || work(&tools))
            .await
            .map_err(|error| ToolsError::Internal(format!("a tool's worker failed: {error}")))?
    }
}

/// A detached process's log, opened for appending (created if missing): what it says on its
/// standard error while nobody waits for it.
pub(crate) fn append_log(path: &std::path::Path) -> Result<std::fs::File, ToolsError> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|source| ToolsError::Io {
            action: "cannot open",
            path: path.to_owned(),
            source,
        })
}
