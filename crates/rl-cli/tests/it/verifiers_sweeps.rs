//! A sweep and a stall of verifiers runs, as for Atropos (issue 41), in one sweep of
//! `fixtures/verifiers-stalls/stalling-sum` (a v1 taskset run by `rl_verifiers` in
//! `target/vf1-venv`) on the local engine: its point `stall_after = 0` trains its two steps to
//! `completed`; its point `stall_after = 8` sends a step's groups, then never finishes scoring
//! another, and its status warns that it is stalled naming the environment (as
//! `stalls.rs` sees for Atropos) until it is stopped. The sweep then ends, its two runs ranked.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::runs::{Stack, assert_nothing_left, is_finished};
use crate::test_python;

/// The stalling fixture's folder instead of the three verifiers fixtures'.
const STALLING_FOLDER: (&str, &str) = ("fixtures/verifiers\"", "fixtures/verifiers-stalls\"");
const TWO_STEPS: (&str, &str) = ("total_steps = 12", "total_steps = 2");
/// Two groups under way at once (a v1 rollout is a process of its own).
const TWO_WORKERS: (&str, &str) = ("max_num_workers = 8", "max_num_workers = 2");
/// Stalled past one median step (`stall_factor`'s least; its default of 5 left this test
/// idle for four more steps' worth, minutes on the local engine), never before 5 s. Groups
/// that never end are abandoned after `worker_timeout` (300 s) and counted as failed, before or
/// after the stall is seen: a group that ended is not one sent, so either way the stall is the
/// environment's.
const STALL_LIMITS: (&str, &str) = ("[run]\n", "[run]\nstall_floor_secs = 5\nstall_factor = 1\n");
/// The stall's words while no group ends at all.
const NOT_SENDING: &str = "the environment is not sending (no group for ";
/// The stall's words once groups end (here: abandoned) without one sent.
const ENDING_UNSENT: &str = "the environment's groups end without one sent to the trainer (";
/// Bound of the waits on this shared, loaded machine: never asserted as a timing.
const WAIT_SECS: u64 = 1500;

fn stall_flag(status: &Value) -> Option<&Value> {
    status["health"]["flags"]
        .as_array()?
        .iter()
        .find(|flag| flag["kind"] == "stalled")
}

/// The sweep's rows, by the value of `stall_after` each point set.
fn row_of(view: &Value, stall_after: i64) -> Value {
    view["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["settings"]["stall_after"].as_i64() == Some(stall_after))
        .cloned()
        .unwrap_or_else(|| panic!("no point stall_after = {stall_after}: {view:#}"))
}

/// Waits until the sweep's point `stall_after` has a run, and returns its id.
fn run_of_point(stack: &Stack, sweep: &str, stall_after: i64) -> String {
    let started = Instant::now();
    loop {
        let view = stack.json(&["sweep", "status", sweep]);
        if let Some(id) = row_of(&view, stall_after)["run_id"].as_str() {
            return id.to_owned();
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "point {stall_after} never started: {view:#}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Waits until `id`'s status says it is stalled on the environment after a step; that status
/// and the flag.
fn stalled_on_the_environment(stack: &Stack, id: &str) -> (Value, Value) {
    let started = Instant::now();
    loop {
        let status = stack.json(&["runs", "status", id]);
        // Other components may be named on the way, while a step is slow; and before its
        // first step the 5 s floor alone judges the run, so a first batch slow to sample on a
        // loaded machine is named too: the stall looked for is the one after a step.
        if let Some(flag) = stall_flag(&status)
            && flag["component"] == "environment"
            && flag["window"]["rows"].as_u64().is_some_and(|rows| rows > 0)
        {
            let flag = flag.clone();
            return (status, flag);
        }
        assert!(
            !is_finished(&status) && started.elapsed() < Duration::from_secs(WAIT_SECS),
            "no stall named on the environment: {status:#}\n{}",
            stack.explain(id)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
#[ignore = "needs the test venvs (verifiers v1, the local engine); run through cargo xtask test"]
fn a_sweep_of_a_verifiers_environment_ranks_its_runs_and_the_one_that_stops_sending_stalls() {
    let python = test_python();
    let engine = rl_test_support::local_engine();
    let verifiers = rl_test_support::verifiers_pythons();
    let settings = rl_test_support::verifiers_engine_settings(&python, &engine, &verifiers);
    let stack = Stack::with_settings(
        settings,
        &[STALLING_FOLDER, TWO_STEPS, TWO_WORKERS, STALL_LIMITS],
        "stalling-sum",
    );
    stack.json(&["config", "set", "batch_size", "8"]);
    stack.json(&["config", "set", "group_size", "4"]);
    let started = stack.json(&[
        "sweep",
        "start",
        "--set",
        "stall_after=0,8",
        "--max-parallel",
        "2",
    ]);
    let sweep = started["sweep_id"].as_str().unwrap().to_owned();
    assert_eq!(started["sweep"]["started"], 2, "{started:#}");
    let trains = run_of_point(&stack, &sweep, 0);
    let stalls = run_of_point(&stack, &sweep, 8);
    // Stopped whatever happens below: nothing of either outlives the test (a failed
    // assertion would otherwise leave the training point going in a deleted folder).
    let _stop = StopOnDrop(&stack, &stalls);
    let _stop_training = StopOnDrop(&stack, &trains);

    // The point that stops sending: stalled on its environment once it trained a step.
    let (status, flag) = stalled_on_the_environment(&stack, &stalls);
    assert_eq!(status["state"], "running", "{status:#}");
    assert_eq!(status["environment_kind"], "verifiers-v1", "{status:#}");
    assert_eq!(status["health"]["healthy"], false, "{status:#}");
    let detail = flag["detail"].as_str().unwrap_or_default();
    // Seen before the hung groups were abandoned, or after (then what ended them is named).
    let silent = detail.starts_with(NOT_SENDING);
    let timing_out =
        detail.starts_with(ENDING_UNSENT) && detail.contains("longer than worker_timeout (300 s)");
    assert!(
        (silent || timing_out)
            && detail.contains("the trainer is waiting for a batch")
            && detail.contains("no new step for ")
            && !detail.contains("run-api"),
        "{flag:#}"
    );
    let phase: Value = serde_json::from_str(
        &std::fs::read_to_string(stack.run_dir(&stalls).join("trainer-phase.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(phase["phase"], "wait", "{phase:#}");
    let last_step = flag["window"]["last_step"].as_i64().unwrap();
    assert_eq!(last_step, 1, "{flag:#}\n{}", stack.explain(&stalls));
    assert_eq!(phase["step"].as_i64(), Some(2), "{phase:#}");
    let text = stack.rl(&["runs", "status", &stalls]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.lines().any(|line| line.starts_with("health: stalled")
            && [NOT_SENDING, ENDING_UNSENT]
                .iter()
                .any(|words| line.contains(&format!(": {words}")))),
        "{text}"
    );
    stack.json(&["runs", "stop", &stalls]);

    // The sweep ends once its other point completes; both are ranked by their reward.
    let started = Instant::now();
    let ended = loop {
        let view = stack.json(&["sweep", "status", &sweep]);
        if view["state"] != "running" {
            break view;
        }
        assert!(
            started.elapsed() < Duration::from_secs(WAIT_SECS),
            "sweep {sweep} did not end: {view:#}\n{}",
            stack.explain(&trains)
        );
        std::thread::sleep(Duration::from_millis(1000));
    };
    assert_eq!(ended["state"], "done", "{ended:#}");
    assert_eq!(
        row_of(&ended, 0)["state"],
        "completed",
        "{}",
        stack.explain(&trains)
    );
    assert_eq!(row_of(&ended, 8)["state"], "stopped", "{ended:#}");
    for (id, stall_after) in [(&trains, 0), (&stalls, 8)] {
        let status = stack.json(&["runs", "status", id]);
        assert_eq!(status["environment_kind"], "verifiers-v1", "{status:#}");
        let config = std::fs::read_to_string(stack.run_dir(id).join("config.yaml")).unwrap();
        assert!(
            config.contains(&format!("stall_after: {stall_after}")),
            "{id} lacks its point's setting:\n{config}"
        );
        assert_nothing_left(&stack, id);
    }
    let results = stack.json(&["sweep", "results", &sweep]);
    let ranked: Vec<&Value> = results["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|row| row["rank"].is_u64())
        .collect();
    assert_eq!(ranked.len(), 2, "{results:#}");
    for (place, row) in ranked.iter().enumerate() {
        assert_eq!(row["rank"], place + 1, "{results:#}");
        assert!(row["metric"].is_f64(), "{results:#}");
    }
    assert!(
        ranked[0]["metric"].as_f64() >= ranked[1]["metric"].as_f64(),
        "{results:#}"
    );
    assert_eq!(results["best_run_id"], ranked[0]["run_id"], "{results:#}");
    assert_eq!(ranked[0]["best"], true, "{results:#}");
}

/// `rl runs stop ID` when dropped: a failed assertion leaves no stalled run going.
struct StopOnDrop<'a>(&'a Stack, &'a str);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        let _ = self.0.rl(&["runs", "stop", self.1, "--json"]);
    }
}
