use std::path::PathBuf;

use rl_config::ConfigError;
use rl_discovery::DiscoveryError;
use rl_metrics::MetricsError;
use rl_preflight::PreflightError;
use rl_process::ProcessError;
use rl_settings::SettingsError;

/// What rl-tools can refuse or fail at.
#[derive(Debug, thiserror::Error)]
pub enum ToolsError {
    #[error("{what}: {reason}")]
    Invalid { what: String, reason: String },
    #[error("{path} exists already; choose another name (nothing was written)")]
    Exists { path: PathBuf },
    #[error("{action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("no tool named '{}'", rl_settings::quoted(name))]
    UnknownTool { name: String },
    #[error("{tool}: {reason}")]
    BadArguments { tool: String, reason: String },
    #[error("no run with id '{run_id}'")]
    UnknownRun {
        run_id: String,
        /// The runs still going (not stopped, completed, capped, failed or lost).
        active: Vec<String>,
        /// The newest runs, whatever their state (at most [`crate::KNOWN_RUNS_SHOWN`]).
        known: Vec<String>,
    },
    /// A file of the run's folder that says where its checkpoints are is gone or unreadable.
    #[error("run {run_id}: {reason}")]
    RunFilesMissing { run_id: String, reason: String },
    /// The selected environment imports what the run's Python cannot (issue 32).
    #[error(
        "environment {environment} cannot import: {missing}; install it with {fix} (nothing was started)"
    )]
    MissingDependencies {
        environment: String,
        missing: String,
        fix: String,
    },
    #[error("no sweep with id '{sweep_id}'")]
    UnknownSweep {
        sweep_id: String,
        /// Sweeps there are, newest first.
        known: Vec<String>,
    },
    #[error("run {run_id} cannot be resumed: {reason}")]
    NotResumable { run_id: String, reason: String },
    /// A fork asked of a step, or with settings, the run's saved states cannot give.
    #[error("the run cannot start: {reason} (nothing was started)")]
    NotStartable { reason: String },
    /// A pre-flight or comparison of rl's own models that its chat route would refuse.
    #[error("the test cannot start: {reason} (nothing was started)")]
    TestNotStartable { reason: String },
    /// The operator's settings forbid what an agent asked (`[agents]`).
    #[error("{what} is not allowed: {reason}")]
    OperatorForbids { what: String, reason: String },
    #[error("run {run_id} cannot be forked so: {reason} (nothing was started)")]
    NotForkable { run_id: String, reason: String },
    #[error(transparent)]
    Settings(#[from] SettingsError),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Process(#[from] ProcessError),
    #[error(transparent)]
    Metrics(#[from] MetricsError),
    #[error(transparent)]
    Preflight(#[from] PreflightError),
    #[error(transparent)]
    Discovery(#[from] DiscoveryError),
    #[error("{0}")]
    Internal(String),
}

/// What kind of failure a tool result is: decides the HTTP status and tells a caller whether
/// to change the request, look something up, or retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The request is wrong: arguments, values, names.
    BadRequest,
    /// It names something that does not exist (a run, a tool, an environment).
    NotFound,
    /// Something must happen first (select an environment, set a key, configure a tree).
    Precondition,
    /// The machine or a service failed; the same request may work later.
    Internal,
}

impl ToolsError {
    pub(crate) fn invalid(what: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::Invalid {
            what: what.into(),
            reason: reason.into(),
        }
    }
}
