//! `rl mcp`'s long calls as the official MCP Python SDK (`mcp` 2.3.0) follows them, through
//! `mcp_tasks_client.py` (issue 31): polled by `test_id` with the low-level session's default
//! options, waited on (`wait: true`) with progress notifications, and as an MCP task (the
//! SEP-2663 tasks extension, which the SDK lacks and the driver adds) run to its end or
//! cancelled.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use rl_test_support::{FixtureServer, processes_mentioning};
use serde_json::{Value, json};

use crate::mcp_clients::StopsPreflights;
use crate::preflight::home_with_endpoint;
use crate::{rl_command, test_python, workspace_root};

/// Two models, 3 s at the endpoint for each request, two groups each: long enough to be seen
/// running, short enough for a test.
const MODELS: [&str; 2] = ["always-right@3", "mixed@3"];
const STEPS: u64 = 2;
/// The bound on a call that answers at once: a client's patience (the TypeScript SDK gives
/// up at 60 s), no speed claim about rl.
const PATIENCE_MS: u64 = 30_000;
/// The whole exchange of one driver.
const BOUND: Duration = Duration::from_secs(300);

fn preflight() -> Value {
    json!({"models": MODELS, "num_steps": STEPS, "group_size": 2})
}

/// What the driver printed, and its stderr (`rl mcp`'s too).
pub(crate) struct Exchange {
    pub(crate) said: Value,
    stderr: String,
}

impl Exchange {
    fn context(&self) -> String {
        format!(
            "{:#}\n--- the client's stderr (and rl mcp's)\n{}",
            self.said, self.stderr
        )
    }

    /// The exchange went through: no failure, no line on the server's stdout that was not
    /// protocol.
    pub(crate) fn succeeded(&self) -> &Value {
        let context = self.context();
        assert!(self.said["failure"].is_null(), "{context}");
        assert_eq!(self.said["stream_errors"], json!([]), "{context}");
        &self.said
    }

    fn ms(&self, key: &str) -> u64 {
        self.said[key]
            .as_u64()
            .unwrap_or_else(|| panic!("no {key}: {}", self.context()))
    }
}

/// `mcp_tasks_client.py MODE` calling `tool` with `arguments` on `rl mcp` for `home`: the
/// driver gives up after `BOUND`, and is killed a minute and a half later if it has not.
pub(crate) fn python_client(home: &Path, mode: &str, tool: &str, arguments: &Value) -> Exchange {
    let mut command = Command::new(test_python());
    command
        .arg(workspace_root().join("crates/rl-cli/tests/it/mcp_tasks_client.py"))
        .arg(mode)
        .arg(env!("CARGO_BIN_EXE_rl"))
        .arg(tool)
        .arg(arguments.to_string())
        .arg(BOUND.as_secs().to_string());
    let (said, stderr) =
        crate::mcp_clients::run_client(command, home, BOUND + Duration::from_secs(90));
    Exchange { said, stderr }
}

/// A test's id as rl gives it: 8 lowercase hexadecimal characters.
fn is_test_id(id: &Value) -> bool {
    id.as_str().is_some_and(|id| {
        id.len() == 8
            && id
                .bytes()
                .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte))
    })
}

/// The pre-flight's report of both models, for `test_id`.
fn assert_report_of_both_models(report: &Value, test_id: &Value, context: &str) {
    assert_eq!(&report["test_id"], test_id, "{context}");
    assert!(report.get("status").is_none(), "not a report: {context}");
    assert_eq!(report["models_succeeded"], 2, "{context}");
    assert_eq!(report["steps"], STEPS, "{context}");
    let tested: Vec<&str> = report["models_tested"]
        .as_array()
        .unwrap_or_else(|| panic!("no models_tested: {context}"))
        .iter()
        .map(|model| model["model"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(tested, MODELS, "{context}");
}

/// `rl_test_inference` given `test_id` alone, as `rl tool call` asks it: what polling gives.
fn polled(home: &Path, test_id: &str) -> Value {
    let output = rl_command(home)
        .args([
            "tool",
            "call",
            "rl_test_inference",
            &json!({"test_id": test_id, "wait": false}).to_string(),
        ])
        .output()
        .unwrap();
    crate::success_json(&["tool", "call", "rl_test_inference"], &output)
}

/// Waits (60 s at most) until no process mentions `home`: the test's worker and its models
/// are gone.
fn assert_no_process_mentions(home: &Path) {
    let home = home.display().to_string();
    let started = Instant::now();
    while !processes_mentioning(&home).is_empty() && started.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(processes_mentioning(&home), Vec::new(), "left running");
}

/// The low-level `ClientSession` with default options: the call answers at once with the
/// test's id, which is polled every `poll_after_seconds` (at most 3 s) to the report.
#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn the_python_client_polls_a_preflight_to_its_report() {
    let python = test_python();
    let fixture = FixtureServer::start(&python, None);
    let home = home_with_endpoint(&python, &fixture.base_url, &[]);
    let home = home.path();
    let _stops = StopsPreflights { home };

    let exchange = python_client(home, "poll", "rl_test_inference", &preflight());
    let said = exchange.succeeded();
    let context = exchange.context();
    let (first_ms, slowest) = (exchange.ms("first_ms"), exchange.ms("max_call_ms"));
    assert!(
        first_ms < PATIENCE_MS && slowest < PATIENCE_MS,
        "a call took {slowest} ms (the first {first_ms} ms): {context}"
    );
    let first = &said["first"];
    assert_eq!(first["status"], "running", "{context}");
    assert_eq!(first["started"], true, "{context}");
    assert!(is_test_id(&first["test_id"]), "{context}");
    assert!(first["poll_after_seconds"].is_number(), "{context}");
    assert_eq!(first["models"], json!(MODELS), "{context}");
    assert!(said["polls"].as_u64() >= Some(1), "{context}");
    assert_report_of_both_models(&said["final"], &first["test_id"], &context);
    assert_no_process_mentions(home);
}

/// `"wait": true` with a progress callback: `notifications/progress` arrive while the call
/// waits, their `progress` strictly increasing, `total` the test's groups; the call answers
/// the report.
#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn progress_notifications_arrive_while_the_python_client_waits() {
    let python = test_python();
    let fixture = FixtureServer::start(&python, None);
    let home = home_with_endpoint(&python, &fixture.base_url, &[]);
    let home = home.path();
    let _stops = StopsPreflights { home };

    let exchange = python_client(home, "progress", "rl_test_inference", &preflight());
    let said = exchange.succeeded();
    let context = exchange.context();
    let report = &said["final"];
    assert!(is_test_id(&report["test_id"]), "{context}");
    assert_report_of_both_models(report, &report["test_id"], &context);
    let test_id = report["test_id"].as_str().unwrap_or_default();
    let notifications = said["notifications"].as_array().unwrap();
    assert!(
        notifications.len() >= 2,
        "{} notification(s) in a test of {} ms: {context}",
        notifications.len(),
        exchange.ms("final_ms")
    );
    let groups = STEPS * MODELS.len() as u64;
    let mut previous = f64::NEG_INFINITY;
    for notification in notifications {
        let progress = notification["progress"].as_f64().unwrap();
        assert!(
            progress > previous,
            "{notification} after {previous}: {context}"
        );
        previous = progress;
        assert_eq!(
            notification["total"].as_f64(),
            Some(groups as f64),
            "{context}"
        );
        assert!(progress <= groups as f64, "{notification}: {context}");
        let message = notification["message"].as_str().unwrap_or_default();
        assert!(message.contains(test_id), "{notification}: {context}");
        assert!(
            notification["at_ms"].as_u64() <= Some(exchange.ms("final_ms")),
            "{context}"
        );
    }
    assert_no_process_mentions(home);
}

/// `mcp.Client` (2026-07-28 with rmcp) declaring the tasks extension: the call becomes a
/// task, working then completed, its statusMessage naming the test, its result the report a
/// poll by `test_id` gives.
#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn as_a_task_a_preflight_works_then_completes_with_the_report() {
    let python = test_python();
    let fixture = FixtureServer::start(&python, None);
    let home = home_with_endpoint(&python, &fixture.base_url, &[]);
    let home = home.path();
    let _stops = StopsPreflights { home };

    let exchange = python_client(home, "task", "rl_test_inference", &preflight());
    let said = exchange.succeeded();
    let context = exchange.context();
    assert_eq!(said["protocol_version"], "2026-07-28", "{context}");
    assert_eq!(said["server_declares_tasks"], true, "{context}");
    assert!(exchange.ms("created_ms") < PATIENCE_MS, "{context}");
    insta::assert_json_snapshot!("task_created", said["created"], {
        ".taskId" => "[task_id]",
        ".createdAt" => "[time]",
        ".lastUpdatedAt" => "[time]",
    });
    assert_eq!(
        said["statuses"],
        json!(["working", "completed"]),
        "{context}"
    );
    assert_eq!(said["final_status"], "completed", "{context}");
    assert_eq!(said["is_error"], false, "{context}");
    let report = &said["result"];
    assert!(is_test_id(&report["test_id"]), "{context}");
    let test_id = report["test_id"].as_str().unwrap_or_default();
    assert_eq!(said["test_id"], test_id, "{context}");
    let messages = said["status_messages"].as_array().unwrap();
    assert!(
        messages
            .iter()
            .any(|message| message.as_str().unwrap_or_default().contains(test_id)),
        "no statusMessage names the test: {context}"
    );
    assert_report_of_both_models(report, &report["test_id"], &context);
    // The tool result inline in tasks/get: the report as structured content.
    assert_eq!(
        &said["task_result"]["structuredContent"], report,
        "{context}"
    );
    assert_eq!(said["task_result"]["isError"], false, "{context}");
    let by_poll = polled(home, test_id);
    let keys = |value: &Value| -> Vec<String> {
        value
            .as_object()
            .map(|fields| fields.keys().cloned().collect())
            .unwrap_or_default()
    };
    assert_eq!(keys(report), keys(&by_poll), "{context}\n{by_poll:#}");
    assert_eq!(report, &by_poll, "{context}");
    assert_no_process_mentions(home);
}

/// A task cancelled once it names its test: the task ends `cancelled`, the test is stopped
/// (as `rl preflight stop` leaves it) and no process of it is left.
#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn a_cancelled_task_stops_its_test_and_leaves_nothing() {
    let python = test_python();
    let fixture = FixtureServer::start(&python, None);
    let home = home_with_endpoint(&python, &fixture.base_url, &[]);
    let home = home.path();
    let _stops = StopsPreflights { home };

    // `slow` answers after an hour: only the cancel ends this test.
    let exchange = python_client(
        home,
        "cancel",
        "rl_test_inference",
        &json!({"models": ["slow"], "num_steps": 1, "group_size": 1}),
    );
    let said = exchange.succeeded();
    let context = exchange.context();
    assert!(is_test_id(&said["test_id"]), "{context}");
    let test_id = said["test_id"].as_str().unwrap_or_default();
    assert!(said["cancel_ack"].is_object(), "{context}");
    assert_eq!(said["final_status"], "cancelled", "{context}");
    assert_eq!(
        said["statuses"],
        json!(["working", "cancelled"]),
        "{context}"
    );
    // The tool asked for the test by its id, in the same session: ended, stopped.
    let after = &said["test_after_cancel"];
    assert_eq!(after["test_id"], test_id, "{context}");
    assert!(after["stopped_at"].is_string(), "{context}");

    let shown = crate::rl_in(home, &["preflight", "show", test_id, "--json"]);
    let shown = crate::success_json(&["preflight", "show", test_id, "--json"], &shown);
    assert!(
        shown["stopped_at"].is_string() || shown["status"] == "stopped",
        "not stopped: {shown:#}\n{context}"
    );
    assert_no_process_mentions(home);
}
