//! A completion sampled from a finished run's saved state, through the run's own engine
//! started again on its database and checkpoints (`fixtures/local-engine/sample_checkpoints.py`).

use std::path::Path;
use std::process::Command;

use anyhow::{Context, bail};

use crate::venv::LocalEngine;

const SCRIPT: &str = "fixtures/local-engine/sample_checkpoints.py";

pub(crate) fn from_run(
    root: &Path,
    engine: &LocalEngine,
    run_dir: &Path,
    state: &str,
) -> anyhow::Result<String> {
    let output = Command::new(&engine.python)
        .arg(root.join(SCRIPT))
        .arg("--run-dir")
        .arg(run_dir)
        .arg("--programs")
        .arg(root.join("crates/rl-python/python"))
        .args(["--state", state])
        .output()
        .with_context(|| format!("cannot run {SCRIPT}"))?;
    if !output.status.success() {
        bail!(
            "{SCRIPT} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let answer: serde_json::Value = serde_json::from_slice(&output.stdout)
        .with_context(|| format!("{SCRIPT} printed no JSON"))?;
    Ok(format!(
        "   prompt: {}\n   sample: {:?}\n   log-probability of {:?} after it: {:.3}",
        answer["prompt"].as_str().unwrap_or_default(),
        answer["sample"].as_str().unwrap_or_default(),
        answer["completion"].as_str().unwrap_or_default(),
        answer["logprob"].as_f64().unwrap_or(f64::NAN),
    ))
}
