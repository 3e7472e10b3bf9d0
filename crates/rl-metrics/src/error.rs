use std::path::PathBuf;

/// What rl-metrics can fail at. A source that merely has nothing for a run is not an error
/// (`Ok(None)`); these are the cases a user has to hear about.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error("{action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a WandB run file: {reason}")]
    NotAWandbFile { path: PathBuf, reason: String },
    #[error("WANDB_API_KEY is not set, so the WandB API cannot be asked")]
    MissingApiKey,
    #[error("WandB refused the API key (HTTP {status}): check WANDB_API_KEY{detail}")]
    Unauthorized { status: u16, detail: String },
    #[error("WandB has no {what}")]
    NotFound { what: String },
    #[error("WandB answered HTTP {status} {attempts} time(s) in a row; giving up: {detail}")]
    Http {
        status: u16,
        attempts: u32,
        detail: String,
    },
    #[error("WandB did not answer within {seconds} s ({attempts} attempt(s))")]
    Timeout { seconds: u64, attempts: u32 },
    #[error("WandB's answers took longer than the {seconds} s this lookup may take")]
    Deadline { seconds: u64 },
    #[error("cannot reach WandB at {url}: {detail}")]
    Transport { url: String, detail: String },
    #[error("WandB sent an answer that is not the expected JSON: {0}")]
    Malformed(String),
    #[error("WandB reported an error: {0}")]
    GraphQl(String),
}
