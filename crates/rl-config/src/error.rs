use std::path::PathBuf;

use rl_settings::{SettingsError, Value};

/// Where the operator locks an environment field, and a trainer key: what a refusal names.
pub(crate) const LOCKED_ENV: &str = "[locked.env]";
pub(crate) const LOCKED_TINKER: &str = "[locked.tinker]";

/// Everything rl-config can refuse or fail at. Messages are written for the person or agent who
/// made the request: each says what was wrong and what would be accepted.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(transparent)]
    Discovery(#[from] rl_discovery::DiscoveryError),
    #[error("cannot read {file}: {reason}")]
    Source { file: String, reason: String },
    #[error("no environment is selected; select one first (rl_select_environment)")]
    NothingSelected,
    #[error("unknown field '{field}'{}", did_you_mean(closest))]
    UnknownField { field: String, closest: Vec<String> },
    #[error(
        "field '{field}' is locked by the operator at {value} ({table} in the state directory's \
         config.toml); it cannot be changed here"
    )]
    LockedField {
        field: String,
        value: Value,
        /// Where: `[locked.env]` or `[locked.tinker]`.
        table: &'static str,
    },
    #[error("field '{field}' expects {expected}, got {got}")]
    WrongType {
        field: String,
        expected: String,
        got: String,
    },
    #[error("field '{field}': {value} is not allowed; allowed values: {}", allowed.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))]
    NotAllowed {
        field: String,
        value: Value,
        allowed: Vec<Value>,
    },
    #[error("field '{field}': {value} is out of range ({range})")]
    OutOfRange {
        field: String,
        value: Value,
        range: String,
    },
    #[error("{what} is not valid: {reason}")]
    InvalidInput { what: String, reason: String },
    #[error(transparent)]
    Settings(#[from] SettingsError),
    #[error("state in {path} is unreadable ({reason}); fix or remove the file")]
    CorruptState { path: PathBuf, reason: String },
    #[error("{action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("python introspection failed: {0}")]
    Introspection(String),
    #[error(
        "run {run_id} ran {file}, which has changed since: the resumed run would train another \
         environment than its first steps did; resume with allow_changes (`--allow-changes`) to \
         continue anyway, or start a new run"
    )]
    EnvironmentChanged { run_id: String, file: PathBuf },
    #[error(
        "run {run_id} did not record which environment it ran ({missing} is missing: it was \
         started by an earlier rl), so it cannot be resumed; start a new run"
    )]
    UnknownRunEnvironment { run_id: String, missing: PathBuf },
}

fn did_you_mean(closest: &[String]) -> String {
    if closest.is_empty() {
        String::new()
    } else {
        format!("; closest fields: {}", closest.join(", "))
    }
}
