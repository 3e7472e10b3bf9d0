//! The environment's readiness gate against atroposlib 0.4.0's run-api itself: asked before
//! and after the environment registers, it never makes run-api raise (issue 30 #4: each
//! `/status-env` asked too early logged a 5 KB traceback), and it turns ready once the
//! environment has sent a scored group.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rl_process::{HttpProbe, Probe, Readiness, free_loopback_ports};

/// run-api, killed with the test.
struct RunApi(Child);

impl Drop for RunApi {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn test_python() -> Option<PathBuf> {
    std::env::var_os("RL_TEST_PYTHON").map(PathBuf::from)
}

async fn call(method: reqwest::Method, url: String, body: serde_json::Value) -> serde_json::Value {
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .request(method, url)
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[test]
#[ignore = "needs the test venv (RL_TEST_PYTHON): `cargo xtask test` runs it"]
fn the_environment_gate_never_makes_run_api_raise() {
    let Some(python) = test_python() else {
        panic!("RL_TEST_PYTHON is not set");
    };
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("api.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let [port] = free_loopback_ports::<1>().unwrap();
    let _api = RunApi(
        Command::new(python)
            .args(["-m", "atroposlib.cli.run_api", "--host", "127.0.0.1"])
            .args(["--port", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let probe = HttpProbe::new().unwrap();
        let host = "127.0.0.1";
        let started = Instant::now();
        while !probe.is_ready(host, Readiness::ApiAnswers { port }).await {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "run-api never answered: {}",
                std::fs::read_to_string(&log_path).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let env = Readiness::EnvSending { api_port: port };
        let url = |path: &str| format!("http://{host}:{port}{path}");
        // Before the trainer registered (run-api has no list of environments yet).
        assert!(!probe.is_ready(host, env).await);
        let registration = serde_json::json!({
            "wandb_group": "g", "wandb_project": "p", "batch_size": 2, "max_token_len": 64,
            "checkpoint_dir": "", "save_checkpoint_interval": 0, "starting_step": 0,
            "num_steps": 2,
        });
        call(reqwest::Method::POST, url("/register"), registration).await;
        // The trainer registered; no environment yet (an empty list).
        assert!(!probe.is_ready(host, env).await);
        // The trainer's first batch request lets environments register.
        call(reqwest::Method::GET, url("/batch"), serde_json::json!({})).await;
        let env_registration = serde_json::json!({
            "max_token_length": 64, "desired_name": "arithmetic", "weight": 1.0,
            "group_size": 2,
        });
        let answer = call(
            reqwest::Method::POST,
            url("/register-env"),
            env_registration,
        )
        .await;
        assert_eq!(answer["env_id"], 0, "{answer}");
        // Registered, nothing sent yet.
        assert!(!probe.is_ready(host, env).await);
        let group = serde_json::json!({
            "tokens": [[1, 2, 3], [1, 2, 4]], "masks": [[-100, 2, 3], [-100, 2, 4]],
            "scores": [1.0, 0.0], "env_id": 0,
        });
        call(reqwest::Method::POST, url("/scored_data"), group).await;
        // Asked again as the gate does: one attempt may time out on a loaded machine.
        let sent = Instant::now();
        while !probe.is_ready(host, env).await {
            assert!(
                sent.elapsed() < Duration::from_secs(30),
                "a group was sent, yet the gate never opened"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(log.contains("GET /latest_example"), "{log}");
    assert!(!log.contains("Traceback"), "{log}");
    assert!(!log.contains(" 500 "), "{log}");
}
