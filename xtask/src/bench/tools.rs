//! The agent tools from a shell (issue 7): one `rl tool call rl_list_runs` as a whole process,
//! against the least any Python tool pays before doing anything, `python3 -c 'import yaml, json'`.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, bail};

use super::{interleaved_medians, millis};
use crate::local_stack_rl;

pub(super) const TITLE: &str = "## Agent tools from a shell (issue 7)";

/// Runs in the state directory listed, so the call reads and reconciles real records.
const RUNS_IN_STORE: usize = 3;

/// Issue 7: the call costs at most this share of Python's start-up with two imports.
const GOAL: f64 = 0.25;

pub(super) fn measure(
    root: &Path,
    rl: &Path,
    python: &Path,
    runs: usize,
) -> anyhow::Result<String> {
    let home = tempfile::tempdir()?;
    std::fs::write(
        home.path().join("config.toml"),
        crate::venv::local_stack_settings(root, python)?,
    )?;
    let rl_in = |args: &[&str]| local_stack_rl(rl, root, home.path(), args);
    let ok = |mut command: Command| -> anyhow::Result<std::process::Output> {
        let output = command.output()?;
        if !output.status.success() {
            bail!(
                "`{command:?}` failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(output)
    };
    ok(rl_in(&["select", "arithmetic", "--json"]))?;
    let mut ids = Vec::new();
    for _ in 0..RUNS_IN_STORE {
        let output = ok(rl_in(&["runs", "start", "--json"]))?;
        let started: serde_json::Value = serde_json::from_slice(&output.stdout)?;
        ids.push(
            started["run_id"]
                .as_str()
                .context("`rl runs start --json` printed no run id")?
                .to_owned(),
        );
    }
    for id in &ids {
        ok(rl_in(&[
            "runs",
            "wait",
            id,
            "--until",
            "finished",
            "--timeout",
            "300",
            "--json",
        ]))?;
    }

    let mut tool = rl_in(&["tool", "call", "rl_list_runs"]);
    let listed: serde_json::Value =
        serde_json::from_slice(&ok(rl_in(&["tool", "call", "rl_list_runs"]))?.stdout)?;
    if listed["count"] != RUNS_IN_STORE {
        bail!(
            "rl_list_runs listed {} runs, not {RUNS_IN_STORE}",
            listed["count"]
        );
    }
    let mut python_start = Command::new("python3");
    python_start.args(["-c", "import yaml, json"]);
    let [tool_time, python_time] = interleaved_medians([&mut tool, &mut python_start], runs)?;
    let ratio = tool_time.as_secs_f64() / python_time.as_secs_f64();
    let verdict = super::verdict(ratio <= GOAL);
    eprintln!("tools: rl tool call rl_list_runs at {ratio:.2}× python3 -c 'import yaml, json'");
    Ok(format!(
        "{TITLE}\n\n\
         `rl tool call rl_list_runs` as a whole process (parse, open the state store, reconcile \
         {RUNS_IN_STORE} finished runs with the processes that exist, read each run's config \
         for its WandB name, print JSON) against `python3 -c 'import yaml, json'`, the least a \
         Python tool pays before doing anything; each {runs} times after one warm-up, \
         interleaved. Goal: at most {GOAL}× Python.\n\n\
         | command | median |\n|---|---|\n\
         | `rl tool call rl_list_runs` | {} |\n\
         | `python3 -c 'import yaml, json'` | {} |\n\n\
         **rl / Python: {ratio:.2}×** (goal ≤ {GOAL}: {verdict}).\n",
        millis(tool_time),
        millis(python_time),
    ))
}
