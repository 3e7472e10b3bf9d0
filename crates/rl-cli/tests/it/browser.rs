//! The run pages as a person sees them: `rl serve` on loopback, headless Chromium driven over
//! the DevTools protocol (a websocket; the few commands used are written here). One chart per
//! series with every step's point, a step written meanwhile on the open page within seconds, a
//! rollout's `<script>` shown as text and never run, no console error; screenshots of both
//! pages are kept in `target/test-artifacts/`.

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tungstenite::stream::MaybeTlsStream;
use tungstenite::{Message, WebSocket};

use crate::pages::{
    HOSTILE_TEXT, LARGE_STEP, RUN, STEPS, ask, run_home, write_large_rollouts, write_step,
};
use crate::serve::Server;
use crate::workspace_root;

/// Longest wait for the browser to start, answer a command, or show something.
pub(crate) const PATIENCE: Duration = Duration::from_secs(30);

/// The flags a headless Chromium needs here: no sandbox (root), no GPU, and none of the
/// background connections this machine's closed network refuses.
const FLAGS: [&str; 8] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
];

fn chromium() -> PathBuf {
    std::env::var_os("RL_TEST_CHROMIUM").map_or_else(|| PathBuf::from("chromium"), PathBuf::from)
}

/// A headless Chromium with one page, its DevTools session, and the events seen so far. Its
/// process group is killed on drop.
pub(crate) struct Browser {
    child: Child,
    _profile: tempfile::TempDir,
    socket: WebSocket<MaybeTlsStream<TcpStream>>,
    session: String,
    next_id: u64,
    events: Vec<Value>,
}

impl Browser {
    pub(crate) fn open(url: &str) -> Self {
        let profile = tempfile::tempdir().unwrap();
        let mut child = Command::new(chromium())
            .args(FLAGS)
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .args([
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
            ])
            .arg("--window-size=1280,1600")
            .arg("about:blank")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start {}: {error}", chromium().display()));
        let (sender, lines) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        let started = Instant::now();
        let endpoint = loop {
            let line = lines
                .recv_timeout(PATIENCE.saturating_sub(started.elapsed()))
                .unwrap_or_else(|_| {
                    let _ = child.kill();
                    panic!("Chromium never said where its DevTools listen")
                });
            if let Some(endpoint) = line.strip_prefix("DevTools listening on ") {
                break endpoint.trim().to_owned();
            }
        };
        let (socket, _) = tungstenite::connect(endpoint.as_str()).unwrap();
        if let MaybeTlsStream::Plain(stream) = socket.get_ref() {
            stream
                .set_read_timeout(Some(Duration::from_millis(200)))
                .unwrap();
        }
        let mut browser = Self {
            child,
            _profile: profile,
            socket,
            session: String::new(),
            next_id: 0,
            events: Vec::new(),
        };
        let target = browser.call("Target.createTarget", json!({"url": "about:blank"}));
        let attached = browser.call(
            "Target.attachToTarget",
            json!({"targetId": target["targetId"], "flatten": true}),
        );
        attached["sessionId"]
            .as_str()
            .unwrap()
            .clone_into(&mut browser.session);
        for domain in ["Runtime.enable", "Log.enable", "Page.enable"] {
            browser.call(domain, json!({}));
        }
        browser.call("Page.navigate", json!({"url": url}));
        browser
    }

    /// One DevTools command (on the page once attached), and its result.
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({"id": id, "method": method});
        message["params"] = params;
        if !self.session.is_empty() {
            message["sessionId"] = Value::from(self.session.as_str());
        }
        self.socket
            .send(Message::text(message.to_string()))
            .unwrap();
        let started = Instant::now();
        while started.elapsed() < PATIENCE {
            let reply = match self.socket.read() {
                Ok(Message::Text(text)) => serde_json::from_str::<Value>(&text).unwrap(),
                Ok(_) => continue,
                Err(tungstenite::Error::Io(error))
                    if matches!(
                        error.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    continue;
                }
                Err(error) => panic!("DevTools: {error}"),
            };
            if reply["id"] == id {
                assert!(reply["error"].is_null(), "{method}: {reply}");
                return reply["result"].clone();
            }
            self.events.push(reply);
        }
        panic!("{method}: no answer within {PATIENCE:?}")
    }

    /// `expression`'s value in the page (promises awaited).
    pub(crate) fn eval(&mut self, expression: &str) -> Value {
        let result = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
        );
        assert!(
            result["exceptionDetails"].is_null(),
            "{expression}: {result}"
        );
        result["result"]["value"].clone()
    }

    /// Waits until `expression` is true in the page.
    pub(crate) fn wait_for(&mut self, expression: &str, within: Duration) -> Duration {
        let started = Instant::now();
        while started.elapsed() < within {
            if self.eval(expression) == Value::Bool(true) {
                return started.elapsed();
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "not true within {within:?}: {expression}\nthe page: {}",
            self.eval("document.body.innerText")
        )
    }

    /// What the page reported as an error: exceptions, `console.error`, and the browser's own
    /// log entries at error level (refused by the content security policy, failed loads).
    pub(crate) fn errors(&self) -> Vec<String> {
        self.events
            .iter()
            .filter(|event| match event["method"].as_str() {
                Some("Runtime.exceptionThrown") => true,
                Some("Runtime.consoleAPICalled") => {
                    matches!(event["params"]["type"].as_str(), Some("error" | "assert"))
                }
                Some("Log.entryAdded") => event["params"]["entry"]["level"] == "error",
                _ => false,
            })
            .map(ToString::to_string)
            .collect()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let group = nix::unistd::Pid::from_raw(i32::try_from(self.child.id()).unwrap());
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

/// A screenshot of `url`, as Chromium's command line takes it.
pub(crate) fn screenshot(url: &str, file: &Path) {
    let profile = tempfile::tempdir().unwrap();
    let output = Command::new(chromium())
        .args(FLAGS)
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(["--window-size=1280,1600", "--virtual-time-budget=4000"])
        .arg(format!("--screenshot={}", file.display()))
        .arg(url)
        .process_group(0)
        .output()
        .unwrap();
    assert!(
        output.status.success() && file.is_file(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
#[ignore = "needs Chromium: `cargo xtask test` runs it"]
fn the_run_page_shows_a_run_as_it_trains() {
    let server = Server::start(run_home(true), &[], &[]);
    let home = server.home().to_owned();
    let mut browser = Browser::open(&format!("{}/runs/{RUN}", server.url()));
    browser.wait_for(
        "document.querySelector('#app')?.dataset.drawn === 'true' && \
         document.querySelectorAll('figure.chart').length > 0",
        PATIENCE,
    );

    // One chart per series the run logged, each with every step's point.
    let charts = browser.eval(
        "JSON.stringify([...document.querySelectorAll('figure.chart')]\
         .map(f => [f.dataset.series, f.dataset.points || null]))",
    );
    let charts: Vec<(String, Option<String>)> =
        serde_json::from_str(charts.as_str().unwrap()).unwrap();
    let steps = STEPS.to_string();
    for series in ["reward_mean", "loss", "learning_rate"] {
        assert!(
            charts
                .iter()
                .any(|(name, points)| name == series && points.as_deref() == Some(&steps)),
            "{series}: {charts:?}"
        );
    }
    // The evaluations (every 2 steps): pass@n and best-of-n drawn, their titles naming n.
    let evaluated = (STEPS / 2).to_string();
    for series in ["eval_mean_score", "eval_pass_at_n", "eval_best_of_n"] {
        assert!(
            charts
                .iter()
                .any(|(name, points)| name == series && points.as_deref() == Some(&evaluated)),
            "{series}: {charts:?}"
        );
    }
    let titles = browser.eval(
        "JSON.stringify(['eval_pass_at_n', 'eval_best_of_n'].map(s => \
         document.querySelector(`figure.chart[data-series=${s}] figcaption`).textContent))",
    );
    assert_eq!(
        titles,
        "[\"eval/pass_at_n (pass@4)\",\"eval/best_of_n (best of 4)\"]"
    );
    // Each with its 95% interval as a band: two bounds' series in its legend.
    let bands = browser.eval(
        "JSON.stringify(['eval_mean_score', 'eval_pass_at_n', 'eval_best_of_n'].map(s => { \
         const f = document.querySelector(`figure.chart[data-series=${s}]`); \
         return [f.dataset.bands, [...f.querySelectorAll('.u-legend .u-series')] \
         .filter(e => e.textContent.includes('95%')).length]; }))",
    );
    assert_eq!(bands, "[[\"1\",2],[\"1\",2],[\"1\",2]]");
    // Each step's anatomy as a stacked bar, a colour per part with its legend, and the pace.
    let bars = browser.eval(
        "JSON.stringify([document.querySelectorAll('figure[data-series=anatomy] rect').length, \
         new Set([...document.querySelectorAll('figure[data-series=anatomy] rect')]\
         .map(r => r.getAttribute('fill'))).size, \
         document.querySelectorAll('figure[data-series=anatomy] ul.legend li').length, \
         document.querySelector('figure[data-series=throughput]')?.dataset.points])",
    );
    let (bars, colours, legend, paced): (usize, usize, usize, String) =
        serde_json::from_str(bars.as_str().unwrap()).unwrap();
    assert!(bars >= STEPS * 6, "{bars} bars");
    assert_eq!((colours, legend), (8, 8), "a colour per part timed");
    assert_eq!(paced, steps);
    assert!(
        browser
            .eval("document.querySelector('#cost').textContent")
            .as_str()
            .unwrap()
            .contains("EUR")
    );
    // The algorithm the run's config sets (issue 43), in its header.
    let algorithm = browser.eval("document.querySelector('#algorithm')?.textContent ?? ''");
    assert_eq!(
        algorithm,
        "Algorithm: loss cispo (clip 0.75..1.28), advantages std_floor, truncated penalty (band 64 tokens)"
    );
    let drawn = browser.eval("document.querySelectorAll('canvas').length");
    assert!(
        drawn.as_u64().unwrap() >= 4,
        "uPlot drew no canvas: {drawn}"
    );

    // A step written now shows on the open page by itself (it asks every 2 s), with no reload.
    write_step(&home, STEPS + 1);
    let waited = browser.wait_for(
        &format!(
            "document.querySelector('figure.chart[data-series=reward_mean]')\
             ?.dataset.points === '{}'",
            STEPS + 1
        ),
        Duration::from_secs(60),
    );
    assert!(waited < Duration::from_secs(60));

    // What a run wrote is shown as text, and never runs.
    browser.wait_for(
        "document.querySelector('#rollouts pre.prompt') !== null",
        PATIENCE,
    );
    let shown = browser.eval("document.querySelector('#rollouts pre.prompt').textContent");
    assert_eq!(shown, HOSTILE_TEXT);
    let injected = browser.eval(
        "document.querySelectorAll('#rollouts script, #rollouts img, #rollouts b, #logs img').length",
    );
    assert_eq!(injected, 0);
    assert_ne!(browser.eval("document.title"), "pwned");
    assert!(
        browser
            .eval("document.querySelector('#logs details[data-log=trainer] pre').textContent")
            .as_str()
            .unwrap()
            .contains(HOSTILE_TEXT)
    );

    let errors = browser.errors();
    assert!(errors.is_empty(), "the page reported errors: {errors:#?}");
    drop(browser);

    // A second run overlaid on the same charts (here the run itself: the same points twice).
    let mut compared = Browser::open(&format!("{}/runs/{RUN}?compare={RUN}", server.url()));
    compared.wait_for(
        "document.querySelector('figure.chart[data-series=reward_mean] .u-legend') !== null",
        PATIENCE,
    );
    let legend = compared.eval(
        "[...document.querySelectorAll('figure.chart[data-series=reward_mean] .u-legend .u-series')]\
         .map(s => s.textContent).join('|')",
    );
    assert!(
        legend.as_str().unwrap().contains(&format!("run {RUN}")),
        "no overlaid run in the legend: {legend}"
    );
    let errors = compared.errors();
    assert!(errors.is_empty(), "the page reported errors: {errors:#?}");

    let artifacts = workspace_root().join("target/test-artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    screenshot(&format!("{}/", server.url()), &artifacts.join("runs.png"));
    screenshot(
        &format!("{}/runs/{RUN}", server.url()),
        &artifacts.join("run.png"),
    );
}

/// Issue 41: a verifiers run's page says its kind, and a step's rows that carry their
/// conversation read as turns labelled by role (an assistant's tool call, the tool's result),
/// every text as text; the decoded tokens stay one click away.
#[test]
#[ignore = "needs Chromium: `cargo xtask test` runs it"]
fn a_verifiers_runs_rollouts_read_as_conversations() {
    let home = run_home(false);
    let dir = rl_settings::run_dir(home.path(), &rl_settings::RunId::parse(RUN).unwrap());
    let environment = json!({"environment": {"key": "unit-convert@unit_convert/unit_convert.py",
        "name": "unit-convert", "class_name": "UnitConvertTaskset", "file": "unit_convert/unit_convert.py",
        "environments_dir": "/envs", "kind": "verifiers-v1"}, "sha256": "00"});
    std::fs::write(dir.join("environment.json"), environment.to_string()).unwrap();
    let call = json!({"id": "call_1", "type": "function",
        "function": {"name": "convert", "arguments": "{\"value\": 3, \"from\": \"km\", \"to\": \"m\"}"}});
    let turns = json!([
        {"role": "system", "content": "Answer with the number only; use the convert tool."},
        {"role": "user", "content": "How many metres are 3 km?"},
        {"role": "assistant", "content": null, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "name": "convert", "content": HOSTILE_TEXT},
        {"role": "assistant", "content": "3000"},
    ]);
    let rows = [
        json!({"group": 0, "index": 0, "rollout": 0, "prompt": "tokens before", "completion": "3000",
            "score": 1.0, "advantage": 0.5, "skipped": false, "messages": turns}),
        json!({"group": 0, "index": 1, "rollout": 1, "prompt": "tokens before", "completion": "30",
            "score": 0.0, "advantage": -0.5, "skipped": false,
            "messages": [{"role": "user", "content": "How many metres are 3 km?"},
                         {"role": "assistant", "content": "30"}]}),
    ];
    let text = rows
        .iter()
        .fold(String::new(), |text, row| text + &row.to_string() + "\n");
    std::fs::write(dir.join("rollouts/step_000003.jsonl"), text).unwrap();
    let server = Server::start(home, &[], &[]);
    let mut browser = Browser::open(&format!("{}/runs/{RUN}", server.url()));
    browser.wait_for(
        "document.querySelectorAll('#rollouts .conversation').length === 2",
        PATIENCE,
    );
    assert_eq!(
        browser.eval("document.querySelector('#environment-kind')?.textContent"),
        "verifiers-v1"
    );
    let roles = browser.eval(
        "JSON.stringify([...document.querySelectorAll('#rollouts .turn')].map(t => t.dataset.role))",
    );
    assert_eq!(
        roles,
        json!([
            "system",
            "user",
            "assistant",
            "tool",
            "assistant",
            "user",
            "assistant"
        ])
        .to_string()
    );
    let call = browser.eval(
        "[...document.querySelectorAll('#rollouts .tool-call')].map(c => c.textContent).join('|')",
    );
    assert_eq!(
        call,
        "calls convert (call_1){\"value\": 3, \"from\": \"km\", \"to\": \"m\"}"
    );
    let result = browser
        .eval("document.querySelector('#rollouts .turn[data-role=tool] pre.content').textContent");
    assert_eq!(result, HOSTILE_TEXT);
    assert_eq!(
        browser.eval("document.querySelector('#rollouts .turn[data-role=tool] .role').textContent"),
        "tool · convert · → call_1"
    );
    assert_eq!(
        browser.eval("document.querySelectorAll('#rollouts script, #rollouts img').length"),
        0
    );
    assert_ne!(browser.eval("document.title"), "pwned");
    assert_eq!(
        browser
            .eval("document.querySelector('#rollouts details.decoded pre.completion').textContent"),
        "3000"
    );
    let errors = browser.errors();
    assert!(errors.is_empty(), "the page reported errors: {errors:#?}");
    drop(browser);

    // The list says the run's kind beside its environment.
    let mut list = Browser::open(&format!("{}/", server.url()));
    list.wait_for(
        &format!("document.querySelector('tr[data-run=\"{RUN}\"]') !== null"),
        PATIENCE,
    );
    assert_eq!(
        list.eval(&format!(
            "document.querySelector('tr[data-run=\"{RUN}\"] td:nth-child(3)').textContent"
        )),
        "digits@digits_env.py (verifiers-v1)"
    );
    drop(list);

    let artifacts = workspace_root().join("target/test-artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    screenshot(
        &format!("{}/runs/{RUN}", server.url()),
        &artifacts.join("run-verifiers.png"),
    );
}

/// Issue 30 #5: `?compare=` naming no run (none such, junk, a path) leaves the run drawn
/// whole, the overlay flagged beside its form; the only error is the compared run's failed
/// load.
#[test]
#[ignore = "needs Chromium: `cargo xtask test` runs it"]
fn a_compare_naming_no_run_still_draws_the_run() {
    let server = Server::start(run_home(false), &[], &[]);
    for compare in ["ffffffff", "junk%3Cb%3Ebold", "..%2F..%2Fetc"] {
        let mut browser = Browser::open(&format!("{}/runs/{RUN}?compare={compare}", server.url()));
        browser.wait_for(
            "document.querySelector('#app')?.dataset.ready !== undefined",
            PATIENCE,
        );
        assert_eq!(
            browser.eval("document.querySelector('#app').dataset.ready"),
            "true",
            "{compare}: {}",
            browser.eval("document.body.innerText")
        );
        let drawn = browser.eval(
            "JSON.stringify([document.querySelectorAll('figure.chart canvas').length, \
             document.querySelector('#checkpoints table') !== null])",
        );
        let (charts, checkpoints): (u64, bool) =
            serde_json::from_str(drawn.as_str().unwrap()).unwrap();
        assert!(
            charts >= 3 && checkpoints,
            "{compare}: the run is not drawn whole: {drawn}"
        );
        browser.wait_for(
            "document.querySelectorAll('#rollouts tr').length >= 2",
            PATIENCE,
        );
        let problem = browser.eval("document.querySelector('#compare-problem')?.textContent");
        assert!(
            problem
                .as_str()
                .is_some_and(|text| text.starts_with("Not overlaid: run ")),
            "{compare}: the overlay is not flagged: {problem}"
        );
        assert_eq!(
            browser.eval("document.querySelectorAll('#compare-problem b, .u-legend b').length"),
            0,
            "{compare}: the id is shown as text"
        );
        let legend = browser.eval(
            "[...document.querySelectorAll('figure.chart .u-legend .u-series')]\
             .map(s => s.textContent).join('|')",
        );
        assert!(
            !legend.as_str().unwrap().contains("run "),
            "{compare}: {legend}"
        );
        let errors: Vec<String> = browser
            .errors()
            .into_iter()
            .filter(|error| {
                !(error.contains("\"source\":\"network\"")
                    && error.contains(&format!("/page/runs/{compare}?")))
            })
            .collect();
        assert!(errors.is_empty(), "{compare}: {errors:#?}");
    }
    let artifacts = workspace_root().join("target/test-artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    screenshot(
        &format!("{}/runs/{RUN}?compare=ffffffff", server.url()),
        &artifacts.join("run-compare-unknown.png"),
    );
}

/// Issue 30 #6 seen from the page: a server busy with reads of run files answers the page's
/// first read 503 with Retry-After; the page asks again then, and draws once it is answered.
#[test]
#[ignore = "needs Chromium: `cargo xtask test` runs it"]
fn a_busy_server_delays_the_run_page_and_never_breaks_it() {
    let server = Server::start(run_home(false), &[], &[]);
    write_large_rollouts(server.home());
    // Clients that never read their answers hold every read until they go.
    let rollouts = format!("/page/runs/{RUN}/rollouts/{LARGE_STEP}");
    let mut stalled = Vec::new();
    while stalled.len() < 64 {
        let (status, head, rest) = ask(&server, &rollouts);
        if status == 503 {
            break;
        }
        assert_eq!(status, 200, "{head}");
        stalled.push(rest);
    }
    let mut browser = Browser::open(&format!("{}/runs/{RUN}", server.url()));
    browser.wait_for(
        &format!(
            "performance.getEntriesByType('resource')\
             .some(e => e.name.endsWith('/page/runs/{RUN}?since=0'))"
        ),
        PATIENCE,
    );
    assert_eq!(
        browser.eval("document.querySelector('#app').dataset.ready ?? 'waiting'"),
        "waiting",
        "the page gave up on a busy server"
    );
    drop(stalled);
    browser.wait_for(
        "document.querySelector('#app').dataset.ready === 'true' && \
         document.querySelectorAll('figure.chart canvas').length > 0",
        PATIENCE,
    );
    let errors: Vec<String> = browser
        .errors()
        .into_iter()
        .filter(|error| !(error.contains("\"source\":\"network\"") && error.contains(" 503 ")))
        .collect();
    assert!(errors.is_empty(), "the page reported errors: {errors:#?}");
}
