//! A run that cannot learn (issue 32, part 3): `fixtures/no-signal/constant_env.py` scores every
//! completion 0.0, so atroposlib drops every group and nothing reaches the trainer. The
//! environment's groups are counted (`rl_env`), shown in the status and its health digest as
//! they change, warned of once the first ones all lacked signal, and the run fails naming the
//! cause past its bound, leaving nothing running. A pre-flight of the same environment, which
//! returns no group when its scores are alike (as gsm8k-style environments do: atroposlib's
//! `process` then asks again until the timeout), ends early with the verdict `no signal`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;

use rl_test_support::FixtureServer;

use crate::runs::{Stack, assert_nothing_left, is_finished};
use crate::{rl_in, test_python};

/// Warned at 8 groups without signal, failed at 48 and no sooner than 10 s after the warning.
const BOUNDS: (&str, &str) = (
    "[run]\n",
    "[run]\nno_signal_warn_groups = 8\nno_signal_fail_groups = 48\nno_signal_fail_secs = 10\n",
);

fn folder() -> PathBuf {
    std::fs::canonicalize(rl_test_support::workspace_root().join("fixtures/no-signal")).unwrap()
}

fn stack() -> Stack {
    let settings = format!(
        "environments_dir = \"{}\"\n{}",
        folder().display(),
        rl_test_support::local_stack_settings(&test_python())
    );
    Stack::with_settings(settings, &[BOUNDS], "constant")
}

fn has_no_signal_flag(status: &Value) -> bool {
    status["health"]["flags"]
        .as_array()
        .is_some_and(|flags| flags.iter().any(|flag| flag["kind"] == "no_signal"))
}

#[test]
#[ignore = "needs the test venv (atroposlib): `cargo xtask test` runs it"]
fn a_run_whose_groups_all_score_alike_warns_then_fails_naming_the_cause() {
    let stack = stack();
    let id = stack.start();
    let started = Instant::now();
    let mut first_groups: Option<Instant> = None;
    let mut warned: Option<(Instant, Value)> = None;
    // The counts as they change, until the warning (or the run's end).
    loop {
        let status = stack.json(&["runs", "status", &id]);
        if first_groups.is_none() && status["groups"].is_object() {
            first_groups = Some(Instant::now());
        }
        if status["groups"]["no_signal"] == true {
            warned = Some((Instant::now(), status));
            break;
        }
        if is_finished(&status) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "no groups counted: {}",
            stack.explain(&id)
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let first_groups = first_groups.expect("the status never showed the groups");
    let (warned_at, warned) = warned.expect("the status never warned");
    assert!(
        warned_at.duration_since(first_groups) < Duration::from_secs(60),
        "warned {:?} after the first groups",
        warned_at.duration_since(first_groups)
    );
    let groups = &warned["groups"];
    assert_eq!(groups["with_signal"], 0, "{warned:#}");
    assert!(groups["alike"].as_u64().unwrap() >= 1, "{warned:#}");
    assert_eq!(
        groups["alike_scores"].as_object().unwrap().len(),
        1,
        "{warned:#}"
    );
    assert!(
        groups["alike_scores"]["0.0"].as_u64().unwrap() >= 1,
        "{warned:#}"
    );
    assert_eq!(warned["health"]["healthy"], false, "{warned:#}");
    assert!(has_no_signal_flag(&warned), "{warned:#}");

    // Past the bound, the run fails with the cause and what to try: not in the same second as
    // the warning (the constant environment makes its groups in milliseconds).
    let finished = stack.wait(&id, "finished", 600);
    assert!(
        warned_at.elapsed() >= Duration::from_secs(10),
        "failed {:?} after the warning",
        warned_at.elapsed()
    );
    assert_eq!(finished["state"], "failed", "{}", stack.explain(&id));
    let error = finished["error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with("no training signal: ") && error.contains("scored alike (all 0.0)"),
        "{error}"
    );
    // Agents read the tool to try; people (below) the command.
    for remedy in ["stronger base model", "shaped reward", "rl_test_inference"] {
        assert!(error.contains(remedy), "{error}");
    }
    // The warning is an event of the run, and the people's status says it.
    let events = stack.json(&["runs", "events", &id]);
    assert!(
        events["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|event| event["kind"] == "no_signal"),
        "{events:#}"
    );
    let text = stack.rl(&["runs", "status", &id]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("health: no_signal: no training signal"),
        "{text}"
    );
    assert!(text.contains("groups: "), "{text}");
    assert!(!text.contains("no warning sign"), "{text}");
    assert!(
        text.contains("`rl preflight`") && !text.contains("rl_test_inference"),
        "{text}"
    );
    assert_nothing_left(&stack, &id);
}

#[test]
#[ignore = "needs the test venv (atroposlib): `cargo xtask test` runs it"]
fn a_preflight_whose_environment_returns_no_group_ends_early_with_no_signal() {
    let python = test_python();
    let server = FixtureServer::start(&python, None);
    let stack = stack();
    stack.json(&["config", "set", "drop_alike", "true"]);
    let home = stack.home.path();
    let started = Instant::now();
    let output = rl_in(
        home,
        &[
            "preflight",
            "--json",
            "--base-url",
            &server.base_url,
            "--model",
            "always-right",
            "--steps",
            "3",
            "--group-size",
            "2",
            "--timeout",
            "600",
        ],
    );
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|error| {
        panic!(
            "{error}: {stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    assert!(took < Duration::from_secs(180), "took {took:?}: {report:#}");
    assert_eq!(report["verdict"], "no_signal", "{report:#}");
    let model = &report["models"][0];
    assert_eq!(model["status"], "no_signal", "{report:#}");
    assert!(
        model["reason"]
            .as_str()
            .unwrap_or_default()
            .starts_with("no training signal: "),
        "{report:#}"
    );
    assert!(
        report["explanation"]
            .as_str()
            .unwrap_or_default()
            .starts_with("no training signal: "),
        "{report:#}"
    );
    assert!(took < Duration::from_secs(60), "took {took:?}: {report:#}");
    // Nothing of the model is left.
    let left: Vec<_> = rl_test_support::processes_mentioning(&home.display().to_string())
        .into_iter()
        .filter(|(_, line)| line.contains(" process "))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// On the local engine, the run's evaluation before its first step (`eval_every`) is a
/// pre-flight of the untrained weights on the same environment's held-out items: it ends with
/// `no signal` (the trainer counts it failed), not `broken`, and within minutes. The run is told never
/// to fail here (`no_signal_fail_groups = 0`), so that the evaluation alone is watched; then it
/// is stopped, leaving nothing running.
#[test]
#[ignore = "needs the test venv and the local engine: `cargo xtask test` runs it"]
fn a_runs_evaluation_without_signal_ends_early() {
    const NEVER_FAILS: (&str, &str) = (
        "[run]\n",
        "[run]\nno_signal_warn_groups = 8\nno_signal_fail_groups = 0\n",
    );
    const EVALUATED: (&str, &str) = (
        "keep_rollouts = 20",
        "keep_rollouts = 20\neval_every = 2\neval_prompts = 3\neval_group_size = 2",
    );
    let engine = rl_test_support::local_engine();
    let settings = format!(
        "environments_dir = \"{}\"\n{}",
        folder().display(),
        rl_test_support::local_engine_settings(&test_python(), &engine)
    );
    let stack = Stack::with_settings(settings, &[NEVER_FAILS, EVALUATED], "constant");
    stack.json(&["config", "set", "drop_alike", "true"]);
    let id = stack.start();
    let dir = stack.run_dir(&id);
    let started = Instant::now();
    let report = loop {
        let reports: Vec<PathBuf> = std::fs::read_dir(dir.join("evaluations"))
            .map(|entries| {
                entries
                    .flatten()
                    .map(|entry| entry.path().join("report.json"))
                    .filter(|path| path.is_file())
                    .collect()
            })
            .unwrap_or_default();
        if let Some(report) = reports.first() {
            break std::fs::read_to_string(report).unwrap();
        }
        let status = stack.json(&["runs", "status", &id]);
        assert!(
            !is_finished(&status) && started.elapsed() < Duration::from_secs(900),
            "no evaluation ended: {}",
            stack.explain(&id)
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    let report: Value = serde_json::from_str(&report).unwrap();
    let text = report.to_string();
    assert!(text.contains("no_signal"), "{report:#}");
    assert!(text.contains("no training signal: "), "{report:#}");
    // Its one model ended within minutes, not at the evaluation's time bound.
    let took = report["models"][0]["duration_secs"]
        .as_f64()
        .unwrap_or(f64::MAX);
    assert!(took < 300.0, "{report:#}");
    stack.rl(&["runs", "stop", &id]);
    let finished = stack.wait(&id, "finished", 300);
    assert_eq!(finished["state"], "stopped", "{}", stack.explain(&id));
    assert_nothing_left(&stack, &id);
}

/// The counts a run's environment wrote reach the run page's data, the status the API answers
/// and its health digest (no Python: the counts file as `rl_env` writes it).
#[test]
fn the_counts_reach_the_run_page_and_the_status() {
    use crate::pages::{RUN, run_home};
    let home = run_home(false);
    let dir = rl_settings::run_dir(home.path(), &rl_settings::RunId::parse(RUN).unwrap());
    std::fs::write(
        dir.join("env-groups.json"),
        r#"{"made": 40, "with_signal": 0, "alike": 40, "alike_scores": {"0.0": 40}, "none": 0,
            "failed": 0, "updated": 1.0}"#,
    )
    .unwrap();
    let server = crate::serve::Server::start(home, &[], &[]);
    let page = crate::serve::expect(server.get(&format!("/page/runs/{RUN}")), 200);
    assert_eq!(page["groups"]["made"], 40, "{page:#}");
    assert_eq!(page["groups"]["no_signal"], true, "{page:#}");
    assert_eq!(
        page["groups"]["summary"], "40 of 40 groups scored alike (all 0.0)",
        "{page:#}"
    );
    assert!(has_no_signal_flag(&page), "{page:#}");
    assert_eq!(page["health"]["healthy"], false, "{page:#}");
    // The status (`rl_check_status`'s answer type).
    let status = crate::success_json(
        &["runs", "status", RUN, "--json"],
        &rl_in(server.home(), &["runs", "status", RUN, "--json"]),
    );
    assert_eq!(status["groups"]["alike"], 40, "{status:#}");
    assert!(has_no_signal_flag(&status), "{status:#}");
}
