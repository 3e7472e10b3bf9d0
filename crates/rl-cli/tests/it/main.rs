//! The `rl` binary as a user runs it.

#![allow(clippy::unwrap_used, clippy::print_stderr)]

mod algorithm_runs;
mod browser;
mod compare;
mod costs;
mod env_dependencies;
mod env_failures;
mod envs_dir_forks;
mod evaluation;
mod forks;
mod hosted;
mod hosted_reach;
mod hosted_training;
mod hostile_components;
mod hostile_sources;
mod json_outputs;
mod long_calls;
mod mcp;
mod mcp_clients;
mod mcp_job;
mod mcp_tasks;
mod mcp_wire;
mod new_env;
mod no_signal;
mod package_envs;
mod pages;
mod preflight;
mod prestart_refusals;
mod read_only;
mod run_logs;
mod runs;
mod serve;
mod serve_arguments;
mod serve_runs;
mod serve_settings;
mod serving;
mod setup;
mod setup_env_lock;
mod setup_settings;
mod slurm;
mod stalls;
mod sweep_pages;
mod sweeps;
mod tools;
mod training;
mod verifiers;
mod verifiers_registry;
mod verifiers_runs;
mod verifiers_sweeps;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub(crate) use rl_test_support::workspace_root;

fn rl(args: &[&str]) -> Output {
    let home = tempfile::tempdir().unwrap();
    rl_in(home.path(), args)
}

/// `rl` with its own state directory, from the workspace, with none of the caller's keys or
/// `RL_*` settings: each test says what it gives.
pub(crate) fn rl_command(home: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_rl"));
    command
        .env("RL_HOME", home)
        .env_remove("RL_TINKER_ATROPOS_ROOT")
        .env_remove("RL_ENVIRONMENTS_DIR")
        .env_remove("RL_INFERENCE__BASE_URL")
        .current_dir(workspace_root());
    for name in rl_settings::SECRET_NAMES {
        command.env_remove(name);
    }
    command
}

/// `rl ARGS` with its own state directory, as a separate process each time.
pub(crate) fn rl_in(home: &Path, args: &[&str]) -> Output {
    rl_command(home).args(args).output().unwrap()
}

/// The JSON answer of a call that must succeed.
pub(crate) fn success_json(args: &[&str], output: &Output) -> serde_json::Value {
    assert!(
        output.status.success(),
        "rl {args:?} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// The JSON a helper program printed on stdout, once it succeeded (else its stderr, shown).
#[track_caller]
pub(crate) fn script_json(command: &mut Command) -> serde_json::Value {
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{command:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).replace(&workspace_root().display().to_string(), "[workspace]")
}

const ROOT: &str = "fixtures/tinker-atropos";

pub(crate) fn test_python() -> PathBuf {
    rl_test_support::test_python()
}

/// `rl --version` names the version and the commit it was built from, as `gh` and `uv` do.
#[test]
fn the_version_names_the_commit() {
    let output = rl(&["--version"]);
    assert!(output.status.success());
    let head = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(workspace_root())
        .output()
        .unwrap();
    assert!(head.status.success(), "the tests run in a git checkout");
    let head = String::from_utf8_lossy(&head.stdout).trim().to_owned();
    assert_eq!(
        text(&output.stdout).trim(),
        format!("rl {} ({head})", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn envs_list_prints_a_table() {
    let output = rl(&["envs", "list", "--root", ROOT]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    insta::assert_snapshot!(text(&output.stdout));
}

#[test]
fn envs_list_json_is_the_scan() {
    let output = rl(&["envs", "list", "--root", ROOT, "--json", "--recursive"]);
    assert!(output.status.success());
    let scan: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(scan["environments"].as_array().unwrap().len(), 20);
    assert_eq!(scan["skipped"].as_array().unwrap().len(), 3);
}

#[test]
fn envs_show_by_key() {
    let output = rl(&[
        "envs",
        "show",
        "countdown@countdown_v2.py",
        "--root",
        ROOT,
        "--json",
    ]);
    assert!(output.status.success());
    let env: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(env["class_name"], "CountdownV2Env");
}

#[test]
fn unknown_environment_fails_with_suggestions() {
    let output = rl(&["envs", "show", "gsm8k", "--root", ROOT]);
    assert_eq!(output.status.code(), Some(1));
    insta::assert_snapshot!(text(&output.stderr));
}

#[test]
fn errors_are_json_with_json() {
    let output = rl(&["envs", "show", "countdown", "--root", ROOT, "--json"]);
    assert_eq!(output.status.code(), Some(1));
    let body: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("countdown@countdown.py"),
        "{body}"
    );
}

/// A state directory that is a file is named as such, once, in text and in JSON.
#[test]
fn a_state_directory_that_is_not_one_is_named() {
    for json in [false, true] {
        let mut command = Command::new(env!("CARGO_BIN_EXE_rl"));
        command.args(["--home", "/dev/null", "runs", "list"]);
        if json {
            command.arg("--json");
        }
        let output = command.output().unwrap();
        assert_eq!(output.status.code(), Some(1));
        let said = if json {
            String::from_utf8_lossy(&output.stdout).into_owned()
        } else {
            String::from_utf8_lossy(&output.stderr).into_owned()
        };
        assert!(
            said.contains("/dev/null") && said.contains("is not a directory"),
            "{said}"
        );
        assert_eq!(said.matches("os error").count(), 0, "{said}");
    }
}

#[test]
fn missing_tree_says_what_to_do() {
    let output = rl(&["envs", "list", "--root", "no/such/tree"]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("does not exist") && stderr.contains("--root"),
        "{stderr}"
    );
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(rl(&["envs", "frobnicate"]).status.code(), Some(2));
    assert_eq!(rl(&["envs", "show"]).status.code(), Some(2));
}

/// With `--json` (before or after the command), a command line clap refuses is answered as the
/// tools' error object on stdout, with clap's text kept as `usage`; exit 2 still. Help stays
/// help; after `--`, `--json` is no option.
#[test]
fn usage_errors_with_json_are_json() {
    for args in [
        &["--json", "runs", "start", "--max-tokens=abc"][..],
        &["runs", "start", "--max-tokens=abc", "--json"],
        &["envs", "frobnicate", "--json"],
        &["--json"],
    ] {
        let output = rl(args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let answer: serde_json::Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|error| panic!("{args:?}: {error}: {}", text(&output.stdout)));
        let error = answer["error"].as_str().unwrap_or_default();
        assert!(
            !error.is_empty() && !error.starts_with("error:"),
            "{answer:#}"
        );
        assert_eq!(answer["kind"], "bad_request", "{answer:#}");
        assert!(
            answer["usage"]
                .as_str()
                .is_some_and(|usage| usage.contains("error:")),
            "{answer:#}"
        );
    }
    let invalid = rl(&["--json", "runs", "start", "--max-tokens=abc"]);
    let answer: serde_json::Value = serde_json::from_slice(&invalid.stdout).unwrap();
    assert!(
        answer["error"].as_str().unwrap().contains("'abc'"),
        "{answer:#}"
    );
    let help = rl(&["--json", "runs", "--help"]);
    assert_eq!(help.status.code(), Some(0));
    assert!(text(&help.stdout).contains("Usage:"));
    let plain = rl(&["runs", "start", "--max-tokens=abc"]);
    assert!(plain.stdout.is_empty() && text(&plain.stderr).contains("error:"));
}

#[test]
fn environment_variable_sets_the_root() {
    let home = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_rl"))
        .args(["envs", "list", "--json"])
        .env("RL_HOME", home.path())
        .env("RL_TINKER_ATROPOS_ROOT", workspace_root().join(ROOT))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output.stderr));
}

#[test]
fn selection_and_edits_are_shared_between_processes() {
    let home = tempfile::tempdir().unwrap();
    let ok = |args: &[&str]| {
        let output = rl_in(home.path(), args);
        assert!(
            output.status.success(),
            "{args:?}: {}",
            text(&output.stderr)
        );
        output
    };
    ok(&["select", "word_ladder", "--root", ROOT]);
    let set = ok(&[
        "config",
        "set",
        "group_size",
        "12",
        "--root",
        ROOT,
        "--json",
    ]);
    let report: serde_json::Value = serde_json::from_slice(&set.stdout).unwrap();
    assert_eq!(
        (report["value"].clone(), report["coerced_from"].clone()),
        (12.into(), "12".into())
    );

    let shown = ok(&["config", "show", "--root", ROOT, "--json"]);
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    let group_size = shown["configurable_fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "group_size")
        .unwrap();
    assert_eq!(
        (
            group_size["current_value"].clone(),
            group_size["origin"].clone()
        ),
        (12.into(), "edited".into())
    );

    let refused = rl_in(
        home.path(),
        &["config", "set", "max_rungs", "99", "--root", ROOT],
    );
    assert_eq!(refused.status.code(), Some(1));
    insta::assert_snapshot!(text(&refused.stderr));
    let diff = ok(&["config", "diff", "--root", ROOT, "--json"]);
    let diff: serde_json::Value = serde_json::from_slice(&diff.stdout).unwrap();
    assert_eq!(
        diff.as_array().unwrap().len(),
        1,
        "the refused edit left no trace"
    );
}

#[test]
fn config_without_selection_says_what_to_do() {
    let output = rl(&["config", "show", "--root", ROOT]);
    assert_eq!(output.status.code(), Some(1));
    let said = text(&output.stderr);
    assert!(said.contains("select one first"), "{said}");
    // A person is told the command; the agents' tool name is theirs.
    assert!(said.contains("`rl select NAME`"), "{said}");
    assert!(!said.contains("rl_select_environment"), "{said}");
}

#[test]
fn doctor_reports_every_check_and_fails_when_one_required_is_missing() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "python = \"/nonexistent/python3\"\n",
    )
    .unwrap();
    let output = rl_in(
        home.path(),
        &["doctor", "--json", "--root", "/nonexistent/tree"],
    );
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    // One JSON document: the report, not an error after it.
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["healthy"], false);
    let missing: Vec<&str> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|check| check["ok"] == false && check["required"] == true)
        .map(|check| check["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        missing,
        [
            "python",
            "atroposlib",
            "trainer",
            "tinker SDK",
            // No route to the hosted service, nor a hub, from here (issue 40).
            "Tinker service",
            "tokenizer",
            "environments",
            "TINKER_API_KEY"
        ]
    );
}

#[test]
fn completions_cover_every_command() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let output = rl(&["completions", shell]);
        assert!(output.status.success(), "{shell}");
        let script = String::from_utf8_lossy(&output.stdout);
        for command in ["runs", "tool", "serve", "mcp", "doctor"] {
            assert!(script.contains(command), "{shell} lacks {command}");
        }
    }
    assert_eq!(rl(&["completions", "tcsh"]).status.code(), Some(2));
}

/// Colour is for a person at a terminal: none in a pipe, none with NO_COLOR.
#[test]
fn colour_only_on_a_terminal_without_no_color() {
    let doctor = rl(&["doctor", "--root", ROOT]);
    assert!(!text(&doctor.stdout).contains('\u{1b}'), "colour in a pipe");
    // `script` gives the command a terminal; skip where util-linux's `script` is missing.
    let command = format!(
        "stty cols 160; {} doctor --root {ROOT}",
        env!("CARGO_BIN_EXE_rl")
    );
    let on_terminal = |no_color: Option<&str>| {
        let home = tempfile::tempdir().unwrap();
        let mut script = Command::new("script");
        script
            .args(["-qec", &command, "/dev/null"])
            .env("RL_HOME", home.path())
            .env_remove("NO_COLOR")
            .current_dir(workspace_root());
        if let Some(value) = no_color {
            script.env("NO_COLOR", value);
        }
        script
            .output()
            .ok()
            .filter(|output| output.status.code().is_some())
    };
    // util-linux's `script` (Debian's bsdutils, always installed) gives rl a terminal.
    let coloured = on_terminal(None).expect("`script` runs rl on a terminal");
    assert!(
        text(&coloured.stdout).contains("\u{1b}["),
        "no colour on a terminal"
    );
    let plain = on_terminal(Some("1")).unwrap();
    assert!(text(&plain.stdout).contains("MISSING"));
    assert!(
        !text(&plain.stdout).contains("\u{1b}["),
        "colour despite NO_COLOR"
    );
}

/// `--json` works on every command that prints something: each answers with one JSON document.
#[test]
fn every_command_answers_in_json() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    for args in [
        &["envs", "list", "--root", ROOT][..],
        &["envs", "show", "word_ladder", "--root", ROOT],
        &["select", "word_ladder", "--root", ROOT],
        &["config", "show", "--root", ROOT],
        &["config", "set", "group_size", "8", "--root", ROOT],
        &["config", "diff", "--root", ROOT],
        &["runs", "list"],
        &["preflight", "list"],
        &["tool", "list"],
        &["tool", "schema"],
        &["doctor", "--root", ROOT],
        &["runs", "status", "0badc0de"],
        &["runs", "events", "0badc0de"],
        &["runs", "logs", "0badc0de"],
        &["runs", "wait", "0badc0de", "--timeout", "1"],
        &["runs", "results", "0badc0de"],
        &["runs", "stop", "0badc0de"],
        &["preflight", "show", "0badc0de"],
    ] {
        let mut all = args.to_vec();
        all.push("--json");
        let output = rl_in(home, &all);
        let answer: serde_json::Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", text(&output.stdout)));
        if !output.status.success() {
            // A failed health check is the report itself, with `healthy: false`.
            let reported = answer["error"].is_string() || answer["healthy"] == false;
            assert!(reported, "{args:?}: {answer}");
        }
    }
}

#[test]
fn a_comparison_of_no_prompts_is_refused_naming_the_option() {
    for (args, said) in [
        (["--prompts", "0"], "--prompts 0 is out of range"),
        (["--group-size", "0"], "--group-size 0 is out of range"),
    ] {
        let output = rl(&[&["compare", "0a1b2c3d"][..], &args[..]].concat());
        assert_eq!(output.status.code(), Some(1), "{output:?}");
        let stderr = text(&output.stderr);
        assert!(stderr.contains(said), "{stderr}");
        assert!(!stderr.contains("num_steps"), "{stderr}");
    }
}
