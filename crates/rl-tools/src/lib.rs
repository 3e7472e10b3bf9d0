//! The `rl_*` tools agents know, over the lower crates. So far: the requirements check behind
//! `rl_health_check` and `rl doctor`, and `rl envs new` (the registry of every tool, and its MCP
//! and HTTP faces, come with the tool-registry issue).

mod error;
mod health;
mod new_env;

pub use error::ToolsError;
pub use health::{Check, HealthReport, MIN_PYTHON, check as health_check};
pub use new_env::{NewEnvironment, new_environment};
