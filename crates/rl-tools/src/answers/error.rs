//! Error answers: `{"error": ..., "kind": ..., "hint": ...}` and what the caller needs to
//! correct the call (the names that exist, the values allowed, the key that is missing). One
//! place for every face: the registry, and the CLI's `--json`.

use rl_settings::Value;
use serde::Serialize;

use crate::diagnosis::{Advice, diagnose};
use crate::error::FailureKind;
use crate::tool_specs::{TOOL_NAMES, specs};
use crate::{Tools, ToolsError};

/// The answer to a failed call: what failed, its kind, what to do, and the facts for doing it
/// (each present only for the errors it helps with).
#[derive(Debug, Clone, Serialize)]
pub struct ErrorAnswer {
    pub error: String,
    pub kind: FailureKind,
    pub hint: String,
    /// The tools that exist, or the environments or sweeps that do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub available: Option<Vec<String>>,
    /// The schema of the tool's argument object.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parameters: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active_runs: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub known_runs: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missing_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub closest: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub available_fields: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub locked_value: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_values: Option<Vec<Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_range: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suggestions: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub candidates: Option<Vec<String>>,
}

impl ErrorAnswer {
    fn new(error: String, kind: FailureKind, hint: &str) -> Self {
        Self {
            error,
            kind,
            hint: hint.to_owned(),
            available: None,
            parameters: None,
            active_runs: None,
            known_runs: None,
            missing_key: None,
            closest: None,
            available_fields: None,
            locked_value: None,
            expected: None,
            allowed_values: None,
            allowed_range: None,
            suggestions: None,
            candidates: None,
        }
    }

    /// The answer to a failed call. `tools` looks up the names to offer (environments,
    /// fields); without it the answer still has its hint.
    pub fn of(error: &ToolsError, tools: Option<&Tools>) -> Self {
        let diagnosis = diagnose(error);
        let mut answer = Self::new(error.to_string(), diagnosis.kind, "");
        answer.hint = match diagnosis.advice {
            Advice::CorrectRequest => "Correct the request as the error says".to_owned(),
            Advice::RetryWhenReady => "rl_health_check shows whether the machine is ready; the \
                                       same call may work once the cause is fixed"
                .to_owned(),
            Advice::CheckStateDirectory => {
                "Check the state directory; rl_health_check shows whether the machine is ready"
                    .to_owned()
            }
            Advice::ConfigureTree => "The operator must point rl at a tinker-atropos tree \
                                      (RL_TINKER_ATROPOS_ROOT or tinker_atropos_root in \
                                      config.toml); rl_health_check shows what is missing"
                .to_owned(),
            Advice::FixSettings => "The operator's configuration (config.toml in the state \
                                    directory, or RL_* variables) needs fixing; `rl doctor` shows \
                                    what is missing. A running `rl serve` or `rl mcp` reads \
                                    config.toml again when it changes (RL_* variables only as \
                                    it starts)"
                .to_owned(),
            Advice::KnownTools => {
                answer.available = Some(TOOL_NAMES.map(str::to_owned).to_vec());
                "Call one of `available`".to_owned()
            }
            Advice::ToolParameters { tool } => {
                answer.parameters = specs()
                    .into_iter()
                    .find(|spec| spec.name == tool)
                    .map(|spec| spec.parameters);
                "Pass an argument object that matches `parameters`".to_owned()
            }
            Advice::UnknownRun { active, known } => {
                answer.active_runs = Some(active.to_vec());
                answer.known_runs = Some(known.to_vec());
                "Pass a run id from rl_list_runs (`active_runs` lists those still going, \
                 `known_runs` the newest of all)"
                    .to_owned()
            }
            Advice::UnknownSweep { known } => {
                answer.available = Some(known.to_vec());
                "Pass one of the sweep ids in `available` (the newest), or one rl_start_sweep answered"
                    .to_owned()
            }
            Advice::MissingKey { variable } => {
                answer.missing_key = Some(variable.to_owned());
                format!(
                    "The operator must provide {variable} (environment or the state directory's .env)"
                )
            }
            Advice::SelectFirst => {
                "Select an environment first with rl_select_environment(name)".to_owned()
            }
            Advice::UnknownField { closest } => {
                answer.closest = Some(closest.to_vec());
                answer.available_fields = tools.and_then(KnownNames::field_names);
                "Pass one of `available_fields` (rl_get_current_config describes them)".to_owned()
            }
            Advice::LockedField { value } => {
                answer.locked_value = Some(value.clone());
                "Locked fields are the operator's; change another field".to_owned()
            }
            Advice::WrongType { expected } => {
                answer.expected = Some(expected.to_owned());
                "Pass a value of the expected type".to_owned()
            }
            Advice::NotAllowed { allowed } => {
                answer.allowed_values = Some(allowed.to_vec());
                "Pass one of `allowed_values`".to_owned()
            }
            Advice::OutOfRange { range } => {
                answer.allowed_range = Some(range.to_owned());
                "Pass a value inside `allowed_range`".to_owned()
            }
            Advice::UnknownEnvironment { suggestions } => {
                answer.suggestions = Some(suggestions.to_vec());
                answer.available = tools.and_then(KnownNames::environment_names);
                "Pass one of `available` (rl_list_environments shows them all)".to_owned()
            }
            Advice::AmbiguousEnvironment { candidates } => {
                answer.candidates = Some(candidates.to_vec());
                "Several environments share this name: pass one of `candidates`".to_owned()
            }
        };
        answer
    }

    /// A command's own refusal (its arguments as the CLI parsed them), in the same shape.
    pub fn of_command(message: String) -> Self {
        Self::new(
            message,
            FailureKind::BadRequest,
            "Correct the command as the error says",
        )
    }
}

/// The answer to a failed call as JSON; see [`ErrorAnswer::of`].
pub fn error_answer(error: &ToolsError, tools: Option<&Tools>) -> serde_json::Value {
    let answer = ErrorAnswer::of(error, tools);
    super::to_json(&answer).unwrap_or_else(|encoding| {
        serde_json::json!({"error": answer.error, "kind": answer.kind, "hint": encoding.to_string()})
    })
}

/// What an error answer lists of what there is (the environments an unknown name could have
/// meant, the fields an edit may set): asked of whoever knows them (`Tools`, in
/// `environments.rs`), so that answers depend on no operation.
pub(crate) trait KnownNames {
    fn environment_names(&self) -> Option<Vec<String>>;
    fn field_names(&self) -> Option<Vec<String>>;
}
