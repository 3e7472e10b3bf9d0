//! The operations behind every face, typed: the registry turns their results into JSON for
//! agents, the CLI into tables. State lives in the state directory, never here, so a selection
//! made over MCP is what `rl config show` reads and a run started over HTTP is one `rl runs stop`
//! can stop.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rl_config::ConfigService;
use rl_inference_test::LocalModelRunner;
use rl_process::{Runs, SupervisorCommand};
use rl_settings::{Secrets, Settings, SettingsError};

use crate::ToolsError;

/// Everything a tool call needs from the world, read once when a face starts.
#[derive(Clone)]
pub struct ToolContext {
    pub home: PathBuf,
    /// The operator's settings, or why they could not be read. Only the operations that need
    /// them (environments, configuration, start, pre-flight) fail for it: a broken
    /// `config.toml` must never keep anyone from watching, stopping or collecting a run.
    pub settings: Result<Settings, String>,
    pub secrets: Secrets,
    /// The process environment: WandB's base URL and entity, and keys not in `<home>/.env`.
    pub environment: BTreeMap<String, String>,
    /// How a run's detached supervisor is started (normally `rl supervise`).
    pub supervisor: SupervisorCommand,
}

/// The operations. Cheap to clone; clones share the pre-flight models they started, so a face
/// that shuts down can stop them all.
#[derive(Clone)]
pub struct Tools {
    context: Arc<ToolContext>,
    models: LocalModelRunner,
    probes: crate::health::Probes,
}

impl Tools {
    pub fn new(context: ToolContext) -> Self {
        Self {
            context: Arc::new(context),
            models: LocalModelRunner::default(),
            probes: crate::health::Probes::default(),
        }
    }

    pub fn context(&self) -> &ToolContext {
        &self.context
    }

    pub fn home(&self) -> &Path {
        &self.context.home
    }

    pub fn settings(&self) -> Result<&Settings, ToolsError> {
        self.context
            .settings
            .as_ref()
            .map_err(|reason| SettingsError::Invalid(reason.clone()).into())
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

    pub fn service(&self) -> Result<ConfigService, ToolsError> {
        Ok(ConfigService::open(
            &self.context.home,
            self.settings()?.clone(),
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

    /// What `rl_health_check` / `rl doctor` report.
    pub fn health_check(&self) -> crate::HealthReport {
        crate::health_check(
            &self.context.home,
            self.context.settings.as_ref().map_err(String::as_str),
            &self.context.secrets,
            &self.probes,
        )
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
