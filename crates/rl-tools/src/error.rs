use std::path::PathBuf;

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
}
