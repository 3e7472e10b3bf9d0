//! The minutes-long tool calls (issue 31) as any face's caller sees them through `rl tool
//! call`: started without waiting, followed by their test's id, the same request at once
//! answered with one test, and every new answer snapshotted.

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::mcp::eventually;
use crate::preflight::home_with_endpoint;
use crate::{rl_command, test_python};

/// `rl tool call TOOL ARGUMENTS` on `home`, the JSON answer and whether it failed.
fn call(home: &Path, tool: &str, arguments: &Value) -> (Value, bool) {
    let output: Output = rl_command(home)
        .args(["tool", "call", tool, &arguments.to_string()])
        .output()
        .unwrap();
    let answer = serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!(
            "not JSON ({error}): {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (answer, !output.status.success())
}

/// The answer with what differs from run to run replaced: the home, its test id and `ids`.
fn scrubbed(answer: &Value, home: &Path, ids: &[&str]) -> Value {
    let home = home.display().to_string();
    rl_test_support::scrub_strings(answer.clone(), &|text| {
        let mut text = text.replace(&home, "[home]");
        for id in answer["test_id"].as_str().iter().chain(ids) {
            text = text.replace(id, "[test_id]");
        }
        text
    })
}

/// Follows `test_id` until it has ended (bounded), returning every answer seen.
fn follow(home: &Path, tool: &str, test_id: &str) -> Vec<Value> {
    let started = Instant::now();
    let mut seen = Vec::new();
    loop {
        // `rl tool call` waits unless told not to, as HTTP does.
        let (answer, failed) = call(home, tool, &json!({"test_id": test_id, "wait": false}));
        assert!(!failed, "{answer}");
        let running = answer["status"] == "running";
        seen.push(answer);
        if !running {
            return seen;
        }
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "never ended: {seen:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Started without waiting, a pre-flight answers its id at once; followed by it, its progress
/// then the report a waiting caller gets; two identical requests at once start one test;
/// a request that differs starts its own.
#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn a_preflight_started_without_waiting_is_followed_by_its_id_and_one_request_is_one_test() {
    let python = test_python();
    let fixture = rl_test_support::FixtureServer::start(&python, None);
    let home = home_with_endpoint(&python, &fixture.base_url, &[]);
    let home = home.path();
    // 3 s at the endpoint per request: the test runs long enough to be seen running.
    let arguments = json!({"models": ["always-right@3", "half-right@3"], "num_steps": 2, "group_size": 2, "wait": false});

    let callers: Vec<_> = (0..2)
        .map(|_| {
            let arguments = arguments.clone();
            let home = home.to_owned();
            std::thread::spawn(move || call(&home, "rl_test_inference", &arguments))
        })
        .collect();
    let answers: Vec<Value> = callers
        .into_iter()
        .map(|caller| {
            let (answer, failed) = caller.join().unwrap();
            assert!(!failed, "{answer}");
            answer
        })
        .collect();
    let test_id = answers[0]["test_id"].as_str().unwrap().to_owned();
    assert_eq!(answers[1]["test_id"], test_id.as_str(), "{answers:?}");
    let mut started: Vec<bool> = answers
        .iter()
        .map(|answer| answer["started"].as_bool().unwrap())
        .collect();
    started.sort_unstable();
    assert_eq!(
        started,
        [false, true],
        "one of them started it: {answers:?}"
    );
    let tests = std::fs::read_dir(home.join("preflight"))
        .unwrap()
        .filter(|entry| {
            rl_settings::RunId::parse(&entry.as_ref().unwrap().file_name().to_string_lossy())
                .is_ok()
        })
        .count();
    assert_eq!(tests, 1, "two identical requests started two tests");
    let first = answers
        .iter()
        .find(|answer| answer["started"] == true)
        .unwrap();
    insta::assert_json_snapshot!("preflight_started", scrubbed(first, home, &[]), {
        ".estimated_seconds" => "[seconds]",
        ".poll_after_seconds" => "[seconds]",
        ".estimate_basis" => "[basis]",
        ".message" => "[message]",
    });

    let seen = follow(home, "rl_test_inference", &test_id);
    let report = seen.last().unwrap();
    assert_eq!(report["test_id"], test_id.as_str(), "{report}");
    assert_eq!(report["models_succeeded"], 2, "{report}");
    let running = seen
        .iter()
        .find(|answer| answer["status"] == "running")
        .expect("the test was never seen running");
    insta::assert_json_snapshot!("preflight_running", scrubbed(running, home, &[]), {
        ".started_at" => "[time]",
        ".estimated_seconds" => "[seconds]",
        ".poll_after_seconds" => "[seconds]",
        ".message" => "[message]",
        ".groups_done" => "[groups]",
        ".models_done" => "[models]",
        ".models[].groups_done" => "[groups]",
        ".models[].running" => "[running]",
    });
    // What the id gives once the test has ended, waiting or not, is one answer.
    let (again, _) = call(home, "rl_test_inference", &json!({"test_id": test_id}));
    assert_eq!(&again, report);

    // Ended, the same request starts a new test; one that differs never shares an id.
    let (anew, _) = call(home, "rl_test_inference", &arguments);
    assert_eq!(anew["started"], true, "{anew}");
    assert_ne!(anew["test_id"], test_id.as_str());
    let mut other = arguments.clone();
    other["num_steps"] = json!(1);
    let (different, _) = call(home, "rl_test_inference", &other);
    assert_eq!(different["started"], true, "{different}");
    assert_ne!(different["test_id"], anew["test_id"]);
    for id in [&anew["test_id"], &different["test_id"]] {
        let stopped = crate::rl_in(home, &["preflight", "stop", id.as_str().unwrap()]);
        assert!(stopped.status.success(), "{stopped:?}");
    }
}

/// What a test id cannot be asked: another tool's test, one that does not exist, an id beside
/// a new test's arguments, and a comparison with neither a run nor a test.
#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn a_test_id_is_asked_of_its_own_tool_alone() {
    let python = test_python();
    let fixture = rl_test_support::FixtureServer::start(&python, None);
    let home = home_with_endpoint(&python, &fixture.base_url, &[]);
    let home = home.path();
    let (started, _) = call(
        home,
        "rl_test_inference",
        &json!({"models": ["always-right"], "num_steps": 1, "group_size": 1, "wait": false}),
    );
    let test_id = started["test_id"].as_str().unwrap().to_owned();
    follow(home, "rl_test_inference", &test_id);
    let refusals = [
        (
            "another_tools_test",
            "rl_compare_training",
            json!({"test_id": test_id}),
        ),
        (
            "no_such_test",
            "rl_test_inference",
            json!({"test_id": "0badc0de"}),
        ),
        (
            "test_id_with_arguments",
            "rl_test_inference",
            json!({"test_id": test_id, "num_steps": 2}),
        ),
        (
            "compare_without_run_or_test",
            "rl_compare_training",
            json!({}),
        ),
        (
            "malformed_test_id",
            "rl_test_inference",
            json!({"test_id": "../../etc"}),
        ),
    ];
    for (name, tool, arguments) in refusals {
        let (answer, failed) = call(home, tool, &arguments);
        assert!(failed, "{name}: {answer}");
        insta::assert_json_snapshot!(
            format!("refused_{name}"),
            scrubbed(&answer, home, &[&test_id])
        );
    }
}

/// The worker of a test started without waiting is told to end (SIGTERM, as a machine's
/// shutdown does): it stops its test as `rl preflight stop` would and reports it stopped; no
/// model is left to find later.
#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn a_worker_told_to_end_reports_its_test_stopped_and_leaves_nothing() {
    let python = test_python();
    let fixture = rl_test_support::FixtureServer::start(&python, None);
    let home = home_with_endpoint(&python, &fixture.base_url, &[]);
    let home = home.path();
    let (started, failed) = call(
        home,
        "rl_test_inference",
        &json!({"models": ["slow"], "num_steps": 1, "group_size": 1, "wait": false}),
    );
    assert!(!failed, "{started}");
    let test_id = started["test_id"].as_str().unwrap().to_owned();
    assert!(
        eventually(Duration::from_secs(120), || fixture
            .requests()
            .iter()
            .any(|request| request["model"] == "slow")),
        "the model never asked the endpoint"
    );
    let shown = crate::rl_in(home, &["preflight", "show", &test_id, "--json"]);
    let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
    let worker = i32::try_from(shown["owner_pid"].as_u64().unwrap()).unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(worker),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let seen = follow(home, "rl_test_inference", &test_id);
    let report = seen.last().unwrap();
    assert!(report["stopped_at"].is_string(), "{report}");
    let home_text = home.display().to_string();
    assert!(
        eventually(Duration::from_secs(60), || {
            rl_test_support::processes_mentioning(&home_text).is_empty()
        }),
        "left running: {:?}",
        rl_test_support::processes_mentioning(&home_text)
    );
}

/// `rl preflight --no-wait` starts the test as an agent's call does and prints its id; `rl
/// preflight wait` follows it to its report. Options it cannot pass on are refused.
#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn the_cli_starts_a_test_without_waiting_and_follows_it() {
    let python = test_python();
    let fixture = rl_test_support::FixtureServer::start(&python, None);
    let home = home_with_endpoint(&python, &fixture.base_url, &[]);
    let home = home.path();
    let args = [
        "preflight",
        "--no-wait",
        "--model",
        "always-right",
        "--steps",
        "1",
        "--group-size",
        "1",
        "--json",
    ];
    let started = crate::rl_in(home, &args);
    let started = crate::success_json(&args, &started);
    assert_eq!(started["started"], true, "{started}");
    let test_id = started["test_id"].as_str().unwrap();
    let waited = crate::rl_in(home, &["preflight", "wait", test_id, "--json"]);
    let waited = crate::success_json(&["preflight", "wait"], &waited);
    assert_eq!(waited["timed_out"], false, "{waited}");
    assert_eq!(waited["test"]["models_succeeded"], 1, "{waited}");

    let refused = crate::rl_in(home, &["preflight", "--no-wait", "--timeout", "5"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("cannot be used with"),
        "{refused:?}"
    );
}
