use std::path::PathBuf;

/// What rl-preflight can refuse or fail at. A model that fails is not an error of the
/// test: it is reported in the model's figures.
#[derive(Debug, thiserror::Error)]
pub enum PreflightError {
    #[error("{what}: {reason}")]
    Invalid { what: String, reason: String },
    #[error("{what} is {value}; it must be between 1 and {max}")]
    OutOfRange {
        what: &'static str,
        value: u32,
        max: u32,
    },
    #[error(
        "{variable} is not set: the endpoint needs its key, from the environment of rl's process (the keys rl knows are also read from RL_HOME/.env); the operator names another variable in [inference] key_variable of config.toml (in a shell, rl preflight --key-var)"
    )]
    MissingKey { variable: String },
    /// The key a Tinker service takes is the one its runs train with: no setting renames it.
    #[error(
        "{variable} is not set: the Tinker service samples with the key the operator's runs train with, from the environment of rl's process (or RL_HOME/.env)"
    )]
    MissingServiceKey { variable: String },
    #[error("{action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("no pre-flight test with id '{0}'; list tests to see the ids")]
    UnknownTest(String),
    #[error("test report {path} is unreadable ({reason})")]
    CorruptReport { path: PathBuf, reason: String },
    #[error(transparent)]
    Config(#[from] rl_config::ConfigError),
    #[error(transparent)]
    Settings(#[from] rl_settings::SettingsError),
}

impl PreflightError {
    pub(crate) fn invalid(what: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::Invalid {
            what: what.into(),
            reason: reason.into(),
        }
    }
}
