//! A verifiers run (digit-sum, a v1 taskset run by `rl_verifiers` in `target/vf1-venv`) through
//! the run lifecycle an Atropos run goes through, on the local engine: extended by a step and
//! forked from a saved step (each continuing from the parent's state, its environment read as
//! the parent recorded it), failed by a kill -9 of its environment with that cause, lost with
//! its supervisor killed and ended by a stop, and capped by `--max-tokens` with the figures of
//! its own steps. Runs are short (two steps of two groups of four); one trained run serves the
//! extension and the fork.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use rl_process::{ProcessIdentity, carrying_run_dir, descendants_of};
use serde_json::{Value, json};

use crate::runs::{Stack, assert_nothing_left, is_finished, pid_of, run_processes};
use crate::test_python;
use crate::training::lines;

/// Runs of two steps (the lifecycle's), or of forty (the ends': each ends long before).
const TWO_STEPS: (&str, &str) = ("total_steps = 12", "total_steps = 2");
const FORTY_STEPS: (&str, &str) = ("total_steps = 12", "total_steps = 40");
/// A state saved at every step: the fork continues from step 1's.
const SAVE_EVERY_STEP: (&str, &str) = ("save_every = 4", "save_every = 1");
/// Two groups under way at once (a v1 rollout is a process of its own).
const TWO_WORKERS: (&str, &str) = ("max_num_workers = 8", "max_num_workers = 2");
/// Bounds of waits on this shared, loaded machine: never asserted as timings.
const TRAINING_SECS: u32 = 1800;
const ENDING_SECS: u32 = 900;

/// A state directory for the verifiers fixtures on the local engine, digit-sum selected and
/// configured to a batch of two groups of four.
fn digit_sum_stack(edits: &[(&str, &str)]) -> Stack {
    let python = test_python();
    let engine = rl_test_support::local_engine();
    let verifiers = rl_test_support::verifiers_pythons();
    let settings = rl_test_support::verifiers_engine_settings(&python, &engine, &verifiers);
    let stack = Stack::with_settings(settings, edits, "digit-sum");
    stack.json(&["config", "set", "batch_size", "8"]);
    stack.json(&["config", "set", "group_size", "4"]);
    stack
}

/// Ends every run a test started, whatever happened to it: `rl runs stop` for each (a lost
/// run's leftovers too), then SIGKILL for any process still carrying a run's folder. A failed
/// assertion leaves nothing running.
struct RunsGuard {
    home: PathBuf,
    ids: std::cell::RefCell<Vec<String>>,
}

impl RunsGuard {
    fn new(stack: &Stack) -> Self {
        Self {
            home: stack.home.path().to_owned(),
            ids: std::cell::RefCell::new(Vec::new()),
        }
    }

    /// `id`, kept to be ended.
    fn keep(&self, id: &str) -> String {
        self.ids.borrow_mut().push(id.to_owned());
        id.to_owned()
    }
}

impl Drop for RunsGuard {
    fn drop(&mut self) {
        for id in self.ids.borrow().iter() {
            let _ = crate::rl_in(&self.home, &["runs", "stop", id, "--json"]);
            for left in carrying_run_dir(&self.home.join("runs").join(id)) {
                if let Ok(pid) = i32::try_from(left.identity.pid) {
                    let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
                }
            }
        }
    }
}

/// The rows of a run's `metrics.jsonl` that are steps, by step.
fn step_rows(stack: &Stack, id: &str) -> Vec<(u64, Value)> {
    lines(&stack.run_dir(id).join("metrics.jsonl"))
        .into_iter()
        .filter(|row| row.get("event").is_none())
        .filter_map(|row| Some((row["step"].as_u64()?, row)))
        .collect()
}

fn steps_of(stack: &Stack, id: &str) -> Vec<u64> {
    step_rows(stack, id)
        .into_iter()
        .map(|(step, _)| step)
        .collect()
}

/// The state the trainer saved at `step` (`checkpoints.jsonl`).
fn state_saved_at(stack: &Stack, id: &str, step: u64) -> String {
    lines(&stack.run_dir(id).join("checkpoints.jsonl"))
        .into_iter()
        .find(|row| row["step"].as_u64() == Some(step) && row["state_path"].is_string())
        .and_then(|row| row["state_path"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("run {id} saved no state at step {step}"))
}

/// The steps `rl checkpoints list ID` shows.
fn listed_checkpoint_steps(stack: &Stack, id: &str) -> BTreeSet<u64> {
    let listed = stack.json(&["checkpoints", "list", id]);
    listed["runs"][0]["checkpoints"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed:#}"))
        .iter()
        .filter_map(|checkpoint| checkpoint["step"].as_u64())
        .collect()
}

/// A continuation of a verifiers run that completed: a verifiers run itself (its answer says
/// so, its environment process was rl's runner and made groups), its steps those of its
/// parent up to `from` then its own up to `last`, and its trainer verified it loaded the
/// parent's state saved at `from`.
fn assert_continued(stack: &Stack, parent: &str, child: &str, from: u64, last: u64) {
    let ended = stack.wait(child, "finished", TRAINING_SECS);
    assert_eq!(ended["state"], "completed", "{}", stack.explain(child));
    assert_eq!(ended["environment_kind"], "verifiers-v1", "{ended:#}");
    assert!(
        ended["environment"]
            .as_str()
            .is_some_and(|name| name.starts_with("digit-sum")),
        "{ended:#}"
    );
    let parent_rows = step_rows(stack, parent);
    let rows = step_rows(stack, child);
    assert_eq!(
        rows.iter().map(|(step, _)| *step).collect::<Vec<_>>(),
        (1..=last).collect::<Vec<_>>(),
        "{}",
        stack.explain(child)
    );
    for ((step, row), (_, parent_row)) in rows
        .iter()
        .zip(&parent_rows)
        .take_while(|(r, _)| r.0 <= from)
    {
        assert_eq!(row, parent_row, "step {step} is the parent's");
    }
    for (step, row) in rows.iter().filter(|(step, _)| *step > from) {
        assert!(row["reward/mean"].is_f64(), "step {step}: {row}");
        assert!(row["reward/correct"].is_f64(), "step {step}: {row}");
    }
    let checkpoints = listed_checkpoint_steps(stack, child);
    assert_eq!(checkpoints.last(), Some(&last), "{checkpoints:?}");
    assert!(
        (from + 1..=last).all(|step| checkpoints.contains(&step)),
        "its own steps' checkpoints: {checkpoints:?}"
    );
    let state = state_saved_at(stack, parent, from);
    let trainer_log = std::fs::read_to_string(stack.run_dir(child).join("trainer.log")).unwrap();
    assert!(
        trainer_log.contains(&format!(
            "verified: the loaded weights are those saved at {state}"
        )),
        "{trainer_log}"
    );
    let status = stack.json(&["runs", "status", child]);
    let groups = &status["groups"];
    assert!(
        groups["made"].as_u64().is_some_and(|made| made >= 2),
        "the child's environment made its step's groups: {groups:#}"
    );
    assert_eq!(groups["failed"], 0, "{groups:#}");
    assert_runs_verifiers_v1(stack, child);
    assert_nothing_left(stack, child);
    assert_no_process_carries(stack, child);
}

/// The run's environment component, as launched: rl's runner in verifiers' v1 Python, told
/// its kind.
fn assert_runs_verifiers_v1(stack: &Stack, id: &str) {
    let launch: Value = serde_json::from_str(
        &std::fs::read_to_string(stack.run_dir(id).join("launch.json")).unwrap(),
    )
    .unwrap();
    let env = launch["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|spec| spec["component"] == "env")
        .unwrap_or_else(|| panic!("{launch:#}"));
    let python = rl_test_support::verifiers_pythons().v1;
    assert_eq!(env["program"], python.display().to_string(), "{env:#}");
    assert!(
        env["env"]
            .as_array()
            .unwrap()
            .contains(&json!(["RL_ENV_KIND", "verifiers-v1"])),
        "{env:#}"
    );
}

/// No process anywhere (in the run's groups or outside them) still carries the run's folder.
fn assert_no_process_carries(stack: &Stack, id: &str) {
    let left = carrying_run_dir(&stack.run_dir(id));
    assert!(
        left.is_empty(),
        "processes of run {id} left: {left:?}\n{}",
        stack.explain(id)
    );
}

/// Digit-sum trained two steps, saving its state each step; then, selected another
/// environment meanwhile, extended by a step and forked from step 1, at once: each child is a
/// verifiers run continuing from the parent's saved state, as the parent recorded its
/// environment.
#[test]
#[ignore = "needs the test venvs (verifiers v1, the local engine); run through cargo xtask test"]
fn a_verifiers_run_is_extended_and_forked_from_its_saved_states() {
    let stack = digit_sum_stack(&[TWO_STEPS, SAVE_EVERY_STEP, TWO_WORKERS]);
    let guard = RunsGuard::new(&stack);
    let parent = guard.keep(&stack.start());
    let ended = stack.wait(&parent, "finished", TRAINING_SECS);
    assert_eq!(ended["state"], "completed", "{}", stack.explain(&parent));
    assert_eq!(ended["environment_kind"], "verifiers-v1", "{ended:#}");
    assert_eq!(steps_of(&stack, &parent), [1, 2]);
    assert_runs_verifiers_v1(&stack, &parent);
    let saved = listed_checkpoint_steps(&stack, &parent);
    assert!(saved.contains(&1) && saved.contains(&2), "{saved:?}");
    assert_nothing_left(&stack, &parent);

    // The selection changes: the children read the environment their parent recorded.
    stack.json(&["select", "reverse-text"]);
    let extended = stack.json(&["runs", "resume", &parent, "--steps", "+1"]);
    let extension = guard.keep(extended["run_id"].as_str().unwrap());
    assert_eq!(
        extended["resumed_from"],
        json!({"run_id": parent, "step": 2, "kind": "extension",
               "changes": {"total_steps": 3}}),
        "{extended:#}"
    );
    assert_eq!(extended["environment_kind"], "verifiers-v1", "{extended:#}");
    let forked = stack.json(&["runs", "fork", &parent, "--step", "1"]);
    let fork = guard.keep(forked["run_id"].as_str().unwrap());
    assert_eq!(
        forked["resumed_from"],
        json!({"run_id": parent, "step": 1, "kind": "fork"}),
        "{forked:#}"
    );
    assert_eq!(forked["environment_kind"], "verifiers-v1", "{forked:#}");

    assert_continued(&stack, &parent, &extension, 2, 3);
    assert_continued(&stack, &parent, &fork, 1, 2);
    let listed = stack.json(&["runs", "list"]);
    for run in listed["runs"].as_array().unwrap() {
        assert_eq!(run["environment_kind"], "verifiers-v1", "{run:#}");
    }
}

/// A verifiers run ends as an Atropos run does, all three at once: kill -9 of its environment
/// process (`rl_verifiers`, with its rollouts under way) fails it naming that; kill -9 of its
/// supervisor makes it `lost`, and a stop ends what it left; a `--max-tokens` cap ends it
/// `capped` with the figures of the steps it trained. Nothing of any of them is left.
#[test]
#[ignore = "needs the test venvs (verifiers v1, the local engine); run through cargo xtask test"]
fn a_verifiers_run_fails_with_its_environment_is_lost_with_its_supervisor_and_is_capped() {
    let stack = digit_sum_stack(&[FORTY_STEPS, TWO_WORKERS]);
    let guard = RunsGuard::new(&stack);
    let killed_env = guard.keep(&stack.start());
    let killed_supervisor = guard.keep(&stack.start());
    // A first step may start (the bound of a first step is 2 × 8 × 256 tokens); whatever a
    // step uses, the cap ends the run before a step that would pass it.
    let cap = 4096;
    let started = stack.json(&["runs", "start", "--max-tokens", &cap.to_string()]);
    let capped = guard.keep(started["id"].as_str().unwrap());
    assert_eq!(started["caps"]["max_tokens"], cap, "{started:#}");

    assert_env_kill_fails_the_run(&stack, &killed_env);
    assert_supervisor_kill_loses_the_run(&stack, &killed_supervisor);
    assert_capped(&stack, &capped, cap);
}

/// Waits until `id` runs and its environment has made a group: its rollouts are under way.
fn running_with_groups(stack: &Stack, id: &str) -> Value {
    let running = stack.wait(id, "running", ENDING_SECS);
    assert_eq!(running["state"], "running", "{}", stack.explain(id));
    let deadline = Instant::now() + Duration::from_secs(u64::from(ENDING_SECS));
    loop {
        let status = stack.json(&["runs", "status", id]);
        if status["groups"]["made"]
            .as_u64()
            .is_some_and(|made| made >= 1)
        {
            return status;
        }
        assert!(
            !is_finished(&status) && Instant::now() < deadline,
            "run {id} made no group: {}",
            stack.explain(id)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn sigkill(pid: u32) {
    kill(Pid::from_raw(i32::try_from(pid).unwrap()), Signal::SIGKILL).unwrap();
}

/// Every process of the run, in its groups or below them (a v1 rollout runs in a session of
/// its own), with its identity: to show each is gone, not another with its pid.
fn run_identities(status: &Value) -> Vec<ProcessIdentity> {
    let mut found: Vec<ProcessIdentity> = run_processes(status)
        .into_iter()
        .filter_map(ProcessIdentity::of)
        .collect();
    for name in ["engine", "api", "trainer", "env"] {
        if let Some(pid) = pid_of(status, name) {
            found.extend(descendants_of(pid).into_iter().map(|stray| stray.identity));
        }
    }
    found
}

fn assert_env_kill_fails_the_run(stack: &Stack, id: &str) {
    let running = running_with_groups(stack, id);
    let env = pid_of(&running, "env").unwrap();
    assert_runs_verifiers_v1(stack, id);
    let processes = run_identities(&running);
    sigkill(env);
    let failed = stack.wait(id, "finished", ENDING_SECS);
    assert_eq!(failed["state"], "failed", "{}", stack.explain(id));
    let error = failed["error"].as_str().unwrap();
    // What ended it, and nothing the environment logged before as if it were the cause.
    assert!(
        error.starts_with("env was ended by SIGKILL; last lines of "),
        "{error}\n{}",
        stack.explain(id)
    );
    let env_component = crate::runs::component(&failed, "env");
    assert_eq!(
        (&env_component["status"], &env_component["signal"]),
        (&Value::from("signalled"), &Value::from(9)),
        "{env_component:#}"
    );
    assert_nothing_left(stack, id);
    assert_no_process_carries(stack, id);
    let left: Vec<&ProcessIdentity> = processes.iter().filter(|p| p.is_alive()).collect();
    assert!(left.is_empty(), "processes of run {id} left: {left:?}");
}

fn assert_supervisor_kill_loses_the_run(stack: &Stack, id: &str) {
    let running = running_with_groups(stack, id);
    let supervisor = u32::try_from(running["supervisor"]["pid"].as_u64().unwrap()).unwrap();
    let processes = run_identities(&running);
    sigkill(supervisor);
    let lost = stack.wait(id, "finished", 60);
    assert_eq!(lost["state"], "lost", "{}", stack.explain(id));
    assert!(
        lost["error"]
            .as_str()
            .unwrap()
            .contains(&format!("its supervisor (pid {supervisor}) is gone")),
        "{lost:#}"
    );
    // Resumed, the lost run's leftovers (its run-api, environment and engine, holding ports and
    // the engine folder the child copies) are ended first, as `rl runs stop` ends them (issue
    // 42 #2); the lost run stays lost, and its child starts.
    let resumed = stack.json(&["runs", "resume", id]);
    let child = resumed["run_id"].as_str().unwrap().to_owned();
    let parent = stack.json(&["runs", "status", id]);
    assert_eq!(parent["state"], "lost", "a lost run stays lost: {parent:#}");
    assert!(
        parent["error"]
            .as_str()
            .is_some_and(|error| error.contains("has ended what it found of the run")),
        "the resume ended what the lost run left, as a stop does: {parent:#}"
    );
    assert_nothing_left(stack, id);
    assert_no_process_carries(stack, id);
    let left: Vec<&ProcessIdentity> = processes.iter().filter(|p| p.is_alive()).collect();
    assert!(left.is_empty(), "processes of run {id} left: {left:?}");
    stack.json(&["runs", "stop", &child]);
    assert_nothing_left(stack, &child);
}

/// The run ended `capped` by `max_tokens`, before a step it did not train, and what it says it
/// used is what its steps' rows add up to.
fn assert_capped(stack: &Stack, id: &str, cap: u64) {
    let ended = crate::costs::wait_until_finished(stack, id, TRAINING_SECS, Some(3));
    assert_eq!(ended["state"], "capped", "{}", stack.explain(id));
    assert!(
        ended.get("error").is_none(),
        "a cap is no failure: {ended:#}"
    );
    let rows = step_rows(stack, id);
    let trained: Vec<u64> = rows.iter().map(|(step, _)| *step).collect();
    assert!(
        !trained.is_empty() && trained.len() < 40,
        "{trained:?}\n{}",
        stack.explain(id)
    );
    let used: u64 = rows
        .iter()
        .map(|(_, row)| {
            ["prompt", "sampled", "trained"]
                .iter()
                .map(|kind| row[format!("tokens/{kind}")].as_u64().unwrap_or(0))
                .sum::<u64>()
        })
        .sum();
    let metrics = lines(&stack.run_dir(id).join("metrics.jsonl"));
    let row = metrics.last().unwrap();
    assert_eq!(
        (&row["event"], &row["cap"], &row["step"]),
        (
            &Value::from("capped"),
            &Value::from("max_tokens"),
            &Value::from(*trained.last().unwrap())
        ),
        "{metrics:#?}"
    );
    assert_eq!(row["spent"].as_f64(), Some(used as f64), "{row:#}");
    let next = row["next_step"].as_f64().unwrap();
    assert!(used as f64 + next > cap as f64, "{row:#}");
    let said = ended["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|event| event["message"].as_str())
        .find(|message| message.contains("max_tokens"))
        .unwrap_or_else(|| panic!("no event names the cap: {ended:#}"))
        .to_owned();
    assert!(
        said.contains(&format!("max_tokens {cap}: this run used {used} tokens"))
            && said.contains(&format!("before step {}/40", trained.len() + 1)),
        "{said}"
    );
    assert_nothing_left(stack, id);
    assert_no_process_carries(stack, id);
}
