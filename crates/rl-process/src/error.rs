/// What rl-process can fail at.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error("run store: {0}")]
    Store(String),
    #[error("no run with id '{0}'; list runs to see the ids")]
    UnknownRun(String),
    #[error("a run with id '{0}' exists already")]
    DuplicateRun(String),
    #[error("{action} {path}: {source}")]
    Io {
        action: &'static str,
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("no free loopback port: {0}")]
    NoFreePort(std::io::Error),
    #[error("cannot start {component}: {reason}")]
    Launch {
        component: crate::Component,
        reason: String,
    },
}

impl From<rusqlite::Error> for ProcessError {
    fn from(error: rusqlite::Error) -> Self {
        ProcessError::Store(error.to_string())
    }
}
