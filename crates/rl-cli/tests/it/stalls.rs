//! A run that stalls (issue 34, part 3): `fixtures/stalls/stalling_env.py` sends the groups of
//! a couple of steps, then never returns from making another. rl's trainer, on the local
//! engine, says where it is (`trainer-phase.json`: waiting for its batch); once the run has
//! gone `run.stall_factor` times its median step (never less than `run.stall_floor_secs`)
//! without a step, its status warns that it is stalled and names the environment. Stopped,
//! it leaves nothing running.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::runs::{Stack, assert_nothing_left, is_finished};
use crate::test_python;

/// Stalled past twice the median step, never before 5 s.
const STALL_LIMITS: (&str, &str) = ("[run]\n", "[run]\nstall_factor = 2\nstall_floor_secs = 5\n");

fn folder() -> PathBuf {
    std::fs::canonicalize(rl_test_support::workspace_root().join("fixtures/stalls")).unwrap()
}

fn stall_flag(status: &Value) -> Option<&Value> {
    status["health"]["flags"]
        .as_array()?
        .iter()
        .find(|flag| flag["kind"] == "stalled")
}

#[test]
#[ignore = "needs the test venv and the local engine: `cargo xtask test` runs it"]
fn an_environment_that_stops_sending_stalls_the_run_naming_the_environment() {
    let engine = rl_test_support::local_engine();
    let settings = format!(
        "environments_dir = \"{}\"\n{}",
        folder().display(),
        rl_test_support::local_engine_settings(&test_python(), &engine)
    );
    let stack = Stack::with_settings(settings, &[STALL_LIMITS], "stalling");
    let id = stack.start();
    let dir = stack.run_dir(&id);
    let started = Instant::now();
    // Until the stall is named on the environment (other components may be named on the way,
    // while a step is slow): the engine's start, JAX's compilation and two steps take minutes.
    let (status, flag) = loop {
        let status = stack.json(&["runs", "status", &id]);
        if let Some(flag) = stall_flag(&status)
            && flag["component"] == "environment"
        {
            let flag = flag.clone();
            break (status, flag);
        }
        assert!(
            !is_finished(&status) && started.elapsed() < Duration::from_secs(600),
            "no stall named on the environment: {status:#}\n{}",
            stack.explain(&id)
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(status["state"], "running", "{status:#}");
    assert_eq!(status["health"]["healthy"], false, "{status:#}");
    let detail = flag["detail"].as_str().unwrap_or_default();
    assert!(
        detail.starts_with("the environment is not sending (no group for ")
            && detail.contains("the trainer is waiting for a batch")
            && detail.contains("no new step for "),
        "{flag:#}"
    );
    // The trainer said so: it waits for the batch of the step after its last.
    let phase: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("trainer-phase.json")).unwrap())
            .unwrap();
    assert_eq!(phase["phase"], "wait", "{phase:#}");
    let last_step = flag["window"]["last_step"].as_i64().unwrap();
    assert!(last_step >= 1, "{flag:#}");
    assert_eq!(phase["step"].as_i64(), Some(last_step + 1), "{phase:#}");
    // The people's status says it too.
    let text = stack.rl(&["runs", "status", &id]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.lines().any(|line| line.starts_with("health: stalled")
            && line.contains(": the environment is not sending (no group for ")),
        "{text}"
    );

    stack.rl(&["runs", "stop", &id]);
    let finished = stack.wait(&id, "finished", 300);
    assert_eq!(finished["state"], "stopped", "{}", stack.explain(&id));
    assert_nothing_left(&stack, &id);
}
