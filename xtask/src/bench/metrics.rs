//! Reading a run's metrics (issue 5): rl-metrics' readers of a WandB run file and of the
//! trainer's metrics file against CPython reading the same files, each timed inside its own
//! process, interleaved.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, bail};
use serde_json::Value;

use super::median;
use crate::{display, run_command};

pub(super) const TITLE: &str = "## Reading metrics (issue 5)";

/// Fewer interleaved rounds than this say little on a noisy machine.
const MIN_RUNS: usize = 5;
/// Steps of the WandB run the real SDK writes (the fixture's run has 50).
const WANDB_STEPS: usize = 2000;
/// Metrics rows of the generated metrics file.
const JSONL_ROWS: usize = 10_000;
/// The generated metrics file has a checkpoint event every this many steps.
const CHECKPOINT_EVERY: usize = 100;

const SCRIPT: &str = "xtask/python/bench_metrics.py";
const READER: &str = "bench-metrics-read";

/// One file both readers read.
struct Case {
    label: &'static str,
    path: PathBuf,
    /// The argument of the rl reader, and the Python script's command.
    rl_kind: &'static str,
    python_command: &'static str,
    rows: usize,
}

/// The medians of one case.
struct Measured {
    bytes: u64,
    rows: usize,
    rl_read: f64,
    python_read: f64,
    rl_process: f64,
    python_process: f64,
}

/// Measures both files, `runs` rounds each (at least [`MIN_RUNS`]) after one warm-up, and
/// returns the report's section.
pub(super) fn measure(root: &Path, python: &Path, runs: usize) -> anyhow::Result<String> {
    let runs = runs.max(MIN_RUNS);
    // The xtask itself is a debug build: rl's reader is timed in a release binary of its own.
    run_command(crate::cargo().args([
        "build",
        "--quiet",
        "--release",
        "-p",
        "xtask",
        "--bin",
        READER,
    ]))?;
    let reader = root.join("target/release").join(READER);
    let script = root.join(SCRIPT);
    let dir = tempfile::Builder::new()
        .prefix("rl-bench-metrics-")
        .tempdir()
        .context("cannot create a temporary directory")?;

    let started = Instant::now();
    let run_file = write_wandb_run(python, &script, dir.path())?;
    eprintln!(
        "metrics: the wandb SDK wrote a {WANDB_STEPS}-step offline run in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let metrics_file = dir.path().join("metrics.jsonl");
    write_metrics_file(&metrics_file)?;

    let cases = [
        Case {
            label: "WandB run file (`run-<id>.wandb`)",
            path: run_file,
            rl_kind: "wandb",
            python_command: "read-wandb",
            rows: WANDB_STEPS,
        },
        Case {
            label: "trainer metrics file (`metrics.jsonl`)",
            path: metrics_file,
            rl_kind: "jsonl",
            python_command: "read-jsonl",
            rows: JSONL_ROWS,
        },
    ];
    let mut about = Value::Null;
    let mut measured = Vec::with_capacity(cases.len());
    for case in &cases {
        let mut rl = Command::new(&reader);
        rl.arg(case.rl_kind).arg(&case.path);
        let mut py = Command::new(python);
        py.arg(&script).arg(case.python_command).arg(&case.path);
        let (result, said) = measure_case(case, &mut rl, &mut py, runs)?;
        if case.rl_kind == "wandb" {
            about = said;
        }
        eprintln!(
            "metrics: {}: rl {:.1}× the rows/s of Python",
            case.label,
            result.python_read / result.rl_read
        );
        measured.push(result);
    }
    Ok(report(&cases, &measured, &about, runs))
}

/// The SDK's offline run; returns its `run-<id>.wandb`.
fn write_wandb_run(python: &Path, script: &Path, dir: &Path) -> anyhow::Result<PathBuf> {
    let mut command = Command::new(python);
    command
        .arg(script)
        .arg("write-wandb")
        .arg(dir)
        .arg(WANDB_STEPS.to_string())
        .env("WANDB_MODE", "offline")
        .env("WANDB_SILENT", "true");
    let said = json_of(&mut command)?;
    let path = said["run_file"]
        .as_str()
        .with_context(|| format!("`{}` printed no run file", display(&command)))?;
    let path = PathBuf::from(path);
    if !path.is_file() {
        bail!("the wandb SDK wrote no {}", path.display());
    }
    Ok(path)
}

/// [`JSONL_ROWS`] rows shaped like `fixtures/metrics/complete.jsonl`'s, written as Python's
/// `json` writes them, with a checkpoint event every [`CHECKPOINT_EVERY`] steps and the final
/// weights at the end.
fn write_metrics_file(path: &Path) -> anyhow::Result<()> {
    let file =
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    for step in 1..=JSONL_ROWS {
        let n = step as f64;
        let timestamp = 1_795_000_000.0 + 30.5 * n;
        let reward = (0.1 + n / 12_500.0).min(0.9);
        let loss = 2.0 * 0.9995_f64.powf(n);
        let diff = 0.0125 + n / 1e6;
        writeln!(
            out,
            "{{\"step\": {step}, \"_timestamp\": {timestamp:?}, \"reward/mean\": {reward:?}, \
             \"train/loss\": {loss:?}, \"train/learning_rate\": 4e-05, \"logprobs/diff\": \
             {diff:?}, \"advantages/std\": 0.4, \"batch/groups\": 4}}"
        )?;
        if step % CHECKPOINT_EVERY == 0 {
            writeln!(
                out,
                "{{\"event\": \"checkpoint\", \"step\": {step}, \"path\": \
                 \"tinker://bench-run/sampler_weights/step_{step}\"}}"
            )?;
        }
    }
    writeln!(
        out,
        "{{\"event\": \"final_weights\", \"path\": \"tinker://bench-run/sampler_weights/final\"}}"
    )?;
    out.flush()
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// One case, interleaved: rl, then Python, `runs` rounds after one warm-up. Every read must
/// return the case's rows. Also returns the last thing the Python reader printed.
fn measure_case(
    case: &Case,
    rl: &mut Command,
    python: &mut Command,
    runs: usize,
) -> anyhow::Result<(Measured, Value)> {
    let bytes = std::fs::metadata(&case.path)
        .with_context(|| format!("cannot stat {}", case.path.display()))?
        .len();
    let mut samples: [Vec<f64>; 4] = std::array::from_fn(|_| Vec::with_capacity(runs));
    let mut said = Value::Null;
    for round in 0..=runs {
        let (rl_read, rl_process, _) = timed_read(rl, case.rows)?;
        let (python_read, python_process, python_said) = timed_read(python, case.rows)?;
        said = python_said;
        if round > 0 {
            for (samples, value) in
                samples
                    .iter_mut()
                    .zip([rl_read, python_read, rl_process, python_process])
            {
                samples.push(value);
            }
        }
    }
    let [rl_read, python_read, rl_process, python_process] = samples.map(|values| median(&values));
    Ok((
        Measured {
            bytes,
            rows: case.rows,
            rl_read,
            python_read,
            rl_process,
            python_process,
        },
        said,
    ))
}

/// Runs a reader: (its own read time, the whole process's time, what it printed), in seconds.
fn timed_read(command: &mut Command, rows: usize) -> anyhow::Result<(f64, f64, Value)> {
    let started = Instant::now();
    let said = json_of(command)?;
    let process = started.elapsed().as_secs_f64();
    let read_rows = said["rows"]
        .as_u64()
        .with_context(|| format!("`{}` printed no row count", display(command)))?;
    if usize::try_from(read_rows).ok() != Some(rows) {
        bail!(
            "`{}` read {read_rows} rows, not the {rows} written",
            display(command)
        );
    }
    let read = said["seconds"]
        .as_f64()
        .with_context(|| format!("`{}` printed no time", display(command)))?;
    Ok((read, process, said))
}

/// Runs a command that must succeed and print one JSON value.
fn json_of(command: &mut Command) -> anyhow::Result<Value> {
    let output = command
        .output()
        .with_context(|| format!("cannot run `{}`", display(command)))?;
    if !output.status.success() {
        bail!(
            "`{}` failed ({}): {}",
            display(command),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    serde_json::from_slice(&output.stdout)
        .with_context(|| format!("`{}` printed no JSON", display(command)))
}

/// The upper one of an even count, as elsewhere in the report.
fn millis(seconds: f64) -> String {
    let ms = seconds * 1e3;
    if ms < 10.0 {
        format!("{ms:.2} ms")
    } else {
        format!("{ms:.0} ms")
    }
}

fn rate(rows: usize, seconds: f64) -> String {
    let per_second = rows as f64 / seconds;
    if per_second >= 1e6 {
        format!("{:.2} M", per_second / 1e6)
    } else {
        format!("{:.0} k", per_second / 1e3)
    }
}

fn times(ratio: f64) -> String {
    if ratio >= 10.0 {
        format!("{ratio:.0}×")
    } else {
        format!("{ratio:.1}×")
    }
}

fn size(bytes: u64) -> String {
    format!("{:.2} MB", bytes as f64 / 1e6)
}

fn report(cases: &[Case], measured: &[Measured], about: &Value, runs: usize) -> String {
    let wandb = about["wandb"].as_str().unwrap_or("unknown");
    let protobuf = about["protobuf"].as_str().unwrap_or("unknown");
    let mut text = format!(
        "{TITLE}\n\n\
         `rl_metrics::read_wandb_file` and `rl_metrics::read_metrics_file` (called by \
         `xtask/src/bin/bench-metrics-read.rs`, built with `--release` and mimalloc as `rl` is) \
         against CPython reading the same file (`{SCRIPT}`, the test venv's Python). Each read \
         is a fresh process timing its own read, from opening the file to the last row, after \
         its imports; the whole process, timed from outside, is given for context. rl then \
         Python, {runs} rounds after one warm-up, medians; both must return every row written.\n\n\
         - WandB run file: written once per bench by the real wandb {wandb} SDK, offline, \
         {WANDB_STEPS} steps of the fixture trainer's keys (`trainer_row` of \
         `fixtures/wandb/log_offline_runs.py`). wandb {wandb} reads run files in its Go core and \
         ships no Python reader any more, so the Python side restates the SDK's former one \
         (`DataStore.open_for_scan` + `scan_data`: 32 KiB blocks, CRC-32 per chunk, split \
         records joined) and parses with the SDK's own protobuf `Record` ({protobuf} backend) \
         and `json.loads` of each history item's `value_json`, one dict per step.\n\
         - Metrics file: {JSONL_ROWS} rows shaped like `fixtures/metrics/complete.jsonl`'s, a \
         checkpoint event every {CHECKPOINT_EVERY} steps; Python reads it with `json.loads` per \
         line.\n\n\
         | file | size | rows | rl read | Python read | rl rows/s | Python rows/s | **rl ÷ Python** | whole process: rl, Python (ratio) |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    for (case, m) in cases.iter().zip(measured) {
        let _ = writeln!(
            text,
            "| {} | {} | {} | {} | {} | {} | {} | **{}** | {}, {} ({}) |",
            case.label,
            size(m.bytes),
            m.rows,
            millis(m.rl_read),
            millis(m.python_read),
            rate(m.rows, m.rl_read),
            rate(m.rows, m.python_read),
            times(m.python_read / m.rl_read),
            millis(m.rl_process),
            millis(m.python_process),
            times(m.python_process / m.rl_process),
        );
    }
    text.push_str(
        "\nrl ÷ Python is the ratio of rows per second (Python's read time over rl's). The \
         whole-process times add each side's start: for Python, CPython's start and, for the run \
         file, importing wandb (which its protobuf classes need).\n",
    );
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metrics_file_is_read_back_whole() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("metrics.jsonl");
        write_metrics_file(&path)?;
        let metrics = rl_metrics::read_metrics_file(&path)?;
        assert!(metrics.warnings.is_empty(), "{:?}", metrics.warnings);
        let rows = metrics.trainer.map_or(0, |run| run.history.len());
        assert_eq!(rows, JSONL_ROWS);
        assert_eq!(metrics.checkpoints.len(), JSONL_ROWS / CHECKPOINT_EVERY);
        assert!(metrics.final_weights.is_some());
        Ok(())
    }
}
