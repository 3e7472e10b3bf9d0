//! `rl serve`'s run pages over HTTP: which client gets a page and which the API's JSON, the
//! headers that keep a page safe, the pages' data, the token as a cookie. `browser.rs` looks
//! at the same pages in headless Chromium.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use rl_process::{
    Component, ComponentStatus, Lineage, NewRun, Phase, ProcessIdentity, RunState, RunStore,
    SweepMember,
};
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
        "env:\n  total_steps: 12\n  use_wandb: false\nopenai: []\ntinker:\n  currency: EUR\n  \
         price_trained_per_million: 2.0\n  loss: cispo\n  clip_low: 0.75\n  clip_high: 1.28\n  \
         truncated: penalty\n  overlong_band: 64\nslurm: false\ntesting: false\n",
    )
    .unwrap();
    let mut store = RunStore::open(home.path()).unwrap();
    record_running(
        &mut store,
        &id,
        &dir,
        config,
        Some((8000, 8001)),
        None,
        None,
    );
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

/// Records run `id` (its config at `config`, its logs in its run folder) and walks it to
/// `running` as its supervisor would: run-api, trainer, environment each started.
pub(crate) fn record_running(
    store: &mut RunStore,
    id: &RunId,
    dir: &Path,
    config: std::path::PathBuf,
    ports: Option<(u16, u16)>,
    resumed_from: Option<Lineage>,
    sweep: Option<SweepMember>,
) {
    let components = [Component::Api, Component::Trainer, Component::Env];
    store
        .create_run(&NewRun {
            id: id.clone(),
            environment: "digits@digits_env.py".to_owned(),
            config_path: config,
            api_port: ports.map(|(api, _)| api),
            trainer_port: ports.map(|(_, trainer)| trainer),
            logs: components
                .iter()
                .map(|component| (*component, dir.join(format!("{component}.log"))))
                .collect(),
            queued: false,
            max_active: None,
            resumed_from,
            sweep,
        })
        .unwrap();
    for component in components {
        store
            .record_component(id, component, None, ComponentStatus::Running)
            .unwrap();
        let next = match component {
            Component::Api => RunState::Starting(Phase::Trainer),
            Component::Trainer => RunState::Starting(Phase::Env),
            _ => RunState::Running,
        };
        store.transition(id, next, "").unwrap();
    }
}

/// Appends step `step`'s row to the run's metrics, as the trainer does.
pub(crate) fn write_step(home: &Path, step: usize) {
    let dir = run_dir(home, &RunId::parse(RUN).unwrap());
    let at = step as f64;
    let mut row = serde_json::json!({"step": step, "_timestamp": 1_795_000_000.0 + 30.0 * at,
        "reward/mean": 0.2 + 0.05 * at, "train/loss": 2.0 / at, "train/learning_rate": 0.01});
    // The anatomy rl's trainer logs: tokens, pace, each part's seconds, the cost.
    let parts = serde_json::json!({
        "tokens/prompt": 12_000, "tokens/sampled": 4_000, "tokens/trained": 15_000,
        "tokens/prompt_total": 12_000 * step, "tokens/sampled_total": 4_000 * step,
        "tokens/trained_total": 15_000 * step,
        "throughput/trained_tokens_per_sec": 500.0 + 40.0 * at,
        "throughput/sampled_tokens_per_sec": 150.0 + 10.0 * at,
        "time/total_secs": 30.0, "time/wait_secs": 12.0 - at, "time/logprobs_secs": 2.0,
        "time/rollouts_secs": 1.0, "time/forward_backward_secs": 8.0 + at,
        "time/optim_secs": 2.0, "time/save_secs": if step.is_multiple_of(3) { 4.0 } else { 0.0 },
        "time/sampler_update_secs": 1.5, "time/eval_secs": 0.0,
        "time/other_secs": if step.is_multiple_of(3) { -0.5 } else { 3.5 },
        "time/bottleneck": "wait", "time/bottleneck_share": 0.4,
        "cost/step": 0.03, "cost/total": 0.03 * at, "cost/estimate_at_completion": 0.36,
    });
    row.as_object_mut()
        .unwrap()
        .extend(parts.as_object().unwrap().clone());
    // Evaluated every 2 steps on held-out prompts, 4 completions each.
    if step.is_multiple_of(2) {
        let evaluation = serde_json::json!({
            "eval/mean_score": 0.3 + 0.02 * at, "eval/percent_correct": 30.0 + 2.0 * at,
            "eval/pass_at_1": 0.3 + 0.02 * at, "eval/pass_at_n": 0.6 + 0.03 * at,
            "eval/best_of_n": 0.6 + 0.03 * at, "eval/n": 4,
            "eval/mean_score_low": 0.2 + 0.02 * at, "eval/mean_score_high": 0.4 + 0.02 * at,
            "eval/pass_at_n_low": 0.5 + 0.03 * at, "eval/pass_at_n_high": 0.7 + 0.03 * at,
            "eval/best_of_n_low": 0.5 + 0.03 * at, "eval/best_of_n_high": 0.7 + 0.03 * at,
        });
        row.as_object_mut()
            .unwrap()
            .extend(evaluation.as_object().unwrap().clone());
    }
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
    // Where the time and money went: each step's parts, the pace, the totals and the cost.
    assert_eq!(page["anatomy"]["steps"].as_array().unwrap().len(), STEPS);
    assert_eq!(page["anatomy"]["parts"][0], "wait");
    assert_eq!(page["accounting"]["tokens"]["trained"], 15_000 * STEPS);
    assert_eq!(page["accounting"]["cost"]["currency"], "EUR", "{page}");
    // The algorithm its config sets (issue 43).
    assert_eq!(page["algorithm"]["loss"], "cispo", "{page}");
    assert_eq!(page["algorithm"]["clip_high"], 1.28, "{page}");
    assert_eq!(
        rows["runs"][0]["usage"]["tokens"]["trained"],
        15_000 * STEPS
    );
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
    // The page's own parameters survive the redirect (issue 30 #5), the token never.
    let (status, headers, _) = server.exchange(
        "GET",
        &format!("/runs/{RUN}?compare=ffffffff&token={TOKEN}&x=1"),
        &[HTML],
        "",
    );
    assert_eq!(status, 303, "{headers}");
    assert!(
        headers.contains(&format!("location: /runs/{RUN}?compare=ffffffff&x=1\r\n")),
        "{headers}"
    );
    let (status, headers, _) = server.exchange(
        "GET",
        &format!("//evil.example/?token={TOKEN}"),
        &[HTML],
        "",
    );
    assert_eq!(status, 303, "{headers}");
    assert!(
        headers.contains("location: /evil.example/\r\n"),
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

/// The step whose rollouts [`write_large_rollouts`] writes.
pub(crate) const LARGE_STEP: usize = 3;

/// Rollouts of step [`LARGE_STEP`] larger than rl ever reads of one step (issue 30 #6's 200 MB
/// file, in small: only the first `MAX_ROLLOUT_BYTES` are read), so each answer is megabytes.
pub(crate) fn write_large_rollouts(home: &Path) {
    let dir = run_dir(home, &RunId::parse(RUN).unwrap());
    let text = "w".repeat(15_000);
    let row = serde_json::json!({"group": 0, "index": 0, "prompt": text, "completion": text,
        "score": 1.0, "advantage": 0.0, "skipped": false});
    let line = format!("{row}\n");
    let rows = usize::try_from(rl_metrics::MAX_ROLLOUT_BYTES).unwrap() / line.len() * 3 / 2;
    std::fs::write(
        dir.join(format!("rollouts/step_{LARGE_STEP:06}.jsonl")),
        line.repeat(rows),
    )
    .unwrap();
}

/// A request whose answer's head is read and its body left in the connection: the status, the
/// head (lower-cased) and the connection, to read the rest from or to drop.
pub(crate) fn ask(
    server: &crate::serve::Server,
    path: &str,
) -> (u16, String, BufReader<TcpStream>) {
    let mut stream =
        TcpStream::connect_timeout(&server.address(), Duration::from_secs(10)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        server.address()
    )
    .unwrap();
    let mut reader = BufReader::new(stream);
    let mut head = String::new();
    loop {
        let mut line = String::new();
        assert!(
            reader.read_line(&mut line).unwrap() > 0,
            "no answer: {head}"
        );
        if line == "\r\n" {
            break;
        }
        head.push_str(&line.to_ascii_lowercase());
    }
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, head, reader)
}

/// A refusal because the server is busy: 503, JSON, and when to ask again.
#[track_caller]
fn assert_busy(head: &str, mut rest: BufReader<TcpStream>) {
    assert!(head.contains("retry-after: "), "{head}");
    assert!(head.contains("content-type: application/json"), "{head}");
    let mut body = String::new();
    rest.read_to_string(&mut body).unwrap();
    let body: Value = serde_json::from_str(&body).unwrap();
    assert!(body["error"].is_string(), "{body}");
}

/// Issue 30 #6: reads of run files are bounded. Clients that ask for megabytes and never read
/// them keep their reads under way; past the bound, the next is refused at once with 503 and
/// Retry-After, and the rest of the API still answers. Their reads end with their connections.
#[test]
fn reads_of_run_files_past_the_bound_are_refused_with_retry_after() {
    const CLIENTS: usize = 24;
    let server = Server::start(run_home(false), &[], &[]);
    write_large_rollouts(server.home());
    let rollouts = format!("/page/runs/{RUN}/rollouts/{LARGE_STEP}");
    let mut stalled = Vec::new();
    let refused = loop {
        assert!(
            stalled.len() < CLIENTS,
            "{CLIENTS} reads under way at once, none refused: reads are unbounded"
        );
        let (status, head, rest) = ask(&server, &rollouts);
        match status {
            200 => stalled.push(rest),
            503 => break (head, rest),
            other => panic!("{other}: {head}"),
        }
    };
    assert_busy(&refused.0, refused.1);
    // Every read of a run's files counts: the page's data, the API's status and metrics.
    for path in [
        format!("/page/runs/{RUN}"),
        "/page/runs".to_owned(),
        format!("/runs/{RUN}"),
        format!("/runs/{RUN}/metrics"),
        "/page/sweeps".to_owned(),
        "/page/sweeps/sw-0badc0de".to_owned(),
    ] {
        let (status, head, rest) = ask(&server, &path);
        assert_eq!(status, 503, "{path}: {head}");
        assert_busy(&head, rest);
    }
    // What reads no run file still answers, the page's shell included.
    crate::serve::expect(server.get("/runs"), 200);
    let (status, _, body) = server.exchange("GET", &format!("/runs/{RUN}"), &[HTML], "");
    assert_eq!(status, 200, "{body}");

    drop(stalled);
    let answered = (0..300).any(|_| {
        let (status, _, mut rest) = ask(&server, &rollouts);
        if status == 200 {
            let mut body = Vec::new();
            rest.read_to_end(&mut body).unwrap();
            let body: Value = serde_json::from_slice(&body).unwrap();
            assert!(body["truncated"] == true && !body["rows"].as_array().unwrap().is_empty());
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
        false
    });
    assert!(answered, "the reads of closed connections never ended");
}

/// Issue 30 #6: a hundred clients at once asking for a large rollouts file get it or a 503 with
/// Retry-After, and the server's memory stays within a bound (1.6 GB before, unbounded).
#[test]
fn a_hundred_reads_at_once_hold_bounded_memory() {
    const CLIENTS: usize = 100;
    /// Far above the bound's worst case (a few reads of 8 MB, each held a few times over),
    /// far below a hundred such reads.
    const MEMORY_LIMIT: u64 = 400 * 1024 * 1024;
    let server = Server::start(run_home(false), &[], &[]);
    write_large_rollouts(server.home());
    let rollouts = format!("/page/runs/{RUN}/rollouts/{LARGE_STEP}");
    let statuses: Vec<u16> = std::thread::scope(|scope| {
        let clients: Vec<_> = (0..CLIENTS)
            .map(|_| {
                scope.spawn(|| {
                    let (status, head, mut rest) = ask(&server, &rollouts);
                    match status {
                        200 => {
                            std::io::copy(&mut rest, &mut std::io::sink()).unwrap();
                        }
                        503 => assert_busy(&head, rest),
                        other => panic!("{other}: {head}"),
                    }
                    status
                })
            })
            .collect();
        clients
            .into_iter()
            .map(|client| client.join().unwrap())
            .collect()
    });
    assert!(statuses.contains(&200), "{statuses:?}");
    let peak = server.peak_memory();
    assert!(
        peak < MEMORY_LIMIT,
        "rl serve held {} MB at its peak for {CLIENTS} reads",
        peak / (1024 * 1024)
    );
}

/// Issue 34: the terminal shows where a run's time and money went — its totals, pace, each
/// part's share and the cost in `rl runs status`, its tokens and cost in `rl runs list`, and
/// `rl runs cost` sums them per environment and per day.
#[test]
fn the_terminal_shows_where_time_and_money_go() {
    let home = run_home(false);
    let rl = |args: &[&str]| {
        let output = crate::rl_in(home.path(), args);
        assert!(output.status.success(), "{args:?}: {output:?}");
        String::from_utf8(output.stdout).unwrap()
    };
    let status = rl(&["runs", "status", RUN, "--source", "file"]);
    for shown in [
        "tokens: 72.0k prompt · 24.0k sampled · 90.0k trained (to step 6)",
        "pace 740 trained/s, 210 sampled/s",
        "time: forward_backward 38% · wait 28%",
        "bottleneck: forward_backward (38% of the time)",
        "cost: 0.18 EUR so far, 0.36 EUR estimated at completion",
        "algorithm: loss cispo (clip 0.75..1.28), advantages std_floor, truncated penalty (band 64 tokens)",
    ] {
        assert!(status.contains(shown), "{shown}\n{status}");
    }
    let json: serde_json::Value =
        serde_json::from_str(&rl(&["--json", "runs", "status", RUN, "--source", "file"])).unwrap();
    assert_eq!(json["accounting"]["tokens"]["sampled"], 24_000, "{json}");
    // The latest evaluation (step 6) with its 95% intervals, in the table and the answer.
    let metrics = &json["metrics"];
    for (key, value) in [
        ("eval_pass_at_n", 0.78),
        ("eval_pass_at_n_low", 0.68),
        ("eval_pass_at_n_high", 0.88),
        ("eval_best_of_n_low", 0.68),
        ("eval_mean_score_high", 0.52),
        ("eval_n", 4.0),
    ] {
        let got = metrics[key].as_f64().unwrap_or(f64::NAN);
        assert!((got - value).abs() < 1e-9, "{key}: {metrics}");
    }
    assert!(
        status.contains("0.78 [0.68, 0.88]"),
        "the interval is not shown:\n{status}"
    );
    assert_eq!(json["accounting"]["bottleneck"]["part"], "forward_backward");
    assert_eq!(json["accounting"]["cost"]["currency"], "EUR");
    let algorithm = &json["algorithm"];
    assert_eq!(
        (
            &algorithm["loss"],
            &algorithm["clip_low"],
            &algorithm["clip_high"],
            &algorithm["dro_beta"],
            &algorithm["advantage_norm"],
            &algorithm["truncated"],
            &algorithm["overlong_band"]
        ),
        (
            &"cispo".into(),
            &0.75.into(),
            &1.28.into(),
            &serde_json::Value::Null,
            &"std_floor".into(),
            &"penalty".into(),
            &64.into()
        ),
        "{json}"
    );
    let results: serde_json::Value =
        serde_json::from_str(&rl(&["--json", "runs", "results", RUN, "--source", "file"])).unwrap();
    assert_eq!(results["accounting"]["tokens"]["trained"], 90_000);
    assert_eq!(results["history"].as_array().unwrap().len(), STEPS);

    let list = rl(&["runs", "list"]);
    assert!(
        list.contains("trained tokens") && list.contains("90.0k") && list.contains("0.18 EUR"),
        "{list}"
    );
    let listed: serde_json::Value = serde_json::from_str(&rl(&["--json", "runs", "list"])).unwrap();
    assert_eq!(listed["runs"][0]["usage"]["tokens"]["prompt"], 72_000);

    let cost: serde_json::Value = serde_json::from_str(&rl(&["--json", "runs", "cost"])).unwrap();
    assert_eq!(cost["total"]["tokens"]["trained"], 90_000, "{cost}");
    assert_eq!(cost["by_environment"][0]["key"], "digits@digits_env.py");
    assert_eq!(cost["currencies"], serde_json::json!(["EUR"]));
    let text = rl(&["runs", "cost", "--since", "2026-01-01"]);
    assert!(
        text.contains("day (UTC)") && text.contains("total"),
        "{text}"
    );
    let refused = crate::rl_in(home.path(), &["runs", "cost", "--since", "yesterday"]);
    assert!(!refused.status.success());
}
