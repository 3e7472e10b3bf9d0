use std::path::PathBuf;

/// Why discovery could not answer at all. Problems with single files are not errors: they are
/// reported per file in [`crate::Scan::skipped`].
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    #[error("environments folder {path} does not exist")]
    RootNotFound { path: PathBuf },
    #[error("{path} is a file, not a folder of environment files")]
    RootNotADirectory { path: PathBuf },
    #[error("cannot read environments folder {path}: {source}")]
    RootUnreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("no environment named '{query}'{}", suggestion_text(suggestions))]
    UnknownEnvironment {
        query: String,
        suggestions: Vec<String>,
    },
    #[error(
        "'{query}' names {} environments; choose one by key: {}",
        candidates.len(),
        candidates.join(", ")
    )]
    AmbiguousEnvironment {
        query: String,
        candidates: Vec<String>,
    },
}

fn suggestion_text(suggestions: &[String]) -> String {
    if suggestions.is_empty() {
        String::new()
    } else {
        format!("; did you mean {}?", suggestions.join(", "))
    }
}
