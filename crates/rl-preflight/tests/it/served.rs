//! A test that starts the server of its own models (`PreflightPlan.server`, as for a run's
//! checkpoints): the fixture OpenAI server stands in for it. It is started in the test's
//! folder, recorded and marked like a model, the models ask it, and nothing of it is left after
//! the test; a server that cannot start fails every model with its reason, and no model runs.

use std::time::Duration;

use rl_preflight::{ModelOutcome, ModelServer};
use rl_settings::Secrets;

use crate::{Stack, processes_mentioning, request_at, test_python};

fn fixture_server(python: &std::path::Path, port: u16, extra: &[&str]) -> ModelServer {
    let script = rl_test_support::workspace_root().join("fixtures/openai-server/openai_server.py");
    let mut args = vec![
        script.to_string_lossy().into_owned(),
        "--port".to_owned(),
        port.to_string(),
    ];
    args.extend(extra.iter().map(|arg| (*arg).to_owned()));
    ModelServer {
        program: python.to_owned(),
        args,
        env: Vec::new(),
        port,
        ready_timeout: Duration::from_secs(60),
        engine_of: None,
        chat_template_of: None,
    }
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
async fn the_test_starts_its_server_and_ends_it() {
    let python = test_python();
    let stack = Stack::new(&python);
    let [port] = rl_process::free_loopback_ports::<1>().unwrap();
    let server = fixture_server(&python, port, &[]);
    let mut test = request_for(&server);
    test.server = Some(server);
    let plan = stack.plan(test);
    let report = stack.run(&plan, Secrets::default()).await;
    for model in &report.models {
        assert_eq!(model.outcome, ModelOutcome::Succeeded, "{model:#?}");
    }
    assert_eq!(report.models[0].figures.accuracy, Some(1.0));
    let dir = &report.output_dir;
    assert!(dir.join("server.group.json").is_file());
    assert!(dir.join("server.log").is_file());
    assert!(
        processes_mentioning(&format!("--port {port}")).is_empty(),
        "the server outlived its test"
    );
    assert!(rl_process::carrying_dir("RL_TEST_DIR", dir, &[]).is_empty());
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
async fn a_server_that_cannot_start_fails_every_model_with_its_reason() {
    let python = test_python();
    let stack = Stack::new(&python);
    let [port] = rl_process::free_loopback_ports::<1>().unwrap();
    // An argument the fixture refuses: it exits 2 at once.
    let server = fixture_server(&python, port, &["--no-such-flag"]);
    let mut test = request_for(&server);
    test.server = Some(server);
    let plan = stack.plan(test);
    let report = stack.run(&plan, Secrets::default()).await;
    for model in &report.models {
        let ModelOutcome::NotStarted { reason } = &model.outcome else {
            panic!("{model:#?}");
        };
        assert!(
            reason.contains("the model server did not start: it exited"),
            "{reason}"
        );
        assert!(reason.contains("--no-such-flag"), "the log's end: {reason}");
        assert!(!model.log_path.exists(), "a model ran: {model:#?}");
    }
}

/// Two fixture policies asked at the server's own URL.
fn request_for(server: &ModelServer) -> rl_preflight::PreflightRequest {
    request_at(&server.base_url(), &["always-right", "always-wrong"])
}
