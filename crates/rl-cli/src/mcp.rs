//! `rl mcp`: the tool registry as a Model Context Protocol server over stdio.
//!
//! The tools are a runtime table (`rl_tools::Registry`), so the handler is written by hand: each
//! spec becomes a tool whose input schema is the spec's parameters, and each call's reply — a
//! JSON object, `{"error": ...}` on failure — is returned as one compact JSON text block, also as
//! structured content, with `isError` set from the reply. Standard output carries protocol
//! messages only. When the client closes standard input, or on SIGINT / SIGTERM / SIGHUP, the server
//! ends; training runs and the tests of long calls run detached (a supervisor, a worker) and go
//! on, followed by id from the next session.
//!
//! Every line from the client passes `wire`'s filter before rmcp: malformed JSON-RPC gets its
//! error answer there (issue 45); what the MCP face repeats of a client's strings is bounded by
//! `rl_settings::quoted`.

use std::time::Duration;

use anyhow::Context as _;
use rl_tools::{CallProgress, Caller, Registry, ToolReply, ToolSpec};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, CreateTaskResult,
    CustomRequest, CustomResult, ErrorCode, GetTaskParams, GetTaskResult, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ProgressToken,
    ServerCapabilities, ServerConfig, Tool, UpdateTaskParams,
};
use rmcp::service::{QuitReason, RequestContext};
use rmcp::task_manager::{TaskExit, TaskManager, TaskOptions};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

use crate::context::{Context, end_what_killed_tests_left, interrupted};

mod wire;

/// What an agent reads first: the order the tools are meant to be used in.
const INSTRUCTIONS: &str = "rl trains language models with reinforcement learning on Atropos and \
verifiers environments, on the trainer the operator configured (a local engine on this machine, \
or the hosted Tinker service). Workflow: rl_list_environments to see the environments, \
rl_select_environment to pick one (read its file_path to see how it loads data and scores \
answers), rl_get_current_config and rl_edit_config to review and change its configuration, \
rl_test_inference to check that models can learn from it, rl_start_training to start a run (it \
goes on in the background: minutes for a small model on the local engine, hours for a large one), \
rl_wait_training to follow it (it blocks until the run logs a step or ends; rl_check_status is a \
single look, limited to once per interval for a run still going, 30 minutes unless the operator \
changed it), rl_stop_training to stop a run that looks wrong, rl_get_results for the metrics and \
final weights, rl_compare_training to see whether training helped, rl_export_checkpoint to hand \
the trained model over as a folder, rl_resume_training to continue a stopped or failed run from \
its last saved state (or a completed one by more steps), rl_fork_training to branch a run from a \
step it saved with other settings, rl_start_sweep to train a grid of settings a few runs at a \
time (rl_check_sweep ranks them, rl_stop_sweep ends it), rl_list_checkpoints for what a run \
saved, rl_serve_checkpoint to serve one as an OpenAI-compatible endpoint. rl_list_runs lists the \
runs; rl_health_check says what the machine lacks. Every call answers within seconds but \
rl_wait_training (as long as it is told to wait) and rl_export_checkpoint with merged: the tests \
that take minutes (rl_test_inference, rl_compare_training) answer with a test_id and \
poll_after_seconds, go on by themselves, are followed by calling the same tool with \
{\"test_id\": ID} until their status is no longer running, and are stopped with rl_stop_test \
(a client that declared the MCP tasks extension gets them as tasks instead). Every answer is a \
JSON object; a failed call answers {\"error\": ..., \"hint\": ...} and says how to correct it.";

/// How long pending tool calls may take to wind down once the session is over.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// How long rmcp's last lines may take to reach stdout once the session is over.
const WIRE_GRACE: Duration = Duration::from_secs(2);

pub(crate) fn run(context: &Context) -> anyhow::Result<()> {
    let registry = context.registry()?.answering_at_once();
    end_what_killed_tests_left(registry.tools(), "rl mcp");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("rl-mcp")
        .enable_all()
        .build()
        .context("cannot start the MCP server's runtime")?;
    let served = runtime.block_on(serve(RlServer::new(registry.clone())));
    // A pre-flight still running belongs to this session: stop its models (whole process
    // groups), then drop the calls still pending, then stop whatever they started meanwhile.
    let models = registry.tools().model_runner();
    models.stop_all();
    runtime.shutdown_timeout(SHUTDOWN_GRACE);
    models.stop_all();
    served
}

/// Serves one session on stdio until the client closes it or a signal arrives.
async fn serve(server: RlServer) -> anyhow::Result<()> {
    // One future for the whole session, so no signal falls between the two waits.
    let stop = interrupted();
    tokio::pin!(stop);
    let (stdin, stdout) = rmcp::transport::stdio_pipes();
    let (transport, wire) = wire::filter(stdin, stdout);
    let running = tokio::select! {
        started = server.serve(transport) => started,
        () = &mut stop => {
            wire.finish(WIRE_GRACE).await;
            return Ok(());
        }
    };
    let running = match running {
        Ok(running) => running,
        Err(error) => {
            wire.finish(WIRE_GRACE).await;
            return Err(error).context("the MCP session did not start");
        }
    };
    let token = running.cancellation_token();
    let waiting = running.waiting();
    tokio::pin!(waiting);
    let quit = tokio::select! {
        quit = &mut waiting => quit,
        () = &mut stop => {
            token.cancel();
            waiting.await
        }
    };
    // rmcp's last answers may still be in the pipe to stdout.
    wire.finish(WIRE_GRACE).await;
    match quit {
        Ok(QuitReason::JoinError(error)) | Err(error) => {
            Err(anyhow::anyhow!("the MCP session failed: {error}"))
        }
        Ok(_) => Ok(()),
    }
}

/// How long a finished task's answer is kept for `tasks/get`, and how often a client should
/// look (a test moves in seconds at best).
const TASK_TTL_MS: u64 = 24 * 3600 * 1000;
const TASK_POLL_MS: u64 = 2000;

/// The MCP face of the registry.
#[derive(Clone)]
struct RlServer {
    registry: Registry,
    tools: Vec<Tool>,
    tasks: TaskManager,
}

impl RlServer {
    fn new(registry: Registry) -> Self {
        let tools = rl_tools::specs().iter().map(tool_of).collect();
        Self {
            registry,
            tools,
            tasks: TaskManager::new(),
        }
    }
}

impl ServerHandler for RlServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build(),
        )
        .with_server_info(
            Implementation::new("rl", env!("CARGO_PKG_VERSION")).with_title(
                "rl: RL training of language models on Atropos and verifiers environments",
            ),
        )
        .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.clone()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.iter().find(|tool| tool.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request
            .arguments
            .map_or_else(|| Value::Object(JsonObject::new()), Value::Object);
        let name = request.name.into_owned();
        let progress = context
            .meta
            .get_progress_token()
            .map(|token| progress_to(context.peer.clone(), token));
        let as_task = rl_tools::LONG_TOOLS.contains(&name.as_str())
            && context
                .client_capabilities()
                .is_some_and(|capabilities| capabilities.supports_tasks())
            && arguments.get("test_id").is_none()
            && arguments.get("wait") != Some(&Value::Bool(false));
        if as_task {
            return Ok(self.task(name, arguments, progress).into());
        }
        Ok(result_of(called(self.registry.clone(), name, arguments, progress).await).into())
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let task = self
            .tasks
            .get_task(&request.task_id)
            .map_err(|error| echo_bounded(error, &request.task_id))?;
        Ok(GetTaskResult::new(task))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.tasks
            .update_task(&request.task_id, request.input_responses)
            .map_err(|error| echo_bounded(error, &request.task_id))
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.tasks
            .cancel_task(&request.task_id)
            .map_err(|error| echo_bounded(error, &request.task_id))
    }

    /// A method rmcp does not know: its answer names the method, bounded (rmcp's would repeat
    /// all of it).
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        Err(ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!("Method not found: {}", rl_settings::quoted(&request.method)),
            None,
        ))
    }
}

/// `error` with `given` (a client's string it repeats) bounded by `rl_settings::quoted`.
fn echo_bounded(mut error: ErrorData, given: &str) -> ErrorData {
    let bounded = rl_settings::quoted(given);
    if bounded != given && error.message.contains(given) {
        error.message = error.message.replace(given, &bounded).into();
    }
    error
}

impl RlServer {
    /// A long call as an MCP task: the test starts in its worker (it outlives this server),
    /// the task follows it to its answer, telling its progress, and a cancelled task stops
    /// the test.
    fn task(
        &self,
        name: String,
        arguments: Value,
        progress: Option<CallProgress>,
    ) -> CreateTaskResult {
        let registry = self.registry.clone();
        let options = TaskOptions::new()
            .with_ttl_ms(TASK_TTL_MS)
            .with_poll_interval_ms(TASK_POLL_MS);
        let task = self.tasks.spawn(options, move |task| {
            Box::pin(async move {
                let mut start = arguments;
                if let Value::Object(fields) = &mut start {
                    fields.insert("wait".to_owned(), Value::Bool(false));
                }
                let started = called(registry.clone(), name.clone(), start, None).await;
                let test_id = match started.value.get("test_id").and_then(Value::as_str) {
                    Some(test_id) if !started.is_error() => test_id.to_owned(),
                    _ => return Ok(result_of(started)),
                };
                if let Some(message) = started.value.get("message").and_then(Value::as_str) {
                    task.set_status_message(message);
                }
                let follow = json!({"test_id": test_id, "wait": true});
                // `tasks/get` tells what a progress notification tells.
                let told = task.clone();
                let progress: CallProgress =
                    std::sync::Arc::new(move |done: f64, total: Option<f64>, message: String| {
                        told.set_status_message(message.clone());
                        if let Some(progress) = &progress {
                            progress(done, total, message);
                        }
                    });
                tokio::select! {
                    () = task.cancelled() => {
                        let tools = registry.tools().clone();
                        let _ = tokio::task::spawn_blocking(move || tools.stop_preflight(&test_id)).await;
                        Err(TaskExit::Cancelled)
                    }
                    reply = called(registry.clone(), name, follow, Some(progress)) => Ok(result_of(reply)),
                }
            })
        });
        CreateTaskResult::new(task)
    }
}

/// Runs a call in a task of its own: it goes to its end even if the client gives up on it (a
/// run half-started is worse than an answer nobody reads), and a panic is an error reply.
async fn called(
    registry: Registry,
    name: String,
    arguments: Value,
    progress: Option<CallProgress>,
) -> ToolReply {
    tokio::spawn(async move {
        registry
            .call_reporting(&name, arguments, Caller::Agent, progress)
            .await
    })
    .await
    .unwrap_or_else(|error| ToolReply {
        value: json!({
            "error": format!("the tool failed unexpectedly: {error}"),
            "kind": rl_tools::FailureKind::Internal,
            "hint": "rl_health_check shows whether the machine is ready; the same call may work again",
        }),
        failure: Some(rl_tools::FailureKind::Internal),
        malformed: false,
    })
}

/// What a progress notification says next: the groups done, or, while they stay the same, a
/// value creeping from them towards the next one, never past `total`. `None` when it cannot
/// grow (every group done, the answer not yet there): the protocol wants each value above the
/// last, and at most the total.
#[derive(Debug, Clone, Copy)]
struct Creep {
    base: f64,
    repeats: u32,
}

impl Creep {
    const START: Self = Self {
        base: f64::NEG_INFINITY,
        repeats: 0,
    };

    fn next(&mut self, done: f64, total: Option<f64>) -> Option<f64> {
        if done > self.base {
            *self = Self {
                base: done,
                repeats: 0,
            };
            return Some(done);
        }
        let room = (total.unwrap_or(f64::INFINITY) - self.base).min(1.0);
        if room <= 0.0 {
            return None;
        }
        self.repeats = self.repeats.saturating_add(1);
        Some(self.base + 0.99 * room * (1.0 - 1.0 / f64::from(self.repeats + 1)))
    }
}

/// `notifications/progress` for the request that gave `token`, as `Creep` says.
fn progress_to(peer: Peer<RoleServer>, token: ProgressToken) -> CallProgress {
    let creep = std::sync::Mutex::new(Creep::START);
    std::sync::Arc::new(move |done: f64, total: Option<f64>, message: String| {
        let Ok(mut creep) = creep.lock() else { return };
        let Some(value) = creep.next(done, total) else {
            return;
        };
        let mut notification =
            ProgressNotificationParam::new(token.clone(), value).with_message(message);
        if let Some(total) = total {
            notification = notification.with_total(total);
        }
        let peer = peer.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                // A client that stopped listening is no reason to stop the work.
                let _ = peer.notify_progress(notification).await;
            });
        }
    })
}

/// A registry spec as an MCP tool: the parameters are the input schema.
fn tool_of(spec: &ToolSpec) -> Tool {
    let schema = if let Value::Object(schema) = &spec.parameters {
        schema.clone()
    } else {
        let mut schema = JsonObject::new();
        schema.insert("type".to_owned(), json!("object"));
        schema
    };
    Tool::new(spec.name, spec.description, schema)
}

/// A reply as one compact JSON text block, the same object as structured content.
fn result_of(reply: ToolReply) -> CallToolResult {
    if reply.is_error() {
        CallToolResult::structured_error(reply.value)
    } else {
        CallToolResult::structured(reply.value)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn every_spec_is_a_tool_with_its_schema() {
        for spec in rl_tools::specs() {
            let tool = tool_of(&spec);
            assert_eq!(tool.name, spec.name);
            assert_eq!(tool.description.as_deref(), Some(spec.description));
            assert_eq!(tool.schema_as_json_value(), spec.parameters);
            assert_eq!(tool.input_schema["type"], "object");
        }
    }

    #[test]
    fn progress_grows_with_each_notification_and_never_passes_the_total() {
        let mut creep = Creep::START;
        let mut said = Vec::new();
        for done in [0.0, 1.0, 1.0, 1.0, 3.0, 4.0, 4.0, 4.0] {
            if let Some(value) = creep.next(done, Some(4.0)) {
                said.push(value);
            }
        }
        assert!(said.windows(2).all(|pair| pair[1] > pair[0]), "{said:?}");
        assert!(said.iter().all(|value| *value <= 4.0), "{said:?}");
        assert_eq!(said.last(), Some(&4.0), "{said:?}");
        assert!(said[2] > 1.0 && said[3] < 2.0, "{said:?}");
    }

    #[test]
    fn a_reply_is_one_compact_text_and_structured_content() {
        let value = json!({"run_id": "0123abcd", "status": "starting"});
        let ok = result_of(ToolReply {
            value: value.clone(),
            failure: None,
            malformed: false,
        });
        assert_eq!(ok.is_error, Some(false));
        assert_eq!(ok.structured_content.as_ref(), Some(&value));
        assert_eq!(ok.content.len(), 1);
        let text = &ok.content[0].as_text().unwrap().text;
        assert_eq!(text, &serde_json::to_string(&value).unwrap());

        let failed = result_of(ToolReply {
            value: json!({"error": "no such run"}),
            failure: Some(rl_tools::FailureKind::NotFound),
            malformed: false,
        });
        assert_eq!(failed.is_error, Some(true));
        assert_eq!(
            failed.content[0].as_text().unwrap().text,
            r#"{"error":"no such run"}"#
        );
    }
}
