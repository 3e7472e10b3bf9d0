//! `rl serve`'s sweep page (`/sweeps/{id}`: the runs' curves overlaid, coloured by setting, and
//! the ranked table), the sweeps on the list page, and a run's lineage and sweep on its page:
//! over HTTP (which client gets a page, the data, the refusals, the token), then in headless
//! Chromium as `browser.rs` drives it. The sweep is made in the store directly, as its driver
//! leaves it, so no process of the fixture stack is needed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rl_process::{
    Lineage, LineageKind, NewSweep, ProcessIdentity, RunState, RunStore, SweepMember,
};
use rl_settings::{RunId, SweepId, Value, run_dir};
use serde_json::json;

use crate::pages::HOSTILE_TEXT;
use crate::serve::{Server, expect};
use crate::workspace_root;

/// The sweep the fixture homes hold.
const SWEEP: &str = "sw-5e7a11ce";
/// Its points' runs, in point order: group_size 2 or 4 × learning_rate 1e-4 or 3e-4.
const RUNS: [&str; 4] = ["a1000000", "a1000001", "a1000002", "a1000003"];
/// A run forked from the first point's run, out of the sweep.
const FORK: &str = "f0000001";
/// Steps in each run's metrics.
const STEPS: usize = 5;
/// The point whose run gets the highest reward (group_size 4, learning_rate 3e-4).
const BEST_POINT: usize = 3;

const HTML: (&str, &str) = ("Accept", "text/html,application/xhtml+xml,*/*;q=0.8");

/// A state directory with a 2×2 sweep whose four runs logged [`STEPS`] steps, and a fork of
/// its first run. With `going`, the best point is still queued (see [`start_best_point`]), so
/// the sweep is `running`; else it is `done`.
fn sweep_home(going: bool) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let mut store = RunStore::open(home.path()).unwrap();
    let grid = [
        ("group_size", vec![Value::Int(2), Value::Int(4)]),
        (
            "learning_rate",
            vec![Value::Float(1e-4), Value::Float(3e-4)],
        ),
    ];
    let metric = json!({"name": "reward", "lower_is_better": false});
    let going = going.then_some(BEST_POINT);
    add_sweep(&mut store, home.path(), SWEEP, &grid, &metric, &RUNS, going);
    let fork = Lineage {
        parent: RunId::parse(RUNS[0]).unwrap(),
        step: 2,
        kind: LineageKind::Fork,
        changes: BTreeMap::from([("learning_rate".to_owned(), Value::Float(5e-4))]),
    };
    make_run(&mut store, home.path(), FORK, None, Some(fork), false);
    home
}

/// A sweep ranked by the trainer's loss, the lowest first, both runs done; its second
/// setting's one value is text that would run as a script if a page rendered it as HTML.
const LOSS_SWEEP: &str = "sw-10550000";
const LOSS_RUNS: [&str; 2] = ["b1000000", "b1000001"];

fn add_loss_sweep(home: &Path) {
    let mut store = RunStore::open(home).unwrap();
    let grid = [
        (
            "learning_rate",
            vec![Value::Float(1e-4), Value::Float(3e-4)],
        ),
        ("note", vec![Value::Str(HOSTILE_TEXT.to_owned())]),
    ];
    let metric = json!({"name": "train/loss", "lower_is_better": true});
    add_sweep(
        &mut store, home, LOSS_SWEEP, &grid, &metric, &LOSS_RUNS, None,
    );
}

/// The sweep `id` over `grid` (each setting's values), its points' runs `runs` logging
/// [`STEPS`] steps; the last point, when it is `queued`, left in the queue (its driver this
/// test process), so the sweep is `running`; else it is `done`.
fn add_sweep(
    store: &mut RunStore,
    home: &Path,
    id: &str,
    grid: &[(&str, Vec<Value>)],
    metric: &serde_json::Value,
    runs: &[&str],
    queued: Option<usize>,
) {
    let me = ProcessIdentity::of(std::process::id()).unwrap();
    let sweep = SweepId::parse(id).unwrap();
    let mut points = vec![BTreeMap::new()];
    for (field, values) in grid {
        points = points
            .into_iter()
            .flat_map(|point: BTreeMap<String, Value>| {
                values.iter().map(move |value| {
                    let mut point = point.clone();
                    point.insert((*field).to_owned(), value.clone());
                    point
                })
            })
            .collect();
    }
    assert_eq!(points.len(), runs.len());
    // What rl-tools' `SweepSpec` reads: each point's checked settings, in the grid's order (the
    // answers read the grid off them).
    let settings: Vec<serde_json::Value> = points
        .iter()
        .map(|point| {
            let point: Vec<serde_json::Value> = grid
                .iter()
                .map(|(field, _)| json!({"section": "env", "field": field, "value": point[*field]}))
                .collect();
            json!(point)
        })
        .collect();
    let spec = json!({
        "selection": {
            "environment": {"key": "digits@digits_env.py", "name": "digits",
                "class_name": "DigitsEnv", "file": "digits_env.py", "environments_dir": "/nowhere"},
            "wandb_name": "digits-20261126-000000", "selected_at": "2026-11-26T00:00:00Z",
            "edits": []
        },
        "points": settings,
        "caps": {},
        "metric": metric,
        "tinker_atropos_root": null,
        "environments_dir": null
    });
    store
        .create_sweep(
            &NewSweep {
                id: sweep.clone(),
                environment: "digits@digits_env.py".to_owned(),
                max_parallel: u32::try_from(runs.len()).unwrap(),
                spec: spec.to_string(),
                points,
            },
            None,
        )
        .unwrap();
    // A live driver: `rl serve` gives a running sweep without one a new driver as it starts.
    assert!(store.claim_sweep_driver(&sweep, me).unwrap());
    for (point, run) in runs.iter().enumerate() {
        if queued == Some(point) {
            break;
        }
        start_point(store, home, &sweep, point, run, false);
    }
    assert_eq!(
        store.finish_sweep_if_done(&sweep).unwrap(),
        queued.is_none()
    );
}

/// The next queued point of `sweep`, `point`, taken and its run made (still going, or
/// completed), its [`STEPS`] steps logged.
fn start_point(
    store: &mut RunStore,
    home: &Path,
    sweep: &SweepId,
    point: usize,
    run: &str,
    going: bool,
) {
    let taken = store.take_sweep_point(sweep).unwrap().unwrap();
    assert_eq!(usize::try_from(taken.index).unwrap(), point);
    let member = SweepMember {
        sweep: sweep.clone(),
        point: taken.index,
    };
    make_run(store, home, run, Some(member), None, going);
    for step in 1..=STEPS {
        write_step(home, run, point, step);
    }
}

/// The queued best point of [`sweep_home`]`(true)` started now, its run going.
fn start_best_point(home: &Path) {
    let mut store = RunStore::open(home).unwrap();
    let sweep = SweepId::parse(SWEEP).unwrap();
    start_point(&mut store, home, &sweep, BEST_POINT, RUNS[BEST_POINT], true);
}

/// A run as its supervisor leaves it: running (supervised by this process) or completed.
fn make_run(
    store: &mut RunStore,
    home: &Path,
    run: &str,
    sweep: Option<SweepMember>,
    resumed_from: Option<Lineage>,
    going: bool,
) {
    let id = RunId::parse(run).unwrap();
    let dir = run_dir(home, &id);
    std::fs::create_dir_all(&dir).unwrap();
    let config: PathBuf = dir.join("config.yaml");
    std::fs::write(
        &config,
        "env:\n  total_steps: 8\n  use_wandb: false\nopenai: []\ntinker:\n  currency: EUR\n  \
         price_trained_per_million: 2.0\nslurm: false\ntesting: false\n",
    )
    .unwrap();
    crate::pages::record_running(store, &id, &dir, config, None, resumed_from, sweep);
    if going {
        let me = ProcessIdentity::of(std::process::id()).unwrap();
        store.set_supervisor(&id, me).unwrap();
    } else {
        store
            .transition(&id, RunState::Completed, "the trainer finished")
            .unwrap();
    }
}

/// Step `step` of the run of point `point`: each point's reward climbs at its own pace (the
/// best point's fastest), with tokens and cost; point 2 evaluated at step 4.
fn write_step(home: &Path, run: &str, point: usize, step: usize) {
    let dir = run_dir(home, &RunId::parse(run).unwrap());
    let at = step as f64;
    let pace = [0.02, 0.05, 0.08, 0.12][point];
    let mut row = json!({"step": step, "_timestamp": 1_795_000_000.0 + 30.0 * at,
        "reward/mean": 0.1 + pace * at, "train/loss": 2.0 / at + 0.1 * point as f64,
        "tokens/prompt_total": 1_000 * step, "tokens/sampled_total": 500 * step,
        "tokens/trained_total": 1_200 * step, "cost/total": 0.01 * at});
    if point == 2 && step == 4 {
        row["eval/mean_score"] = json!(0.55);
        row["eval/mean_score_low"] = json!(0.45);
        row["eval/mean_score_high"] = json!(0.65);
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("metrics.jsonl"))
        .unwrap();
    std::io::Write::write_all(&mut file, format!("{row}\n").as_bytes()).unwrap();
}

/// What the browser test reads of the sweep page.
#[derive(Debug, serde::Deserialize)]
struct Seen {
    /// Runs drawn on the reward chart.
    runs: String,
    /// The reward chart's series names, the step's left out.
    legend: Vec<String>,
    /// The table's points, top to bottom.
    order: Vec<String>,
    /// Each row's colour.
    swatches: Vec<String>,
    best_link: String,
    best_row: String,
    /// Point 2's row, the one evaluated.
    evaluated: String,
    metric_charts: usize,
}

#[track_caller]
fn assert_page(status: u16, headers: &str, body: &str) {
    assert_eq!(status, 200, "{body}");
    assert!(headers.contains("content-type: text/html"), "{headers}");
    assert!(
        headers.contains("content-security-policy: default-src 'none'; script-src 'self';"),
        "{headers}"
    );
}

/// A browser gets the sweep page at `/sweeps/{id}`, its data is JSON at `/page/sweeps/{id}`,
/// the list's at `/page/sweeps`; an id that is no sweep's is the not-found page (404), a
/// malformed one refused; a run's page data carries its lineage and its sweep.
#[test]
fn a_browser_gets_the_sweep_page_and_its_data() {
    let server = Server::start(sweep_home(false), &[], &[]);
    let (status, headers, body) = server.exchange("GET", &format!("/sweeps/{SWEEP}"), &[HTML], "");
    assert_page(status, &headers, &body);
    assert!(body.contains("data-page=\"sweep\""), "{body}");
    assert!(body.contains(&format!("data-sweep=\"{SWEEP}\"")), "{body}");
    assert!(
        body.contains("src=\"/assets/common.js\"") && body.contains("src=\"/assets/sweep.js\""),
        "{body}"
    );
    // The API's JSON, unchanged, for a client that does not ask for HTML.
    let json = expect(server.get(&format!("/sweeps/{SWEEP}")), 200);
    assert!(json.to_string().contains(SWEEP), "{json}");
    for missing in [
        "/sweeps/sw-0badc0de",
        "/sweeps/sw-NOTHEX12",
        "/sweeps/5e7a11ce",
        "/sweeps/..%2Fetc",
    ] {
        let (status, headers, body) = server.exchange("GET", missing, &[HTML], "");
        assert_eq!(status, 404, "{missing}: {body}");
        assert!(headers.contains("content-type: text/html"), "{headers}");
        assert!(!body.contains("<script"), "{missing}: {body}");
    }
    for script in ["/assets/sweep.js", "/assets/common.js", "/assets/app.js"] {
        let (status, headers, _) = server.exchange("GET", script, &[], "");
        assert_eq!(status, 200, "{script}");
        assert!(
            headers.contains("content-type: text/javascript"),
            "{headers}"
        );
    }

    let page = expect(server.get(&format!("/page/sweeps/{SWEEP}")), 200);
    let sweep = &page["sweep"];
    assert_eq!(sweep["sweep_id"], SWEEP);
    assert_eq!(sweep["state"], "done", "{page}");
    assert_eq!(sweep["rows"].as_array().unwrap().len(), RUNS.len());
    assert_eq!(sweep["rows"][0]["run_id"], RUNS[BEST_POINT], "best first");
    assert_eq!(sweep["rows"][0]["best"], true);
    assert_eq!(sweep["best_run_id"], RUNS[BEST_POINT]);
    assert_eq!(sweep["grid"][1]["field"], "learning_rate");
    let curves = page["curves"].as_array().unwrap();
    assert_eq!(curves.len(), RUNS.len(), "{page}");
    assert!(
        curves
            .iter()
            .all(|curve| curve["steps"].as_array().unwrap().len() == STEPS)
    );
    let evaluated = sweep["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["point"] == 2)
        .unwrap();
    assert_eq!(evaluated["held_out"]["low"], 0.45, "{evaluated}");
    assert_eq!(
        evaluated["usage"]["tokens"]["trained"],
        1_200 * STEPS,
        "{evaluated}"
    );

    let listed = expect(server.get("/page/sweeps"), 200);
    assert_eq!(listed["count"], 1, "{listed}");
    assert_eq!(listed["sweeps"][0]["sweep_id"], SWEEP);
    assert_eq!(listed["sweeps"][0]["run_ids"].as_array().unwrap().len(), 4);

    expect(server.get("/page/sweeps/sw-0badc0de"), 404);
    expect(server.get("/page/sweeps/sw-NOTHEX12"), 400);
    expect(server.get("/page/sweeps/5e7a11ce"), 400);
    let refused = server.exchange(
        "POST",
        &format!("/page/sweeps/{SWEEP}"),
        &[("Content-Type", "application/json")],
        "{}",
    );
    assert_eq!(refused.0, 405, "{refused:?}");

    // A run's lineage and sweep, in its page's data.
    let fork = expect(server.get(&format!("/page/runs/{FORK}")), 200);
    let from = &fork["run"]["resumed_from"];
    assert_eq!(from["run_id"], RUNS[0], "{fork}");
    assert_eq!(from["kind"], "fork");
    assert_eq!(from["step"], 2);
    assert_eq!(from["changes"]["learning_rate"], 5e-4);
    assert!(fork["run"]["sweep_id"].is_null(), "{}", fork["run"]);
    let member = expect(server.get(&format!("/page/runs/{}", RUNS[0])), 200);
    assert_eq!(member["run"]["sweep_id"], SWEEP, "{}", member["run"]);
}

/// Remote, the sweep page follows the run pages' token rules: opened once with `?token=`, then
/// read with the cookie; without either, refused.
#[test]
fn the_sweep_page_keeps_the_token_rules() {
    const TOKEN: &str = "sweep-page-token-0123";
    let server = Server::start(
        sweep_home(false),
        &["--token-env", "RL_PAGE_TOKEN"],
        &[("RL_PAGE_TOKEN", TOKEN)],
    );
    let page = format!("/sweeps/{SWEEP}");
    let data = format!("/page/sweeps/{SWEEP}");
    assert_eq!(server.exchange("GET", &page, &[HTML], "").0, 401);
    assert_eq!(server.exchange("GET", &data, &[], "").0, 401);
    assert_eq!(server.exchange("GET", "/page/sweeps", &[], "").0, 401);
    let (status, headers, _) =
        server.exchange("GET", &format!("{page}?token={TOKEN}"), &[HTML], "");
    assert_eq!(status, 303, "{headers}");
    assert!(
        headers.contains(&format!("location: {page}\r\n")),
        "{headers}"
    );
    let cookie = format!("rl_token={TOKEN}");
    let (status, headers, body) =
        server.exchange("GET", &page, &[HTML, ("Cookie", cookie.as_str())], "");
    assert_page(status, &headers, &body);
    for path in [data.as_str(), "/page/sweeps"] {
        let (status, _, body) = server.exchange("GET", path, &[("Cookie", cookie.as_str())], "");
        assert_eq!(status, 200, "{path}: {body}");
    }
    let bearer = format!("Bearer {TOKEN}");
    let (status, _, body) =
        server.exchange("GET", &data, &[("Authorization", bearer.as_str())], "");
    assert_eq!(status, 200, "{body}");
}

/// The tests that drive Chromium: the `browser` segment of their path is what `cargo xtask
/// test` leaves out where there is none.
mod browser {
    use super::*;
    use crate::browser::{Browser, PATIENCE, screenshot};

    /// The sweep page as a person sees it: a chart of every run's reward, one series per run
    /// named by its settings, each run's colour its settings' (the table's swatches match), the
    /// table best first with its links, held-out interval, tokens and cost; a run started and a
    /// step written meanwhile show by themselves. The list links the sweep, a fork's page names its parent and
    /// what it changed, a point's run its sweep. No console error; screenshots kept.
    #[test]
    #[ignore = "needs Chromium: `cargo xtask test` runs it"]
    fn the_sweep_page_overlays_its_runs_coloured_by_setting() {
        let server = Server::start(sweep_home(true), &[], &[]);
        let home = server.home().to_owned();
        let mut browser = Browser::open(&format!("{}/sweeps/{SWEEP}", server.url()));
        browser.wait_for(
            "document.querySelector('#app')?.dataset.drawn === 'true' && \
             document.querySelector('figure.chart[data-series=reward] canvas') !== null",
            PATIENCE,
        );
        let seen = browser.eval(
            "JSON.stringify({runs: document.querySelector('figure[data-series=reward]').dataset.runs, \
             legend: [...document.querySelectorAll('figure[data-series=reward] .u-legend .u-series')]\
             .slice(1).map(s => s.textContent), \
             order: [...document.querySelectorAll('#table tbody tr')].map(r => r.dataset.point), \
             swatches: [...document.querySelectorAll('#table td.settings .swatch')]\
             .map(s => s.style.background), \
             best_link: document.querySelector('#table tr.best a')?.getAttribute('href'), \
             best_row: document.querySelector('#table tr.best')?.textContent, \
             evaluated: document.querySelector('#table tr[data-point=\"2\"]')?.textContent, \
             metric_charts: document.querySelectorAll('figure[data-series=metric]').length})",
        );
        let seen: Seen = serde_json::from_str(seen.as_str().unwrap()).unwrap();
        // The best point still waits: three runs drawn, its row last, queued, with its colour.
        assert_eq!(seen.runs, (RUNS.len() - 1).to_string());
        assert_eq!(seen.legend.len(), RUNS.len() - 1, "{seen:?}");
        assert!(
            seen.legend
                .iter()
                .any(|name| name.contains("group_size=4, learning_rate=0.0001 (a1000002)")),
            "{seen:?}"
        );
        assert_eq!(
            seen.order,
            ["2", "1", "0", "3"],
            "best first, the queued last"
        );
        let distinct: std::collections::BTreeSet<&String> = seen.swatches.iter().collect();
        assert_eq!(distinct.len(), RUNS.len(), "a colour per point: {seen:?}");
        assert_eq!(seen.best_link, format!("/runs/{}", RUNS[2]));
        assert!(
            seen.best_row.contains("best") && seen.best_row.contains("EUR"),
            "{seen:?}"
        );
        assert!(seen.evaluated.contains("0.55 [0.45, 0.65] @ 4"), "{seen:?}");
        assert_eq!(seen.metric_charts, 0, "ranked by reward: one chart");
        assert!(
            browser
                .eval("document.querySelector('#table tr[data-point=\"3\"]').textContent")
                .as_str()
                .unwrap()
                .contains("queued")
        );

        // Its run starts: the open page draws it by itself, and ranks it first.
        start_best_point(&home);
        browser.wait_for(
            "document.querySelector('figure[data-series=reward]')?.dataset.runs === '4' && \
             document.querySelector('#table tbody tr')?.dataset.point === '3'",
            Duration::from_secs(60),
        );
        let legend = browser.eval(
            "[...document.querySelectorAll('figure[data-series=reward] .u-legend .u-series')]\
             .map(s => s.textContent).join('|')",
        );
        assert!(
            legend
                .as_str()
                .unwrap()
                .contains("group_size=4, learning_rate=0.0003 (a1000003)"),
            "{legend}"
        );
        assert_eq!(
            browser.eval("document.querySelector('#table tr.best a').getAttribute('href')"),
            format!("/runs/{}", RUNS[BEST_POINT])
        );

        // A step of the going run shows on the open page by itself.
        write_step(&home, RUNS[BEST_POINT], BEST_POINT, STEPS + 1);
        browser.wait_for(
            &format!(
                "document.querySelector('#table tr[data-point=\"{BEST_POINT}\"] td:nth-child(5)')\
                 ?.textContent === '{}'",
                STEPS + 1
            ),
            Duration::from_secs(60),
        );
        let errors = browser.errors();
        assert!(errors.is_empty(), "the page reported errors: {errors:#?}");
        drop(browser);

        // Ranked by another figure than the reward: its chart too, its column, the lowest first.
        add_loss_sweep(&home);
        let mut loss = Browser::open(&format!("{}/sweeps/{LOSS_SWEEP}", server.url()));
        loss.wait_for(
            "document.querySelector('#app')?.dataset.ready === 'true'",
            PATIENCE,
        );
        let seen = loss.eval(
            "JSON.stringify([document.querySelector('figure[data-series=metric]')?.dataset.runs, \
             document.querySelector('figure[data-series=metric] figcaption')?.textContent, \
             [...document.querySelectorAll('#table th')].map(h => h.textContent).join('|'), \
             [...document.querySelectorAll('#table tbody tr')].map(r => r.dataset.point).join()])",
        );
        let (runs, caption, headings, order): (String, String, String, String) =
            serde_json::from_str(seen.as_str().unwrap()).unwrap();
        assert_eq!(runs, LOSS_RUNS.len().to_string());
        assert_eq!(caption, "train/loss by step (lower is better)");
        assert!(headings.contains("|train/loss|"), "{headings}");
        assert_eq!(order, "0,1", "the lowest loss first");
        // Settings are shown as text, and never run.
        let shown = loss.eval("document.querySelector('#table td.settings').textContent");
        assert!(shown.as_str().unwrap().contains(HOSTILE_TEXT), "{shown}");
        assert_eq!(
            loss.eval("document.querySelectorAll('#app script, #app img, #app b').length"),
            0
        );
        assert_ne!(loss.eval("document.title"), "pwned");
        let errors = loss.errors();
        assert!(errors.is_empty(), "the page reported errors: {errors:#?}");
        drop(loss);

        let mut fork = Browser::open(&format!("{}/runs/{FORK}", server.url()));
        fork.wait_for(
            "document.querySelector('#app')?.dataset.ready === 'true'",
            PATIENCE,
        );
        let lineage = fork.eval(
            "JSON.stringify([document.querySelector('#lineage')?.textContent, \
             document.querySelector('#lineage a')?.getAttribute('href')])",
        );
        let (text, link): (String, String) =
            serde_json::from_str(lineage.as_str().unwrap()).unwrap();
        assert_eq!(
            text,
            format!(
                "forked from run {} at step 2: learning_rate=0.0005",
                RUNS[0]
            )
        );
        assert_eq!(link, format!("/runs/{}", RUNS[0]));
        let errors = fork.errors();
        assert!(errors.is_empty(), "the page reported errors: {errors:#?}");
        drop(fork);

        let mut member = Browser::open(&format!("{}/runs/{}", server.url(), RUNS[0]));
        member.wait_for(
            &format!(
                "document.querySelector('#sweep a')?.getAttribute('href') === '/sweeps/{SWEEP}'"
            ),
            PATIENCE,
        );
        drop(member);

        let mut list = Browser::open(&format!("{}/", server.url()));
        list.wait_for(
            &format!("document.querySelector('#sweeps a[href=\"/sweeps/{SWEEP}\"]') !== null"),
            PATIENCE,
        );
        let errors = list.errors();
        assert!(errors.is_empty(), "the page reported errors: {errors:#?}");
        drop(list);

        let artifacts = workspace_root().join("target/test-artifacts");
        std::fs::create_dir_all(&artifacts).unwrap();
        screenshot(
            &format!("{}/sweeps/{SWEEP}", server.url()),
            &artifacts.join("sweep.png"),
        );
        screenshot(
            &format!("{}/sweeps/{LOSS_SWEEP}", server.url()),
            &artifacts.join("sweep-loss.png"),
        );
        screenshot(
            &format!("{}/runs/{FORK}", server.url()),
            &artifacts.join("run-fork.png"),
        );
        screenshot(
            &format!("{}/", server.url()),
            &artifacts.join("runs-and-sweeps.png"),
        );
    }
}
