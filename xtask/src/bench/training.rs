//! Real training on the local engine (issue 15): seconds per training step of a run driven by
//! rl (its trainer, run-api, the digits environment sampling through the trainer) against the
//! same Tinker calls made by a bare SDK script (`xtask/python/bare_sdk_loop.py`) on the same
//! engine and model, start → first step, and the engine's peak memory.

use std::fmt::Write as _;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::Value;

use super::{median, verdict};
use crate::venv::LocalEngine;
use crate::{local_stack_rl, run_command};

pub(super) const TITLE: &str = "## Real training on the local engine (issue 15)";

/// Steps of each side; the first ones compile JAX functions and are left out of the median.
const STEPS: usize = 12;
const WARM_UP_STEPS: usize = 3;
/// Issue 15: rl's time per step at most this much above the bare script's.
const OVERHEAD_GOAL: f64 = 0.05;
const BARE_SCRIPT: &str = "xtask/python/bare_sdk_loop.py";

pub(super) fn measure(
    root: &Path,
    rl: &Path,
    python: &Path,
    engine: &LocalEngine,
) -> anyhow::Result<String> {
    let bare = bare_steps(root, engine)?;
    let driven = rl_steps(root, rl, python, engine)?;
    let bare_step = median(&bare[WARM_UP_STEPS..]);
    let rl_step = median(&driven.steps[WARM_UP_STEPS..]);
    let overhead = rl_step / bare_step - 1.0;
    let mut text = format!("{TITLE}\n\n");
    let _ = writeln!(
        text,
        "The tiny random Qwen3 (2 layers, hidden 64, made by `cargo xtask`) on skyrl-tx 0.3.0, CPU \
         JAX, 8 prompts × 8 completions of at most 16 tokens a step, LoRA rank 8, {STEPS} steps \
         each side, medians of the steps after the first {WARM_UP_STEPS} (they compile JAX \
         functions). rl's step is measured between the trainer's metrics rows; it includes \
         waiting for run-api's batch, which the environment fills by sampling through the \
         trainer's `/generate` while the previous step trains (one batch ahead at most, \
         `max_batches_offpolicy = 1`). Both make the same Tinker calls per step (rl's run with \
         `save_every = 0`; its last step also saves the final state). The bare script samples, \
         trains and saves one after another.\n"
    );
    let _ = writeln!(text, "| measure | value |\n|---|---|");
    let _ = writeln!(
        text,
        "| bare SDK script, seconds per step | {bare_step:.2} |"
    );
    let _ = writeln!(text, "| rl run, seconds per step | {rl_step:.2} |");
    let _ = writeln!(
        text,
        "| rl's overhead per step (goal ≤ {:.0} %) | {:+.1} % — {} |",
        OVERHEAD_GOAL * 100.0,
        overhead * 100.0,
        verdict(overhead <= OVERHEAD_GOAL)
    );
    let _ = writeln!(
        text,
        "| rl run, start → first step | {:.1} s |",
        driven.to_first_step
    );
    let _ = writeln!(
        text,
        "| the engine's peak resident memory (its largest process, VmHWM) | {:.0} MB |",
        driven.engine_peak_bytes / 1e6
    );
    Ok(text)
}

/// The bare script's step times against an engine of its own.
fn bare_steps(root: &Path, engine: &LocalEngine) -> anyhow::Result<Vec<f64>> {
    let scratch = tempfile::tempdir()?;
    let port = free_port()?;
    let mut server = Command::new(&engine.python)
        .args(["-m", "rl_engine", "--base-model"])
        .arg(&engine.base_model)
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .arg("--database-url")
        .arg(format!("sqlite:///{}/tinker.db", scratch.path().display()))
        .arg("--checkpoints-base")
        .arg(scratch.path().join("checkpoints"))
        .args([
            "--backend-config",
            r#"{"max_lora_adapters": 3, "max_lora_rank": 8, "sample_max_num_sequences": 64, "train_micro_batch_size": 8}"#,
        ])
        .env("PYTHONPATH", root.join("crates/rl-python/python"))
        .env("JAX_PLATFORMS", "cpu")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .context("cannot start the engine for the bare script")?;
    let outcome = (|| {
        wait_for_engine(port)?;
        let out = scratch.path().join("bare.json");
        run_command(
            Command::new(&engine.python)
                .arg(root.join(BARE_SCRIPT))
                .args(["--base-url", &format!("http://127.0.0.1:{port}")])
                .arg("--base-model")
                .arg(&engine.base_model)
                .args(["--steps", &STEPS.to_string()])
                .args(["--group-size", "8", "--groups", "8", "--max-tokens", "16"])
                .args(["--lr", "0.01", "--rank", "8", "--json-out"])
                .arg(&out),
        )?;
        let report: Value = serde_json::from_slice(&std::fs::read(&out)?)?;
        let steps: Vec<f64> = report["steps"]
            .as_array()
            .context("the bare script wrote no steps")?
            .iter()
            .map(|step| {
                step["seconds"]
                    .as_object()
                    .map_or(0.0, |parts| parts.values().filter_map(Value::as_f64).sum())
            })
            .collect();
        Ok(steps)
    })();
    // The whole group: the API process and its engine child.
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", server.id())])
        .status();
    let _ = server.wait();
    outcome
}

struct Driven {
    steps: Vec<f64>,
    to_first_step: f64,
    engine_peak_bytes: f64,
}

/// One rl run of [`STEPS`] steps on the local engine: its step times from the metrics rows,
/// and the engine's memory sampled while it runs.
fn rl_steps(root: &Path, rl: &Path, python: &Path, engine: &LocalEngine) -> anyhow::Result<Driven> {
    let home = tempfile::tempdir()?;
    // The same Tinker calls as the bare script: no optimizer-state saves between steps.
    let settings = crate::venv::local_engine_settings(root, python, engine)?
        .replace("total_steps = 12", &format!("total_steps = {STEPS}"))
        .replace("save_every = 4", "save_every = 0");
    std::fs::write(home.path().join("config.toml"), settings)?;
    let rl_json = |args: &[&str]| -> anyhow::Result<Value> {
        let output = local_stack_rl(rl, root, home.path(), args)
            .arg("--json")
            .output()?;
        if !output.status.success() {
            bail!(
                "rl {args:?} failed: {}",
                String::from_utf8_lossy(&output.stdout)
            );
        }
        Ok(serde_json::from_slice(&output.stdout)?)
    };
    rl_json(&["select", "digits"])?;
    let status = rl_json(&["runs", "start"])?;
    let id = status["id"].as_str().context("no run id")?.to_owned();
    let mut peak = 0.0_f64;
    let deadline = Instant::now() + Duration::from_secs(1200);
    let finished = loop {
        let status = rl_json(&["runs", "status", &id])?;
        if let Some(pgid) = status["components"]
            .as_array()
            .and_then(|all| all.iter().find(|c| c["component"] == "engine"))
            .and_then(|engine| engine["process"]["pid"].as_u64())
        {
            peak = peak.max(group_peak_bytes(pgid));
        }
        if matches!(
            status["state"].as_str(),
            Some("completed" | "failed" | "stopped" | "lost")
        ) {
            break status;
        }
        if Instant::now() > deadline {
            let _ = rl_json(&["runs", "stop", &id]);
            bail!("the benchmark run {id} did not finish in 20 minutes");
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    if finished["state"] != "completed" {
        bail!(
            "the benchmark run ended {}: {}",
            finished["state"],
            finished["error"]
        );
    }
    let metrics =
        std::fs::read_to_string(home.path().join("runs").join(&id).join("metrics.jsonl"))?;
    let stamps: Vec<f64> = metrics
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|row| row.get("step").is_some())
        .filter_map(|row| row["_timestamp"].as_f64())
        .collect();
    if stamps.len() != STEPS {
        bail!("{} metrics rows for {STEPS} steps", stamps.len());
    }
    let created: jiff::Timestamp = finished["created_at"]
        .as_str()
        .context("the run has no created_at")?
        .parse()?;
    let created = created.as_millisecond() as f64 / 1000.0;
    Ok(Driven {
        steps: stamps.windows(2).map(|pair| pair[1] - pair[0]).collect(),
        to_first_step: stamps[0] - created,
        engine_peak_bytes: peak,
    })
}

/// The largest peak resident size (VmHWM) among the members of process group `pgid`.
fn group_peak_bytes(pgid: u64) -> f64 {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0.0;
    };
    let mut peak = 0.0_f64;
    for entry in entries.flatten() {
        let status = std::fs::read_to_string(entry.path().join("status")).unwrap_or_default();
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // The group is the fifth field after the command's closing parenthesis.
        let in_group = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(2))
            .is_some_and(|group| group == pgid.to_string());
        if !in_group {
            continue;
        }
        if let Some(kb) = status
            .lines()
            .find_map(|line| line.strip_prefix("VmHWM:"))
            .and_then(|value| {
                value
                    .trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<f64>()
                    .ok()
            })
        {
            peak = peak.max(kb * 1024.0);
        }
    }
    peak
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn wait_for_engine(port: u16) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(180);
    while Instant::now() < deadline {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    bail!("the engine did not listen on port {port} within 180 s")
}
