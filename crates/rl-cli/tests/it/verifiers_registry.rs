//! verifiers environments installed by `rl setup --env` into Pythons of their own (issue 41): a
//! real published v0 environment from the package registry (`staros-stardata`, whose
//! constraint environment makes its data locally) beside one of rl's v1 fixtures, each in its
//! own venv, then the published one pre-flighted and trained for a few steps on the local
//! engine. Needs the package registry (as `cargo xtask test` does to make its venvs).

use serde_json::Value;

use crate::runs::{Stack, assert_nothing_left};
use crate::training::lines;

const PUBLISHED: &str = "staros-stardata==0.1.1";

#[test]
#[ignore = "needs the test venvs, the local engine and the package registry: `cargo xtask test` runs it"]
fn a_published_v0_environment_and_a_v1_one_are_installed_side_by_side_then_trained() {
    let python = crate::test_python();
    let engine = rl_test_support::local_engine();
    // The fixtures' folder, and no shared verifiers Python: each environment gets its own.
    let settings = rl_test_support::local_engine_settings(&python, &engine).replacen(
        "\n[engine]",
        &format!(
            "environments_dir = \"{}\"\n\n[engine]",
            crate::workspace_root().join("fixtures/verifiers").display()
        ),
        1,
    );
    let stack = Stack::with_settings(
        settings,
        &[
            ("total_steps = 12", "total_steps = 2"),
            // Alike groups are its only groups (above): the run is not failed for them.
            ("[run]\n", "[run]\nno_signal_fail_groups = 0\n"),
            // Its prompts are long: 256 tokens would leave no room to answer.
            ("max_token_length = 256", "max_token_length = 768"),
            (
                "max_token_trainer_length = 256",
                "max_token_trainer_length = 1024",
            ),
        ],
        "digit-sum",
    );

    // Refused until it has a Python of its own, naming the fix.
    stack.refused(
        &["runs", "start", "--json"],
        r#"rl_install_environment {"name": "digit-sum"}"#,
    );

    let installed = setup_env(&stack, PUBLISHED);
    let venv = stack
        .home
        .path()
        .join("venvs/environments/staros-stardata/bin/python");
    assert_eq!(
        installed["environment"]["python"],
        venv.display().to_string(),
        "{installed:#}"
    );
    let again = setup_env(&stack, PUBLISHED);
    assert_eq!(
        again["environment"]["installed"],
        Value::Array(Vec::new()),
        "{again:#}"
    );
    let own = setup_env(&stack, "digit-sum");
    let own_python = stack
        .home
        .path()
        .join("venvs/environments/digit-sum/bin/python");
    assert_eq!(
        own["environment"]["python"],
        own_python.display().to_string(),
        "{own:#}"
    );

    // Both listed with their kind; each runs in its own Python.
    let listed = stack.json(&["envs", "list"]);
    let kind_of = |name: &str| {
        listed["environments"]
            .as_array()
            .unwrap()
            .iter()
            .find(|env| env["name"] == name)
            .map_or_else(
                || panic!("{name} is not listed: {listed:#}"),
                |env| env["kind"].clone(),
            )
    };
    assert_eq!(kind_of("constraint_gym"), "verifiers-v0");
    assert_eq!(kind_of("digit-sum"), "verifiers-v1");
    for (name, python) in [("constraint_gym", &venv), ("digit-sum", &own_python)] {
        let shown = stack.json(&["envs", "show", name]);
        assert_eq!(
            shown["dependencies"]["python"],
            python.display().to_string(),
            "{shown:#}"
        );
        assert!(shown["dependencies"].get("fix").is_none(), "{shown:#}");
    }

    // The published environment: pre-flighted against the fixture server, then trained. Its
    // reward scores every random completion of the tiny model alike: its groups are sent all
    // the same (`ensure_scores_are_not_same`), so the run goes through its steps, and rl says
    // there is no signal rather than failing the run for it.
    stack.json(&["select", "constraint_gym"]);
    stack.json(&["config", "set", "batch_size", "8"]);
    stack.json(&["config", "set", "ensure_scores_are_not_same", "false"]);
    let server = rl_test_support::FixtureServer::start(&python, None);
    let report = crate::verifiers::preflight_one_group(&stack, &server.base_url);
    let model = &report["models"][0];
    assert_eq!(model["status"], "succeeded", "{report:#}");
    assert!(model["verdict"].is_string(), "{report:#}");

    let (id, _) = stack.start_running();
    let finished = stack.wait(&id, "finished", 1200);
    assert_eq!(finished["state"], "completed", "{}", stack.explain(&id));
    let dir = stack.run_dir(&id);
    let steps: Vec<Value> = lines(&dir.join("metrics.jsonl"))
        .into_iter()
        .filter(|row| row.get("reward/mean").is_some())
        .collect();
    assert_eq!(steps.len(), 2, "{steps:#?}");
    assert_nothing_left(&stack, &id);
}

/// `rl setup --env NAME --json` with uv as the installer (verifiers' own pin brings it, in
/// `target/vf1-venv/bin`): rl uses uv when it is on the PATH, and the two installs of this test
/// take a minute with it instead of several with pip.
fn setup_env(stack: &Stack, name: &str) -> Value {
    let uv_folder = rl_test_support::verifiers_pythons()
        .v1
        .parent()
        .unwrap()
        .to_path_buf();
    let path = std::env::join_paths(std::iter::once(uv_folder).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap();
    let output = crate::rl_command(stack.home.path())
        .args(["setup", "--env", name, "--json"])
        .env("PATH", path)
        .env("UV_PYTHON_DOWNLOADS", "never")
        .output()
        .unwrap();
    crate::success_json(&["setup", "--env", name], &output)
}
