//! Pre-flight against several models (issue 6): the wall time of one `rl preflight` of three
//! models against the slowest of the same models run alone, and against the sum of the three
//! (the original's sequential design), on the fixture OpenAI server.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, bail};
use serde_json::Value;

use super::{median, verdict};
use crate::display;
use crate::fixture_server::{FixtureServer, SERVER};

pub(super) const TITLE: &str = "## Pre-flight against several models (issue 6)";

/// Each round takes about a minute: the section measures at most this many (after a warm-up).
pub(super) const MAX_ROUNDS: usize = 5;

/// The fixture server's policies tested, one "model" each.
const MODELS: [&str; 3] = ["always-right", "half-right", "mixed"];
/// The fixture server's delay before each answer, in seconds (`MODEL@SECONDS`): a real endpoint
/// takes seconds per group, and none is the pure cost of the processes.
const LATENCIES: [u32; 2] = [2, 0];
const STEPS: &str = "3";
const GROUP_SIZE: &str = "4";

/// Issue 6: three models at once take at most this many times the slowest one alone.
const GOAL: f64 = 1.2;

/// The samples of one latency, in seconds, one per round.
#[derive(Default)]
struct Samples {
    at_once: Vec<f64>,
    /// The slowest of the three single-model tests of the round.
    slowest: Vec<f64>,
    /// The three single-model tests of the round together.
    sum: Vec<f64>,
    /// CPU time (user + system) of a single-model test, `rl` and its Python child together.
    single_cpu: Vec<f64>,
}

/// Measures `runs` rounds (capped at [`MAX_ROUNDS`]) after one warm-up and returns the report's
/// section.
pub(super) fn measure(
    root: &Path,
    rl: &Path,
    python: &Path,
    runs: usize,
) -> anyhow::Result<String> {
    let rounds = runs.clamp(1, MAX_ROUNDS);
    let started = Instant::now();
    let server = FixtureServer::start(root, python)?;
    let bench = Preflight::new(root, rl, python, &server.base_url)?;
    let ticks = clock_ticks()?;

    // Warms the page cache and Python's bytecode caches; not counted.
    bench.test(&[format!("{}@0", MODELS[0])])?;
    let mut samples: [Samples; 2] = Default::default();
    for round in 1..=rounds {
        for (&latency, samples) in LATENCIES.iter().zip(samples.iter_mut()) {
            let models: Vec<String> = MODELS.iter().map(|m| format!("{m}@{latency}")).collect();
            // `None` = the three at once, `Some(i)` = model i alone; the order turns each round
            // so that no test always runs first.
            let mut jobs = [None, Some(0), Some(1), Some(2)];
            let count = jobs.len();
            jobs.rotate_left(round % count);
            let mut at_once = f64::NAN;
            let mut singles = [f64::NAN; 3];
            for job in jobs {
                match job {
                    None => at_once = bench.test(&models)?.wall,
                    Some(index) => {
                        let cpu_before = children_cpu_ticks()?;
                        singles[index] = bench.test(&models[index..=index])?.wall;
                        let cpu = children_cpu_ticks()?.saturating_sub(cpu_before);
                        samples.single_cpu.push(cpu as f64 / ticks);
                    }
                }
            }
            let slowest = singles.iter().copied().fold(f64::NAN, f64::max);
            let sum: f64 = singles.iter().sum();
            eprintln!(
                "preflight {round}/{rounds}, {latency} s per request: three at once {at_once:.2} s, \
                 slowest alone {slowest:.2} s ({:.2}×), sum {sum:.2} s",
                at_once / slowest
            );
            samples.at_once.push(at_once);
            samples.slowest.push(slowest);
            samples.sum.push(sum);
        }
    }
    server.stop()?;
    let minutes = started.elapsed().as_secs_f64() / 60.0;
    eprintln!("preflight: {minutes:.1} min in all");
    Ok(report(&samples, rounds, minutes))
}

/// One `rl preflight` as timed from outside.
struct Test {
    wall: f64,
}

/// A state directory of its own with the local stack's operator settings and `arithmetic`
/// selected, and the fixture server's address.
struct Preflight {
    root: PathBuf,
    rl: PathBuf,
    base_url: String,
    home: tempfile::TempDir,
}

impl Preflight {
    fn new(root: &Path, rl: &Path, python: &Path, base_url: &str) -> anyhow::Result<Self> {
        let settings = crate::venv::local_stack_settings(root, python)?;
        let home = tempfile::Builder::new()
            .prefix("rl-bench-preflight-")
            .tempdir()
            .context("cannot create a temporary state directory")?;
        let config = home.path().join("config.toml");
        std::fs::write(&config, settings)
            .with_context(|| format!("cannot write {}", config.display()))?;
        let bench = Self {
            root: root.to_owned(),
            rl: rl.to_owned(),
            base_url: base_url.to_owned(),
            home,
        };
        let mut select = bench.command(&["select", "arithmetic", "--json"]);
        let output = select
            .output()
            .with_context(|| format!("cannot run `{}`", display(&select)))?;
        if !output.status.success() {
            bail!(
                "`{}` failed ({}): {}",
                display(&select),
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        Ok(bench)
    }

    fn command(&self, args: &[&str]) -> Command {
        crate::local_stack_rl(&self.rl, &self.root, self.home.path(), args)
    }

    /// `rl preflight --json` of these models; every one of them must succeed.
    fn test(&self, models: &[String]) -> anyhow::Result<Test> {
        let mut args = vec![
            "test",
            "--json",
            "--base-url",
            &self.base_url,
            "--steps",
            STEPS,
            "--group-size",
            GROUP_SIZE,
        ];
        for model in models {
            args.extend(["--model", model]);
        }
        let mut command = self.command(&args);
        let start = Instant::now();
        let output = command
            .output()
            .with_context(|| format!("cannot run `{}`", display(&command)))?;
        let wall = start.elapsed().as_secs_f64();
        let stdout = String::from_utf8_lossy(&output.stdout);
        if !output.status.success() {
            bail!(
                "`{}` failed ({}): {}{}",
                display(&command),
                output.status,
                stdout.trim(),
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        let report: Value = serde_json::from_str(&stdout)
            .with_context(|| format!("`{}` printed no JSON: {stdout}", display(&command)))?;
        if report["models_succeeded"].as_u64() != Some(models.len() as u64) {
            bail!(
                "`{}`: {} of {} models succeeded: {stdout}",
                display(&command),
                report["models_succeeded"],
                models.len()
            );
        }
        Ok(Test { wall })
    }
}

/// `getconf CLK_TCK`: the unit of the CPU times in `/proc`.
fn clock_ticks() -> anyhow::Result<f64> {
    let output = Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .context("cannot run `getconf CLK_TCK`")?;
    let text = String::from_utf8_lossy(&output.stdout);
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|ticks| *ticks > 0.0)
        .with_context(|| format!("`getconf CLK_TCK` said {text:?}"))
}

/// CPU time of this process's waited-for children and their waited-for descendants (cutime +
/// cstime of `/proc/self/stat`), in clock ticks: `rl` waits for its Python children.
fn children_cpu_ticks() -> anyhow::Result<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").context("cannot read /proc/self/stat")?;
    parse_children_ticks(&stat).with_context(|| format!("cannot read /proc/self/stat: {stat:?}"))
}

fn parse_children_ticks(stat: &str) -> Option<u64> {
    // The command name is in parentheses and may hold spaces: fields start after the last `)`,
    // with the state (field 3); cutime and cstime are fields 16 and 17.
    let fields: Vec<&str> = stat
        .get(stat.rfind(')')? + 1..)?
        .split_whitespace()
        .collect();
    let cutime: u64 = fields.get(13)?.parse().ok()?;
    let cstime: u64 = fields.get(14)?.parse().ok()?;
    Some(cutime + cstime)
}

/// The upper middle of an even count, as elsewhere in the report.
fn report(samples: &[Samples; 2], rounds: usize, minutes: f64) -> String {
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let models = MODELS.join("`, `");
    let mut text = format!(
        "{TITLE}\n\n\
         The wall time of one `rl preflight --json --base-url URL --model always-right@D \
         --model half-right@D --model mixed@D --steps {STEPS} --group-size {GROUP_SIZE}` (three \
         models at once, each in its own atroposlib `process`-mode Python process, on the \
         arithmetic environment of the local stack in a temporary `RL_HOME`) against the same \
         test of each model alone, timed from outside, on the fixture OpenAI server \
         (`{SERVER}`; the models `{models}` are its policies, and `@D` makes it wait D seconds \
         before each answer). D = 2 s stands for a real endpoint, which takes seconds per group; \
         D = 0 leaves the processes' own cost. Per round and latency: the three at once and the \
         three alone, in an order that turns each round; per round, the slowest single test and \
         the sum of the three (what the original's one-model-after-another design costs). \
         {rounds} rounds after one warm-up test, medians (ratios are of the medians; their range \
         is the ratio's within each round); every test must report all its models succeeded. \
         Goal (issue 6): three at once at most {GOAL}× the slowest single model alone.\n\n\
         | latency per request | three at once | slowest alone | **at once ÷ slowest** (rounds' range) | sum of the three alone | sum ÷ at once | goal ≤ {GOAL}× |\n\
         |---|---|---|---|---|---|---|\n",
    );
    let mut ratios = [f64::NAN; 2];
    for ((latency, samples), ratio) in LATENCIES.iter().zip(samples).zip(ratios.iter_mut()) {
        let at_once = median(&samples.at_once);
        let slowest = median(&samples.slowest);
        let sum = median(&samples.sum);
        *ratio = at_once / slowest;
        let per_round: Vec<f64> = samples
            .at_once
            .iter()
            .zip(&samples.slowest)
            .map(|(at_once, slowest)| at_once / slowest)
            .collect();
        let low = per_round.iter().copied().fold(f64::NAN, f64::min);
        let high = per_round.iter().copied().fold(f64::NAN, f64::max);
        let _ = writeln!(
            text,
            "| D = {latency} s | {at_once:.2} s | {slowest:.2} s | **{ratio:.2}×** ({low:.2}–{high:.2}×) | \
             {sum:.2} s | {:.2}× | **{}** |",
            sum / at_once,
            verdict(*ratio <= GOAL),
        );
    }
    let cpu = median(&samples[1].single_cpu);
    let parallel = cores.clamp(1, MODELS.len());
    let floor = MODELS.len() as f64 / parallel as f64;
    let over = median(&samples[0].at_once) - median(&samples[0].slowest);
    let startups = (floor - 1.0) * cpu;
    let _ = write!(
        text,
        "\nWith D = 2 s, the three at once take {:.2}× the slowest alone: the goal of at most \
         {GOAL}× is **{}**; the three one after another (the sum) take {:.2}× as long as \
         the three at once. Of the {over:.1} s the three at once take over the slowest alone, \
         the start-ups sharing the cores account for about {startups:.1} s (the D = 0 floor \
         below). ",
        ratios[0],
        verdict(ratios[0] <= GOAL),
        median(&samples[0].sum) / median(&samples[0].at_once),
    );
    if over > startups + 0.5 {
        text.push_str(
            "The rest is not the start-ups': the machine's other load (below) competes for the \
             same cores, and the three processes' own work between requests does too. ",
        );
    }
    let _ = write!(
        text,
        "With D = 0 the ratio is {:.2}×. Each model is a Python process that spends about \
         {cpu:.1} CPU-seconds (median of the single tests, `rl` and its child together, from \
         `/proc/self/stat`'s cutime + cstime), mostly starting up and importing atroposlib; \
         three of them on {cores} cores (`nproc`) need at least {:.1} s on the clock against \
         {cpu:.1} s for one, a floor of {floor:.1}× before any other work on the machine. ",
        ratios[1],
        cpu * MODELS.len() as f64 / parallel as f64,
    );
    if parallel < MODELS.len() {
        text.push_str(
            "So on this machine three at once cannot come near 1× without latency: the goal is \
             out of reach for D = 0 whatever rl does, and only a machine with at least 3 idle \
             cores would run the three side by side. ",
        );
    }
    let saved = median(&samples[1].sum) / median(&samples[1].at_once);
    if saved < GOAL {
        let _ = write!(
            text,
            "Without latency, the three at once save little or nothing over the three one after \
             another (sum ÷ at once {saved:.2}×): they share the same cores. ",
        );
    }
    let _ = writeln!(
        text,
        "Waiting on the endpoint costs no CPU, so with real latencies the processes' start-up \
         is a smaller share of the test and the ratio falls toward 1×. The section took \
         {minutes:.1} min."
    );
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn childrens_cpu_time_is_read_from_proc() {
        let stat = "1234 (a (b) c) S 1 1234 1234 0 -1 4194560 100 200 0 0 7 3 40 2 20 0 1 0 5";
        assert_eq!(parse_children_ticks(stat), Some(42));
        assert_eq!(parse_children_ticks("1234 (x) S 1"), None);
        assert!(children_cpu_ticks().is_ok());
    }

    #[test]
    fn the_median_is_the_upper_middle() {
        assert!((median(&[3.0, 1.0, 2.0]) - 2.0).abs() < 1e-12);
        assert!((median(&[4.0, 1.0, 3.0, 2.0]) - 3.0).abs() < 1e-12);
        assert!(median(&[]).is_nan());
    }
}
