//! `rl mcp` as agents built on the official MCP TypeScript SDK call it
//! (`mcp_ts_client.mjs`, @modelcontextprotocol/sdk pinned in xtask/node/mcp-client): the SDK
//! gives up on a request after 60 s (DEFAULT_REQUEST_TIMEOUT_MSEC) unless told otherwise, and
//! such agents do not tell it. The tools that take minutes answer at once with a `test_id` and
//! are polled with it, so no call of the client comes near its limit (issue 31).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rl_test_support::{FixtureServer, processes_mentioning};
use serde_json::{Value, json};

use crate::runs::assert_nothing_left;
use crate::training::{SAVE_EVERY_TWO, stack};
use crate::{test_python, workspace_root};

/// The variable `cargo xtask test` sets to the `node_modules` folder holding the SDK.
const MCP_TS_ENV: &str = "RL_TEST_MCP_TS";
/// The SDK's DEFAULT_REQUEST_TIMEOUT_MSEC: a call that takes longer fails in the client.
const CLIENT_LIMIT_MS: u64 = 60_000;
/// Well under the client's limit: no timing claim about rl, only room below the limit.
const WELL_UNDER_THE_LIMIT_MS: u64 = 30_000;

/// The SDK's `node_modules` folder, from `RL_TEST_MCP_TS`.
fn mcp_ts_modules() -> PathBuf {
    match std::env::var_os(MCP_TS_ENV).map(PathBuf::from) {
        Some(modules) if modules.is_dir() => modules,
        _ => panic!(
            "{MCP_TS_ENV} is not set (or names no folder): this test needs Node and the MCP \
             TypeScript SDK; run it through `cargo xtask test`"
        ),
    }
}

/// Pre-flights still running in `home` (a detached worker outlives its client), stopped on
/// drop, so that a failing test leaves none of its models behind.
pub(crate) struct StopsPreflights<'a> {
    pub(crate) home: &'a Path,
}

impl Drop for StopsPreflights<'_> {
    fn drop(&mut self) {
        let listed = crate::rl_in(self.home, &["preflight", "list", "--json"]);
        let Ok(listed) = serde_json::from_slice::<Value>(&listed.stdout) else {
            return;
        };
        for test in listed.as_array().into_iter().flatten() {
            if test["status"] == "running"
                && let Some(id) = test["test_id"].as_str()
            {
                let _ = crate::rl_in(self.home, &["preflight", "stop", id, "--json"]);
            }
        }
    }
}

/// What the driver printed: the first answer, the final one and the calls' durations.
struct Exchange {
    said: Value,
    stderr: String,
}

impl Exchange {
    fn context(&self) -> String {
        format!(
            "{:#}\n--- the client's stderr (and rl mcp's)\n{}",
            self.said, self.stderr
        )
    }

    fn ms(&self, key: &str) -> u64 {
        self.said[key]
            .as_u64()
            .unwrap_or_else(|| panic!("no {key}: {}", self.context()))
    }

    /// The client never came near its limit, and the first answer said the tool is running.
    fn polled_within_the_limit(&self) -> &Value {
        let context = self.context();
        assert!(self.said["error"].is_null(), "{context}");
        let (first_ms, slowest) = (self.ms("first_ms"), self.ms("max_call_ms"));
        assert!(
            first_ms < WELL_UNDER_THE_LIMIT_MS && slowest < WELL_UNDER_THE_LIMIT_MS,
            "a call took {slowest} ms (the first {first_ms} ms); the client gives up at \
             {CLIENT_LIMIT_MS} ms: {context}"
        );
        let first = &self.said["first"];
        assert_eq!(first["status"], "running", "{context}");
        let id = first["test_id"].as_str().unwrap_or_default();
        assert!(
            id.len() == 8 && id.bytes().all(|byte| byte.is_ascii_hexdigit()),
            "{context}"
        );
        assert!(first["poll_after_seconds"].is_number(), "{context}");
        assert!(first["message"].is_string(), "{context}");
        assert!(self.said["polls"].as_u64() >= Some(1), "{context}");
        let last = &self.said["final"];
        assert_ne!(last["status"], "running", "{context}");
        assert_eq!(last["test_id"], first["test_id"], "{context}");
        last
    }
}

/// `mcp_ts_client.mjs` calling `tool` with `arguments` on `rl mcp` for the state directory
/// `home`, the whole exchange bounded by `bound`: the driver gives up then, and is killed a
/// minute later if it has not.
fn typescript_client(home: &Path, tool: &str, arguments: &Value, bound: Duration) -> Exchange {
    let mut command = Command::new("node");
    command
        .arg(workspace_root().join("crates/rl-cli/tests/it/mcp_ts_client.mjs"))
        .arg(env!("CARGO_BIN_EXE_rl"))
        .arg(tool)
        .arg(arguments.to_string())
        .arg(bound.as_secs().to_string())
        .env(MCP_TS_ENV, mcp_ts_modules())
        .env_remove("RL_MCP_TS_BOUND_SECS");
    let (said, stderr) = run_client(command, home, bound + Duration::from_secs(60));
    Exchange { said, stderr }
}

/// Runs a client driver (`command`, its arguments given) on `rl mcp` for `home`, with none of
/// the caller's `RL_*` settings or keys; killed past `limit` (its `rl mcp` then sees its stdin
/// close and ends). Returns the JSON line it printed last, and its standard error.
pub(crate) fn run_client(mut command: Command, home: &Path, limit: Duration) -> (Value, String) {
    command
        .env("RL_HOME", home)
        .env_remove("RL_TINKER_ATROPOS_ROOT")
        .env_remove("RL_ENVIRONMENTS_DIR")
        .env_remove("RL_INFERENCE__BASE_URL")
        .current_dir(workspace_root())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for name in rl_settings::SECRET_NAMES {
        command.env_remove(name);
    }
    let mut child = command
        .spawn()
        .unwrap_or_else(|error| panic!("cannot start {command:?}: {error}"));
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let deadline = Instant::now() + limit;
    let mut status = None;
    while status.is_none() && Instant::now() < deadline {
        status = child.try_wait().unwrap();
        if status.is_none() {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    if status.is_none() {
        let _ = child.kill();
    }
    let ended = child.wait().unwrap();
    let stdout = out.join().unwrap();
    let stderr = err.join().unwrap();
    let said = serde_json::from_str(stdout.lines().last().unwrap_or_default()).unwrap_or_else(
        |error| {
            panic!(
                "the client ({ended}, killed: {}) printed no JSON line ({error}):\n{stdout}\n{stderr}",
                status.is_none()
            )
        },
    );
    (said, stderr)
}

/// Waits (30 s at most) until no process mentions `home`: the pre-flight's worker and its
/// models are gone once it finished.
fn assert_no_process_mentions(home: &Path) {
    let home = home.display().to_string();
    let started = Instant::now();
    while !processes_mentioning(&home).is_empty() && started.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(processes_mentioning(&home), Vec::new(), "left running");
}

/// A pre-flight that takes longer than the client's limit (two models at once, 5 steps of 15 s
/// each): the client starts it, polls it with its `test_id`, and gets the report.
#[test]
#[ignore = "needs the test venv and Node with the MCP TypeScript SDK: `cargo xtask test` runs it"]
fn the_typescript_client_at_its_default_timeout_gets_a_preflight_by_polling() {
    const MODELS: [&str; 2] = ["mixed@15", "always-right@15"];
    let python = test_python();
    let fixture = FixtureServer::start(&python, None);
    let home = crate::preflight::home_with_endpoint(&python, &fixture.base_url, &["always-right"]);
    let home = home.path();
    let _stops = StopsPreflights { home };

    let exchange = typescript_client(
        home,
        "rl_test_inference",
        &json!({"models": MODELS, "num_steps": 5, "group_size": 2}),
        Duration::from_secs(300),
    );
    let report = exchange.polled_within_the_limit();
    let context = exchange.context();
    let first = &exchange.said["first"];
    assert_eq!(first["started"], true, "{context}");
    assert_eq!(first["models"], json!(MODELS), "{context}");
    // The premise: answered in one call, the client would have given up.
    assert!(
        report["duration_secs"].as_f64().unwrap_or_default() * 1000.0 > CLIENT_LIMIT_MS as f64,
        "the pre-flight took less than the client's limit: {context}"
    );
    let summary = &report["summary"];
    assert_eq!(summary["models_tested"], 2, "{context}");
    assert_eq!(summary["models_succeeded"], 2, "{context}");
    assert_eq!(summary["steps_requested"], 5, "{context}");
    let tested: Vec<&str> = report["models_tested"]
        .as_array()
        .unwrap_or_else(|| panic!("no models_tested: {context}"))
        .iter()
        .map(|model| model["model"].as_str().unwrap())
        .collect();
    assert_eq!(tested, MODELS, "{context}");
    for model in MODELS {
        let asked = fixture
            .requests()
            .iter()
            .filter(|request| request["model"] == model)
            .count();
        assert_eq!(asked, 5, "{model}: {context}");
    }
    assert_no_process_mentions(home);
}

/// `rl_compare_training` on a finished local-engine run: the base model and the last
/// checkpoint sampled through the run's engine, started again, which takes minutes on a CPU.
#[test]
#[ignore = "needs the test venv, the local engine and Node with the MCP TypeScript SDK: `cargo xtask test` runs it"]
fn the_typescript_client_at_its_default_timeout_gets_a_comparison_by_polling() {
    // A quarter of the items out of training: with seed 7, 4 of the 12 digits prompts.
    const FOUR_HELD_OUT: (&str, &str) = (
        "keep_rollouts = 20",
        "keep_rollouts = 20\n\n[held_out]\nfraction = 0.25\nseed = 7",
    );
    // Two steps: what is compared is a checkpoint and the base, not how far training went.
    const TWO_STEPS: (&str, &str) = ("total_steps = 12", "total_steps = 2");
    let (stack, _engine) = stack(&[TWO_STEPS, SAVE_EVERY_TWO, FOUR_HELD_OUT]);
    let id = stack.start();
    let finished = stack.wait(&id, "finished", 900);
    assert_eq!(finished["state"], "completed", "{}", stack.explain(&id));
    let home = stack.home.path();
    let _stops = StopsPreflights { home };

    let started = Instant::now();
    let exchange = typescript_client(
        home,
        "rl_compare_training",
        &json!({"run_id": id, "num_steps": 2, "group_size": 2}),
        Duration::from_secs(600),
    );
    let compared = exchange.polled_within_the_limit();
    let context = exchange.context();
    eprintln!(
        "the comparison took {:.0?} in {} polls",
        started.elapsed(),
        exchange.said["polls"]
    );
    assert_eq!(compared["run_id"], id.as_str(), "{context}");
    assert_eq!(compared["prompt_source"], "held-out slice", "{context}");
    assert!(
        ["better", "no detectable difference", "worse"]
            .contains(&compared["verdict"].as_str().unwrap_or_default()),
        "{context}"
    );
    assert_eq!(
        compared["base"]["model"],
        format!("run:{id}@base"),
        "{context}"
    );
    for side in ["base", "trained"] {
        assert_eq!(compared[side]["status"], "succeeded", "{context}");
        assert_eq!(compared[side]["prompts"], 2, "{context}");
        assert_eq!(compared[side]["completions"], 4, "{context}");
    }
    // The comparison is a test of the store, as `rl compare` leaves it.
    let shown = stack.json(&["preflight", "show", compared["test_id"].as_str().unwrap()]);
    assert_eq!(shown["test_id"], compared["test_id"], "{shown:#}");
    assert_no_process_mentions(home);

    // The same with the official Python SDK's client: answered at once, polled to the verdict.
    let python = crate::mcp_tasks::python_client(
        home,
        "poll",
        "rl_compare_training",
        &json!({"run_id": id, "num_steps": 2, "group_size": 2}),
    );
    let said = python.succeeded();
    assert_eq!(said["first"]["status"], "running", "{said:#}");
    let final_answer = &said["final"];
    assert_eq!(final_answer["run_id"], id.as_str(), "{said:#}");
    assert!(
        ["better", "no detectable difference", "worse"]
            .contains(&final_answer["verdict"].as_str().unwrap_or_default()),
        "{said:#}"
    );
    assert_no_process_mentions(home);
    assert_nothing_left(&stack, &id);
}
