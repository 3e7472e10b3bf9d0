//! The `rl_*` tools as agents call them: a name, a JSON schema, a description, and a call that
//! takes a JSON argument object and always answers with a JSON object, `{"error": ...}` on
//! failure. MCP, HTTP and `rl tool call` are adapters of this one table.

use std::sync::Arc;

use rl_preflight::{Progress, ProgressSink};
use rl_settings::{Caps, Value};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, json};

use crate::answers::{RateLimited, error_answer, to_json};
use crate::error::FailureKind;
use crate::long_calls::{LongCall, LongCallState};
use crate::metrics::SourceChoice;
use crate::rate_limit::StatusChecks;
use crate::tool_specs::ToolName;
use crate::{Tools, ToolsError};

mod export;
mod install;
mod serving;
mod sweeps;
mod waiting;

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
    /// The call itself was malformed (an unknown tool, arguments that do not fit its
    /// parameters), not refused for what it asked: `rl tool call` exits 2 on it.
    pub malformed: bool,
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
    /// Whether a long call (a pre-flight, a comparison) waits for its end unless told
    /// `wait: false`; else it answers at once with its test's id unless told `wait: true`.
    waits: bool,
}

/// Hears how far a long call a caller waits on has got: done, of total, and a sentence.
pub type CallProgress = Arc<dyn Fn(f64, Option<f64>, String) + Send + Sync>;

/// How often a caller waiting on a detached test looks at it.
const FOLLOW_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    #[serde(default)]
    recursive: bool,
}

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
    #[serde(default)]
    max_cost: Option<f64>,
    #[serde(default)]
    max_tokens: Option<u64>,
    #[serde(default)]
    max_hours: Option<f64>,
    /// More steps than the parent's `total_steps`: an extension.
    #[serde(default)]
    steps: Option<u64>,
}

/// `rl_fork_training`'s arguments: the parent, the step whose saved state it continues, the
/// settings it changes (field → value, a string read as `rl config set` reads it, or a JSON
/// scalar), its own caps.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ForkArgs {
    run_id: String,
    step: u64,
    #[serde(default)]
    settings: std::collections::BTreeMap<String, Value>,
    #[serde(default)]
    allow_changes: bool,
    #[serde(default)]
    max_cost: Option<f64>,
    #[serde(default)]
    max_tokens: Option<u64>,
    #[serde(default)]
    max_hours: Option<f64>,
}

/// `rl_start_training`'s arguments: the run's own caps, each optional.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StartArgs {
    #[serde(default, rename = "max_cost")]
    cost: Option<f64>,
    #[serde(default, rename = "max_tokens")]
    tokens: Option<u64>,
    #[serde(default, rename = "max_hours")]
    hours: Option<f64>,
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
    base_url: Option<String>,
    wait: Option<bool>,
    test_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CompareArgs {
    run_id: Option<String>,
    step: Option<String>,
    num_steps: Option<u32>,
    group_size: Option<u32>,
    measure: Option<rl_preflight::Measure>,
    wait: Option<bool>,
    test_id: Option<String>,
}

impl Registry {
    pub fn new(tools: Tools) -> Self {
        Self { tools, waits: true }
    }

    /// Long calls answer at once with their test's id unless asked to wait (`wait: true`):
    /// for clients that give up on a call after tens of seconds (MCP's).
    #[must_use]
    pub fn answering_at_once(mut self) -> Self {
        self.waits = false;
        self
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
        self.call_reporting(name, arguments, caller, None).await
    }

    /// Calls a tool, telling `progress` how far a long call it waits on has got.
    pub async fn call_reporting(
        &self,
        name: &str,
        arguments: serde_json::Value,
        caller: Caller,
        progress: Option<CallProgress>,
    ) -> ToolReply {
        let outcome = self.dispatch(name, arguments, caller, progress).await;
        match outcome {
            Ok(value) => ToolReply {
                value,
                failure: None,
                malformed: false,
            },
            Err(error) => {
                let failure = Some(error.kind());
                let malformed = matches!(
                    error,
                    ToolsError::BadArguments { .. } | ToolsError::UnknownTool { .. }
                );
                let value = self
                    .tools
                    .blocking(move |tools| Ok(error_answer(&error, Some(tools))))
                    .await
                    .unwrap_or_else(|error| error_answer(&error, None));
                ToolReply {
                    value,
                    failure,
                    malformed,
                }
            }
        }
    }

    async fn dispatch(
        &self,
        name: &str,
        arguments: serde_json::Value,
        caller: Caller,
        progress: Option<CallProgress>,
    ) -> Result<serde_json::Value, ToolsError> {
        let Some(tool) = ToolName::named(name) else {
            return Err(ToolsError::UnknownTool {
                name: name.to_owned(),
            });
        };
        match tool {
            ToolName::ListEnvironments => {
                let ListArgs { recursive } = parse(name, arguments)?;
                self.tools
                    .blocking(move |tools| to_json(&tools.list_environments(recursive)?))
                    .await
            }
            ToolName::InstallEnvironment => {
                self.install_environment(name, arguments, progress).await
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
                let StartArgs {
                    cost,
                    tokens,
                    hours,
                } = parse(name, arguments)?;
                let asked = Caps {
                    max_cost: cost,
                    max_tokens: tokens,
                    max_hours: hours,
                };
                self.tools
                    .blocking(move |tools| to_json(&tools.start_training_with(&asked)?))
                    .await
            }
            ToolName::CheckStatus => {
                let StatusArgs { run_id, since } = parse(name, arguments)?;
                self.check_status(&run_id, i64::from(since), caller).await
            }
            ToolName::WaitTraining => self.wait_training(name, arguments, progress).await,
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
                    max_cost,
                    max_tokens,
                    max_hours,
                    steps,
                } = parse(name, arguments)?;
                let asked = Caps {
                    max_cost,
                    max_tokens,
                    max_hours,
                };
                self.tools
                    .blocking(move |tools| {
                        let id = tools.run_id(&run_id)?;
                        to_json(&tools.resume_training_with(&id, allow_changes, &asked, steps)?)
                    })
                    .await
            }
            ToolName::ForkTraining => {
                let ForkArgs {
                    run_id,
                    step,
                    settings,
                    allow_changes,
                    max_cost,
                    max_tokens,
                    max_hours,
                } = parse(name, arguments)?;
                let asked = Caps {
                    max_cost,
                    max_tokens,
                    max_hours,
                };
                let settings: Vec<(String, Value)> = settings.into_iter().collect();
                self.tools
                    .blocking(move |tools| {
                        let id = tools.run_id(&run_id)?;
                        to_json(&tools.fork_training(
                            &id,
                            step,
                            &settings,
                            allow_changes,
                            &asked,
                        )?)
                    })
                    .await
            }
            ToolName::StartSweep => self.start_sweep(name, arguments).await,
            ToolName::CheckSweep => self.check_sweep(name, arguments, caller).await,
            ToolName::StopSweep => self.stop_sweep(name, arguments).await,
            ToolName::GetResults => {
                let RunArgs { run_id } = parse(name, arguments)?;
                let id = self.tools.run_id(&run_id)?;
                to_json(&self.tools.results_answer(&id, SourceChoice::Auto).await?)
            }
            ToolName::ListRuns => {
                let NoArgs {} = parse(name, arguments)?;
                self.tools
                    .blocking(|tools| to_json(&tools.list_runs_with_usage()?))
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
                let given = args.num_steps.is_some()
                    || args.group_size.is_some()
                    || args.models.is_some()
                    || args.base_url.is_some();
                if let Some(test_id) = args.test_id {
                    return self
                        .follow_alone(tool, given, test_id, args.wait, progress)
                        .await;
                }
                checked_size(tool, args.num_steps, args.group_size)?;
                let call = LongCall::Inference {
                    models: args.models.unwrap_or_default(),
                    num_steps: args.num_steps,
                    group_size: args.group_size,
                    base_url: args.base_url,
                };
                self.long_call(call, args.wait, progress).await
            }
            ToolName::CompareTraining => {
                let args: CompareArgs = parse(name, arguments)?;
                let given = args.run_id.is_some()
                    || args.step.is_some()
                    || args.num_steps.is_some()
                    || args.group_size.is_some()
                    || args.measure.is_some();
                if let Some(test_id) = args.test_id {
                    return self
                        .follow_alone(tool, given, test_id, args.wait, progress)
                        .await;
                }
                let Some(run_id) = args.run_id else {
                    return Err(ToolsError::BadArguments {
                        tool: name.to_owned(),
                        reason: "missing field `run_id` (or give test_id alone, to follow a \
                                 comparison started earlier)"
                            .to_owned(),
                    });
                };
                checked_size(tool, args.num_steps, args.group_size)?;
                let call = LongCall::Compare {
                    run_id,
                    step: args.step,
                    num_steps: args.num_steps,
                    group_size: args.group_size,
                    measure: args.measure,
                };
                self.long_call(call, args.wait, progress).await
            }
            ToolName::StopTest => self.stop_test(name, arguments).await,
            ToolName::ExportCheckpoint => self.export_checkpoint(name, arguments).await,
            ToolName::ServeCheckpoint => self.serve_checkpoint(name, arguments).await,
            ToolName::ListServed => {
                let NoArgs {} = parse(name, arguments)?;
                self.tools.blocking(|tools| to_json(&tools.served()?)).await
            }
            ToolName::StopServing => self.stop_serving(name, arguments).await,
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
                // Read first: only a run that exists counts, so a mistyped id uses up no check;
                // a run that has ended changes no more, so reading it is never limited.
                let status = tools.run_status(&owned, since)?;
                if limited && !status.run.state.is_finished() {
                    let checks = StatusChecks::new(tools.home());
                    if let Some(left) = checks.admit(owned.as_str(), interval, now_seconds())? {
                        return Ok(Err(rate_limited(&owned, left)));
                    }
                }
                Ok(Ok(status))
            })
            .await?;
        match read {
            Ok(status) => to_json(
                &self
                    .tools
                    .with_metrics_and_accounting(status, SourceChoice::Auto)
                    .await?,
            ),
            Err(rate_limited) => Ok(rate_limited),
        }
    }

    /// A long call's test followed by its id, which comes alone (`given`: the call also had
    /// a new test's arguments).
    async fn follow_alone(
        &self,
        tool: ToolName,
        given: bool,
        test_id: String,
        wait: Option<bool>,
        progress: Option<CallProgress>,
    ) -> Result<serde_json::Value, ToolsError> {
        if given {
            return Err(ToolsError::BadArguments {
                tool: tool.name().to_owned(),
                reason: "test_id follows a test started earlier: give it alone (with wait at \
                         most), or leave it out to start one"
                    .to_owned(),
            });
        }
        self.follow(tool.name(), test_id, wait.unwrap_or(self.waits), progress)
            .await
    }

    /// A long call: started at once in a worker, or waited on (here, or in a worker followed
    /// until it ends when this face answers at once).
    async fn long_call(
        &self,
        call: LongCall,
        wait: Option<bool>,
        progress: Option<CallProgress>,
    ) -> Result<serde_json::Value, ToolsError> {
        let tool = call.tool();
        let wait = wait.unwrap_or(self.waits);
        if !wait {
            let started = self
                .tools
                .blocking(move |tools| tools.start_long_call(&call))
                .await?;
            return to_json(&started);
        }
        if self.waits {
            let planning = call.clone();
            let planned = self
                .tools
                .blocking(move |tools| tools.long_call_plan(&planning))
                .await?;
            return self
                .tools
                .run_long_call(&call, planned, None, heard(progress))
                .await;
        }
        let started = self
            .tools
            .blocking(move |tools| tools.start_long_call(&call))
            .await?;
        self.follow(tool, started.test_id, true, progress).await
    }

    /// A long call's test by its id: where it stands, or, with `wait`, its answer once it has
    /// ended (progress told on the way).
    async fn follow(
        &self,
        tool: &'static str,
        test_id: String,
        wait: bool,
        progress: Option<CallProgress>,
    ) -> Result<serde_json::Value, ToolsError> {
        loop {
            let id = test_id.clone();
            let state = self
                .tools
                .blocking(move |tools| tools.long_call_state(tool, &id))
                .await?;
            match state {
                LongCallState::Finished(answer) => return Ok(answer),
                LongCallState::Running(running) if !wait => return to_json(&running),
                LongCallState::Running(running) => {
                    if let Some(progress) = &progress {
                        progress(
                            f64::from(running.groups_done),
                            Some(f64::from(running.groups_total)),
                            format!(
                                "test {}: {} of {} model(s) done, {} of {} group(s)",
                                running.test_id,
                                running.models_done,
                                running.models_total,
                                running.groups_done,
                                running.groups_total
                            ),
                        );
                    }
                }
            }
            tokio::time::sleep(FOLLOW_EVERY).await;
        }
    }
}

/// The test's events told to `progress` as groups done of all.
fn heard(progress: Option<CallProgress>) -> ProgressSink {
    let Some(progress) = progress else {
        return Arc::new(|_: Progress| {});
    };
    let done = Arc::new(std::sync::Mutex::new(std::collections::BTreeMap::new()));
    Arc::new(move |event: Progress| {
        let Progress::Groups {
            model,
            done: groups,
            total,
        } = event
        else {
            return;
        };
        let Ok(mut done) = done.lock() else { return };
        done.insert(model, (groups, total));
        let (groups, total) = done
            .values()
            .fold((0, 0), |(d, t), (groups, total)| (d + groups, t + total));
        progress(
            f64::from(groups),
            Some(f64::from(total)),
            format!("{groups} of {total} group(s) done"),
        );
    })
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
        reason: rl_settings::with_quotes_bounded(&error.to_string()),
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
             Follow it without polling: rl_wait_training {{\"run_id\": \"{run_id}\"}} blocks until it logs its next \
             step or ends and answers what rl_check_status does (until: finished waits for its end); with a shell, \
             `rl runs wait {run_id} --until change` does the same. Or call rl_check_status again after \
             next_check_in_seconds."
        ),
        next_check_in_seconds: left.ceil(),
        hint: "Follow the run with rl_wait_training (not limited), or call rl_check_status again after next_check_in_seconds",
    };
    to_json(&answer).unwrap_or_else(|error| json!({"error": error.to_string()}))
}
