//! The rl side of `cargo xtask bench --only metrics`, built with `--release` (the xtask itself is
//! a debug build): reads one file with rl-metrics and prints `{"rows": N, "seconds": S}`, the
//! history rows read and the seconds the read took, measured inside the process.
//!
//! usage: bench-metrics-read wandb RUN_FILE | jsonl METRICS_FILE

use std::io::Write as _;
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, bail};

/// The `rl` binary's allocator, so that the readers allocate here as they do in `rl`.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [kind, path] = args.as_slice() else {
        bail!("usage: bench-metrics-read wandb RUN_FILE | jsonl METRICS_FILE");
    };
    let path = Path::new(path);
    let started = Instant::now();
    let (rows, problems) = match kind.as_str() {
        "wandb" => {
            let file = rl_metrics::read_wandb_file(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            (file.run.history.len(), file.problems)
        }
        "jsonl" => {
            let metrics = rl_metrics::read_metrics_file(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            let rows = metrics.trainer.as_ref().map_or(0, |run| run.history.len());
            (rows, metrics.warnings)
        }
        other => bail!("unknown file kind {other:?}; expected wandb or jsonl"),
    };
    let seconds = started.elapsed().as_secs_f64();
    // A reader that skipped part of the file did less work: the comparison would be unfair.
    if !problems.is_empty() {
        bail!("{} was read only in part: {problems:?}", path.display());
    }
    let mut stdout = std::io::stdout().lock();
    writeln!(
        stdout,
        "{}",
        serde_json::json!({ "rows": rows, "seconds": seconds })
    )?;
    Ok(())
}
