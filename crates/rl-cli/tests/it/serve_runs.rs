//! `rl serve` running things: runs of the local stack started, followed, read and stopped over
//! HTTP (and what their processes inherit), the pre-flight's bodies, and the server's own life
//! (a terminal closing, a stop signal during a test, what a killed pre-flight left).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::serve::{
    ANSWER_TIMEOUT, Server, StartedRuns, expect, rl_by_home_flag, serve_command, stack_home,
};
use crate::runs::{FAKE_OPENROUTER_KEY, environ_of, pid_of, processes_of_run};
use crate::{test_python, workspace_root};

/// Runs of the local stack started over HTTP by a server given `--home DIR` (no `RL_HOME`):
/// the first followed to its end and read, the second stopped over HTTP, the third stopped by
/// `rl runs stop` in a process of its own, which the server then reports. `rl --home DIR`
/// sees the server's selection and runs. While the first runs, no process of it holds the
/// server's token, and the provider keys only where the operator allows them (issue 45).
#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn runs_are_started_followed_read_and_stopped_over_http() {
    const TOKEN: &str = "rl-api-token-0123456789";
    const OPENAI_KEY: &str = "sk-openai-fake-0123456789";
    let python = test_python();
    let home = stack_home(&python, "");
    let config = home.path().join("config.toml");
    // Steps of 1.5 s: the first run is `running` long enough for its processes to be read.
    let settings = std::fs::read_to_string(&config).unwrap().replace(
        "RL_FIXTURE_TRAINER_STEP_SECONDS = \"0.2\"",
        "RL_FIXTURE_TRAINER_STEP_SECONDS = \"1.5\"",
    );
    std::fs::write(
        &config,
        format!("environment_keys = [\"OPENROUTER_API_KEY\"]\n{settings}"),
    )
    .unwrap();
    let mut server = Server::start_with_home_flag(
        home,
        &["--token-env", "RL_API_TOKEN"],
        &[
            ("RL_API_TOKEN", TOKEN),
            ("OPENROUTER_API_KEY", FAKE_OPENROUTER_KEY),
            ("OPENAI_API_KEY", OPENAI_KEY),
        ],
    );
    server.token = Some(TOKEN.to_owned());
    let home = server.home.path().to_owned();
    let mut runs = StartedRuns {
        home: &home,
        ids: Vec::new(),
    };
    // The original client's select: no body, no content type.
    expect(
        server.request("POST", "/environments/arithmetic/select", None),
        200,
    );
    let shown = rl_by_home_flag(&home, &["config", "show"]);
    assert_eq!(shown["environment"], "arithmetic", "{shown}");

    // The original client's `{}`, and an empty JSON body.
    let first = expect(server.post("/runs", &json!({})), 200);
    let first_id = first["run_id"].as_str().unwrap().to_owned();
    runs.ids.push(first_id.clone());
    assert_eq!(first["status"], "starting", "{first}");
    let authorization = format!("Bearer {TOKEN}");
    let json_type = [
        ("Content-Type", "application/json"),
        ("Authorization", authorization.as_str()),
    ];
    let second = expect(server.raw("POST", "/runs", &json_type, ""), 200);
    let second_id = second["run_id"].as_str().unwrap().to_owned();
    runs.ids.push(second_id.clone());

    let listed = expect(server.get("/runs"), 200);
    assert_eq!(listed["count"], 2, "{listed}");
    let run_ids = |listed: &Value| -> Vec<String> {
        listed["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|run| run["run_id"].as_str().unwrap().to_owned())
            .collect()
    };
    let listed_ids = run_ids(&listed);
    assert!(
        listed_ids.contains(&first_id) && listed_ids.contains(&second_id),
        "{listed}"
    );
    let mut seen_ids = run_ids(&rl_by_home_flag(&home, &["runs", "list"]));
    seen_ids.sort();
    let mut listed_ids = listed_ids;
    listed_ids.sort();
    assert_eq!(seen_ids, listed_ids, "rl runs list differs from GET /runs");

    let status = expect(server.get(&format!("/runs/{second_id}")), 200);
    assert_eq!(status["run_id"], second_id.as_str());
    let stopped = expect(
        server.request("POST", &format!("/runs/{second_id}/stop"), None),
        200,
    );
    assert_eq!(stopped["run_id"], second_id.as_str());
    assert!(stopped["stopped"].is_boolean(), "{stopped}");
    assert!(
        ["stopped", "completed", "failed"].contains(&stopped["status"].as_str().unwrap()),
        "{stopped}"
    );

    // A run the server started, stopped by another face.
    let third = expect(server.post("/runs", &json!({})), 200);
    let third_id = third["run_id"].as_str().unwrap().to_owned();
    runs.ids.push(third_id.clone());
    let stopped = rl_by_home_flag(&home, &["runs", "stop", &third_id]);
    assert_eq!(
        (stopped["stopped"].clone(), stopped["status"].clone()),
        (json!(true), json!("stopped")),
        "{stopped}"
    );
    let reported = expect(server.get(&format!("/runs/{third_id}")), 200);
    assert_eq!(reported["status"], "stopped", "{reported}");

    // While the first runs: its processes hold no token, its environment the allowed key
    // alone, its trainer and run-api none.
    let started = Instant::now();
    while expect(server.get(&format!("/runs/{first_id}")), 200)["status"] != "running" {
        assert!(
            started.elapsed() < Duration::from_secs(180),
            "run {first_id} never ran"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let running = rl_by_home_flag(&home, &["runs", "status", &first_id]);
    let supervisor = u32::try_from(running["supervisor"]["pid"].as_u64().unwrap()).unwrap();
    let of_run = processes_of_run(&first_id);
    let has = |pid: u32, name: &str| {
        environ_of(pid)
            .iter()
            .any(|variable| variable.starts_with(&format!("{name}=")))
    };
    for pid in of_run.iter().copied().chain([supervisor]) {
        assert!(!has(pid, "RL_API_TOKEN"), "the token reached {pid}");
        assert!(
            !environ_of(pid)
                .iter()
                .any(|variable| variable.contains(TOKEN)),
            "the token's value reached {pid}"
        );
    }
    let env = pid_of(&running, "env").unwrap();
    assert!(of_run.contains(&env), "{of_run:?}");
    assert!(environ_of(env).contains(&format!("OPENROUTER_API_KEY={FAKE_OPENROUTER_KEY}")));
    assert!(
        !has(env, "OPENAI_API_KEY"),
        "a key not allowed environments"
    );
    for name in ["api", "trainer"] {
        let pid = pid_of(&running, name).unwrap();
        assert!(of_run.contains(&pid), "{name}: {of_run:?}");
        assert!(
            !has(pid, "OPENROUTER_API_KEY") && !has(pid, "OPENAI_API_KEY"),
            "{name}"
        );
    }

    // The first runs to its end (6 steps of 1.5 s once the stack is up).
    let started = Instant::now();
    let finished = loop {
        let status = expect(server.get(&format!("/runs/{first_id}")), 200);
        let state = status["status"].as_str().unwrap().to_owned();
        if ["completed", "failed", "stopped", "lost"].contains(&state.as_str()) {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(180),
            "run {first_id} did not end: {status}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(finished["status"], "completed", "{finished}");
    assert!(finished["metrics"].is_object(), "{finished}");
    let events = expect(server.get(&format!("/runs/{first_id}?since=0")), 200);
    let next = events["next_since"].as_i64().unwrap();
    assert!(
        next > 0 && !events["events"].as_array().unwrap().is_empty(),
        "{events}"
    );
    let later = expect(server.get(&format!("/runs/{first_id}?since={next}")), 200);
    assert_eq!(later["events"], json!([]), "{later}");

    let results = expect(server.get(&format!("/runs/{first_id}/metrics")), 200);
    assert_eq!(results["run_id"], first_id.as_str());
    assert_eq!(results["status"], "completed");
    assert!(results["final_metrics"].is_object(), "{results}");

    let again = expect(
        server.request("POST", &format!("/runs/{first_id}/stop"), None),
        200,
    );
    assert_eq!(again["stopped"], false, "{again}");
}

/// The pre-flight against the fixture OpenAI server: today's body, and the original client's
/// prompts, read as a number of steps.
#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn the_inference_test_takes_the_new_body_and_translates_the_old_one() {
    let python = test_python();
    let fixture = rl_test_support::FixtureServer::start(&python, None);
    let inference = format!(
        "\n[inference]\nbase_url = \"{}\"\nmodels = [\"half-right\"]\n",
        fixture.base_url
    );
    let server = Server::start(stack_home(&python, &inference), &[], &[]);
    expect(
        server.request("POST", "/environments/arithmetic/select", None),
        200,
    );

    let new = expect(
        server.post(
            "/test/inference",
            &json!({"num_steps": 1, "group_size": 2, "models": ["always-right"]}),
        ),
        200,
    );
    assert_eq!(new["models_succeeded"], 1, "{new}");
    assert_eq!(new["models"][0]["model"], "always-right", "{new}");
    assert_eq!(new["steps"], 1, "{new}");
    assert!(new.get("translated_from_old_body").is_none());

    let old = expect(
        server.post(
            "/test/inference",
            &json!({"prompts": ["What is 2+2?", "What is 3*3?"], "max_tokens": 64, "temperature": 0.7}),
        ),
        200,
    );
    assert_eq!(old["models"][0]["model"], "half-right", "{old}");
    assert_eq!(old["steps"], 2, "{old}");
    let translated = &old["translated_from_old_body"];
    assert_eq!(translated["num_steps"], 2, "{old}");
    assert_eq!(
        translated["not_sent"],
        json!(["prompts", "max_tokens", "temperature"])
    );
    assert!(
        translated["message"]
            .as_str()
            .unwrap()
            .contains("process mode has no per-request prompt input")
    );

    // `"wait": false` answers at once with the test's id; polling it gives the full answer.
    let started = expect(
        server.post(
            "/test/inference",
            &json!({"num_steps": 1, "group_size": 2, "models": ["always-right"], "wait": false}),
        ),
        200,
    );
    let test_id = started["test_id"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + ANSWER_TIMEOUT;
    let polled = loop {
        let polled = expect(
            server.post("/test/inference", &json!({ "test_id": test_id })),
            200,
        );
        if polled["status"] != "running" {
            break polled;
        }
        assert!(Instant::now() < deadline, "still running: {polled}");
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(polled["models_succeeded"], 1, "{polled}");
    assert_eq!(polled["models"][0]["model"], "always-right", "{polled}");
    assert_eq!(polled["steps"], 1, "{polled}");
}

/// Started with `nohup`, a server outlives its terminal: a SIGHUP leaves it serving, and
/// SIGTERM still stops it.
#[test]
fn a_server_started_with_nohup_survives_its_terminal_closing() {
    let home = tempfile::tempdir().unwrap();
    let plain = serve_command(home.path(), &["--addr", "127.0.0.1:0"], &[]);
    let mut command = Command::new("nohup");
    command
        .arg(plain.get_program())
        .args(plain.get_args())
        .current_dir(workspace_root());
    for (name, value) in plain.get_envs() {
        match value {
            Some(value) => command.env(name, value),
            None => command.env_remove(name),
        };
    }
    let mut server = Server::spawn(command, home);
    let pid = nix::unistd::Pid::from_raw(i32::try_from(server.child.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).unwrap();
    // Had the signal stopped it, it would be gone well within this.
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        server.child.try_wait().unwrap().is_none(),
        "{}",
        server.output()
    );
    assert_eq!(server.request("GET", "/health", None).status, 200);
    assert!(server.terminate().success(), "{}", server.output());
    assert!(!server.output().contains("panicked"), "{}", server.output());
}

/// A stop signal while a test runs ends its models (they run in process groups of their own,
/// which a signal to the server does not reach), and the server exits.
#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn a_stopped_server_leaves_no_model_running() {
    let python = test_python();
    let fixture = rl_test_support::FixtureServer::start(&python, None);
    let inference = format!("\n[inference]\nbase_url = \"{}\"\n", fixture.base_url);
    let mut server = Server::start(stack_home(&python, &inference), &[], &[]);
    expect(
        server.request("POST", "/environments/arithmetic/select", None),
        200,
    );
    let home = server.home.path().display().to_string();
    let models_running = || {
        rl_test_support::processes_mentioning(&home)
            .iter()
            .filter(|(_, line)| line.contains(" process "))
            .count()
    };
    let address = server.address();
    let body =
        json!({"models": ["slow", "half-right@60"], "num_steps": 1, "group_size": 1}).to_string();
    // The answer (if any) is not the point: the request only has to be in flight.
    let request = std::thread::spawn(move || {
        let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(10)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let head = format!(
            "POST /test/inference HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        stream
            .write_all(format!("{head}{body}").as_bytes())
            .unwrap();
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer);
    });
    let started = Instant::now();
    while models_running() < 2 && started.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        models_running(),
        2,
        "the models never started: {}",
        server.output()
    );
    let status = server.terminate();
    assert!(status.success(), "{status}: {}", server.output());
    assert_eq!(models_running(), 0, "{}", server.output());
    assert!(server.output().contains("rl serve: stopping"));
    request.join().unwrap();
}

/// `rl serve` ends, as it starts, what the killed owner of an earlier pre-flight left; a store
/// it cannot read is said, and it serves all the same.
#[test]
fn a_starting_server_ends_what_a_killed_preflight_left_and_starts_without_a_store() {
    let home = tempfile::tempdir().unwrap();
    let guard = rl_test_support::KillOnDrop::new("serve-start");
    let (dir, mut model) = crate::preflight::left_by_a_killed_owner(home.path(), &guard.marker);
    let server = Server::start(home, &[], &[]);
    let started = Instant::now();
    while !(rl_test_support::processes_mentioning(&guard.marker).is_empty()
        && dir.join("interrupted.json").exists())
    {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "left running: {:?}: {}",
            rl_test_support::processes_mentioning(&guard.marker),
            server.output()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    model.wait().unwrap();
    drop(server);

    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("preflight"), "not a folder").unwrap();
    let server = Server::start(home, &[], &[]);
    expect(server.get("/health"), 200);
    let started = Instant::now();
    while !server
        .output()
        .contains("rl serve: cannot look for what killed pre-flight tests left")
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{}",
            server.output()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
