//! The `rl_*` tools agents know, over the lower crates: typed operations ([`Tools`]) that every
//! face shares, and the [`Registry`] that exposes them to agents as named tools with JSON
//! schemas and JSON answers (the MCP server, the HTTP API and `rl tool call` adapt it).

mod answer;
mod environments;
mod error;
mod health_check;
mod metrics;
mod new_env;
mod preflight;
mod rate_limit;
mod registry;
mod runs;
mod tools;

pub use answer::error_answer;
pub use environments::{
    ConfigView, Edited, EnvironmentEntry, EnvironmentList, FieldView, Selected,
};
pub use error::{FailureKind, ToolsError};
pub use health_check::{Check, HealthReport, MIN_PYTHON, Probes, check as health_check};
pub use metrics::SourceChoice;
pub use new_env::{NewEnvironment, new_environment};
pub use preflight::{InferenceOptions, report_json};
pub use registry::{
    Caller, MAX_TEST_GROUP_SIZE, MAX_TEST_STEPS, Registry, TOOL_NAMES, ToolReply, ToolSpec, specs,
};
pub use runs::{
    EventsView, LogTail, ResultsView, RunEntry, RunList, Started, StatusView, Stopped,
    process_label,
};
pub use tools::{ToolContext, Tools};

/// How many run ids an answer about an unknown run lists, newest first.
pub const KNOWN_RUNS_SHOWN: usize = 20;
