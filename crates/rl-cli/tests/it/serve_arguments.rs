//! The HTTP face takes exactly the arguments each tool's schema declares: every tool has a
//! route, every key of its schema is taken there (from the path, the query or the body), and a
//! key the schema lacks is refused by name. Asked of a real `rl serve` with no environment
//! selected and no key, with values of the wrong type, so that nothing runs.

use serde_json::{Value, json};

use super::serve::{Server, error_of, expect};

/// Each tool's route, as a client of the API spells it: method, path with an id in it (if
/// any), and the argument the path's id is.
const ROUTES: [(&str, &str, &str, Option<&str>); 25] = [
    ("rl_health_check", "GET", "/health", None),
    ("rl_list_environments", "GET", "/environments", None),
    (
        "rl_install_environment",
        "POST",
        "/environments/nowhere/install",
        Some("name"),
    ),
    (
        "rl_select_environment",
        "POST",
        "/environments/nowhere/select",
        Some("name"),
    ),
    ("rl_get_current_config", "GET", "/config", None),
    ("rl_edit_config", "POST", "/config", None),
    ("rl_start_training", "POST", "/runs", None),
    ("rl_list_runs", "GET", "/runs", None),
    ("rl_check_status", "GET", "/runs/0badc0de", Some("run_id")),
    (
        "rl_wait_training",
        "GET",
        "/runs/0badc0de/wait",
        Some("run_id"),
    ),
    (
        "rl_stop_training",
        "POST",
        "/runs/0badc0de/stop",
        Some("run_id"),
    ),
    (
        "rl_resume_training",
        "POST",
        "/runs/0badc0de/resume",
        Some("run_id"),
    ),
    (
        "rl_fork_training",
        "POST",
        "/runs/0badc0de/fork",
        Some("run_id"),
    ),
    ("rl_start_sweep", "POST", "/sweeps", None),
    (
        "rl_check_sweep",
        "GET",
        "/sweeps/0badc0de",
        Some("sweep_id"),
    ),
    (
        "rl_stop_sweep",
        "POST",
        "/sweeps/0badc0de/stop",
        Some("sweep_id"),
    ),
    (
        "rl_get_results",
        "GET",
        "/runs/0badc0de/metrics",
        Some("run_id"),
    ),
    ("rl_list_checkpoints", "GET", "/checkpoints", None),
    ("rl_test_inference", "POST", "/test/inference", None),
    ("rl_compare_training", "POST", "/compare", None),
    (
        "rl_stop_test",
        "POST",
        "/test/0badc0de/stop",
        Some("test_id"),
    ),
    (
        "rl_export_checkpoint",
        "POST",
        "/runs/0badc0de/export",
        Some("run_id"),
    ),
    ("rl_serve_checkpoint", "POST", "/served", None),
    ("rl_list_served", "GET", "/served", None),
    (
        "rl_stop_serving",
        "POST",
        "/served/0badc0de/stop",
        Some("serve_id"),
    ),
];

/// One argument sent to a route: in the query of a GET (as text that no schema type but a
/// string reads), in the JSON body of a POST (as an object where the schema wants something
/// else). The answer, which must be JSON.
fn send(server: &Server, method: &str, path: &str, key: &str) -> Value {
    let answer = if method == "GET" {
        server.get(&format!("{path}?{key}=x%21"))
    } else {
        server.post(path, &json!({ key: {"not": "this"} }))
    };
    answer.body
}

#[test]
fn every_routes_accepted_keys_are_its_tools_schema() {
    let specs = rl_tools::specs();
    for spec in &specs {
        assert!(
            ROUTES.iter().any(|(tool, ..)| *tool == spec.name),
            "{} has no route in this test's table",
            spec.name
        );
    }
    let server = Server::start(tempfile::tempdir().unwrap(), &[], &[]);
    for (tool, method, path, path_argument) in ROUTES {
        let spec = specs
            .iter()
            .find(|spec| spec.name == tool)
            .unwrap_or_else(|| panic!("{tool} is not a tool"));
        let properties = spec.parameters["properties"].as_object().unwrap();
        if let Some(argument) = path_argument {
            assert!(properties.contains_key(argument), "{tool}: {argument}");
        }
        for key in properties.keys() {
            if Some(key.as_str()) == path_argument {
                continue;
            }
            // Refused for its value (or for what the machine lacks), never as a stranger.
            let answer = send(&server, method, path, key);
            let error = answer["error"].as_str().unwrap_or_default();
            assert!(
                !error.is_empty()
                    && !error.starts_with("no route")
                    && !error.contains(&format!("unknown field `{key}`")),
                "{method} {path} refuses {key}, an argument of {tool}: {answer}"
            );
        }
        let unknown = send(&server, method, path, "zz_not_an_argument");
        let error = unknown["error"].as_str().unwrap_or_default();
        assert!(
            error.contains("unknown field `zz_not_an_argument`"),
            "{method} {path} takes a key {tool} lacks: {unknown}"
        );
    }
}

/// `POST /runs/{id}/resume` takes no body, as the README says: then it is the run's, not the
/// request's, that answers (404 for a run that does not exist), whatever the content type.
#[test]
fn a_bodiless_resume_is_the_runs_answer() {
    let server = Server::start(tempfile::tempdir().unwrap(), &[], &[]);
    for headers in [
        &[][..],
        &[("Content-Type", "application/octet-stream")][..],
        &[("Content-Type", "application/json")][..],
    ] {
        let answer = expect(
            server.raw("POST", "/runs/0badc0de/resume", headers, ""),
            404,
        );
        assert!(
            error_of(&answer).contains("0badc0de"),
            "{headers:?}: {answer}"
        );
    }
    // A body that is not empty is still JSON's, and the path's id is not contradicted.
    expect(
        server.raw("POST", "/runs/0badc0de/resume", &[], "{\"steps\": 2}"),
        415,
    );
    let contradicted = expect(
        server.post("/runs/0badc0de/resume", &json!({"run_id": "12345678"})),
        400,
    );
    assert!(error_of(&contradicted).contains("path"), "{contradicted}");
}

/// A caller's long text (an id, a key, a value) comes back cut, never whole.
#[test]
fn a_long_text_is_never_echoed_whole() {
    let server = Server::start(tempfile::tempdir().unwrap(), &[], &[]);
    let long = "y".repeat(10_000);
    for answer in [
        server.post("/test/inference", &json!({ "test_id": long })),
        server.post("/config", &json!({ long.clone(): 1 })),
        server.get(&format!("/runs/0badc0de?since={long}")),
        server.get(&format!("/runs/{long}")),
        server.post("/compare", &json!({ "run_id": long })),
    ] {
        let text = answer.body.to_string();
        assert!(answer.status >= 400, "{text}");
        assert!(
            !text.contains(&"y".repeat(100)),
            "{}: {}",
            answer.status,
            &text[..300.min(text.len())]
        );
        assert!(error_of(&answer.body).contains("characters"), "{text}");
    }
}
