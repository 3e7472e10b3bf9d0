//! A running server follows the operator's `config.toml`: a setting lowered while it serves
//! is the one its next refusal quotes.

use serde_json::json;

use super::serve::{Server, StartedRuns, error_of, expect, stack_home};
use crate::test_python;

#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn a_lowered_max_active_runs_is_honoured_by_a_running_server() {
    let python = test_python();
    // Steps of 30 s: the first run is still going when the second is asked for.
    let home = stack_home(&python, "");
    let config = home.path().join("config.toml");
    let settings = std::fs::read_to_string(&config).unwrap().replace(
        "RL_FIXTURE_TRAINER_STEP_SECONDS = \"0.2\"",
        "RL_FIXTURE_TRAINER_STEP_SECONDS = \"30\"",
    );
    assert!(
        settings.contains("= \"30\""),
        "the fixture's step setting moved"
    );
    std::fs::write(&config, &settings).unwrap();
    let server = Server::start(home, &[], &[]);
    let mut runs = StartedRuns {
        home: server.home(),
        ids: Vec::new(),
    };
    expect(
        server.request("POST", "/environments/arithmetic/select", None),
        200,
    );
    let first = expect(server.post("/runs", &json!({})), 200);
    runs.ids.push(first["run_id"].as_str().unwrap().to_owned());

    // The operator lowers the bound (default 8) to the one run going.
    std::fs::write(&config, format!("max_active_runs = 1\n{settings}")).unwrap();
    let refused = expect(server.post("/runs", &json!({})), 409);
    assert!(
        error_of(&refused).contains("max_active_runs is 1"),
        "{refused}"
    );
    // A config.toml that cannot be read is said so, and the watching routes still answer.
    std::fs::write(&config, format!("max_active_runs = \"one\"\n{settings}")).unwrap();
    let broken = expect(server.post("/runs", &json!({})), 409);
    assert!(error_of(&broken).contains("max_active_runs"), "{broken}");
    assert!(
        broken["hint"]
            .as_str()
            .unwrap()
            .contains("again when it changes"),
        "{broken}"
    );
    expect(server.get(&format!("/runs/{}", runs.ids[0])), 200);
}
