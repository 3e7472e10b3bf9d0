//! `rl mcp` as MCP clients use it: the official Python SDK's client over the local stack, raw
//! JSON-RPC lines for what a client library would hide (stdout holds protocol messages only,
//! closing stdin ends the server), and the end of a session stopping its pre-flight models.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rl_test_support::{FixtureServer, KillOnDrop, processes_mentioning};
use serde_json::{Value, json};

use crate::preflight::left_by_a_killed_owner;
use crate::serve::stack_home;
use crate::{test_python, workspace_root};

fn tree() -> PathBuf {
    workspace_root().join("fixtures/tinker-atropos")
}

/// `command` with the state directory, the fixture tree and no key at all.
fn isolate(command: &mut Command, home: &Path) {
    command
        .env("RL_HOME", home)
        .env("RL_TINKER_ATROPOS_ROOT", tree())
        .env_remove("RL_ENVIRONMENTS_DIR")
        .current_dir(workspace_root());
    for name in rl_settings::SECRET_NAMES {
        command.env_remove(name);
    }
}

/// Waits for `done` for at most `limit`, polling.
pub(crate) fn eventually(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let started = Instant::now();
    loop {
        if done() {
            return true;
        }
        if started.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `rl mcp` spoken to line by line, as a client library would; `env` is set last, over the
/// isolation's defaults.
pub(crate) struct RawServer {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    /// Every stdout line, for the "protocol only" check.
    seen: Vec<String>,
    stderr: Arc<Mutex<String>>,
}

impl RawServer {
    pub(crate) fn start(home: &Path, env: &[(&str, &str)]) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_rl"));
        command
            .arg("mcp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        isolate(&mut command, home);
        command.envs(env.iter().copied());
        let mut child = command.spawn().unwrap();
        let stdin = child.stdin.take();
        let (send, lines) = channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = stderr.clone();
        let err = child.stderr.take().unwrap();
        // Line by line, so that a test can wait for a line while the server runs.
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines() {
                let Ok(line) = line else { break };
                sink.lock().unwrap().push_str(&format!("{line}\n"));
            }
        });
        Self {
            child,
            stdin,
            lines,
            seen: Vec::new(),
            stderr,
        }
    }

    fn send(&mut self, message: &Value) {
        self.send_line(&message.to_string());
    }

    /// Writes `line` and a newline as the client's next message, whatever it holds.
    pub(crate) fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    fn notify(&mut self, method: &str) {
        self.send(&json!({"jsonrpc": "2.0", "method": method}));
    }

    /// Sends a request and waits (30 s at most) for the message answering it.
    pub(crate) fn request(&mut self, id: u64, method: &str, params: &Value) -> Value {
        self.request_within(id, method, params, Duration::from_secs(30))
    }

    fn request_within(&mut self, id: u64, method: &str, params: &Value, limit: Duration) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.answer_to(&json!(id), limit)
    }

    /// Waits (`limit` at most) for the message whose id is `id` (`null` included).
    pub(crate) fn answer_to(&mut self, id: &Value, limit: Duration) -> Value {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = match self.lines.recv_timeout(left) {
                Ok(line) => line,
                Err(error) => panic!("no answer to id {id} ({error}): {}", self.stderr()),
            };
            self.seen.push(line.clone());
            let message: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("stdout holds a line that is not JSON ({e}): {line}"));
            if message.get("id") == Some(id) {
                return message;
            }
        }
    }

    pub(crate) fn initialize(&mut self) -> Value {
        self.initialize_with(&json!({}))
    }

    /// `initialize` as id 1, the client declaring `capabilities`.
    pub(crate) fn initialize_with(&mut self, capabilities: &Value) -> Value {
        let answer = self.request(
            1,
            "initialize",
            &json!({
                "protocolVersion": "2025-11-25",
                "capabilities": capabilities,
                "clientInfo": {"name": "rl-it", "version": "0"}
            }),
        );
        self.notify("notifications/initialized");
        answer
    }

    pub(crate) fn call(&mut self, id: u64, tool: &str, arguments: Option<Value>) -> Value {
        let mut params = json!({"name": tool});
        if let Some(arguments) = arguments {
            params["arguments"] = arguments;
        }
        let answer = self.request(id, "tools/call", &params);
        answer["result"].clone()
    }

    pub(crate) fn close_stdin(&mut self) {
        self.stdin = None;
    }

    pub(crate) fn wait(&mut self, limit: Duration) -> ExitStatus {
        let mut status = None;
        let ended = eventually(limit, || {
            status = self.child.try_wait().unwrap();
            status.is_some()
        });
        assert!(
            ended,
            "rl mcp did not end within {limit:?}: {}",
            self.stderr()
        );
        status.unwrap()
    }

    /// The stdout lines not read yet, once the server has ended.
    pub(crate) fn rest(&mut self) -> Vec<String> {
        let mut rest = Vec::new();
        loop {
            match self.lines.recv_timeout(Duration::from_secs(5)) {
                Ok(line) => rest.push(line),
                Err(RecvTimeoutError::Disconnected) => return rest,
                Err(RecvTimeoutError::Timeout) => panic!("stdout stayed open after the exit"),
            }
        }
    }

    pub(crate) fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }
}

impl Drop for RawServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A tool result's one text block, checked to be the structured content as compact JSON.
pub(crate) fn reply(result: &Value) -> &Value {
    let content = result["content"].as_array().unwrap();
    assert_eq!(content.len(), 1, "{result}");
    assert_eq!(content[0]["type"], "text");
    let text = content[0]["text"].as_str().unwrap();
    assert!(!text.contains('\n'), "{text}");
    let parsed: Value = serde_json::from_str(text).unwrap();
    assert_eq!(parsed, result["structuredContent"], "{result}");
    assert!(parsed.is_object());
    &result["structuredContent"]
}

fn names(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|item| {
            item.as_str()
                .unwrap_or_else(|| item["name"].as_str().unwrap())
                .to_owned()
        })
        .collect()
}

#[test]
fn raw_json_rpc_gets_protocol_only_and_closing_stdin_ends_the_server() {
    let home = tempfile::tempdir().unwrap();
    let mut server = RawServer::start(home.path(), &[]);

    let init = server.initialize();
    let info = &init["result"];
    assert_eq!(info["protocolVersion"], "2025-11-25", "{init}");
    assert_eq!(info["serverInfo"]["name"], "rl");
    assert_eq!(info["serverInfo"]["version"], env!("CARGO_PKG_VERSION"));
    assert!(info["capabilities"]["tools"].is_object(), "{info}");
    let instructions = info["instructions"].as_str().unwrap();
    for tool in [
        "rl_list_environments",
        "rl_select_environment",
        "rl_start_training",
    ] {
        assert!(instructions.contains(tool), "{instructions}");
    }

    let listed = server.request(2, "tools/list", &json!({}));
    // What every MCP client is shown: names, descriptions, input schemas.
    insta::assert_json_snapshot!("mcp_tools_list", listed["result"]);
    let tools = listed["result"]["tools"].as_array().unwrap();
    assert_eq!(names(&listed["result"]["tools"]), rl_tools::TOOL_NAMES);
    for (tool, spec) in tools.iter().zip(rl_tools::specs()) {
        assert_eq!(tool["inputSchema"], spec.parameters, "{}", spec.name);
        assert_eq!(tool["description"], spec.description);
    }

    // No `arguments` at all counts as `{}`.
    let found = server.call(3, "rl_list_environments", None);
    assert_eq!(found["isError"], false, "{found}");
    let environments = &reply(&found)["environments"];
    assert!(
        names(environments).contains(&"arithmetic".to_owned()),
        "{found}"
    );

    let malformed = server.call(4, "rl_check_status", Some(json!({"run_id": 5})));
    insta::assert_json_snapshot!("mcp_call_refused", malformed);
    assert_eq!(malformed["isError"], true, "{malformed}");
    let refusal = reply(&malformed);
    assert_eq!(refusal["kind"], "bad_request", "{refusal}");
    assert!(
        refusal["error"]
            .as_str()
            .unwrap()
            .contains("rl_check_status")
    );
    assert_eq!(refusal["parameters"]["required"], json!(["run_id"]));

    let unknown = server.call(5, "rl_no_such_tool", Some(json!({})));
    assert_eq!(unknown["isError"], true, "{unknown}");
    assert_eq!(names(&reply(&unknown)["available"]), rl_tools::TOOL_NAMES);

    // Arguments that are not an object cannot be a `tools/call` at all: a protocol error, and
    // the session goes on.
    let not_an_object = server.request(
        6,
        "tools/call",
        &json!({"name": "rl_list_runs", "arguments": 5}),
    );
    assert!(not_an_object["error"]["code"].is_i64(), "{not_an_object}");
    let runs = server.call(7, "rl_list_runs", Some(json!({})));
    assert_eq!(runs["isError"], false, "{runs}");
    assert_eq!(reply(&runs)["count"], 0);

    server.close_stdin();
    let status = server.wait(Duration::from_secs(15));
    assert!(status.success(), "{status:?}: {}", server.stderr());
    let rest = server.rest();
    for line in server.seen.iter().chain(&rest) {
        let message: Value = serde_json::from_str(line).unwrap();
        assert_eq!(message["jsonrpc"], "2.0", "{line}");
    }
    assert!(!server.stderr().contains("panicked"), "{}", server.stderr());
}

#[test]
fn sigterm_ends_the_server() {
    let home = tempfile::tempdir().unwrap();
    let mut server = RawServer::start(home.path(), &[]);
    server.initialize();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(server.child.id()).unwrap()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = server.wait(Duration::from_secs(15));
    assert!(status.success(), "{status:?}: {}", server.stderr());
}

/// The official Python SDK's client walks an agent's workflow, the run on the local stack; the
/// selection and the edit it made are what `rl config show` (a process of its own) shows.
#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn a_real_mcp_client_walks_the_workflow() {
    let python = test_python();
    let home = stack_home(&python, "");
    let script = workspace_root().join("crates/rl-cli/tests/it/mcp_client.py");
    let mut command = Command::new(&python);
    command
        .arg(&script)
        .arg(env!("CARGO_BIN_EXE_rl"))
        .env("RL_STATUS_CHECK_INTERVAL_SECS", "1800")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    isolate(&mut command, home.path());
    let mut child = command.spawn().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut text);
        text
    });
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
        text
    });
    let ended = eventually(Duration::from_secs(240), || {
        child.try_wait().unwrap().is_some()
    });
    if !ended {
        let _ = child.kill();
    }
    let status = child.wait().unwrap();
    let stdout = out.join().unwrap();
    let stderr = err.join().unwrap();
    assert!(ended && status.success(), "{status:?}\n{stdout}\n{stderr}");
    let summary: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("no summary ({e}):\n{stdout}\n{stderr}"));
    let context = format!("{summary:#}\n--- client's stderr (and the server's)\n{stderr}");

    // Whatever else happened, the run must be gone: stopped by the tool, or here.
    let run_id = summary["run_id"].as_str().map(str::to_owned);
    let left = || {
        let mut left = processes_mentioning(&home.path().display().to_string());
        if let Some(id) = &run_id {
            left.extend(processes_mentioning(id));
        }
        left
    };
    let gone = eventually(Duration::from_secs(30), || left().is_empty());
    if !gone && let Some(id) = &run_id {
        let mut stop = Command::new(env!("CARGO_BIN_EXE_rl"));
        isolate(&mut stop, home.path());
        let _ = stop.args(["runs", "stop", id]).output();
    }
    assert!(gone, "processes left: {:?}\n{context}", left());

    assert!(summary["failure"].is_null(), "{context}");
    assert_eq!(summary["stream_errors"], json!([]), "{context}");
    let server = &summary["server"];
    assert_eq!(server["name"], "rl");
    assert_eq!(server["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(server["tools_capability"], true);
    // Exactly the registry's tools (the names are the registry's, not a copy in the client).
    assert_eq!(
        summary["tools"].as_object().map(serde_json::Map::len),
        Some(rl_tools::TOOL_NAMES.len()),
        "{context}"
    );
    for spec in rl_tools::specs() {
        assert_eq!(
            summary["tools"][spec.name], spec.parameters,
            "{}",
            spec.name
        );
    }

    let calls = &summary["calls"];
    for (step, call) in calls.as_object().unwrap() {
        assert!(call["protocol_error"].is_null(), "{step}: {context}");
        assert_eq!(call["content_blocks"], 1, "{step}: {context}");
        assert_eq!(call["text_blocks"], 1, "{step}");
        assert_eq!(call["one_line"], true, "{step}");
        assert!(call["value"].is_object(), "{step}: {context}");
        assert_eq!(call["value"], call["structured"], "{step}");
    }
    let ok = |step: &str| {
        let call = &calls[step];
        assert_eq!(call["is_error"], false, "{step} failed: {context}");
        &call["value"]
    };
    let refused = |step: &str| {
        let call = &calls[step];
        assert_eq!(call["is_error"], true, "{step} was not refused: {context}");
        assert!(call["value"]["error"].is_string(), "{step}: {context}");
        &call["value"]
    };

    let environments = ok("list_environments");
    assert!(names(&environments["environments"]).contains(&"arithmetic".to_owned()));
    assert_eq!(ok("list_environments_without_arguments"), environments);
    // Issue 55: the environment's Python holds what it imports: installing installs nothing;
    // a published package is the operator's to allow, and the refusal says so.
    let installed = ok("install");
    assert_eq!(installed["nothing_to_do"], true, "{installed}");
    let published = refused("install_published");
    assert_eq!(published["kind"], "precondition", "{published}");
    assert!(
        published["error"]
            .as_str()
            .unwrap()
            .contains("[agents] install"),
        "{published}"
    );
    let unknown = refused("select_unknown");
    assert!(
        names(&unknown["available"]).contains(&"arithmetic".to_owned()),
        "{unknown}"
    );
    assert!(ok("select")["file_path"].is_string(), "{context}");
    let fields = &ok("current_config")["configurable_fields"];
    assert!(
        names(fields).contains(&"eval_items".to_owned()),
        "{context}"
    );
    let edited = ok("edit");
    assert_eq!(edited["value"], 3, "{edited}");
    assert_eq!(edited["coerced_from"], "3", "{edited}");
    refused("edit_bad_value");
    // A trainer setting the agent set is read back with where it comes from (issue 55).
    let trainer = ok("current_config_edited")["trainer_settings"].clone();
    let learning_rate = trainer
        .as_array()
        .unwrap()
        .iter()
        .find(|setting| setting["name"] == "learning_rate")
        .unwrap_or_else(|| panic!("no learning_rate: {trainer}"));
    assert_eq!(
        (
            learning_rate["current_value"].clone(),
            learning_rate["origin"].clone()
        ),
        (json!(0.0002), json!("edited")),
        "{trainer}"
    );
    assert_eq!(
        refused("stop_unknown_test")["kind"],
        "not_found",
        "{context}"
    );
    assert_eq!(
        refused("wait_too_short")["kind"],
        "bad_request",
        "{context}"
    );
    let malformed = refused("malformed_arguments");
    assert_eq!(malformed["kind"], "bad_request", "{malformed}");
    refused("unexpected_argument");
    assert_eq!(refused("unknown_tool")["kind"], "not_found");
    assert_eq!(refused("status_unknown_run")["kind"], "not_found");

    let started = ok("start");
    assert_eq!(started["run_id"], summary["run_id"], "{started}");
    let first = ok("status_first");
    assert!(first["rate_limited"].is_null(), "{first}");
    assert_eq!(first["run_id"], summary["run_id"], "{first}");
    let second = ok("status_second");
    assert_eq!(second["rate_limited"], true, "{second}");
    assert!(
        second["next_check_in_seconds"].as_f64().unwrap() > 0.0,
        "{second}"
    );
    // The limit points to a tool an agent with MCP alone can call.
    assert!(
        second["message"]
            .as_str()
            .unwrap()
            .contains("rl_wait_training"),
        "{second}"
    );
    let waited = ok("wait_step");
    assert_eq!(waited["run_id"], summary["run_id"], "{waited}");
    assert_eq!(waited["waited"]["until"], "step", "{waited}");
    assert_eq!(
        waited["waited"]["reached"],
        !waited["waited"]["timed_out"].as_bool().unwrap(),
        "{waited}"
    );
    assert!(waited["metrics"].is_object(), "{waited}");
    assert_eq!(ok("list_runs")["count"], 1);
    let stopped = ok("stop");
    assert!(
        matches!(stopped["status"].as_str(), Some("stopped" | "completed")),
        "{stopped}"
    );
    let ended = ok("status_ended");
    assert!(ended["rate_limited"].is_null(), "{ended}");
    assert_eq!(ended["status"], stopped["status"], "{ended}");
    let waited_ended = ok("wait_ended");
    assert_eq!(
        (
            waited_ended["waited"]["reached"].clone(),
            waited_ended["status"].clone()
        ),
        (json!(true), stopped["status"].clone()),
        "{waited_ended}"
    );
    assert_eq!(waited_ended["waited"]["timed_out"], false, "{waited_ended}");

    let mut show = Command::new(env!("CARGO_BIN_EXE_rl"));
    isolate(&mut show, home.path());
    let shown = show.args(["config", "show", "--json"]).output().unwrap();
    assert!(
        shown.status.success(),
        "{}",
        String::from_utf8_lossy(&shown.stderr)
    );
    let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(shown["environment"], "arithmetic", "{shown}");
    let eval_items = shown["configurable_fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|field| field["name"] == "eval_items")
        .unwrap_or_else(|| panic!("no eval_items: {shown}"));
    assert_eq!(
        (
            eval_items["current_value"].clone(),
            eval_items["origin"].clone()
        ),
        (json!(3), json!("edited")),
        "{shown}"
    );
}

/// Issue 31: a pre-flight asked over MCP answers at once with its test's id and runs in a
/// worker of its own. However its session ends (the client closing the pipe, SIGTERM, or a
/// `kill -9` with the pipe closed after it), the test goes on, nothing is left waiting on the
/// server, and a new session gets the whole answer by the id.
#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn a_preflight_outlives_its_session_and_a_new_one_gets_its_answer() {
    let python = test_python();
    let fixture = FixtureServer::start(&python, None);
    let env_of = |base_url: &str| {
        [
            ("RL_INFERENCE__BASE_URL", base_url.to_owned()),
            ("RL_STATUS_CHECK_INTERVAL_SECS", "1800".to_owned()),
        ]
    };
    for ending in ["stdin closed", "SIGTERM", "SIGKILL"] {
        let home = stack_home(&python, "");
        let env = env_of(&fixture.base_url);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let mut server = RawServer::start(home.path(), &env);
        server.initialize();
        let selected = server.call(
            2,
            "rl_select_environment",
            Some(json!({"name": "arithmetic"})),
        );
        assert_eq!(selected["isError"], false, "{selected}");
        // Each request waits 4 s at the endpoint: the test is still going when the session ends.
        let started = server.call(
            3,
            "rl_test_inference",
            Some(json!({"models": ["always-right@4"], "num_steps": 2, "group_size": 1})),
        );
        assert_eq!(started["isError"], false, "{ending}: {started}");
        let started = reply(&started).clone();
        assert_eq!(started["status"], "running", "{started}");
        assert_eq!(started["started"], true, "{started}");
        let test_id = started["test_id"].as_str().unwrap().to_owned();
        let worker = crate::rl_in(home.path(), &["preflight", "show", &test_id, "--json"]);
        let worker: Value = serde_json::from_slice(&worker.stdout).unwrap();
        let worker = worker["owner_pid"].as_u64().unwrap();
        assert_ne!(
            u64::from(server.child.id()),
            worker,
            "the test runs in a worker"
        );

        let pid = nix::unistd::Pid::from_raw(i32::try_from(server.child.id()).unwrap());
        match ending {
            "SIGTERM" => nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap(),
            "SIGKILL" => {
                nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
                server.close_stdin();
            }
            _ => server.close_stdin(),
        }
        let status = server.wait(Duration::from_secs(40));
        if ending != "SIGKILL" {
            assert!(
                status.success(),
                "{ending}: {status:?}: {}",
                server.stderr()
            );
        }
        // The server is gone; the worker is not waiting on it.
        assert!(
            crate::runs::is_alive(u32::try_from(worker).unwrap()),
            "{ending}: the test's worker ended with the session"
        );

        let mut next = RawServer::start(home.path(), &env);
        next.initialize();
        let mut answer = Value::Null;
        let finished = eventually(Duration::from_secs(180), || {
            let polled = next.call(4, "rl_test_inference", Some(json!({"test_id": test_id})));
            assert_eq!(polled["isError"], false, "{ending}: {polled}");
            answer = reply(&polled).clone();
            if answer["status"] == "running" {
                assert_eq!(answer["test_id"], test_id.as_str());
                std::thread::sleep(Duration::from_secs(1));
                return false;
            }
            true
        });
        assert!(finished, "{ending}: never finished: {answer}");
        assert_eq!(answer["test_id"], test_id.as_str(), "{answer}");
        assert_eq!(answer["models_succeeded"], 1, "{ending}: {answer}");
        next.close_stdin();
        next.wait(Duration::from_secs(40));
        let home_text = home.path().display().to_string();
        assert!(
            eventually(Duration::from_secs(30), || processes_mentioning(&home_text)
                .is_empty()),
            "{ending}: left running: {:?}",
            processes_mentioning(&home_text)
        );
    }
}

/// The worker running a pre-flight is `kill -9`ed: its model, waiting on a slow endpoint, is
/// left. Asked for the test by its id, a new session finds it interrupted, ends what it left
/// and says so; the same call without the id starts it anew.
#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn a_killed_workers_test_reads_interrupted_and_what_it_left_is_ended() {
    let python = test_python();
    let fixture = FixtureServer::start(&python, None);
    let home = stack_home(&python, "");
    let env = [
        ("RL_INFERENCE__BASE_URL", fixture.base_url.as_str()),
        ("RL_STATUS_CHECK_INTERVAL_SECS", "1800"),
    ];
    let home_text = home.path().display().to_string();
    let models = || {
        processes_mentioning(&home_text)
            .into_iter()
            .filter(|(_, line)| line.contains(" process "))
            .count()
    };
    let mut server = RawServer::start(home.path(), &env);
    server.initialize();
    let selected = server.call(
        2,
        "rl_select_environment",
        Some(json!({"name": "arithmetic"})),
    );
    assert_eq!(selected["isError"], false, "{selected}");
    let arguments = json!({"models": ["slow"], "num_steps": 1, "group_size": 1});
    let started = server.call(3, "rl_test_inference", Some(arguments.clone()));
    let test_id = reply(&started)["test_id"].as_str().unwrap().to_owned();
    assert!(
        eventually(Duration::from_secs(60), || fixture
            .requests()
            .iter()
            .any(|request| request["model"] == "slow")),
        "the model never asked the endpoint: {}",
        server.stderr()
    );
    let shown = crate::rl_in(home.path(), &["preflight", "show", &test_id, "--json"]);
    let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
    let worker = i32::try_from(shown["owner_pid"].as_u64().unwrap()).unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(worker),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    assert!(
        eventually(Duration::from_secs(10), || !crate::runs::is_alive(
            u32::try_from(worker).unwrap()
        )),
        "the worker survived SIGKILL"
    );
    assert_eq!(models(), 1, "the premise: the model outlives its worker");

    let polled = server.call(4, "rl_test_inference", Some(json!({"test_id": test_id})));
    assert_eq!(polled["isError"], true, "{polled}");
    let error = reply(&polled)["error"].as_str().unwrap().to_owned();
    assert!(
        error.contains("interrupted") && error.contains("without test_id"),
        "{error}"
    );
    assert_eq!(models(), 0, "the killed worker's model is still running");

    // Not running any more, the same request starts a new test.
    let again = server.call(5, "rl_test_inference", Some(arguments));
    assert_eq!(reply(&again)["started"], true, "{again}");
    assert_ne!(reply(&again)["test_id"], test_id.as_str(), "{again}");
    let stopped = crate::rl_in(
        home.path(),
        &[
            "preflight",
            "stop",
            reply(&again)["test_id"].as_str().unwrap(),
        ],
    );
    assert!(stopped.status.success(), "{stopped:?}");
}

/// `rl mcp` ends, as it starts, what the killed owner of an earlier pre-flight left (the model's
/// group, and what the model left in a session of its own), without anyone listing or running a
/// test; the test reads `interrupted`.
#[test]
fn a_starting_server_ends_what_a_killed_preflight_left() {
    let home = tempfile::tempdir().unwrap();
    let guard = KillOnDrop::new("mcp-start");
    let (dir, mut model) = left_by_a_killed_owner(home.path(), &guard.marker);
    let mut server = RawServer::start(home.path(), &[]);
    server.initialize();
    let ended = eventually(Duration::from_secs(60), || {
        processes_mentioning(&guard.marker).is_empty() && dir.join("interrupted.json").exists()
    });
    assert!(
        ended,
        "left running: {:?}: {}",
        processes_mentioning(&guard.marker),
        server.stderr()
    );
    model.wait().unwrap();
    server.close_stdin();
    assert!(server.wait(Duration::from_secs(30)).success());
}

/// A pre-flight store that cannot be read is said on stderr, and the server serves all the same.
#[test]
fn an_unreadable_preflight_store_does_not_keep_the_server_from_starting() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("preflight"), "not a folder").unwrap();
    let mut server = RawServer::start(home.path(), &[]);
    let initialized = server.initialize();
    assert!(
        initialized["result"]["serverInfo"].is_object(),
        "{initialized}"
    );
    assert!(
        eventually(Duration::from_secs(30), || server.stderr().contains(
            "rl mcp: cannot look for what killed pre-flight tests left"
        )),
        "{}",
        server.stderr()
    );
    server.close_stdin();
    assert!(server.wait(Duration::from_secs(30)).success());
    assert!(
        server.rest().is_empty(),
        "stdout holds protocol messages only"
    );
}

/// `rl mcp --print-config claude-desktop` names this binary and the state directory by absolute
/// path: the official MCP client, started with nothing but the printed entry, lists the tools.
#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn the_printed_client_configuration_starts_the_server() {
    let python = test_python();
    let home = tempfile::tempdir().unwrap();
    let printed = crate::rl_in(
        home.path(),
        &["mcp", "--print-config", "claude-desktop", "--home", "."],
    );
    assert!(printed.status.success(), "{printed:?}");
    let config: Value = serde_json::from_slice(&printed.stdout).unwrap();
    let entry = &config["mcpServers"]["rl"];
    assert_eq!(
        entry["env"]["RL_HOME"]
            .as_str()
            .map(std::path::PathBuf::from),
        Some(workspace_root()),
        "--home . is made absolute: {entry}"
    );
    assert!(
        std::path::Path::new(entry["command"].as_str().unwrap()).is_absolute(),
        "{entry}"
    );
    // The client gets the state directory of this test, not the workspace.
    let mut config = config.clone();
    config["mcpServers"]["rl"]["env"]["RL_HOME"] = Value::from(home.path().to_str().unwrap());
    let file = home.path().join("claude_desktop_config.json");
    std::fs::write(&file, config.to_string()).unwrap();
    let listed = crate::script_json(
        Command::new(&python)
            .arg(workspace_root().join("crates/rl-cli/tests/it/mcp_config_client.py"))
            .arg(&file)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default()),
    );
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|name| name.as_str().unwrap())
        .collect();
    assert_eq!(names, rl_tools::TOOL_NAMES);
}
