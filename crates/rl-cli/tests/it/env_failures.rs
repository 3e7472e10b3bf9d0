//! What a real environment's run says when nothing trains (issue 40), on fixtures shaped like
//! Atropos's own environments against atroposlib 0.4.0 (`fixtures/no-signal/`): rollouts
//! returned unscored (infinimath: every `handle_send_to_api` fails), prompts longer than the
//! token limit skipped without asking the model (reasoning_gym), and data missing at setup (an
//! NLTK corpus). Each run fails naming its real cause and its fix, within its bounds, and leaves
//! nothing running.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::runs::{Stack, assert_nothing_left};
use crate::test_python;

/// Warned at 8 groups, failed at 16 and no sooner than 2 s after the warning.
const BOUNDS: (&str, &str) = (
    "[run]\n",
    "[run]\nno_signal_warn_groups = 8\nno_signal_fail_groups = 16\nno_signal_fail_secs = 2\n",
);

fn folder() -> PathBuf {
    std::fs::canonicalize(rl_test_support::workspace_root().join("fixtures/no-signal")).unwrap()
}

/// A run of `environment` on the local stack (run-api, the fixture trainer), failed.
fn failed_run(environment: &str) -> (Stack, String, Value) {
    let settings = format!(
        "environments_dir = \"{}\"\n{}",
        folder().display(),
        rl_test_support::local_stack_settings(&test_python())
    );
    let stack = Stack::with_settings(settings, &[BOUNDS], environment);
    let id = stack.start();
    let finished = stack.wait(&id, "finished", 300);
    assert_eq!(finished["state"], "failed", "{}", stack.explain(&id));
    (stack, id, finished)
}

#[test]
#[ignore = "needs the test venv (atroposlib): `cargo xtask test` runs it"]
fn an_environment_whose_code_fails_is_named_with_its_first_error_not_as_no_signal() {
    let (stack, id, finished) = failed_run("unscored");
    let error = finished["error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with("no group reached the trainer: the environment's code fails: "),
        "{error}"
    );
    for said in [
        "returned no scored group (tokens, masks, scores): a list of 4 tuple",
        "errors in its handle_send_to_api, the first: `AttributeError: 'tuple' object has no \
         attribute 'get'`",
        "against atroposlib 0.4.0, not the model",
    ] {
        assert!(error.contains(said), "{said:?} in {error}");
    }
    assert!(!error.contains("stronger base model"), "{error}");
    // The counts say it too, for agents and the page.
    let status = stack.json(&["runs", "status", &id]);
    let groups = &status["groups"];
    assert_eq!(groups["made"], 0, "{status:#}");
    assert!(groups["invalid"].as_u64().unwrap() >= 16, "{status:#}");
    assert!(
        groups["errors"]["handle_send_to_api"]["count"]
            .as_u64()
            .unwrap()
            >= 1,
        "{status:#}"
    );
    assert_nothing_left(&stack, &id);
}

#[test]
#[ignore = "needs the test venv (atroposlib): `cargo xtask test` runs it"]
fn prompts_skipped_as_too_long_are_named_with_their_length_and_the_limit_to_set() {
    let (stack, id, finished) = failed_run("long_prompts");
    let error = finished["error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with(
            "no group reached the trainer: the environment skips prompts longer than its token \
             limit: "
        ) && error.contains("skipped their prompt without asking the model: prompts of up to ")
            && error.contains("against the token limit of 256")
            && error.contains(r#"rl_edit_config {"field": "max_token_length", "value": "#),
        "{error}"
    );
    // The same cause as a person at the shell reads it: the command to type.
    let shown = stack.rl(&["runs", "status", &id]);
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.contains("`rl config set max_token_length "),
        "{shown}"
    );
    let status = stack.json(&["runs", "status", &id]);
    let groups = &status["groups"];
    assert!(
        groups["longest_prompt"].as_u64().unwrap() >= 256,
        "{status:#}"
    );
    assert_eq!(groups["prompt_too_long"], groups["unsampled"], "{status:#}");
    assert_nothing_left(&stack, &id);
}

/// On the local engine, whose start alone takes most of a minute: the environment's setup runs
/// first, so its failure ends the run within 15 s of `rl runs start`, quoting the line that
/// names the fix.
#[test]
#[ignore = "needs the test venv and the local engine: `cargo xtask test` runs it"]
fn an_environment_dying_in_its_setup_fails_the_run_before_the_trainer_is_ready_quoting_the_fix() {
    let engine = rl_test_support::local_engine();
    let settings = format!(
        "environments_dir = \"{}\"\n{}",
        folder().display(),
        rl_test_support::local_engine_settings(&test_python(), &engine)
    );
    let stack = Stack::with_settings(settings, &[], "missing_data");
    let started = Instant::now();
    let id = stack.start();
    let failed = loop {
        let status = stack.json(&["runs", "status", &id]);
        if status["state"] == "failed" {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "not failed: {}",
            stack.explain(&id)
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let took = started.elapsed();
    let error = failed["error"].as_str().unwrap_or_default();
    let first = error.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("env exited with code 1 during its setup")
            && first.contains("LookupError: Resource words not found.")
            && first.contains("nltk.download('words')"),
        "{error}"
    );
    // Before the trainer was ready (its start alone takes most of a minute here): the
    // environment's setup ran first. Idle, this machine fails such a run in about 12 s of
    // `rl runs start` (atroposlib's import is 5 of them); 40 s once with two test suites
    // sharing its two cores. The bound is generous for a busy machine: the order of the events
    // is what shows the environment started first.
    let events = stack.json(&["runs", "events", &id]);
    let events = events["events"].as_array().cloned().unwrap_or_default();
    assert!(
        !events.iter().any(|event| event["message"]
            .as_str()
            .is_some_and(|message| message.starts_with("trainer ready"))),
        "{events:#?}"
    );
    assert!(
        took < Duration::from_secs(90),
        "failed after {took:?}: {error}"
    );
    assert_nothing_left(&stack, &id);
}
