//! `rl preflight` as an agent uses it: one compact JSON answer, tests kept and listed, bad
//! requests refused before anything starts.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

use rl_preflight::ModelMarks;
use rl_process::ProcessIdentity;
use rl_test_support::FixtureServer;
use serde_json::{Value, json};

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

/// [`home_with_arithmetic`] whose pre-flights go to the endpoint at `base_url`, asking
/// `models` when a call names none.
pub(crate) fn home_with_endpoint(
    python: &std::path::Path,
    base_url: &str,
    models: &[&str],
) -> tempfile::TempDir {
    let home = home_with_arithmetic(python);
    let config = home.path().join("config.toml");
    let settings = std::fs::read_to_string(&config).unwrap();
    let models = if models.is_empty() {
        String::new()
    } else {
        format!("models = {}\n", serde_json::json!(models))
    };
    std::fs::write(
        &config,
        format!("{settings}\n[inference]\nbase_url = \"{base_url}\"\n{models}"),
    )
    .unwrap();
    home
}

/// What a `kill -9` of the process running a test leaves in `home`: the test's folder with its
/// dead owner and one model's process group recorded, the model still running, and a process
/// the model left in a session of its own. Every process's command line holds `marker`.
/// Returns the test's folder and the model's process, to reap once it is ended.
pub(crate) fn left_by_a_killed_owner(home: &Path, marker: &str) -> (PathBuf, Child) {
    let dir = home.join("preflight").join("0badc0de");
    std::fs::create_dir_all(&dir).unwrap();
    let mut gone = Command::new("true").spawn().unwrap();
    let owner = ProcessIdentity::of(gone.id()).unwrap();
    gone.wait().unwrap();
    let plan = json!({
        "test_id": "0badc0de", "environment": "shell@shell.py", "models": ["m1"],
        "base_url": "http://127.0.0.1:9/v1", "started_at": "2026-01-01T00:00:00Z",
        "owner": {"process": owner, "boot_id": rl_process::boot_id()},
    });
    std::fs::write(dir.join("plan.json"), plan.to_string()).unwrap();
    // As the runner starts a model: a group of its own, its marks in its environment.
    let marks = ModelMarks {
        test_dir: dir.clone(),
        model: "01-m1".to_owned(),
    };
    let model = Command::new("/bin/sh")
        .args([
            "-c",
            &format!(
                "setsid sh -c 'touch detached; sleep 300; : {marker}' & sleep 300; : {marker}"
            ),
        ])
        .current_dir(&dir)
        .envs(marks.environment())
        .process_group(0)
        .spawn()
        .unwrap();
    let leader = ProcessIdentity::of(model.id()).unwrap();
    let group = json!({"model": "m1", "leader": leader});
    std::fs::write(dir.join("01-m1.group.json"), group.to_string()).unwrap();
    let started = Instant::now();
    while !dir.join("detached").exists() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the model never detached"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    (dir, model)
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
            "preflight",
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
    // Each model is judged on its own groups: the one that never scores has no reward to learn
    // from, whatever the other does, and the pooled verdict says they differ.
    assert_eq!(report["models"][1]["verdict"], "too_hard", "{report:#}");
    assert!(
        report["models"][1]["verdict_explanation"]
            .as_str()
            .unwrap()
            .contains("all wrong"),
        "{report:#}"
    );
    assert_ne!(report["models"][0]["verdict"], "too_hard", "{report:#}");
    assert!(
        report["explanation"]
            .as_str()
            .unwrap()
            .contains("the models differ"),
        "{report:#}"
    );
    let id = report["test_id"].as_str().unwrap();

    let listed = rl_in(home.path(), &["preflight", "list", "--json"]);
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(listed[0]["test_id"], id);
    let shown = rl_in(home.path(), &["preflight", "show", id, "--json"]);
    let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(shown, report);
    let table = rl_in(home.path(), &["preflight", "show", id]);
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(table.contains("verdict: "), "{table}");
    assert!(
        table.contains("too hard"),
        "each model's verdict in its row: {table}"
    );
}

#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn bad_requests_are_refused_before_anything_starts() {
    let python = test_python();
    let home = home_with_arithmetic(&python);
    let run = |extra: &[&str]| {
        let mut args = vec!["preflight", "--json"];
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
    // Over the limits every face shares (the plan once allowed 1 024 and 1 000).
    let oversized = run(&[&local[..], &["--group-size", "1000"]].concat());
    assert!(
        oversized.contains("group_size is 1000; it must be between 1 and 256"),
        "{oversized}"
    );
    let oversized = run(&[&local[..], &["--steps", "1000"]].concat());
    assert!(
        oversized.contains("num_steps is 1000; it must be between 1 and 100"),
        "{oversized}"
    );
    assert!(run(&["--base-url", "localhost:8000"]).contains("not an http(s) URL"));
    assert!(
        run(&[&local[..], &["--key-var", "RL_NO_SUCH_VARIABLE"]].concat())
            .contains("RL_NO_SUCH_VARIABLE is not set")
    );
    // The base model the next run trains: off the local engine a run's models are sampled at
    // Tinker's endpoint with the run's key (`hosted.rs`), and without that key nothing starts.
    let no_base = run(&["--model", "base"]);
    assert!(no_base.contains("TINKER_API_KEY is not set"), "{no_base}");
    assert!(!no_base.contains("key_variable"), "{no_base}");
    assert!(!home.path().join("preflight").exists());
    let unknown = refused(&rl_in(
        home.path(),
        &["preflight", "show", "0badc0de", "--json"],
    ));
    assert!(
        unknown.contains("no pre-flight test with id '0badc0de'"),
        "{unknown}"
    );
    let bad = refused(&rl_in(
        home.path(),
        &["preflight", "show", "../etc", "--json"],
    ));
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
        .args(["preflight", "--json", "--base-url", &server.base_url])
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
    let listed = rl_in(home.path(), &["preflight", "list", "--json"]);
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(listed[0]["verdict"], Value::Null);
    assert_eq!(listed[0]["status"], "interrupted", "{listed}");
}

/// The models of tests in `home` (`process` runs whose command line names the state directory).
fn models_running(home: &std::path::Path) -> usize {
    rl_test_support::processes_mentioning(&home.display().to_string())
        .iter()
        .filter(|(_, line)| line.contains(" process "))
        .count()
}

fn wait_for_models(home: &std::path::Path, count: usize) {
    let started = std::time::Instant::now();
    while models_running(home) < count && started.elapsed() < std::time::Duration::from_secs(60) {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(models_running(home), count, "the models never started");
}

/// `rl preflight ARGS --json`, for a test that runs.
fn json_of(home: &std::path::Path, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    crate::success_json(&all, &rl_in(home, &all))
}

/// `rl preflight` running a test in `home`; killed should an assertion fail first, and its models
/// then ended by `rl preflight list`.
struct Owner(Option<std::process::Child>, std::path::PathBuf);

impl Owner {
    fn pid(&self) -> u32 {
        self.0.as_ref().map_or(0, std::process::Child::id)
    }

    fn kill(&mut self) {
        if let Some(child) = self.0.as_mut() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }

    fn output(mut self) -> Output {
        self.0.take().unwrap().wait_with_output().unwrap()
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
            let _ = rl_in(&self.1, &["preflight", "list"]);
        }
    }
}

fn start_owner(home: &std::path::Path, server: &FixtureServer, extra: &[&str]) -> Owner {
    let child = crate::rl_command(home)
        .args(["preflight", "--json", "--base-url", &server.base_url])
        .args([
            "--model",
            "slow",
            "--model",
            "half-right@60",
            "--timeout",
            "600",
        ])
        .args(extra)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    Owner(Some(child), home.to_owned())
}

/// `kill -9` of `rl preflight`: its models, in process groups of their own, run on as children of
/// init with the endpoint's key in their environment. The test recorded them: `rl preflight list`
/// finds their owner gone, ends them and shows the test interrupted.
#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn a_killed_test_is_found_interrupted_and_the_models_it_left_are_ended() {
    let python = test_python();
    let server = FixtureServer::start(&python, None);
    let home = home_with_arithmetic(&python);
    let mut owner = start_owner(home.path(), &server, &[]);
    wait_for_models(home.path(), 2);
    // Killed once both models wait for their answers: they print nothing then, so nothing (a
    // pipe closed by the kill) ends them but a stop.
    let asked = |model: &str| {
        server
            .requests()
            .iter()
            .any(|request| request["model"] == model)
    };
    let started = std::time::Instant::now();
    while !(asked("slow") && asked("half-right@60"))
        && started.elapsed() < std::time::Duration::from_secs(60)
    {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(
        asked("slow") && asked("half-right@60"),
        "{:?}",
        server.requests()
    );
    let listed = json_of(home.path(), &["preflight", "list"]);
    assert_eq!(listed[0]["status"], "running", "{listed}");
    let id = listed[0]["test_id"].as_str().unwrap().to_owned();
    let shown = json_of(home.path(), &["preflight", "show", &id]);
    assert_eq!(shown["status"], "running", "{shown}");
    assert_eq!(shown["owner_pid"], owner.pid());
    assert_eq!(shown["models"][0]["running"], true, "{shown}");

    owner.kill();
    // Nothing of `rl` is left to stop them.
    assert_eq!(models_running(home.path()), 2);

    let listed = json_of(home.path(), &["preflight", "list"]);
    assert_eq!(listed[0]["status"], "interrupted", "{listed}");
    assert_eq!(listed[0]["verdict"], Value::Null);
    assert_eq!(
        models_running(home.path()),
        0,
        "a model of the killed test survived its listing"
    );
    let shown = json_of(home.path(), &["preflight", "show", &id]);
    assert_eq!(shown["status"], "interrupted", "{shown}");
    let interruption = &shown["interruption"];
    assert!(
        interruption["reason"]
            .as_str()
            .unwrap()
            .contains("ended without finishing"),
        "{shown}"
    );
    assert!(
        interruption["ended"]
            .as_str()
            .unwrap()
            .contains("model slow: "),
        "{shown}"
    );
    let stopped = json_of(home.path(), &["preflight", "stop", &id]);
    assert_eq!(stopped["stopped"], false, "{stopped}");
    assert_eq!(stopped["status"], "interrupted");
}

/// `rl preflight stop` from another shell: the running models are ended, the one waiting for its
/// turn never starts, and `rl preflight` answers with a report that says it was stopped. Meanwhile
/// `rl preflight wait` follows the test from the store.
#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn a_test_stopped_from_another_process_is_reported_stopped() {
    let python = test_python();
    let server = FixtureServer::start(&python, None);
    let home = home_with_arithmetic(&python);
    let owner = start_owner(
        home.path(),
        &server,
        &["--model", "mixed@60", "--concurrency", "2"],
    );
    wait_for_models(home.path(), 2);
    let id = json_of(home.path(), &["preflight", "list"])[0]["test_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let waited = json_of(home.path(), &["preflight", "wait", &id, "--timeout", "0.5"]);
    assert_eq!(waited["timed_out"], true, "{waited}");
    assert_eq!(waited["test"]["status"], "running", "{waited}");

    let stopped = json_of(home.path(), &["preflight", "stop", &id]);
    assert_eq!(stopped["stopped"], true, "{stopped}");
    assert_eq!(stopped["status"], "stopped", "{stopped}");
    assert_eq!(models_running(home.path()), 0);

    let output = owner.output();
    assert!(output.status.success(), "{output:?}");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(report["stopped_at"].is_string(), "{report}");
    let statuses: Vec<&str> = report["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|model| model["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["stopped", "stopped", "not_started"], "{report}");
    let listed = json_of(home.path(), &["preflight", "list"]);
    assert_eq!(listed[0]["status"], "stopped", "{listed}");
    let waited = json_of(home.path(), &["preflight", "wait", &id]);
    assert_eq!(waited["timed_out"], false);
    assert_eq!(waited["test"]["stopped_at"], report["stopped_at"]);
}

/// A model's log that reached its size limit is in two files: `rl preflight show` says so, for
/// a test without a report and for one with, and names where the latest output went.
#[test]
fn a_capped_model_log_is_said_by_show() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("preflight").join("0badc0de");
    std::fs::create_dir_all(&dir).unwrap();
    // No owner recorded (a test of an earlier rl): shown interrupted, nothing to end.
    let plan = json!({
        "test_id": "0badc0de", "environment": "shell@shell.py", "models": ["m1", "m2"],
        "base_url": "http://127.0.0.1:9/v1", "started_at": "2026-01-01T00:00:00Z", "steps": 2,
    });
    std::fs::write(dir.join("plan.json"), plan.to_string()).unwrap();
    // As `capped_log` leaves a capped log: the head with its marker, the latest output beside.
    let capped = dir.join("01-m1.log");
    std::fs::write(&capped, "started\n[rl] log capped at 1024 bytes\n").unwrap();
    let tail = rl_process::tail_path(&capped);
    std::fs::write(&tail, "the latest line\n").unwrap();
    let whole = dir.join("02-m2.log");
    std::fs::write(&whole, "started\nended\n").unwrap();

    let said = |shown: &str| {
        let lines: Vec<&str> = shown.lines().filter(|l| l.contains("log capped")).collect();
        assert_eq!(lines.len(), 1, "{shown}");
        assert!(lines[0].starts_with("m1: "), "{shown}");
        assert!(lines[0].contains(&tail.display().to_string()), "{shown}");
    };
    let keys = |model: &Value, capped: bool| {
        if capped {
            assert_eq!(model["log_capped"], true, "{model}");
            assert_eq!(
                model["log_tail_path"],
                tail.display().to_string(),
                "{model}"
            );
        } else {
            assert!(model.get("log_capped").is_none(), "{model}");
            assert!(model.get("log_tail_path").is_none(), "{model}");
        }
    };

    let shown = json_of(home.path(), &["preflight", "show", "0badc0de"]);
    assert_eq!(shown["status"], "interrupted", "{shown}");
    keys(&shown["models"][0], true);
    keys(&shown["models"][1], false);
    let table = rl_in(home.path(), &["preflight", "show", "0badc0de"]);
    assert!(table.status.success(), "{table:?}");
    said(&String::from_utf8_lossy(&table.stdout));

    let model = |name: &str, log: &Path| {
        json!({
            "model": name, "status": "failed", "code": 1, "signal": null, "duration_secs": 1.0,
            "steps_tested": 0, "completions": 0, "scores": null, "accuracy": null,
            "accuracy_score_above_zero": null, "steps_with_correct": 0,
            "step_success_rate": null, "zero_variance_groups": 0, "all_correct_groups": 0,
            "all_wrong_groups": 0, "parse_failures": 0, "error": "it failed",
            "error_tail": ["it failed"], "log_path": log,
            "output_path": log.with_extension("jsonl"),
        })
    };
    let report = json!({
        "test_id": "0badc0de", "environment": "shell@shell.py",
        "base_url": "http://127.0.0.1:9/v1", "key_variable": "(none)", "steps": 2,
        "group_size": 2, "correct_rule": {"rule": "top_score"}, "correct_from": null,
        "started_at": "2026-01-01T00:00:00Z", "duration_secs": 1.0, "output_dir": dir,
        "models": [model("m1", &capped), model("m2", &whole)],
        "models_tested": 2, "models_succeeded": 0, "best_model": null,
        "average_accuracy": null, "environment_working": false, "verdict": "broken",
        "basis": {
            "groups": 0, "all_correct_share": null, "all_wrong_share": null,
            "zero_variance_share": null, "policy": {"nearly_all": 0.9, "most": 0.5},
        },
        "explanation": "no model produced a scored group",
    });
    std::fs::write(dir.join("report.json"), report.to_string()).unwrap();
    let shown = json_of(home.path(), &["preflight", "show", "0badc0de"]);
    assert_eq!(shown["verdict"], "broken", "{shown}");
    keys(&shown["models"][0], true);
    keys(&shown["models"][1], false);
    let table = rl_in(home.path(), &["preflight", "show", "0badc0de"]);
    assert!(table.status.success(), "{table:?}");
    said(&String::from_utf8_lossy(&table.stdout));
}
