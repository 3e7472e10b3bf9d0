//! `rl serve`'s run pages over HTTP: which client gets a page and which the API's JSON, the
//! headers that keep a page safe, the pages' data, the token as a cookie. `browser.rs` looks
//! at the same pages in headless Chromium.

use std::path::Path;

use rl_process::{Component, ComponentStatus, NewRun, Phase, ProcessIdentity, RunState, RunStore};
use rl_settings::{RunId, run_dir};
use serde_json::Value;

use crate::serve::Server;

/// The run the fixture homes hold.
pub(crate) const RUN: &str = "5e7a11ce";
/// Steps in the fixture run's metrics.
pub(crate) const STEPS: usize = 6;
/// A rollout text that would run as a script if a page rendered it as HTML.
pub(crate) const HOSTILE_TEXT: &str =
    "<script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\">";

/// A state directory with one run as its supervisor leaves it: its metrics (`STEPS` steps),
/// checkpoints, a step's rollouts holding [`HOSTILE_TEXT`], and log lines. With `running`,
/// the run is still going, its supervisor this test process.
pub(crate) fn run_home(running: bool) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let id = RunId::parse(RUN).unwrap();
    let dir = run_dir(home.path(), &id);
    std::fs::create_dir_all(dir.join("rollouts")).unwrap();
    let config = dir.join("config.yaml");
    std::fs::write(
        &config,
        "env:\n  total_steps: 12\n  use_wandb: false\nopenai: []\ntinker: {}\nslurm: false\ntesting: false\n",
    )
    .unwrap();
    let components = [Component::Api, Component::Trainer, Component::Env];
    let mut store = RunStore::open(home.path()).unwrap();
    store
        .create_run(&NewRun {
            id: id.clone(),
            environment: "digits@digits_env.py".to_owned(),
            config_path: config,
            api_port: Some(8000),
            trainer_port: Some(8001),
            logs: components
                .iter()
                .map(|component| (*component, dir.join(format!("{component}.log"))))
                .collect(),
            queued: false,
            max_active: None,
            resumed_from: None,
        })
        .unwrap();
    for component in components {
        store
            .record_component(&id, component, None, ComponentStatus::Running)
            .unwrap();
        let next = match component {
            Component::Api => RunState::Starting(Phase::Trainer),
            Component::Trainer => RunState::Starting(Phase::Env),
            _ => RunState::Running,
        };
        store.transition(&id, next, "").unwrap();
    }
    if running {
        let me = ProcessIdentity::of(std::process::id()).unwrap();
        store.set_supervisor(&id, me).unwrap();
    } else {
        store
            .transition(&id, RunState::Completed, "the trainer finished")
            .unwrap();
    }
    for step in 1..=STEPS {
        write_step(home.path(), step);
    }
    std::fs::write(
        dir.join("checkpoints.jsonl"),
        "{\"step\": 0, \"name\": \"step_0\", \"sampler_path\": \"tinker://m/step_0\", \"state_path\": \"tinker://m/weights/step_0\"}\n\
         {\"step\": 4, \"name\": \"step_4\", \"sampler_path\": \"tinker://m/step_4\", \"state_path\": \"tinker://m/weights/step_4\"}\n",
    )
    .unwrap();
    let rollout = serde_json::json!({"group": 0, "index": 0, "prompt": HOSTILE_TEXT,
        "completion": "12 34 <b>not bold</b>", "score": 0.5, "advantage": 0.25, "skipped": false});
    let skipped = serde_json::json!({"group": 1, "index": null, "prompt": null,
        "completion": null, "score": null, "advantage": null, "skipped": true,
        "skip_reason": "every score equal"});
    std::fs::write(
        dir.join("rollouts/step_000002.jsonl"),
        format!("{rollout}\n{skipped}\n"),
    )
    .unwrap();
    std::fs::write(dir.join("trainer.log"), format!("step 1\n{HOSTILE_TEXT}\n")).unwrap();
    home
}

/// Appends step `step`'s row to the run's metrics, as the trainer does.
pub(crate) fn write_step(home: &Path, step: usize) {
    let dir = run_dir(home, &RunId::parse(RUN).unwrap());
    #[expect(clippy::cast_precision_loss, reason = "a few steps")]
    let at = step as f64;
    let row = serde_json::json!({"step": step, "_timestamp": 1_795_000_000.0 + 30.0 * at,
        "reward/mean": 0.2 + 0.05 * at, "train/loss": 2.0 / at, "train/learning_rate": 0.01});
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("metrics.jsonl"))
        .unwrap();
    std::io::Write::write_all(&mut file, format!("{row}\n").as_bytes()).unwrap();
}

const HTML: (&str, &str) = ("Accept", "text/html,application/xhtml+xml,*/*;q=0.8");

#[track_caller]
fn assert_page_headers(headers: &str) {
    assert!(headers.contains("content-type: text/html"), "{headers}");
    assert!(
        headers.contains("content-security-policy: default-src 'none'; script-src 'self';"),
        "{headers}"
    );
    assert!(
        headers.contains("x-content-type-options: nosniff"),
        "{headers}"
    );
}

/// A browser gets a page at `/` and `/runs/{id}`; every other client the API's JSON there,
/// as before. The pages' data is JSON, read-only, and the assets ship in the binary.
#[test]
fn a_browser_gets_pages_and_every_other_client_the_api() {
    let server = Server::start(run_home(false), &[], &[]);
    let (status, headers, body) = server.exchange("GET", "/", &[HTML], "");
    assert_eq!(status, 200, "{body}");
    assert_page_headers(&headers);
    assert!(body.contains("data-page=\"list\""), "{body}");
    assert!(
        !body.contains("<script>") || !body.contains("<script>\n"),
        "{body}"
    );

    let (status, headers, body) = server.exchange("GET", &format!("/runs/{RUN}"), &[HTML], "");
    assert_eq!(status, 200, "{body}");
    assert_page_headers(&headers);
    assert!(body.contains(&format!("data-run=\"{RUN}\"")), "{body}");

    // The seed client's JSON, unchanged, for a client that does not ask for HTML.
    let json = crate::serve::expect(server.get(&format!("/runs/{RUN}")), 200);
    assert_eq!(json["run_id"], RUN);

    for missing in ["/runs/0badc0de", "/runs/..%2Fetc", "/runs/NOTHEX12"] {
        let (status, headers, body) = server.exchange("GET", missing, &[HTML], "");
        assert_eq!(status, 404, "{missing}: {body}");
        assert!(
            headers.contains("content-type: text/html"),
            "{missing}: {headers}"
        );
        assert!(!body.contains("<script"), "{missing}: {body}");
    }

    let (status, headers, script) = server.exchange("GET", "/assets/uPlot.iife.min.js", &[], "");
    assert_eq!(status, 200);
    assert!(
        headers.contains("content-type: text/javascript"),
        "{headers}"
    );
    assert!(script.contains("uPlot"), "the vendored chart library");
    crate::serve::expect(server.get("/assets/nothing.js"), 404);
    crate::serve::expect(server.get("/assets/..%2F..%2FCargo.toml"), 404);

    let rows = crate::serve::expect(server.get("/page/runs"), 200);
    assert_eq!(rows["runs"][0]["run_id"], RUN, "{rows}");
    assert_eq!(rows["runs"][0]["step"], 6, "{rows}");
    let page = crate::serve::expect(server.get(&format!("/page/runs/{RUN}")), 200);
    assert_eq!(page["history"].as_array().unwrap().len(), STEPS, "{page}");
    assert_eq!(page["rollout_steps"], serde_json::json!([2]), "{page}");
    assert_eq!(page["total_steps"], 12);
    let rollouts = crate::serve::expect(server.get(&format!("/page/runs/{RUN}/rollouts/2")), 200);
    assert_eq!(
        rollouts["rows"][0]["prompt"], HOSTILE_TEXT,
        "data stays data"
    );
    assert_eq!(rollouts["rows"][1]["skipped"], true);
    crate::serve::expect(server.get(&format!("/page/runs/{RUN}/rollouts/9")), 400);
    crate::serve::expect(server.get(&format!("/page/runs/{RUN}/rollouts/two")), 400);
    crate::serve::expect(server.get("/page/runs/0badc0de"), 404);
    // Read-only: the pages' paths answer GET only.
    let refused = server.exchange(
        "POST",
        "/page/runs",
        &[("Content-Type", "application/json")],
        "{}",
    );
    assert_eq!(refused.0, 405, "{refused:?}");
}

/// Remote, a browser opens the pages once with `?token=`: the token becomes an `HttpOnly`,
/// `SameSite=Strict` cookie, good for reading, never for what changes state.
#[test]
fn the_token_reaches_a_browser_as_a_cookie_for_reading_only() {
    const TOKEN: &str = "page-token-0123456789";
    let server = Server::start(
        run_home(false),
        &["--token-env", "RL_PAGE_TOKEN"],
        &[("RL_PAGE_TOKEN", TOKEN)],
    );
    let (status, _, _) = server.exchange("GET", "/", &[HTML], "");
    assert_eq!(status, 401);
    let (status, _, _) = server.exchange("GET", "/?token=wrong", &[HTML], "");
    assert_eq!(status, 401);
    let (status, headers, _) =
        server.exchange("GET", &format!("/runs/{RUN}?token={TOKEN}"), &[HTML], "");
    assert_eq!(status, 303, "{headers}");
    assert!(
        headers.contains(&format!("location: /runs/{RUN}\r\n")),
        "{headers}"
    );
    let cookie = headers
        .lines()
        .find_map(|line| line.strip_prefix("set-cookie: "))
        .unwrap_or_else(|| panic!("no cookie: {headers}"));
    assert!(
        cookie.contains("httponly") && cookie.contains("samesite=strict"),
        "{cookie}"
    );
    let sent = format!("rl_token={TOKEN}");
    let with_cookie = [HTML, ("Cookie", sent.as_str())];
    let (status, headers, _) = server.exchange("GET", &format!("/runs/{RUN}"), &with_cookie, "");
    assert_eq!(status, 200);
    assert_page_headers(&headers);
    let (status, _, body) = server.exchange("GET", "/page/runs", &[("Cookie", sent.as_str())], "");
    assert_eq!(status, 200, "{body}");
    // A cookie never starts or stops anything.
    let (status, _, body) = server.exchange(
        "POST",
        &format!("/runs/{RUN}/stop"),
        &[("Cookie", sent.as_str())],
        "",
    );
    assert_eq!(status, 401, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert!(answer["error"].is_string());
}
