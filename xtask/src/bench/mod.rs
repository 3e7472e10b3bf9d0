//! `cargo xtask bench`: every benchmark of the project, written to docs/benchmarks.md.
//!
//! The machine is shared and noisy, so figures are medians of several runs, and verdicts compare
//! quantities measured in the same run (a speed-up, start → running over the components' own
//! readiness) wherever the goal allows; memory and stop time are absolute budgets.
//! `--only SECTION` measures one section and keeps the others' text.

mod corpus;
mod metrics;
mod preflight;
mod runs;
mod tools;
mod training;

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::{display, run_command, venv};

#[derive(clap::Args)]
pub(crate) struct BenchArgs {
    /// Also measure discovery on these folders (each scanned at its top level).
    #[arg(long = "dir", value_name = "DIR")]
    dirs: Vec<PathBuf>,
    /// Timed runs of each command (after one warm-up); training runs and pre-flight rounds take
    /// at most 5.
    #[arg(long, default_value_t = 10)]
    runs: usize,
    /// Files in the generated corpus.
    #[arg(long, default_value_t = 320)]
    corpus_files: usize,
    /// Print the report instead of writing docs/benchmarks.md.
    #[arg(long)]
    dry_run: bool,
    /// Measure one section only; the others keep their text in docs/benchmarks.md.
    #[arg(long, value_enum, value_name = "SECTION")]
    only: Option<Section>,
}

/// The sections of docs/benchmarks.md, in their order there.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Section {
    /// `rl envs list` against the original Python scan (issue 2).
    Discovery,
    /// The run lifecycle on the local stack (issue 4).
    Runs,
    /// Reading a run's metrics: WandB run files and the trainer's metrics file (issue 5).
    Metrics,
    /// Three models at once in `rl preflight` against the slowest alone (issue 6).
    Preflight,
    /// `rl tool call rl_list_runs` against Python's start-up (issue 7).
    Tools,
    /// Real training on the local engine against a bare SDK script (issue 15).
    Training,
    /// The stage times of `bash .ci/run` on a fresh clone (issue 54): measured by whoever runs
    /// it (its stage headings print them) and written by hand, so always kept as written.
    #[value(skip)]
    Suite,
}

impl Section {
    const ALL: [Self; 7] = [
        Self::Discovery,
        Self::Runs,
        Self::Metrics,
        Self::Preflight,
        Self::Tools,
        Self::Training,
        Self::Suite,
    ];

    fn title(self) -> &'static str {
        match self {
            Self::Discovery => DISCOVERY_TITLE,
            Self::Runs => runs::TITLE,
            Self::Metrics => metrics::TITLE,
            Self::Preflight => preflight::TITLE,
            Self::Tools => tools::TITLE,
            Self::Training => training::TITLE,
            Self::Suite => SUITE_TITLE,
        }
    }
}

const DISCOVERY_TITLE: &str = "## Environment discovery (issue 2)";
const SUITE_TITLE: &str = "## The test suite's time on a fresh clone (issue 54)";

/// The discovery goal of issue 2: rl's scan at least this many times faster than CPython's.
const DISCOVERY_GOAL: f64 = 20.0;

const REPORT: &str = "docs/benchmarks.md";

pub(crate) fn run(root: &Path, args: &BenchArgs) -> anyhow::Result<()> {
    if args.runs == 0 {
        bail!("--runs must be at least 1");
    }
    let wanted = |section: Section| args.only.is_none_or(|only| only == section);
    // Before the build, so that a venv that cannot be made fails at once.
    let python = if wanted(Section::Runs)
        || wanted(Section::Metrics)
        || wanted(Section::Preflight)
        || wanted(Section::Tools)
        || wanted(Section::Training)
    {
        Some(venv::ensure_test_venv(root).context(
            "the training-run, metrics and pre-flight benchmarks need the Python test venv that \
             `cargo xtask test` provisions (`--only discovery` does without it)",
        )?)
    } else {
        None
    };
    run_command(crate::cargo().args(["build", "--quiet", "--release", "-p", "rl-cli"]))?;
    let rl = root.join("target/release/rl");

    // Sections measured now; with `--only`, the others are kept from the written report.
    // And the suite's times, which no benchmark measures, are always kept.
    let previous = std::fs::read_to_string(root.join(REPORT)).unwrap_or_default();
    let kept = |section: Section| {
        let kept = section_of(&previous, section.title()).map(str::to_owned);
        if kept.is_none() && !args.dry_run {
            eprintln!("{REPORT} has no `{}` section to keep", section.title());
        }
        kept
    };
    let mut sections = Vec::new();
    for section in Section::ALL {
        let text = match section {
            _ if !wanted(section) => kept(section),
            Section::Suite => kept(section),
            Section::Discovery => {
                let load = load_note();
                Some(discovery(root, &rl, args)? + &load)
            }
            Section::Runs => {
                let python = python
                    .as_deref()
                    .context("the Python test venv is missing")?;
                let load = load_note();
                Some(runs::measure(root, &rl, python, args.runs)? + &load)
            }
            Section::Metrics => {
                let python = python
                    .as_deref()
                    .context("the Python test venv is missing")?;
                let load = load_note();
                Some(metrics::measure(root, python, args.runs)? + &load)
            }
            Section::Preflight => {
                let python = python
                    .as_deref()
                    .context("the Python test venv is missing")?;
                let load = load_note();
                Some(preflight::measure(root, &rl, python, args.runs)? + &load)
            }
            Section::Tools => {
                let python = python
                    .as_deref()
                    .context("the Python test venv is missing")?;
                let load = load_note();
                Some(tools::measure(root, &rl, python, args.runs)? + &load)
            }
            Section::Training => {
                let python = python
                    .as_deref()
                    .context("the Python test venv is missing")?;
                let engine = venv::ensure_local_engine(root)?;
                let load = load_note();
                Some(training::measure(root, &rl, python, &engine)? + &load)
            }
        };
        sections.extend(text.map(|text| format!("{}\n", text.trim_end())));
    }
    let report = header() + &sections.join("\n");

    if args.dry_run {
        println!("{report}");
    } else {
        std::fs::write(root.join(REPORT), &report)?;
        eprintln!("wrote {REPORT}");
    }
    Ok(())
}

/// The section of a report under `title`, up to the next `## ` heading.
fn section_of<'a>(report: &'a str, title: &str) -> Option<&'a str> {
    let start = report.match_indices(title).map(|(at, _)| at).find(|&at| {
        (at == 0 || report[..at].ends_with('\n')) && report[at + title.len()..].starts_with('\n')
    })?;
    let body = &report[start..];
    let end = body[title.len()..]
        .find("\n## ")
        .map_or(body.len(), |at| title.len() + at + 1);
    Some(&body[..end])
}

fn discovery(root: &Path, rl: &Path, args: &BenchArgs) -> anyhow::Result<String> {
    let python_scan = root.join("xtask/python/original_scan.py");
    let corpus_dir = root.join("target/bench/discovery-corpus");
    let facts = corpus::generate(&corpus_dir, args.corpus_files)?;
    let mut folders = vec![(
        format!(
            "generated corpus: {} files, {:.1} MB",
            facts.files,
            facts.bytes as f64 / 1e6
        ),
        corpus_dir,
    )];
    // The fixture tree is small but has every odd shape; any folder given is measured too.
    folders.push((
        "fixture tree (`fixtures/tinker-atropos/tinker_atropos/environments`)".to_owned(),
        root.join("fixtures/tinker-atropos/tinker_atropos/environments"),
    ));
    for dir in &args.dirs {
        folders.push((format!("`{}`", dir.display()), dir.clone()));
    }

    let mut report = format!(
        "{DISCOVERY_TITLE}\n\n\
         `rl envs list --json --envs-dir DIR` as a whole process against \
         `python3 xtask/python/original_scan.py DIR` (the original tool's algorithm with CPython's \
         `ast`), both at the folder's top level, each {runs} times after one warm-up, \
         interleaved. Goal: rl at least 20× faster, and finding every environment the Python \
         scan finds.\n\n\
         | folder | rl median | Python median | speed-up | found by Python | found by rl | missed by rl | goal |\n\
         |---|---|---|---|---|---|---|---|\n",
        runs = args.runs,
    );
    let bench_home = root.join("target/bench/discovery-home");
    std::fs::create_dir_all(&bench_home)?;
    for (label, dir) in &folders {
        // A state directory of its own: the developer's config.toml must not change the scan.
        let mut rl_cmd = Command::new(rl);
        rl_cmd
            .args(["envs", "list", "--json", "--home"])
            .arg(&bench_home)
            .arg("--envs-dir")
            .arg(dir);
        let mut py_cmd = Command::new("python3");
        py_cmd.arg(&python_scan).arg(dir);

        let rl_found = found_by_rl(&rl_cmd)?;
        let py_found = found_by_python(&py_cmd)?;
        let missed = py_found.difference(&rl_found).count();
        let [rl_time, py_time] = interleaved_medians([&mut rl_cmd, &mut py_cmd], args.runs)?;
        let speedup = py_time.as_secs_f64() / rl_time.as_secs_f64();
        let verdict = verdict(speedup >= DISCOVERY_GOAL && missed == 0);
        let _ = writeln!(
            report,
            "| {label} | {} | {} | **{speedup:.1}×** | {} | {} | {missed} | {verdict} |",
            millis(rl_time),
            millis(py_time),
            py_found.len(),
            rl_found.len(),
        );
        eprintln!("discovery on {label}: {speedup:.1}× faster, {missed} missed");
    }
    report.push_str(
        "\nrl finds more because it follows aliased imports, subclasses of environments in other \
         files and classes defined earlier in the same file; the Python scan only sees `BaseEnv` \
         written as a base.\n",
    );
    Ok(report)
}

fn header() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|line| line.starts_with("model name"))
                .and_then(|line| line.split(':').nth(1))
                .map(|model| model.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let python = Command::new("python3")
        .arg("--version")
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .unwrap_or_default();
    format!(
        "# Benchmarks\n\n\
         Written by `cargo xtask bench` (`--only SECTION` rewrites one section and keeps the \
         others). Figures are medians of timed runs after a warm-up; each section says how many. \
         The machine is shared and noisy: read the ratios, which are measured in one run, not \
         the absolute times.\n\n\
         Machine: {cores} cores, {cpu}; {python}; rl built with `--release`.\n\n",
    )
}

/// The machine's load as a section starts: other work on a shared machine shows in the times.
fn load_note() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next().map(str::to_owned))
        .map_or_else(String::new, |load| {
            let cores = std::thread::available_parallelism().map_or(0, usize::from);
            format!("\nLoad average (1 min) as this section started: {load} on {cores} cores.\n")
        })
}

/// Runs the commands in turn, `runs` times each after one warm-up, and returns their medians.
/// Interleaving spreads the machine's noise over all of them alike.
fn interleaved_medians<const N: usize>(
    mut commands: [&mut Command; N],
    runs: usize,
) -> anyhow::Result<[Duration; N]> {
    let mut samples: [Vec<Duration>; N] = std::array::from_fn(|_| Vec::with_capacity(runs));
    for round in 0..=runs {
        for (command, samples) in commands.iter_mut().zip(samples.iter_mut()) {
            let start = Instant::now();
            let output = command.output().with_context(|| display(command))?;
            let elapsed = start.elapsed();
            if !output.status.success() {
                bail!(
                    "`{}` failed: {}",
                    display(command),
                    String::from_utf8_lossy(&output.stderr)
                );
            }
            if round > 0 {
                samples.push(elapsed);
            }
        }
    }
    Ok(samples.map(|mut samples| {
        samples.sort();
        samples[samples.len() / 2]
    }))
}

fn millis(duration: Duration) -> String {
    format!("{:.1} ms", duration.as_secs_f64() * 1e3)
}

type Found = BTreeSet<(String, String)>;

/// rl lists each environment's `file_path`; the Python scan, its file name as `file`.
fn found_by_rl(command: &Command) -> anyhow::Result<Found> {
    let scan = json_output(command)?;
    collect_found(&scan["environments"], |env| {
        Path::new(env["file_path"].as_str()?)
            .file_name()?
            .to_str()
            .map(str::to_owned)
    })
}

fn found_by_python(command: &Command) -> anyhow::Result<Found> {
    collect_found(&json_output(command)?, |env| {
        env["file"].as_str().map(str::to_owned)
    })
}

fn json_output(command: &Command) -> anyhow::Result<serde_json::Value> {
    let mut command = rebuild(command);
    let output = command.output().with_context(|| display(&command))?;
    if !output.status.success() {
        bail!(
            "`{}` failed: {}",
            display(&command),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    serde_json::from_slice(&output.stdout)
        .with_context(|| format!("`{}` printed no JSON", display(&command)))
}

fn collect_found(
    list: &serde_json::Value,
    file_of: impl Fn(&serde_json::Value) -> Option<String>,
) -> anyhow::Result<Found> {
    let list = list
        .as_array()
        .context("expected a JSON list of environments")?;
    let read: Vec<Option<(String, String)>> = list
        .iter()
        .map(|env| Some((file_of(env)?, env["class_name"].as_str()?.to_owned())))
        .collect();
    // An entry without them is a misread answer, not a finding.
    let misread = read.iter().filter(|entry| entry.is_none()).count();
    anyhow::ensure!(
        misread == 0,
        "{misread} of {} environments lack a file or a class name",
        list.len()
    );
    Ok(read.into_iter().flatten().collect())
}

/// `Command` is not `Clone`; rebuild one from its parts.
fn rebuild(command: &Command) -> Command {
    let mut copy = Command::new(command.get_program());
    copy.args(command.get_args());
    copy
}

/// The middle of the samples (the upper one of an even count); NaN for none.
fn median(values: &[f64]) -> f64 {
    let mut values = values.to_vec();
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

/// How a goal fares, in the report's words.
fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "NOT met" }
}

#[cfg(test)]
mod tests {
    use super::section_of;

    #[test]
    fn a_section_runs_to_the_next_heading() {
        let report = "# Benchmarks\n\nintro\n\n## A (issue 2)\n\ntext\n\n## B (issue 4)\n\nmore\n";
        assert_eq!(
            section_of(report, "## A (issue 2)"),
            Some("## A (issue 2)\n\ntext\n\n")
        );
        assert_eq!(
            section_of(report, "## B (issue 4)"),
            Some("## B (issue 4)\n\nmore\n")
        );
        assert_eq!(section_of(report, "## A"), None);
        assert_eq!(section_of(report, "## C"), None);
    }
}
