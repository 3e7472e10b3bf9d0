//! Source files built to break a parser, in the environments folder: on every face they are
//! skipped files with their reason, the environment beside them is listed and selectable, and
//! no process ends. Before the nesting check each face died of a stack overflow (exit 134).

use std::path::Path;

use rl_test_support::{GOOD_ENVIRONMENT, deeply_nested_sources};
use serde_json::{Value, json};

use crate::mcp::{RawServer, reply};
use crate::serve::{Server, expect};
use crate::{rl_in, success_json};

/// An environments folder with the good environment and every deeply nested file, and a state
/// directory whose settings point at it.
fn hostile_folder() -> (tempfile::TempDir, tempfile::TempDir) {
    let envs = tempfile::tempdir().unwrap();
    std::fs::write(envs.path().join("good.py"), GOOD_ENVIRONMENT).unwrap();
    for (name, source, ..) in deeply_nested_sources() {
        std::fs::write(envs.path().join(name), source).unwrap();
    }
    let home = tempfile::tempdir().unwrap();
    let settings = format!(
        "environments_dir = {}\n",
        Value::from(envs.path().display().to_string())
    );
    std::fs::write(home.path().join("config.toml"), settings).unwrap();
    (envs, home)
}

/// The listing names the good environment and every deep file with its nesting.
#[track_caller]
fn assert_listing(listing: &Value) {
    let names: Vec<&str> = listing["environments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|env| env["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["good"], "{listing}");
    let skipped = listing["skipped"].as_array().unwrap();
    let expected = deeply_nested_sources();
    assert_eq!(skipped.len(), expected.len(), "{listing}");
    for (name, _, nesting, line) in expected {
        let entry = skipped.iter().find(|s| s["file"] == name).unwrap();
        assert_eq!(entry["reason"]["kind"], "too_deeply_nested", "{entry}");
        assert_eq!(entry["reason"]["nesting"], nesting, "{entry}");
        assert_eq!(entry["reason"]["line"], line, "{entry}");
    }
}

fn ok(home: &Path, args: &[&str]) -> Value {
    success_json(args, &rl_in(home, args))
}

#[test]
fn the_cli_and_the_tool_list_and_select_beside_deeply_nested_files() {
    let (_envs, home) = hostile_folder();
    let home = home.path();

    assert_listing(&ok(home, &["envs", "list", "--json"]));
    assert_listing(&ok(home, &["tool", "call", "rl_list_environments"]));
    let table = rl_in(home, &["envs", "list"]);
    assert!(table.status.success());
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(
        table.contains("sum.py: an expression nested more than 3000 levels deep at line 3"),
        "{table}"
    );

    assert_eq!(
        ok(home, &["envs", "show", "good", "--json"])["class_name"],
        "GoodEnv"
    );
    ok(home, &["select", "good", "--json"]);
    let config = ok(home, &["config", "show", "--json"]);
    assert!(config.to_string().contains("group_size"), "{config}");
}

#[test]
fn mcp_lists_beside_deeply_nested_files() {
    let (envs, home) = hostile_folder();
    let envs_dir = envs.path().display().to_string();
    let mut server = RawServer::start(home.path(), &[("RL_ENVIRONMENTS_DIR", envs_dir.as_str())]);
    server.initialize();
    let result = server.call(2, "rl_list_environments", Some(json!({})));
    assert_listing(reply(&result));
}

#[test]
fn serve_answers_beside_deeply_nested_files() {
    let (_envs, home) = hostile_folder();
    let server = Server::start(home, &[], &[]);
    // The original server's answer: the list alone.
    let listed = expect(server.get("/environments"), 200);
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|env| env["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["good"], "{listed}");
    // Still serving after answering.
    expect(server.get("/health"), 200);
}

#[test]
fn envs_new_refuses_names_that_shadow_modules_and_list_warns_about_such_files() {
    let envs = tempfile::tempdir().unwrap();
    let envs_dir = envs.path().display().to_string();
    let home = tempfile::tempdir().unwrap();
    for name in [
        "json",
        "typing",
        "random",
        "asyncio",
        "logging",
        "atroposlib",
        "class",
    ] {
        let args = [
            "--envs-dir",
            envs_dir.as_str(),
            "envs",
            "new",
            name,
            "--json",
        ];
        let output = rl_in(home.path(), &args);
        assert_eq!(output.status.code(), Some(1), "{output:?}");
        let error: Value = serde_json::from_slice(&output.stdout).unwrap();
        let error = error["error"].as_str().unwrap();
        assert!(error.contains(&format!("{name}_env")), "{error}");
    }
    assert_eq!(std::fs::read_dir(envs.path()).unwrap().count(), 0);

    // A user who writes json.py by hand is told what it breaks.
    std::fs::write(envs.path().join("good.py"), GOOD_ENVIRONMENT).unwrap();
    std::fs::write(envs.path().join("json.py"), "x = 1\n").unwrap();
    let listed = rl_in(
        home.path(),
        &["--envs-dir", envs_dir.as_str(), "envs", "list"],
    );
    assert!(listed.status.success());
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.contains("json.py: shadows Python's standard library module `json`"),
        "{listed}"
    );
}
