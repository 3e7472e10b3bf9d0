//! `rl preflight` as an agent uses it: one compact JSON answer, tests kept and listed, bad
//! requests refused before anything starts.

use std::process::Output;

use rl_test_support::FixtureServer;
use serde_json::Value;

use crate::{rl_in, test_python};

pub(crate) fn home_with_arithmetic(python: &std::path::Path) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        rl_test_support::local_stack_settings(python),
    )
    .unwrap();
    assert!(
        rl_in(home.path(), &["select", "arithmetic"])
            .status
            .success()
    );
    home
}

fn refused(output: &Output) -> String {
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let answer: Value = serde_json::from_slice(&output.stdout).unwrap();
    answer["error"].as_str().unwrap().to_owned()
}

#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn a_test_answers_in_one_json_line_and_is_kept() {
    let python = test_python();
    let server = FixtureServer::start(&python, None);
    let home = home_with_arithmetic(&python);
    let output = rl_in(
        home.path(),
        &[
            "test",
            "--json",
            "--base-url",
            &server.base_url,
            "--model",
            "half-right",
            "--model",
            "always-wrong",
            "--steps",
            "2",
            "--group-size",
            "2",
        ],
    );
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["models_succeeded"], 2);
    assert_eq!(report["best_model"], "half-right");
    assert_eq!(report["key_variable"], "(none)");
    assert_eq!(report["models"][0]["status"], "succeeded");
    assert_eq!(report["models"][0]["accuracy"], 0.5);
    let id = report["test_id"].as_str().unwrap();

    let listed = rl_in(home.path(), &["test", "list", "--json"]);
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(listed[0]["test_id"], id);
    let shown = rl_in(home.path(), &["test", "show", id, "--json"]);
    let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(shown, report);
    let table = rl_in(home.path(), &["test", "show", id]);
    assert!(String::from_utf8_lossy(&table.stdout).contains("verdict: "));
}

#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn bad_requests_are_refused_before_anything_starts() {
    let python = test_python();
    let home = home_with_arithmetic(&python);
    let run = |extra: &[&str]| {
        let mut args = vec!["test", "--json"];
        args.extend_from_slice(extra);
        refused(&rl_in(home.path(), &args))
    };
    // OpenRouter by default: its key is required (the test helper removes every key).
    assert!(run(&[]).contains("OPENROUTER_API_KEY is not set"));
    let local = ["--base-url", "http://127.0.0.1:9/v1"];
    assert!(run(&[&local[..], &["--model", "a b"]].concat()).contains("not a model id"));
    assert!(
        run(&[&local[..], &["--model", "m", "--model", "m"]].concat()).contains("listed twice")
    );
    assert!(run(&[&local[..], &["--steps", "0"]].concat()).contains("steps"));
    assert!(run(&["--base-url", "localhost:8000"]).contains("not an http(s) URL"));
    assert!(
        run(&[&local[..], &["--key-var", "RL_NO_SUCH_VARIABLE"]].concat())
            .contains("RL_NO_SUCH_VARIABLE is not set")
    );
    assert!(!home.path().join("preflight").exists());
    let unknown = refused(&rl_in(home.path(), &["test", "show", "0badc0de", "--json"]));
    assert!(
        unknown.contains("no pre-flight test with id '0badc0de'"),
        "{unknown}"
    );
    let bad = refused(&rl_in(home.path(), &["test", "show", "../etc", "--json"]));
    assert!(bad.contains("8 lowercase hexadecimal"), "{bad}");
}

/// A Ctrl-C reaches only `rl` (the models run in process groups of their own): `rl` stops them
/// all before it exits, and keeps the unfinished test.
#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn an_interrupted_test_leaves_no_model_running() {
    let python = test_python();
    let server = FixtureServer::start(&python, None);
    let home = home_with_arithmetic(&python);
    let rl = std::process::Command::new(env!("CARGO_BIN_EXE_rl"))
        .args(["test", "--json", "--base-url", &server.base_url])
        .args([
            "--model",
            "slow",
            "--model",
            "half-right@60",
            "--timeout",
            "600",
        ])
        .env("RL_HOME", home.path())
        .env_remove("RL_TINKER_ATROPOS_ROOT")
        .current_dir(crate::workspace_root())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let home_text = home.path().display().to_string();
    let models_running = || {
        rl_test_support::processes_mentioning(&home_text)
            .iter()
            .filter(|(_, line)| line.contains(" process "))
            .count()
    };
    let started = std::time::Instant::now();
    while models_running() < 2 && started.elapsed() < std::time::Duration::from_secs(60) {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(models_running(), 2, "the models never started");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(rl.id()).unwrap()),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let output = rl.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let answer: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(
        answer["error"].as_str().unwrap().starts_with("interrupted"),
        "{answer}"
    );
    assert_eq!(models_running(), 0);
    let listed = rl_in(home.path(), &["test", "list", "--json"]);
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(listed[0]["verdict"], Value::Null);
}
