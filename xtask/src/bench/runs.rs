//! The run lifecycle on the local stack (issue 4): start → running, each component's own
//! readiness, the supervisor's memory and the stop, measured through the release `rl` binary as
//! a caller sees it, and from the run's own event log.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use anyhow::{Context, bail};
use serde_json::Value;

use crate::display;

mod events;
mod procfs;
mod report;

use events::{event_at, events_of, readiness, seconds_between};
use procfs::{assert_nothing_left, kb_to_bytes, supervisor_memory};
use report::report;

pub(super) const TITLE: &str = "## Training runs (issue 4)";

/// Each run takes seconds: the section measures at most this many (after one warm-up).
pub(super) const MAX_RUNS: usize = 5;

/// The components in start order, as named in the run's events.
const COMPONENTS: [&str; 3] = ["api", "trainer", "env"];

/// Issue 4: running at most this long after the slowest component is ready.
const START_GOAL_SECS: f64 = 1.0;
/// Issue 4: the supervisor's resident memory, in bytes (MB = 10⁶ bytes).
const MEMORY_GOAL_BYTES: f64 = 15e6;
/// Issue 4: `rl runs stop` of a running run whose components exit on SIGTERM.
const STOP_GOAL_SECS: f64 = 1.0;

/// The fixture trainer's step, slowed from 0.2 s so that a run stays `running` (about 30 s)
/// while its memory and its stop are measured.
const TRAINER_STEP: (&str, &str) = (
    r#"RL_FIXTURE_TRAINER_STEP_SECONDS = "0.2""#,
    r#"RL_FIXTURE_TRAINER_STEP_SECONDS = "5""#,
);

/// Measures `runs` run lifecycles (capped at [`MAX_RUNS`]) after one warm-up and returns the
/// report's section.
pub(super) fn measure(
    root: &Path,
    rl: &Path,
    python: &Path,
    runs: usize,
) -> anyhow::Result<String> {
    let runs = runs.clamp(1, MAX_RUNS);
    let mut stack = Stack::new(root, rl, python)?;
    stack.rl_json(&["select", "arithmetic"])?;
    let mut samples = Vec::with_capacity(runs);
    for round in 0..=runs {
        let sample = stack.lifecycle()?;
        eprintln!(
            "run lifecycle {round}/{runs}{}: running after {:.2} s (readiness {:.2} s in all), \
             supervisor {:.1} MB, stopped in {:.2} s",
            if round == 0 { " (warm-up)" } else { "" },
            sample.to_running,
            sample.readiness_sum(),
            sample.rss_bytes / 1e6,
            sample.stop,
        );
        if round > 0 {
            samples.push(sample);
        }
    }
    stack.close()?;
    Ok(report(&samples))
}

/// One run, from `rl runs start` to its stop; times in seconds.
struct Sample {
    /// `rl runs start --json` alone, until it returns.
    start_returns: f64,
    /// Before `rl runs start` until `rl runs wait --until running` returns.
    to_running: f64,
    /// The run's `created` event to its `running` event.
    store_to_running: f64,
    /// Each component's own launch → ready, in [`COMPONENTS`] order.
    ready: [f64; 3],
    rss_bytes: f64,
    hwm_bytes: f64,
    /// `rl runs stop --json`, until it returns.
    stop: f64,
    /// The run's `stopping` event to its `stopped` event.
    store_stop: f64,
    /// Every component's group ended on SIGTERM, none needed SIGKILL.
    graceful: bool,
}

impl Sample {
    fn readiness_sum(&self) -> f64 {
        self.ready.iter().sum()
    }

    /// The index in [`COMPONENTS`] and the readiness of the slowest component.
    fn slowest(&self) -> (usize, f64) {
        self.ready
            .iter()
            .copied()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap_or((0, f64::NAN))
    }
}

/// A state directory of its own with the local stack's operator settings, and the runs started
/// in it: whatever is still running when it is dropped, error paths included, is stopped.
struct Stack {
    root: PathBuf,
    rl: PathBuf,
    /// Runs started and not yet seen stopped with nothing left.
    live: Vec<String>,
    /// Dropped after [`Drop::drop`] has stopped the runs whose logs it holds.
    home: tempfile::TempDir,
}

impl Stack {
    fn new(root: &Path, rl: &Path, python: &Path) -> anyhow::Result<Self> {
        let settings = crate::venv::local_stack_settings(root, python)?;
        if !settings.contains(TRAINER_STEP.0) {
            bail!(
                "fixtures/local-stack.toml no longer holds `{}`; update the bench's edit of it",
                TRAINER_STEP.0
            );
        }
        let settings = settings.replace(TRAINER_STEP.0, TRAINER_STEP.1);
        let home = tempfile::Builder::new()
            .prefix("rl-bench-home-")
            .tempdir()
            .context("cannot create a temporary state directory")?;
        let config = home.path().join("config.toml");
        std::fs::write(&config, settings)
            .with_context(|| format!("cannot write {}", config.display()))?;
        Ok(Self {
            root: root.to_owned(),
            rl: rl.to_owned(),
            live: Vec::new(),
            home,
        })
    }

    fn command(&self, args: &[&str]) -> Command {
        crate::local_stack_rl(&self.rl, &self.root, self.home.path(), args)
    }

    fn rl_output(&self, args: &[&str]) -> anyhow::Result<Output> {
        let mut command = self.command(args);
        command
            .output()
            .with_context(|| format!("cannot run `{}`", display(&command)))
    }

    /// `rl ARGS --json`, which must succeed and print JSON.
    fn rl_json(&self, args: &[&str]) -> anyhow::Result<Value> {
        let mut all = args.to_vec();
        all.push("--json");
        let output = self.rl_output(&all)?;
        parse_json(&all, &output)
    }

    fn lifecycle(&mut self) -> anyhow::Result<Sample> {
        let started = Instant::now();
        let output = self.rl_output(&["runs", "start", "--json"])?;
        let start_returns = started.elapsed().as_secs_f64();
        let status = parse_json(&["runs", "start", "--json"], &output)?;
        let id = status["id"]
            .as_str()
            .context("`rl runs start --json` printed no run id")?
            .to_owned();
        self.live.push(id.clone());
        let supervisor = status["supervisor"]["pid"]
            .as_u64()
            .context("`rl runs start --json` printed no supervisor pid")?;

        let outcome = self.rl_json(&[
            "runs",
            "wait",
            &id,
            "--until",
            "running",
            "--timeout",
            "120",
        ])?;
        let to_running = started.elapsed().as_secs_f64();
        let status = &outcome["status"];
        if outcome["timed_out"] != false || status["state"] != "running" {
            bail!(
                "run {id} did not reach running (state {}): {}",
                status["state"].as_str().unwrap_or("unknown"),
                self.explain(&id)
            );
        }
        let (rss_kb, hwm_kb) = supervisor_memory(supervisor)
            .with_context(|| format!("cannot read the memory of supervisor {supervisor}"))?;

        let events = events_of(status)?;
        let created = event_at(&events, "state", |m| m.starts_with("created"))?;
        let running = event_at(&events, "state", |m| m.starts_with("running"))?;
        let mut ready = [0.0; 3];
        for (slot, component) in ready.iter_mut().zip(COMPONENTS) {
            *slot = readiness(&events, component)?;
        }

        let stopping_started = Instant::now();
        let report = self.rl_json(&["runs", "stop", &id])?;
        let stop = stopping_started.elapsed().as_secs_f64();
        let status = &report["run"];
        if status["state"] != "stopped" {
            bail!(
                "run {id} is {} after `rl runs stop`, not stopped: {}",
                status["state"].as_str().unwrap_or("unknown"),
                self.explain(&id)
            );
        }
        let events = events_of(status)?;
        let stop_requested = event_at(&events, "state", |m| m == "stopping: stop requested")?;
        let stopped = event_at(&events, "state", |m| m == "stopped")?;
        let graceful = events
            .iter()
            .filter(|e| e.kind == "stop" && e.message.ends_with("ended on SIGTERM"))
            .count()
            == COMPONENTS.len();
        assert_nothing_left(supervisor, status)
            .with_context(|| format!("run {id}: {}", self.explain(&id)))?;
        self.live.retain(|live| *live != id);

        Ok(Sample {
            start_returns,
            to_running,
            store_to_running: seconds_between(created, running),
            ready,
            rss_bytes: kb_to_bytes(rss_kb),
            hwm_bytes: kb_to_bytes(hwm_kb),
            stop,
            store_stop: seconds_between(stop_requested, stopped),
            graceful,
        })
    }

    /// The run's status and the tails of its logs, for error messages (the state directory is
    /// removed afterwards).
    fn explain(&self, id: &str) -> String {
        let mut text = self.rl_output(&["runs", "status", id]).map_or_else(
            |error| format!("{error:#}"),
            |output| String::from_utf8_lossy(&output.stdout).into_owned(),
        );
        let dir = self.home.path().join("runs").join(id);
        for log in ["supervisor", "api", "trainer", "env"] {
            let content =
                std::fs::read_to_string(dir.join(format!("{log}.log"))).unwrap_or_default();
            let lines: Vec<&str> = content.lines().collect();
            let tail = lines[lines.len().saturating_sub(15)..].join("\n");
            let _ = write!(text, "\n--- {log}.log\n{tail}");
        }
        text
    }

    /// Stops what is still running and says whether anything was.
    fn stop_all(&mut self) -> Vec<String> {
        let mut trouble = Vec::new();
        for id in std::mem::take(&mut self.live) {
            eprintln!("stopping run {id}, left running by an error");
            match self.rl_output(&["runs", "stop", &id, "--json"]) {
                Ok(output) if output.status.success() => {}
                Ok(output) => trouble.push(format!(
                    "`rl runs stop {id}` failed: {}",
                    String::from_utf8_lossy(&output.stderr).trim()
                )),
                Err(error) => trouble.push(format!("{error:#}")),
            }
        }
        trouble
    }

    /// The normal end: nothing may be left running.
    fn close(mut self) -> anyhow::Result<()> {
        let trouble = self.stop_all();
        if !trouble.is_empty() {
            bail!("{}", trouble.join("\n"));
        }
        Ok(())
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        for trouble in self.stop_all() {
            eprintln!("xtask: {trouble}");
        }
    }
}

fn parse_json(args: &[&str], output: &Output) -> anyhow::Result<Value> {
    if !output.status.success() {
        bail!(
            "`rl {}` failed ({}): {}{}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stdout).trim(),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    serde_json::from_slice(&output.stdout)
        .with_context(|| format!("`rl {}` printed no JSON", args.join(" ")))
}
