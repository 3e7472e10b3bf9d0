//! The `rl_*` tools as agents call them: a name, a JSON schema, a description, and a call that
//! takes a JSON argument object and always answers with a JSON object, `{"error": ...}` on
//! failure. MCP, HTTP and `rl tool call` are adapters of this one table.

use std::sync::Arc;

use rl_preflight::Progress;
use rl_settings::Value;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, json};

use crate::answers::{RateLimited, error_answer, report_json, to_json};
use crate::compare::CompareOptions;
use crate::error::FailureKind;
use crate::metrics::SourceChoice;
use crate::preflight::InferenceOptions;
use crate::rate_limit::StatusChecks;
use crate::tool_specs::ToolName;
use crate::{Tools, ToolsError};

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
struct CheckpointsArgs {
    #[serde(default)]
    run_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ResumeArgs {
    run_id: String,
    #[serde(default)]
    allow_changes: bool,
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CompareArgs {
    run_id: String,
    step: Option<String>,
    num_steps: Option<u32>,
    group_size: Option<u32>,
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
                    .blocking(|tools| to_json(&tools.list_environments(false)?))
                    .await
            }
            ToolName::SelectEnvironment => {
                let SelectArgs { name } = parse(name, arguments)?;
                self.tools
                    .blocking(move |tools| to_json(&tools.select_environment(&name)?))
                    .await
            }
            ToolName::GetCurrentConfig => {
                let NoArgs {} = parse(name, arguments)?;
                self.tools
                    .blocking(|tools| to_json(&tools.current_config()?))
                    .await
            }
            ToolName::EditConfig => {
                let EditArgs { field, value } = parse(name, arguments)?;
                self.tools
                    .blocking(move |tools| to_json(&tools.edit_config(&field, &value)?))
                    .await
            }
            ToolName::StartTraining => {
                let NoArgs {} = parse(name, arguments)?;
                self.tools
                    .blocking(|tools| to_json(&tools.start_training()?))
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
                        to_json(&tools.stop_training(&id)?)
                    })
                    .await
            }
            ToolName::ResumeTraining => {
                let ResumeArgs {
                    run_id,
                    allow_changes,
                } = parse(name, arguments)?;
                self.tools
                    .blocking(move |tools| {
                        let id = tools.run_id(&run_id)?;
                        to_json(&tools.resume_training(&id, allow_changes)?)
                    })
                    .await
            }
            ToolName::GetResults => {
                let RunArgs { run_id } = parse(name, arguments)?;
                let id = self.tools.run_id(&run_id)?;
                to_json(&self.tools.results(&id, SourceChoice::Auto).await?)
            }
            ToolName::ListRuns => {
                let NoArgs {} = parse(name, arguments)?;
                self.tools
                    .blocking(|tools| to_json(&tools.list_runs()?))
                    .await
            }
            ToolName::ListCheckpoints => {
                let CheckpointsArgs { run_id } = parse(name, arguments)?;
                self.tools
                    .blocking(move |tools| {
                        let id = run_id.map(|id| tools.run_id(&id)).transpose()?;
                        to_json(&tools.list_checkpoints(id.as_ref())?)
                    })
                    .await
            }
            ToolName::TestInference => {
                let args: InferenceArgs = parse(name, arguments)?;
                self.test_inference(args).await
            }
            ToolName::CompareTraining => {
                let args: CompareArgs = parse(name, arguments)?;
                self.compare_training(args).await
            }
            ToolName::HealthCheck => {
                let NoArgs {} = parse(name, arguments)?;
                self.tools
                    .blocking(|tools| to_json(&tools.health_check()))
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
            Ok(status) => to_json(&self.tools.with_metrics(status, SourceChoice::Auto).await?),
            Err(rate_limited) => Ok(rate_limited),
        }
    }

    async fn test_inference(&self, args: InferenceArgs) -> Result<serde_json::Value, ToolsError> {
        checked_size(ToolName::TestInference, args.num_steps, args.group_size)?;
        let options = InferenceOptions {
            models: args.models.unwrap_or_default(),
            num_steps: args.num_steps,
            group_size: args.group_size,
            ..InferenceOptions::default()
        };
        let plan = self
            .tools
            .blocking(move |tools| tools.inference_plan(&options))
            .await?;
        let report = self
            .tools
            .test_inference(&plan, Arc::new(|_: Progress| {}))
            .await?;
        report_json(&report)
    }

    async fn compare_training(&self, args: CompareArgs) -> Result<serde_json::Value, ToolsError> {
        checked_size(ToolName::CompareTraining, args.num_steps, args.group_size)?;
        let defaults = CompareOptions::default();
        let options = CompareOptions {
            step: args.step,
            prompts: args.num_steps.unwrap_or(defaults.prompts),
            group_size: args.group_size.unwrap_or(defaults.group_size),
            ..defaults
        };
        let (id, plan) = self
            .tools
            .blocking(move |tools| {
                let id = tools.run_id(&args.run_id)?;
                let plan = tools.compare_plan(&id, &options)?;
                Ok((id, plan))
            })
            .await?;
        let report = self
            .tools
            .test_inference(&plan.test, Arc::new(|_: Progress| {}))
            .await?;
        to_json(&self.tools.comparison(&id, plan.trained, &report)?)
    }
}

/// A test's size checked before its plan, which needs a selection and a key: an oversized test
/// is refused as the bad argument it is.
fn checked_size(
    tool: ToolName,
    steps: Option<u32>,
    group_size: Option<u32>,
) -> Result<(), ToolsError> {
    rl_preflight::check_size(steps, group_size).map_err(|error| ToolsError::BadArguments {
        tool: tool.name().to_owned(),
        reason: error.to_string(),
    })
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

fn now_seconds() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |elapsed| elapsed.as_secs_f64())
}

fn rate_limited(run_id: &rl_settings::RunId, left: f64) -> serde_json::Value {
    let minutes = (left / 60.0).ceil();
    let answer = RateLimited {
        rate_limited: true,
        run_id: run_id.to_string(),
        message: format!(
            "Run {run_id} was checked less than the allowed interval ago; the next check is allowed in {minutes:.0} minute(s). \
             Training changes slowly. With a shell, follow it without polling: block until it changes with \
             `rl runs wait {run_id} --until change`, or read only new events with `rl runs events {run_id} --since N`; \
             otherwise call rl_check_status again after next_check_in_seconds."
        ),
        next_check_in_seconds: left.ceil(),
        hint: "Call again after next_check_in_seconds, or follow the run with `rl runs wait` / `rl runs events`",
    };
    to_json(&answer).unwrap_or_else(|error| json!({"error": error.to_string()}))
}
