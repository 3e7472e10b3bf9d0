//! What the human commands print with `--json` that no tool answers: `rl envs show`,
//! `rl config diff` and `rl config show --introspect python`. Scripts read these keys, so they
//! are snapshotted like the tools' answers.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::{ROOT, rl_in, success_json, test_python};

/// `value` with the machine's paths and the edits' times replaced.
fn portable(value: Value) -> Value {
    let workspace = crate::workspace_root().display().to_string();
    let value = rl_test_support::scrub_strings(value, &|text| {
        rl_test_support::without_stamps(&text.replace(&workspace, "[workspace]"))
    });
    blank_key(value, "edited_at")
}

fn blank_key(value: Value, key: &str) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(name, inner)| {
                    let inner = if name == key {
                        Value::from("[time]")
                    } else {
                        blank_key(inner, key)
                    };
                    (name, inner)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(|i| blank_key(i, key)).collect()),
        other => other,
    }
}

fn json_of(home: &std::path::Path, args: &[&str]) -> Value {
    success_json(args, &rl_in(home, args))
}

/// Every environment of the fixture tree, as `rl envs show KEY --json` prints it.
#[test]
fn envs_show_json_of_every_fixture_environment() {
    let home = tempfile::tempdir().unwrap();
    let listing = json_of(
        home.path(),
        &["envs", "list", "--root", ROOT, "--recursive", "--json"],
    );
    let mut shown = BTreeMap::new();
    for env in listing["environments"].as_array().unwrap() {
        let key = env["key"].as_str().unwrap();
        let args = ["envs", "show", key, "--root", ROOT, "--recursive", "--json"];
        shown.insert(key.to_owned(), portable(json_of(home.path(), &args)));
    }
    assert_eq!(shown.len(), 20);
    insta::assert_json_snapshot!(shown);
}

/// `rl config show --json` (`rl_get_current_config`'s answer) of every fixture environment:
/// each kind of field, default and constraint as an agent reads it.
#[test]
fn config_show_json_of_every_fixture_environment() {
    let listing = json_of(
        tempfile::tempdir().unwrap().path(),
        &["envs", "list", "--root", ROOT, "--recursive", "--json"],
    );
    let mut shown = BTreeMap::new();
    for env in listing["environments"].as_array().unwrap() {
        let key = env["key"].as_str().unwrap();
        // Nested ones too, without `recursive_discovery`: what the recursive list shows is
        // selectable.
        let home = tempfile::tempdir().unwrap();
        let select = ["select", key, "--root", ROOT, "--json"];
        let selected = rl_in(home.path(), &select);
        let answer = if selected.status.success() {
            json_of(home.path(), &["config", "show", "--root", ROOT, "--json"])
        } else {
            serde_json::from_slice(&selected.stdout).unwrap()
        };
        shown.insert(key.to_owned(), portable(answer));
    }
    assert_eq!(shown.len(), 20);
    insta::assert_json_snapshot!(shown);
}

/// `rl config diff --json` after two edits.
#[test]
fn config_diff_json_lists_each_edit() {
    let home = tempfile::tempdir().unwrap();
    json_of(
        home.path(),
        &["select", "word_ladder", "--root", ROOT, "--json"],
    );
    for (field, value) in [("group_size", "12"), ("max_rungs", "7")] {
        json_of(
            home.path(),
            &["config", "set", field, value, "--root", ROOT, "--json"],
        );
    }
    let diff = json_of(home.path(), &["config", "diff", "--root", ROOT, "--json"]);
    insta::assert_json_snapshot!(portable(diff));
}

/// `rl config show --introspect python --json`: the static reading plus Python's
/// disagreements, one of each kind (a field only Python sees, one only the static reading
/// sees, a default they read differently).
#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn config_show_introspected_json_names_each_disagreement() {
    let envs = tempfile::tempdir().unwrap();
    std::fs::write(envs.path().join("split.py"), SPLIT_ENVIRONMENT).unwrap();
    let home = tempfile::tempdir().unwrap();
    let settings = format!(
        "environments_dir = {}\npython = {}\n",
        Value::from(envs.path().display().to_string()),
        Value::from(test_python().display().to_string()),
    );
    std::fs::write(home.path().join("config.toml"), settings).unwrap();
    json_of(home.path(), &["select", "split", "--json"]);
    let shown = json_of(
        home.path(),
        &["config", "show", "--introspect", "python", "--json"],
    );
    let envs_dir = envs.path().display().to_string();
    let shown = rl_test_support::scrub_strings(shown, &|text| text.replace(&envs_dir, "[envs]"));
    insta::assert_json_snapshot!(portable(shown));
}

/// A config class that Python rebuilds at import time, so that it and the static reading of
/// the class statement disagree: `extra` only Python sees, `dropped` only the static reading,
/// and they read `rounds`' default differently.
const SPLIT_ENVIRONMENT: &str = r#"from atroposlib.envs.base import BaseEnv, BaseEnvConfig
from pydantic import Field, create_model


class SplitConfig(BaseEnvConfig):
    rounds: int = Field(default=3, description="rounds per game")
    dropped: str = "here"


SplitConfig = create_model(
    "SplitConfig",
    __base__=BaseEnvConfig,
    rounds=(int, Field(default=4, description="rounds per game")),
    extra=(int, 9),
)


class SplitEnv(BaseEnv):
    """Fields seen differently by Python and by a static reading."""

    name = "split"
    env_config_cls = SplitConfig
"#;
