use std::path::PathBuf;

/// Everything rl-settings can refuse or fail at, said for the operator or caller who can fix it.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// The operator's configuration (`config.toml`, `RL_*` variables) is refused.
    #[error("operator config is invalid: {0}")]
    Invalid(String),
    #[error("{what} is not valid: {reason}")]
    InvalidInput { what: String, reason: String },
    #[error("{path} is a {kind}, not a regular file; replace it with a file, or remove it")]
    NotAFile { path: PathBuf, kind: String },
    #[error("{action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}
