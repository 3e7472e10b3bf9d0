//! Sweeps as a user runs them: a 2×2 grid of the RL algorithm (`loss` × `kl_coef`, issue 43)
//! trained on the local engine two runs at a time, one run's supervisor killed mid-way while
//! the others go on and the queue starts; a sweep
//! whose driver is killed driven again by the next `rl` command; the sweep over HTTP.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::runs::{Stack, assert_nothing_left};
use crate::serve::{Server, expect, stack_home};
use crate::test_python;
use crate::training::stack;

/// The losses the sweep's grid tries, each against `kl_coef` 0 and 0.1.
const SWEPT_LOSSES: [&str; 2] = ["ppo", "cispo"];

fn rows(view: &Value) -> &Vec<Value> {
    view["rows"].as_array().unwrap()
}

fn is_going(row: &Value) -> bool {
    row["run_id"].is_string()
        && !matches!(
            row["state"].as_str().unwrap_or_default(),
            "completed" | "stopped" | "failed" | "lost" | "capped"
        )
}

fn kill(pid: u64) {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
}

/// Follows the sweep until it is done, checking at every look that no more than `bound` of
/// its runs go at once; `each` sees every look.
fn follow(
    stack: &Stack,
    sweep: &str,
    bound: usize,
    limit: Duration,
    mut each: impl FnMut(&Value),
) -> Value {
    let started = Instant::now();
    loop {
        let view = stack.json(&["sweep", "status", sweep]);
        let going = rows(&view).iter().filter(|row| is_going(row)).count();
        assert!(going <= bound, "{going} runs at once: {view:#}");
        each(&view);
        if view["state"] != "running" {
            return view;
        }
        assert!(
            started.elapsed() < limit,
            "sweep {sweep} did not end in {limit:?}: {view:#}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// No instant had more than `bound` of the runs between their creation and their end (the
/// store's times: a check that a look every half second cannot miss).
fn never_more_than(stack: &Stack, run_ids: &[String], bound: usize) {
    let spans: Vec<(String, String)> = run_ids
        .iter()
        .map(|id| {
            let status = stack.json(&["runs", "status", id]);
            (
                status["created_at"].as_str().unwrap().to_owned(),
                status["updated_at"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    for (start, _) in &spans {
        let at_once = spans
            .iter()
            .filter(|(created, ended)| created <= start && ended > start)
            .count();
        assert!(
            at_once <= bound,
            "{at_once} runs at once at {start}: {spans:?}"
        );
    }
}

#[test]
#[ignore = "needs the test venv and the local engine: `cargo xtask test` runs it"]
fn a_sweep_trains_its_grid_two_at_a_time_through_a_killed_supervisor_and_ranks_it() {
    let (stack, _engine) = stack(&[("total_steps = 12", "total_steps = 3")]);
    let started = stack.json(&[
        "sweep",
        "start",
        "--set",
        &format!("loss={}", SWEPT_LOSSES.join(",")),
        "--set",
        "kl_coef=0,0.1",
        "--max-parallel",
        "2",
    ]);
    let sweep = started["sweep_id"].as_str().unwrap().to_owned();
    assert_eq!(started["sweep"]["started"], 2, "{started:#}");
    assert_eq!(started["sweep"]["waiting"], 2, "{started:#}");

    // Once the first two train, the supervisor of one that has a step's reward is killed: its
    // run is lost (ranked by the reward it reached), the other goes on, and the queue's two
    // start as places free.
    let mut killed: Option<String> = None;
    let ended = follow(&stack, &sweep, 2, Duration::from_secs(1500), |view| {
        if killed.is_some() {
            return;
        }
        let mut running: Vec<&Value> = rows(view)
            .iter()
            .filter(|row| row["state"] == "running")
            .collect();
        running.sort_by_key(|row| row["reward"].is_null());
        if running.len() == 2 && running[0]["reward"].is_number() {
            let victim = running[0]["run_id"].as_str().unwrap().to_owned();
            let status = stack.json(&["runs", "status", &victim]);
            kill(status["supervisor"]["pid"].as_u64().unwrap());
            killed = Some(victim);
        }
    });
    let killed = killed.expect("two runs of the sweep never trained at once");
    assert_eq!(ended["state"], "done", "{ended:#}");
    let run_ids: Vec<String> = rows(&ended)
        .iter()
        .map(|row| row["run_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(run_ids.len(), 4, "{ended:#}");
    for row in rows(&ended) {
        let expected = if row["run_id"] == killed.as_str() {
            "lost"
        } else {
            "completed"
        };
        assert_eq!(
            row["state"],
            expected,
            "{}",
            stack.explain(row["run_id"].as_str().unwrap())
        );
    }
    never_more_than(&stack, &run_ids, 2);
    // Each run trained with its point's settings, and its status says so.
    for row in rows(&ended) {
        let id = row["run_id"].as_str().unwrap();
        let config = std::fs::read_to_string(stack.run_dir(id).join("config.yaml")).unwrap();
        let algorithm = &stack.json(&["runs", "status", id])["algorithm"];
        for (field, value) in row["settings"].as_object().unwrap() {
            let text = value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_owned);
            assert!(
                config.contains(&format!("{field}: {text}")),
                "{id} lacks {field}: {text}\n{config}"
            );
            let shown = &algorithm[field.as_str()];
            if value.is_number() {
                assert_eq!(shown.as_f64(), value.as_f64(), "{id}: {algorithm:#}");
            } else {
                assert_eq!(shown, value, "{id}: {algorithm:#}");
            }
        }
    }

    // The results rank the runs that reached a reward, the best first and marked.
    let results = stack.json(&["sweep", "results", &sweep]);
    let ranked: Vec<&Value> = rows(&results)
        .iter()
        .filter(|row| row["rank"].is_u64())
        .collect();
    assert_eq!(ranked.len(), 4, "every run reached a reward: {results:#}");
    for (place, row) in ranked.iter().enumerate() {
        assert_eq!(row["rank"], place + 1, "{results:#}");
    }
    for pair in ranked.windows(2) {
        assert!(
            pair[0]["metric"].as_f64() >= pair[1]["metric"].as_f64(),
            "{results:#}"
        );
    }
    assert_eq!(results["best_run_id"], ranked[0]["run_id"], "{results:#}");
    assert_eq!(ranked[0]["best"], true);
    let table = stack.rl(&["sweep", "results", &sweep]);
    assert!(String::from_utf8_lossy(&table.stdout).contains("best"));
    for id in &run_ids {
        assert_nothing_left(&stack, id);
    }
}

/// The fixture stack with a sweep of two group sizes started, one run at a time.
fn one_at_a_time() -> (Stack, Value) {
    let stack = Stack::new(&test_python(), &[]);
    let started = stack.json(&[
        "sweep",
        "start",
        "--set",
        "group_size=2,4",
        "--max-parallel",
        "1",
    ]);
    (stack, started)
}

/// The processes driving sweep `sweep`.
fn drivers_of(sweep: &str) -> Vec<(u32, String)> {
    rl_test_support::processes_mentioning(&format!("drive {sweep}"))
}

#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn a_sweep_whose_driver_is_killed_is_driven_again_by_the_next_command() {
    let (stack, started) = one_at_a_time();
    let sweep = started["sweep_id"].as_str().unwrap().to_owned();
    assert_eq!(started["sweep"]["started"], 1, "{started:#}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut drivers = drivers_of(&sweep);
    while drivers.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        drivers = drivers_of(&sweep);
    }
    for (pid, _) in &drivers {
        kill(u64::from(*pid));
    }
    assert!(!drivers.is_empty(), "no driver of {sweep} ever ran");
    // The next command (any) gives the sweep a new driver, which goes on with its queue.
    stack.json(&["runs", "list"]);
    let killed: Vec<u32> = drivers.iter().map(|(pid, _)| *pid).collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !drivers_of(&sweep)
        .iter()
        .any(|(pid, _)| !killed.contains(pid))
    {
        assert!(Instant::now() < deadline, "no new driver of {sweep}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let view = follow(&stack, &sweep, 1, Duration::from_secs(300), |_| {});
    assert_eq!(view["state"], "done", "{view:#}");
    assert!(
        rows(&view).iter().all(|row| row["state"] == "completed"),
        "{view:#}"
    );
    assert!(drivers_of(&sweep).is_empty(), "a driver outlived its sweep");
    let listed = stack.json(&["runs", "list"]);
    for run in listed["runs"].as_array().unwrap() {
        assert_eq!(run["sweep_id"], sweep.as_str(), "{listed:#}");
    }
    let first = rows(&view)[0]["run_id"].as_str().unwrap();
    let shown = stack.rl(&["runs", "status", first]);
    assert!(
        String::from_utf8_lossy(&shown.stdout).contains(&format!("a run of sweep {sweep}")),
        "{shown:?}"
    );
}

#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn a_sweep_is_started_checked_and_stopped_over_http() {
    let python = test_python();
    let home = stack_home(&python, "");
    let config = home.path().join("config.toml");
    let settings = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, format!("max_active_sweeps = 1\n{settings}")).unwrap();
    let server = Server::start(home, &[], &[]);
    expect(
        server.request("POST", "/environments/arithmetic/select", None),
        200,
    );
    let refused = expect(
        server.post("/sweeps", &json!({"settings": {"total_steps": [3, 4]}})),
        400,
    );
    assert!(
        refused["error"].as_str().unwrap().contains("locked"),
        "{refused}"
    );
    // 20 identical requests at once (a client retrying, agents racing) make one sweep.
    let request = json!({"settings": {"group_size": [2, 4, 8]}, "max_parallel": 1});
    let answers: Vec<Value> = std::thread::scope(|scope| {
        let calls: Vec<_> = (0..20)
            .map(|_| scope.spawn(|| expect(server.post("/sweeps", &request), 200)))
            .collect();
        calls.into_iter().map(|call| call.join().unwrap()).collect()
    });
    let started = answers
        .iter()
        .find(|answer| answer["started"] == true)
        .unwrap_or_else(|| panic!("none started: {answers:?}"))
        .clone();
    let sweep = started["sweep_id"].as_str().unwrap().to_owned();
    for answer in &answers {
        assert_eq!(answer["sweep_id"], sweep.as_str(), "{answer}");
    }
    assert_eq!(
        answers
            .iter()
            .filter(|answer| answer["started"] == true)
            .count(),
        1,
        "{answers:?}"
    );
    let listed = crate::rl_in(server.home(), &["sweep", "list", "--json"]);
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(listed["sweeps"].as_array().unwrap().len(), 1, "{listed}");
    assert!(drivers_of(&sweep).len() <= 1, "{:?}", drivers_of(&sweep));
    // Another sweep is beyond the operator's bound while this one goes.
    let bounded = expect(
        server.post("/sweeps", &json!({"settings": {"group_size": [2, 4]}})),
        409,
    );
    assert!(
        bounded["error"]
            .as_str()
            .unwrap()
            .contains("max_active_sweeps is 1"),
        "{bounded}"
    );
    let checked = expect(server.get(&format!("/sweeps/{sweep}")), 200);
    assert_eq!(checked["points"], 3, "{checked}");
    expect(server.get("/sweeps/sw-0badc0de"), 404);
    let stopped = expect(
        server.request("POST", &format!("/sweeps/{sweep}/stop"), None),
        200,
    );
    assert_eq!(stopped["sweep"]["state"], "stopped", "{stopped}");
    let states: Vec<&str> = rows(&stopped["sweep"])
        .iter()
        .map(|row| row["state"].as_str().unwrap())
        .collect();
    assert_eq!(
        states.iter().filter(|state| **state == "dropped").count(),
        2,
        "{stopped}"
    );
    let again = expect(
        server.request("POST", &format!("/sweeps/{sweep}/stop"), None),
        200,
    );
    assert!(
        again["message"]
            .as_str()
            .unwrap()
            .contains("had ended already"),
        "{again}"
    );
    // A fork over HTTP: the route joins the path's run and the body; a run that saved no
    // state is refused with the reason (the fixture trainer keeps none).
    let stopped_run = rows(&stopped["sweep"])
        .iter()
        .find_map(|row| row["run_id"].as_str())
        .unwrap()
        .to_owned();
    let refused = expect(
        server.post(
            &format!("/runs/{stopped_run}/fork"),
            &json!({"step": 1, "settings": {"group_size": 4}}),
        ),
        409,
    );
    assert!(
        refused["error"].as_str().unwrap().contains(&stopped_run),
        "{refused}"
    );
    for row in rows(&stopped["sweep"]) {
        if let Some(id) = row["run_id"].as_str() {
            let status = crate::rl_in(server.home(), &["runs", "status", id, "--json"]);
            let status: Value = serde_json::from_slice(&status.stdout).unwrap();
            assert!(crate::runs::is_finished(&status), "{status}");
        }
    }
}

/// Over MCP an agent checks a sweep within the operator's interval, as a run, and stops it.
#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn a_sweep_is_checked_and_stopped_over_mcp_within_the_agents_limit() {
    let (stack, started) = one_at_a_time();
    let sweep = started["sweep_id"].as_str().unwrap().to_owned();
    let mut server = crate::mcp::RawServer::start(stack.home.path(), &[]);
    server.initialize();
    let checked = server.call(2, "rl_check_sweep", Some(json!({"sweep_id": sweep})));
    assert_eq!(checked["isError"], false, "{checked}");
    assert_eq!(crate::mcp::reply(&checked)["points"], 2, "{checked}");
    let again = server.call(3, "rl_check_sweep", Some(json!({"sweep_id": sweep})));
    assert_eq!(crate::mcp::reply(&again)["rate_limited"], true, "{again}");
    let unknown = server.call(4, "rl_stop_sweep", Some(json!({"sweep_id": "sw-0badc0de"})));
    assert_eq!(unknown["isError"], true, "{unknown}");
    let stopped = server.call(5, "rl_stop_sweep", Some(json!({"sweep_id": sweep})));
    assert_eq!(
        crate::mcp::reply(&stopped)["sweep"]["state"],
        "stopped",
        "{stopped}"
    );
}
