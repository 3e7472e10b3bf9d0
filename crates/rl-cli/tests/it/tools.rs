//! The agent tools through `rl tool`: the same JSON an agent gets over MCP, exit codes for
//! scripts, the status limit that applies to agents only, and state shared with the human
//! commands.

use std::path::Path;
use std::process::Output;

use serde_json::Value;

use crate::{ROOT, rl_in, test_python, workspace_root};

fn tool(home: &Path, name: &str, arguments: Option<&str>, extra_env: &[(&str, &str)]) -> Output {
    let mut command = crate::rl_command(home);
    command
        .args(["tool", "call", name])
        .args(arguments)
        .env("RL_TINKER_ATROPOS_ROOT", workspace_root().join(ROOT));
    for (name, value) in extra_env {
        command.env(name, value);
    }
    command.output().unwrap()
}

fn answer(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!(
            "not JSON ({error}): {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

#[test]
fn the_schema_is_every_tool_in_function_calling_form() {
    let home = tempfile::tempdir().unwrap();
    let output = rl_in(home.path(), &["tool", "schema"]);
    assert!(output.status.success());
    let functions = answer(&output);
    let names: Vec<&str> = functions
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            assert_eq!(f["type"], "function");
            assert_eq!(f["function"]["parameters"]["type"], "object");
            assert!(f["function"]["description"].as_str().unwrap().len() > 80);
            f["function"]["name"].as_str().unwrap()
        })
        .collect();
    assert_eq!(names, rl_tools::TOOL_NAMES);
    let edit = &functions
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["function"]["name"] == "rl_edit_config")
        .unwrap()["function"]["parameters"];
    assert_eq!(edit["required"], serde_json::json!(["field", "value"]));

    let listed = rl_in(home.path(), &["tool", "list"]);
    let table = String::from_utf8_lossy(&listed.stdout);
    assert!(rl_tools::TOOL_NAMES.iter().all(|name| table.contains(name)));
}

#[test]
fn answers_keep_the_original_keys_and_errors_say_what_to_do() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();

    let listed = tool(home, "rl_list_environments", None, &[]);
    assert_eq!(listed.status.code(), Some(0));
    let listed = answer(&listed);
    assert_eq!(
        listed["count"],
        listed["environments"].as_array().unwrap().len()
    );
    assert!(listed["tips"].as_array().unwrap().len() >= 3);
    let first = &listed["environments"][0];
    for key in ["name", "class_name", "file_path", "description"] {
        assert!(first[key].is_string(), "{key} in {first}");
    }

    let unselected = tool(home, "rl_get_current_config", Some("{}"), &[]);
    assert_eq!(unselected.status.code(), Some(1));
    let unselected = answer(&unselected);
    assert!(
        unselected["hint"]
            .as_str()
            .unwrap()
            .contains("rl_select_environment")
    );

    let unknown = answer(&tool(
        home,
        "rl_select_environment",
        Some(r#"{"name": "gsm9k"}"#),
        &[],
    ));
    assert_eq!(unknown["kind"], "not_found");
    assert!(
        unknown["available"]
            .as_array()
            .unwrap()
            .contains(&"word_ladder".into())
    );

    let selected = tool(
        home,
        "rl_select_environment",
        Some(r#"{"name": "word_ladder"}"#),
        &[],
    );
    assert_eq!(selected.status.code(), Some(0));
    let selected = answer(&selected);
    assert_eq!(selected["environment"], "word_ladder");
    assert!(
        std::path::Path::new(selected["file_path"].as_str().unwrap())
            .extension()
            .is_some_and(|extension| extension == "py")
    );

    let config = answer(&tool(home, "rl_get_current_config", None, &[]));
    assert_eq!(config["environment"], "word_ladder");
    assert!(config["tip"].is_string());
    let locked = config["locked_fields"].as_array().unwrap();
    assert!(locked.iter().all(|f| !f["locked_value"].is_null()));
    assert!(locked.iter().any(|f| f["name"] == "max_token_length"));

    // A number as JSON, not text: the agent's value reaches the validator as it was sent.
    let edited = answer(&tool(
        home,
        "rl_edit_config",
        Some(r#"{"field": "group_size", "value": 12}"#),
        &[],
    ));
    assert_eq!(
        (
            edited["value"].clone(),
            edited["config"]["group_size"].clone()
        ),
        (12.into(), 12.into())
    );
    let wrong = answer(&tool(
        home,
        "rl_edit_config",
        Some(r#"{"field": "group_size", "value": "many"}"#),
        &[],
    ));
    assert_eq!(wrong["kind"], "bad_request");
    assert!(wrong["expected"].is_string(), "{wrong}");
    let locked = answer(&tool(
        home,
        "rl_edit_config",
        Some(r#"{"field": "max_token_length", "value": 10}"#),
        &[],
    ));
    assert_eq!(locked["locked_value"], 8192);
    let typo = answer(&tool(
        home,
        "rl_edit_config",
        Some(r#"{"field": "group_sise", "value": 4}"#),
        &[],
    ));
    assert!(
        typo["closest"]
            .as_array()
            .unwrap()
            .contains(&"group_size".into())
    );
    assert!(typo["available_fields"].as_array().unwrap().len() > 5);

    // The edit made by the agent is what a person sees.
    let shown = answer(&rl_in(home, &["config", "show", "--root", ROOT, "--json"]));
    let group_size = shown["configurable_fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "group_size")
        .unwrap()
        .clone();
    assert_eq!(group_size["current_value"], 12);

    let no_key = tool(home, "rl_start_training", None, &[]);
    assert_eq!(no_key.status.code(), Some(1));
    let no_key = answer(&no_key);
    assert_eq!(
        (no_key["kind"].clone(), no_key["missing_key"].clone()),
        ("precondition".into(), "TINKER_API_KEY".into())
    );
    assert!(
        !home.join("runs").exists(),
        "a refused start leaves nothing"
    );

    let health = answer(&tool(home, "rl_health_check", None, &[]));
    assert!(health["checks"].as_array().unwrap().len() >= 6);
}

#[test]
fn malformed_calls_are_errors_with_their_exit_codes() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    for (arguments, code) in [
        ("{not json", 2),
        ("[1, 2]", 2),
        // Arguments that do not fit the tool's parameters: as malformed as bad JSON.
        (r#"{"run_id": 5}"#, 2),
        (r#"{"run_id": "0badc0de", "extra": true}"#, 2),
        (r"{}", 2),
    ] {
        let output = tool(home, "rl_check_status", Some(arguments), &[]);
        assert_eq!(output.status.code(), Some(code), "{arguments}");
        let error = answer(&output);
        assert!(error["error"].is_string(), "{arguments}: {error}");
        if arguments.starts_with('{') && arguments != "{not json" {
            assert_eq!(error["kind"], "bad_request", "{arguments}: {error}");
            assert_eq!(
                error["parameters"]["required"],
                serde_json::json!(["run_id"])
            );
        }
    }
    let bad_id = answer(&tool(
        home,
        "rl_stop_training",
        Some(r#"{"run_id": "../etc"}"#),
        &[],
    ));
    assert_eq!(bad_id["kind"], "bad_request", "{bad_id}");
    let unknown = tool(
        home,
        "rl_get_results",
        Some(r#"{"run_id": "0badc0de"}"#),
        &[],
    );
    assert_eq!(unknown.status.code(), Some(1));
    assert_eq!(answer(&unknown)["active_runs"], serde_json::json!([]));

    // A whole number beyond 64 bits is refused with its own digits, not a float's.
    answer(&tool(
        home,
        "rl_select_environment",
        Some(r#"{"name": "word_ladder"}"#),
        &[],
    ));
    let huge = answer(&tool(
        home,
        "rl_edit_config",
        Some(r#"{"field": "group_size", "value": 9223372036854775808}"#),
        &[],
    ));
    let error = huge["error"].as_str().unwrap();
    assert!(error.contains("9223372036854775808"), "{huge}");
    assert!(!error.contains("9223372036854776000"), "{huge}");

    let no_tool = tool(home, "rl_train_harder", None, &[]);
    assert_eq!(no_tool.status.code(), Some(2));
    assert_eq!(
        answer(&no_tool)["available"].as_array().unwrap().len(),
        rl_tools::TOOL_NAMES.len()
    );
}

/// Agents may check a going run once per interval, and the limit's answer points to
/// `rl_wait_training`; a run that has ended is read without limit; people may always; an
/// unknown id uses up nothing; 0 turns the limit off.
#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn the_status_limit_applies_to_agents_and_known_runs_only() {
    let python = test_python();
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    std::fs::write(
        home.join("config.toml"),
        rl_test_support::local_stack_settings(&python),
    )
    .unwrap();
    let run = |args: &[&str]| {
        let output = rl_in(home, args);
        assert!(
            output.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        answer(&output)
    };
    run(&["select", "arithmetic", "--json"]);
    let started = run(&[
        "runs",
        "start",
        "--wait",
        "finished",
        "--timeout",
        "120",
        "--json",
    ]);
    assert_eq!(started["state"], "completed", "{started}");
    let id = started["run_id"].as_str().unwrap().to_owned();
    let limited = [("RL_STATUS_CHECK_INTERVAL_SECS", "1800")];
    let args = format!(r#"{{"run_id": "{id}"}}"#);

    // A mistyped id, twice: it is unknown both times (the original answered the second with
    // `rate_limited`), and records no check.
    for _ in 0..2 {
        let unknown = tool(
            home,
            "rl_check_status",
            Some(r#"{"run_id": "0badc0de"}"#),
            &limited,
        );
        let unknown = answer(&unknown);
        assert_eq!(unknown["kind"], "not_found", "{unknown}");
        // The completed run is known, not active.
        assert_eq!(unknown["active_runs"], serde_json::json!([]), "{unknown}");
        assert_eq!(unknown["known_runs"], serde_json::json!([id]), "{unknown}");
    }
    let recorded = std::fs::read_to_string(home.join("status-checks.json")).unwrap_or_default();
    assert!(!recorded.contains("0badc0de"), "{recorded}");

    let first = answer(&tool(home, "rl_check_status", Some(&args), &limited));
    assert_eq!(
        (first["run_id"].clone(), first["status"].clone()),
        (id.clone().into(), "completed".into())
    );
    for key in [
        "processes",
        "logs",
        "metrics",
        "wandb_project",
        "wandb_run_name",
        "running_time_minutes",
    ] {
        assert!(!first[key].is_null(), "{key} in {first}");
    }
    assert_eq!(first["processes"]["trainer"], "exited (0)");
    assert!(first["metrics"]["step"].is_number(), "{first}");

    // It has ended: it changes no more, and is read again without limit.
    let again = answer(&tool(home, "rl_check_status", Some(&args), &limited));
    assert!(again["rate_limited"].is_null(), "{again}");
    assert_eq!(again["status"], "completed", "{again}");

    // A person is never limited, and 0 switches the limit off for agents.
    let person = run(&["runs", "status", &id, "--json"]);
    assert_eq!(person["status"], "completed");
    let unlimited = answer(&tool(
        home,
        "rl_check_status",
        Some(&args),
        &[("RL_STATUS_CHECK_INTERVAL_SECS", "0")],
    ));
    assert_eq!(unlimited["status"], "completed", "{unlimited}");

    let results = answer(&tool(home, "rl_get_results", Some(&args), &[]));
    assert!(
        results["final_weights"]
            .as_str()
            .unwrap()
            .starts_with("tinker://"),
        "{results}"
    );
    assert!(!results["history"].as_array().unwrap().is_empty());
    let runs = answer(&tool(home, "rl_list_runs", None, &[]));
    assert_eq!(
        (runs["count"].clone(), runs["runs"][0]["run_id"].clone()),
        (1.into(), id.clone().into())
    );
    let stopped = answer(&tool(home, "rl_stop_training", Some(&args), &[]));
    assert_eq!(
        (stopped["stopped"].clone(), stopped["status"].clone()),
        (false.into(), "completed".into())
    );

    let logs = run(&[
        "runs",
        "logs",
        &id,
        "--component",
        "trainer",
        "-n",
        "3",
        "--json",
    ]);
    assert_eq!(logs[0]["lines"].as_array().unwrap().len(), 3, "{logs}");
    let no_such = rl_in(home, &["runs", "logs", &id, "--component", "gpu"]);
    assert_eq!(no_such.status.code(), Some(1));

    // A going run (its fixture trainer slowed to a step a minute): the second check within the
    // interval is an answer naming the way on an agent has, the wait tool.
    let slow = rl_test_support::local_stack_settings(&python).replace(
        "RL_FIXTURE_TRAINER_STEP_SECONDS = \"0.2\"",
        "RL_FIXTURE_TRAINER_STEP_SECONDS = \"60\"",
    );
    assert!(
        slow.contains("\"60\""),
        "the fixture's step time is not where it was"
    );
    std::fs::write(home.join("config.toml"), slow).unwrap();
    let going = run(&[
        "runs",
        "start",
        "--wait",
        "running",
        "--timeout",
        "120",
        "--json",
    ]);
    let going_id = going["run_id"].as_str().unwrap().to_owned();
    let _stop = crate::serve::StartedRuns {
        home,
        ids: vec![going_id.clone()],
    };
    let going_args = format!(r#"{{"run_id": "{going_id}"}}"#);
    let first = answer(&tool(home, "rl_check_status", Some(&going_args), &limited));
    assert_eq!(first["status"], "running", "{first}");
    let second = tool(home, "rl_check_status", Some(&going_args), &limited);
    assert_eq!(
        second.status.code(),
        Some(0),
        "a limited check is an answer, not an error"
    );
    let second = answer(&second);
    assert_eq!(second["rate_limited"], true, "{second}");
    let left = second["next_check_in_seconds"].as_f64().unwrap();
    assert!(left > 1700.0 && left <= 1800.0, "{left}");
    let message = second["message"].as_str().unwrap();
    assert!(
        message.contains("rl_wait_training") && message.contains("rl runs wait"),
        "{message}"
    );
    assert!(
        second["hint"]
            .as_str()
            .unwrap()
            .contains("rl_wait_training"),
        "{second}"
    );
}

/// The pre-flight as an agent calls it: the endpoint is the operator's (`[inference]`), the
/// answer has the original's keys, and sizes beyond the schema's bounds are refused.
#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn the_inference_test_uses_the_operators_endpoint_and_answers_with_the_original_keys() {
    let python = test_python();
    let server = rl_test_support::FixtureServer::start(&python, None);
    let home = crate::preflight::home_with_endpoint(
        &python,
        &server.base_url,
        &["always-right", "half-right"],
    );
    let home = home.path();

    let too_big = tool(
        home,
        "rl_test_inference",
        Some(r#"{"num_steps": 101}"#),
        &[],
    );
    assert_eq!(answer(&too_big)["kind"], "bad_request");
    assert!(
        !home.join("preflight").exists(),
        "a refused test starts nothing"
    );

    let output = tool(
        home,
        "rl_test_inference",
        Some(r#"{"num_steps": 2, "group_size": 4}"#),
        &[],
    );
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report = answer(&output);
    let summary = &report["summary"];
    assert_eq!(
        (
            summary["steps_requested"].clone(),
            summary["models_tested"].clone(),
            summary["models_succeeded"].clone(),
            summary["environment_working"].clone(),
        ),
        (2.into(), 2.into(), 2.into(), true.into()),
        "{report}"
    );
    assert!(summary["avg_accuracy"].is_number() && summary["verdict"].is_string());
    assert!(summary["output_directory"].is_string());
    assert_eq!(report["test_config"]["total_rollouts"], 16);
    assert!(
        report["environment_file"]
            .as_str()
            .unwrap()
            .ends_with("arithmetic_env.py")
    );
    let models = report["models_tested"].as_array().unwrap();
    assert_eq!(models.len(), 2);
    let right = models
        .iter()
        .find(|m| m["model"] == "always-right")
        .unwrap();
    assert_eq!(
        (right["steps_tested"].clone(), right["accuracy"].clone()),
        (2.into(), 1.0.into())
    );
    assert!(std::path::Path::new(right["output_file"].as_str().unwrap()).exists());
    assert!(std::path::Path::new(right["log_file"].as_str().unwrap()).exists());
    // Every request went to the operator's endpoint, for the operator's models.
    let requests = server.requests();
    assert!(!requests.is_empty());
    assert!(
        requests
            .iter()
            .all(|r| r["model"] == "always-right" || r["model"] == "half-right"),
        "{requests:?}"
    );

    // Issue 55: an endpoint the agent names is tested with the models it names and never gets
    // the operator's key, even with one configured for the operator's endpoint.
    let named = rl_test_support::FixtureServer::start(&python, None);
    let arguments = serde_json::json!({
        "num_steps": 1, "group_size": 2, "models": ["always-right"], "base_url": named.base_url,
    })
    .to_string();
    let output = tool(
        home,
        "rl_test_inference",
        Some(&arguments),
        &[
            ("RL_INFERENCE__KEY_VARIABLE", "OPENAI_API_KEY"),
            ("OPENAI_API_KEY", "sk-operators-own"),
        ],
    );
    let report = answer(&output);
    assert_eq!(output.status.code(), Some(0), "{report}");
    assert_eq!(report["summary"]["models_succeeded"], 1, "{report}");
    let asked = named.requests();
    assert!(!asked.is_empty(), "{report}");
    // The client sends a placeholder where there is no key (`rl-preflight`'s); never the key.
    let placeholder = rl_test_support::sha256_hex("no-key-needed");
    assert!(
        asked
            .iter()
            .all(|r| r["auth_sha256"] == placeholder.as_str()),
        "the operator's key reached an endpoint the agent named: {asked:?}"
    );
    assert_eq!(
        server.requests().len(),
        requests.len(),
        "the operator's endpoint was asked"
    );
}

/// With `--json`, a failed command answers in the tools' shape: what to do next included.
#[test]
fn json_errors_of_commands_carry_the_tools_hints() {
    let home = tempfile::tempdir().unwrap();
    let unknown = rl_in(home.path(), &["select", "gsm9k", "--root", ROOT, "--json"]);
    assert_eq!(unknown.status.code(), Some(1));
    let unknown = answer(&unknown);
    assert_eq!(unknown["kind"], "not_found", "{unknown}");
    assert!(
        unknown["available"]
            .as_array()
            .unwrap()
            .contains(&"word_ladder".into())
    );
    assert!(unknown["hint"].is_string());

    std::fs::write(
        home.path().join("config.toml"),
        "status_check_interval_secs = \"soon\"\n",
    )
    .unwrap();
    // A broken config.toml fails the tools that need the settings, saying which setting; the
    // runs stay reachable and the health check names it.
    let broken = tool(home.path(), "rl_list_environments", None, &[]);
    assert_eq!(broken.status.code(), Some(1));
    let broken = answer(&broken);
    assert_eq!(broken["kind"], "precondition", "{broken}");
    assert!(
        broken["error"]
            .as_str()
            .unwrap()
            .contains("status_check_interval_secs")
    );
    let runs = tool(home.path(), "rl_list_runs", None, &[]);
    assert_eq!(runs.status.code(), Some(0), "{runs:?}");
    assert_eq!(answer(&runs)["count"], 0);
    let health = tool(home.path(), "rl_health_check", None, &[]);
    let health = answer(&health);
    assert_eq!(health["healthy"], false, "{health}");
    let settings = &health["checks"][0];
    assert_eq!(settings["name"], "settings", "{health}");
    assert_eq!(settings["ok"], false, "{health}");
    assert!(
        settings["detail"]
            .as_str()
            .unwrap()
            .contains("status_check_interval_secs"),
        "{health}"
    );
}

/// Issue 55: what agents may install is the operator's to say. With `[agents] install =
/// "none"` an environment of the folder is refused naming the setting; by default a published
/// package is refused the same way; neither reaches a Python or the registry.
#[test]
fn an_agents_install_is_refused_where_the_operator_forbids_it() {
    let forbidding = tempfile::tempdir().unwrap();
    std::fs::write(
        forbidding.path().join("config.toml"),
        "[agents]\ninstall = \"none\"\n",
    )
    .unwrap();
    let by_default = tempfile::tempdir().unwrap();
    for (home, name, said) in [
        (forbidding.path(), "word_ladder", "install = \"none\""),
        (
            by_default.path(),
            "some-package==1.0.0",
            "install = \"folder\"",
        ),
    ] {
        let arguments = serde_json::json!({"name": name}).to_string();
        let output = tool(home, "rl_install_environment", Some(&arguments), &[]);
        let error = answer(&output);
        assert_eq!(output.status.code(), Some(1), "{error}");
        assert_eq!(error["kind"], "precondition", "{error}");
        let text = error["error"].as_str().unwrap();
        assert!(text.contains("[agents]") && text.contains(said), "{error}");
        assert!(text.contains(&format!("rl setup --env {name}")), "{error}");
        assert!(
            !home.join("venvs").exists(),
            "{name}: something was installed"
        );
    }
}
