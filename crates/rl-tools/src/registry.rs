//! The `rl_*` tools as agents call them: a name, a JSON schema, a description, and a call that
//! takes a JSON argument object and always answers with a JSON object, `{"error": ...}` on
//! failure. MCP, HTTP and `rl tool call` are adapters of this one table.

use std::sync::Arc;

use rl_preflight::Progress;
use rl_settings::Value;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, json};

use crate::answer::error_answer;
use crate::error::FailureKind;
use crate::metrics::SourceChoice;
use crate::preflight::{InferenceOptions, report_json};
use crate::rate_limit::StatusChecks;
use crate::{Tools, ToolsError};

/// One tool as agents see it.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    pub name: &'static str,
    pub description: &'static str,
    /// JSON Schema of the argument object.
    pub parameters: serde_json::Value,
}

/// Who is calling: the status limit applies to agents only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    Agent,
    Person,
}

/// A tool's answer: always a JSON object; `failure` says what kind of error it holds, if any.
#[derive(Debug, Clone)]
pub struct ToolReply {
    pub value: serde_json::Value,
    pub failure: Option<FailureKind>,
}

impl ToolReply {
    pub fn is_error(&self) -> bool {
        self.failure.is_some()
    }
}

/// The largest pre-flight an agent may ask for: a test is a quick check, not a run, and every
/// completion is paid for at the endpoint.
pub const MAX_TEST_STEPS: u32 = 100;
pub const MAX_TEST_GROUP_SIZE: u32 = 256;

/// The tools by name; the spec and the call of each are exhaustive matches, so a tool cannot
/// be added without both. `ALL` must list it too, or no face can reach it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ToolName {
    ListEnvironments,
    SelectEnvironment,
    GetCurrentConfig,
    EditConfig,
    StartTraining,
    CheckStatus,
    StopTraining,
    GetResults,
    ListRuns,
    TestInference,
    HealthCheck,
}

impl ToolName {
    /// In the order an agent meets them.
    const ALL: [Self; 11] = [
        Self::ListEnvironments,
        Self::SelectEnvironment,
        Self::GetCurrentConfig,
        Self::EditConfig,
        Self::StartTraining,
        Self::CheckStatus,
        Self::StopTraining,
        Self::GetResults,
        Self::ListRuns,
        Self::TestInference,
        Self::HealthCheck,
    ];

    const fn name(self) -> &'static str {
        match self {
            Self::ListEnvironments => "rl_list_environments",
            Self::SelectEnvironment => "rl_select_environment",
            Self::GetCurrentConfig => "rl_get_current_config",
            Self::EditConfig => "rl_edit_config",
            Self::StartTraining => "rl_start_training",
            Self::CheckStatus => "rl_check_status",
            Self::StopTraining => "rl_stop_training",
            Self::GetResults => "rl_get_results",
            Self::ListRuns => "rl_list_runs",
            Self::TestInference => "rl_test_inference",
            Self::HealthCheck => "rl_health_check",
        }
    }

    fn named(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|tool| tool.name() == name)
    }
}

/// Every tool's name, in the order an agent meets them.
pub const TOOL_NAMES: [&str; ToolName::ALL.len()] = {
    let mut names = [""; ToolName::ALL.len()];
    let mut index = 0;
    while index < names.len() {
        names[index] = ToolName::ALL[index].name();
        index += 1;
    }
    names
};

fn no_parameters() -> serde_json::Value {
    json!({"type": "object", "properties": {}, "required": [], "additionalProperties": false})
}

fn run_id_parameter(what: &str) -> serde_json::Value {
    json!({"type": "string", "description": what, "pattern": "^[0-9a-f]{8}$"})
}

/// Every tool, in the order an agent meets them.
pub fn specs() -> Vec<ToolSpec> {
    ToolName::ALL.into_iter().map(ToolName::spec).collect()
}

impl ToolName {
    fn spec(self) -> ToolSpec {
        match self {
            Self::ListEnvironments => ToolSpec {
                name: self.name(),
                description: "List the RL environments found in the environments folder (Python classes \
                    derived from atroposlib's BaseEnv, read without running them). Use it first, to \
                    pick an environment. Returns `environments` (each with `name` to pass to \
                    rl_select_environment, `class_name`, `file_path`, `description`, `config_class`, \
                    `runnable`), `count`, `tips`, and the files that could not be read.",
                parameters: no_parameters(),
            },
            Self::SelectEnvironment => ToolSpec {
                name: self.name(),
                description: "Select the environment to configure and train; the choice is saved and \
                    replaces the previous selection and its edits. Returns the environment's \
                    `file_path` (read it to see how it loads data and scores answers), its config \
                    class, its number of fields, the locked fields and the WandB run name it will \
                    use. An unknown name is an error listing the names that exist.",
                parameters: json!({
                    "type": "object",
                    "properties": {"name": {"type": "string", "description": "An environment's name from rl_list_environments (or its key, `name@file.py`, where names repeat)"}},
                    "required": ["name"],
                    "additionalProperties": false
                }),
            },
            Self::GetCurrentConfig => ToolSpec {
                name: self.name(),
                description: "Show every field of the selected environment's configuration with the \
                    value a run would use now. Returns `configurable_fields` (name, type, default, \
                    current_value, description, allowed values) and `locked_fields` (set by the \
                    operator, with `locked_value`). Use it before rl_edit_config to see which fields \
                    exist and what they accept.",
                parameters: no_parameters(),
            },
            Self::EditConfig => ToolSpec {
                name: self.name(),
                description: "Set one configuration field of the selected environment for the next \
                    run. The value is checked against the field's type, range and allowed values \
                    (\"16\" is read as 16 for an integer field); locked fields are refused. Also \
                    accepts `wandb_project`. Returns the new and previous value and the whole \
                    configuration; a refused edit changes nothing and says what is allowed.",
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "field": {"type": "string", "description": "A field name from rl_get_current_config"},
                        "value": {"description": "The new value: a number, string, boolean, list or null, as the field's type allows"}
                    },
                    "required": ["field", "value"],
                    "additionalProperties": false
                }),
            },
            Self::StartTraining => ToolSpec {
                name: self.name(),
                description: "Start a training run of the selected environment with its current \
                    configuration: the Atropos API, the Tinker trainer and the environment, on free \
                    local ports. Returns at once with `run_id`, `status` (starting), the run's \
                    config file, WandB names and log paths; the run goes on in the background and \
                    survives this call. Needs TINKER_API_KEY unless the operator's trainer needs \
                    none. Training takes hours: check it with rl_check_status now and then.",
                parameters: no_parameters(),
            },
            Self::CheckStatus => ToolSpec {
                name: self.name(),
                description: "A run's state and latest training numbers. Returns `status` (starting, \
                    running, stopping, stopped, completed, failed, lost), each process's state, \
                    log paths, `metrics` (step, reward_mean, loss, percent_correct, \
                    eval_percent_correct, ... each null until logged), a health digest with warning \
                    signs, and the run's events. Agents may check one run once per interval set by \
                    the operator (30 minutes unless changed); an earlier call answers \
                    `rate_limited` with the time left.",
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "run_id": run_id_parameter("The run id from rl_start_training or rl_list_runs"),
                        "since": {"type": "integer", "minimum": 0, "default": 0, "description": "Only events after this cursor (`next_since` of an earlier answer)"}
                    },
                    "required": ["run_id"],
                    "additionalProperties": false
                }),
            },
            Self::StopTraining => ToolSpec {
                name: self.name(),
                description: "Stop a run: the environment, the trainer and the API, each with all its \
                    child processes. Use it when metrics look wrong or flat, or to try other \
                    settings. Returns `message`, the run's `status` afterwards and whether anything \
                    was stopped (a run that has already ended is left as it is).",
                parameters: json!({
                    "type": "object",
                    "properties": {"run_id": run_id_parameter("The run to stop")},
                    "required": ["run_id"],
                    "additionalProperties": false
                }),
            },
            Self::GetResults => ToolSpec {
                name: self.name(),
                description: "A run's results so far or final: `metrics` (latest numbers), \
                    `final_metrics` (the trainer's last value of every logged key), `history` \
                    (every step), `final_weights` (the tinker:// path, once the trainer reports \
                    it), checkpoints, a health digest and WandB links. Read from the run's folder \
                    first, WandB's API only when needed.",
                parameters: json!({
                    "type": "object",
                    "properties": {"run_id": run_id_parameter("The run to read")},
                    "required": ["run_id"],
                    "additionalProperties": false
                }),
            },
            Self::ListRuns => ToolSpec {
                name: self.name(),
                description: "List every training run this machine knows, newest first, running or \
                    ended, with `run_id`, `environment`, `status` and the WandB run name. Returns \
                    `runs` and `count`.",
                parameters: no_parameters(),
            },
            Self::TestInference => ToolSpec {
                name: self.name(),
                description: "Pre-flight the selected environment before training: run it in \
                    atroposlib's process mode against several models (num_steps groups of \
                    group_size completions each, models at once) on the operator's inference \
                    endpoint (OpenRouter unless configured; needs its key). Takes minutes. Returns \
                    per model the accuracy, steps with a correct answer, zero-variance groups and \
                    errors with their log, and a `summary` with a verdict (ready, too easy, too \
                    hard, no signal, broken) explaining whether training can learn from it.",
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "num_steps": {"type": "integer", "minimum": 1, "maximum": MAX_TEST_STEPS, "default": 3, "description": "Groups per model"},
                        "group_size": {"type": "integer", "minimum": 1, "maximum": MAX_TEST_GROUP_SIZE, "default": 16, "description": "Completions per group, as in training"},
                        "models": {"type": "array", "items": {"type": "string"}, "description": "Model ids as the endpoint names them (default: the operator's list, else qwen/qwen3-8b, z-ai/glm-4.7-flash, minimax/minimax-m2.7)"}
                    },
                    "required": [],
                    "additionalProperties": false
                }),
            },
            Self::HealthCheck => ToolSpec {
                name: self.name(),
                description: "Check what training needs on this machine: the operator's settings \
                    readable, Python 3.11 or newer, atroposlib importable (and its version), the \
                    tinker-atropos tree and its environments, TINKER_API_KEY / WANDB_API_KEY / \
                    OPENROUTER_API_KEY present (never their values), a writable state directory. \
                    Returns `healthy` and each check with what was found and the fix when it is \
                    missing.",
                parameters: no_parameters(),
            },
        }
    }
}

/// The tool table with its operations.
#[derive(Clone)]
pub struct Registry {
    tools: Tools,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SelectArgs {
    name: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EditArgs {
    field: String,
    value: Value,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RunArgs {
    run_id: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StatusArgs {
    run_id: String,
    #[serde(default)]
    since: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InferenceArgs {
    num_steps: Option<u32>,
    group_size: Option<u32>,
    #[serde(default)]
    models: Option<Vec<String>>,
}

impl Registry {
    pub fn new(tools: Tools) -> Self {
        Self { tools }
    }

    pub fn tools(&self) -> &Tools {
        &self.tools
    }

    /// Calls a tool. Never fails and never panics outward: every problem is an error reply.
    pub async fn call(
        &self,
        name: &str,
        arguments: serde_json::Value,
        caller: Caller,
    ) -> ToolReply {
        let outcome = self.dispatch(name, arguments, caller).await;
        match outcome {
            Ok(value) => ToolReply {
                value,
                failure: None,
            },
            Err(error) => {
                let failure = Some(error.kind());
                let value = self
                    .tools
                    .blocking(move |tools| Ok(error_answer(&error, Some(tools))))
                    .await
                    .unwrap_or_else(|error| error_answer(&error, None));
                ToolReply { value, failure }
            }
        }
    }

    async fn dispatch(
        &self,
        name: &str,
        arguments: serde_json::Value,
        caller: Caller,
    ) -> Result<serde_json::Value, ToolsError> {
        let Some(tool) = ToolName::named(name) else {
            return Err(ToolsError::UnknownTool {
                name: name.to_owned(),
            });
        };
        match tool {
            ToolName::ListEnvironments => {
                let NoArgs {} = parse(name, arguments)?;
                self.tools
                    .blocking(|tools| to_json(tools.list_environments(false)?))
                    .await
            }
            ToolName::SelectEnvironment => {
                let SelectArgs { name } = parse(name, arguments)?;
                self.tools
                    .blocking(move |tools| to_json(tools.select_environment(&name)?))
                    .await
            }
            ToolName::GetCurrentConfig => {
                let NoArgs {} = parse(name, arguments)?;
                self.tools
                    .blocking(|tools| to_json(tools.current_config()?))
                    .await
            }
            ToolName::EditConfig => {
                let EditArgs { field, value } = parse(name, arguments)?;
                self.tools
                    .blocking(move |tools| to_json(tools.edit_config(&field, &value)?))
                    .await
            }
            ToolName::StartTraining => {
                let NoArgs {} = parse(name, arguments)?;
                self.tools
                    .blocking(|tools| to_json(tools.start_training()?))
                    .await
            }
            ToolName::CheckStatus => {
                let StatusArgs { run_id, since } = parse(name, arguments)?;
                self.check_status(&run_id, i64::from(since), caller).await
            }
            ToolName::StopTraining => {
                let RunArgs { run_id } = parse(name, arguments)?;
                self.tools
                    .blocking(move |tools| {
                        let id = tools.run_id(&run_id)?;
                        to_json(tools.stop_training(&id)?)
                    })
                    .await
            }
            ToolName::GetResults => {
                let RunArgs { run_id } = parse(name, arguments)?;
                let id = self.tools.run_id(&run_id)?;
                to_json(self.tools.results(&id, SourceChoice::Auto).await?)
            }
            ToolName::ListRuns => {
                let NoArgs {} = parse(name, arguments)?;
                self.tools
                    .blocking(|tools| to_json(tools.list_runs()?))
                    .await
            }
            ToolName::TestInference => {
                let args: InferenceArgs = parse(name, arguments)?;
                self.test_inference(args).await
            }
            ToolName::HealthCheck => {
                let NoArgs {} = parse(name, arguments)?;
                self.tools
                    .blocking(|tools| to_json(tools.health_check()))
                    .await
            }
        }
    }

    async fn check_status(
        &self,
        run_id: &str,
        since: i64,
        caller: Caller,
    ) -> Result<serde_json::Value, ToolsError> {
        let id = self.tools.run_id(run_id)?;
        // Settings that cannot be read leave the limit at its default, never off.
        let interval = self.tools.settings().map_or(
            rl_settings::DEFAULT_STATUS_CHECK_INTERVAL_SECS,
            |settings| settings.status_check_interval_secs,
        );
        let limited = caller == Caller::Agent && interval > 0.0;
        let owned = id.clone();
        let read = self
            .tools
            .blocking(move |tools| {
                // Read first: only a run that exists counts, so a mistyped id uses up no check.
                let status = tools.run_status(&owned, since)?;
                if limited {
                    let checks = StatusChecks::new(tools.home());
                    if let Some(left) = checks.admit(owned.as_str(), interval, now_seconds())? {
                        return Ok(Err(rate_limited(&owned, left)));
                    }
                }
                Ok(Ok(status))
            })
            .await?;
        match read {
            Ok(status) => to_json(self.tools.with_metrics(status, SourceChoice::Auto).await?),
            Err(rate_limited) => Ok(rate_limited),
        }
    }

    async fn test_inference(&self, args: InferenceArgs) -> Result<serde_json::Value, ToolsError> {
        for (name, value, limit) in [
            ("num_steps", args.num_steps, MAX_TEST_STEPS),
            ("group_size", args.group_size, MAX_TEST_GROUP_SIZE),
        ] {
            if let Some(value) = value
                && !(1..=limit).contains(&value)
            {
                return Err(ToolsError::BadArguments {
                    tool: "rl_test_inference".to_owned(),
                    reason: format!("{name} is {value}; it must be between 1 and {limit}"),
                });
            }
        }
        let options = InferenceOptions {
            models: args.models.unwrap_or_default(),
            num_steps: args.num_steps,
            group_size: args.group_size,
            ..InferenceOptions::default()
        };
        let plan = self
            .tools
            .blocking(move |tools| tools.inference_plan(options))
            .await?;
        let report = self
            .tools
            .test_inference(&plan, Arc::new(|_: Progress| {}))
            .await?;
        report_json(&report)
    }
}

/// The argument object, `null` or absent counting as `{}`.
fn parse<T: DeserializeOwned>(tool: &str, arguments: serde_json::Value) -> Result<T, ToolsError> {
    let arguments = match arguments {
        serde_json::Value::Null => serde_json::Value::Object(Map::new()),
        serde_json::Value::Object(_) => arguments,
        other => {
            return Err(ToolsError::BadArguments {
                tool: tool.to_owned(),
                reason: format!("arguments must be a JSON object, not {}", json_kind(&other)),
            });
        }
    };
    serde_json::from_value(arguments).map_err(|error| ToolsError::BadArguments {
        tool: tool.to_owned(),
        reason: error.to_string(),
    })
}

fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

fn to_json<T: serde::Serialize>(value: T) -> Result<serde_json::Value, ToolsError> {
    serde_json::to_value(value)
        .map_err(|error| ToolsError::Internal(format!("cannot encode the answer: {error}")))
}

fn now_seconds() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |elapsed| elapsed.as_secs_f64())
}

fn rate_limited(run_id: &rl_settings::RunId, left: f64) -> serde_json::Value {
    let minutes = (left / 60.0).ceil();
    json!({
        "rate_limited": true,
        "run_id": run_id.as_str(),
        "message": format!(
            "Run {run_id} was checked less than the allowed interval ago; the next check is allowed in {minutes:.0} minute(s). \
             Training changes slowly. With a shell, follow it without polling: block until it changes with \
             `rl runs wait {run_id} --until change`, or read only new events with `rl runs events {run_id} --since N`; \
             otherwise call rl_check_status again after next_check_in_seconds."
        ),
        "next_check_in_seconds": left.ceil(),
        "hint": "Call again after next_check_in_seconds, or follow the run with `rl runs wait` / `rl runs events`",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_leads_back_to_its_tool() {
        for tool in ToolName::ALL {
            assert_eq!(ToolName::named(tool.name()), Some(tool));
        }
        let distinct: std::collections::BTreeSet<_> = TOOL_NAMES.iter().collect();
        assert_eq!(distinct.len(), TOOL_NAMES.len());
        assert_eq!(ToolName::named("rl_no_such_tool"), None);
    }
}
