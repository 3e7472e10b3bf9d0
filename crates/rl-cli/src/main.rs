//! `rl`: the command-line face of the workspace. Thin by design: parse arguments, call the
//! library crates, print. Exit codes: 0 success, 1 a failed request, 2 a usage error.

mod config;
mod context;
mod envs;
mod metrics;
mod output;
mod preflight;
mod runs;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::metrics::SourceChoice;

/// Parsing thousands of Python files is allocation-heavy; mimalloc cuts the scan's time
/// noticeably against glibc's malloc (see docs/decisions.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(
    name = "rl",
    version,
    about = "Reinforcement-learning runs on Atropos environments"
)]
struct Cli {
    /// State directory: selection, runs, settings (`config.toml`) and `.env`.
    #[arg(long, global = true, env = "RL_HOME", value_name = "DIR")]
    home: Option<PathBuf>,
    /// The tinker-atropos tree (defaults to the configured one, else the current folder).
    #[arg(
        long,
        global = true,
        env = "RL_TINKER_ATROPOS_ROOT",
        value_name = "DIR"
    )]
    root: Option<PathBuf>,
    /// The environments folder (defaults to ROOT/tinker_atropos/environments).
    #[arg(long, global = true, env = "RL_ENVIRONMENTS_DIR", value_name = "DIR")]
    envs_dir: Option<PathBuf>,
    /// Print JSON instead of tables.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Discover environments.
    #[command(subcommand)]
    Envs(envs::EnvsCommand),
    /// Select the environment to configure and train.
    Select {
        /// Name, key (`name@file.py`) or class name.
        name: String,
    },
    /// Show and edit the selected environment's configuration.
    #[command(subcommand)]
    Config(config::ConfigCommand),
    /// Start a training run of the selected environment (API, trainer, environment).
    Start {
        /// Wait until the run reaches this point before returning.
        #[arg(long, value_enum, value_name = "UNTIL")]
        wait: Option<runs::Until>,
        /// Seconds `--wait` may take.
        #[arg(long, default_value_t = 1800.0)]
        timeout: f64,
    },
    /// List runs, newest first.
    Runs,
    /// A run's state, components, ports, logs and events.
    Status {
        run_id: String,
        /// Only events after this cursor (`next_since` of an earlier answer).
        #[arg(long, default_value_t = 0)]
        since: i64,
        /// Where to read the run's metrics.
        #[arg(long, value_enum, default_value_t = SourceChoice::Auto)]
        source: SourceChoice,
    },
    /// A run's metrics: latest numbers, every step, final weights, checkpoints and health.
    Results {
        run_id: String,
        /// Where to read the run's metrics.
        #[arg(long, value_enum, default_value_t = SourceChoice::Auto)]
        source: SourceChoice,
    },
    /// A run's events after a cursor.
    Events {
        run_id: String,
        #[arg(long, default_value_t = 0)]
        since: i64,
        #[arg(long, default_value_t = rl_process::DEFAULT_EVENT_LIMIT)]
        limit: usize,
    },
    /// Block until a run changes state, is running, or has finished.
    Wait {
        run_id: String,
        #[arg(long, value_enum, default_value = "change")]
        until: runs::Until,
        /// Seconds to wait at most.
        #[arg(long, default_value_t = 60.0)]
        timeout: f64,
        #[arg(long, default_value_t = 0)]
        since: i64,
    },
    /// Stop a run: environment, trainer, then API, each as a whole process group.
    Stop { run_id: String },
    /// Check what rl needs: Python, atroposlib, the tree and its environments, keys, state.
    Doctor,
    /// Pre-flight: the selected environment against several models, before training.
    #[command(subcommand)]
    Preflight(preflight::PreflightCommand),
    /// The supervisor of one run (started by `rl start`, detached).
    #[command(hide = true)]
    Supervise { run_id: String },
}

/// Exits 1 when a required check fails, so scripts can gate on it.
fn doctor(context: &context::Context, as_json: bool) -> anyhow::Result<()> {
    let report =
        rl_tools::health_check(&context.home()?, &context.settings()?, &context.secrets()?);
    if as_json {
        output::json(&report)?;
    } else {
        let mut table = output::table(&["check", "", "found", "fix"]);
        for check in &report.checks {
            let mark = match (check.ok, check.required) {
                (true, _) => "ok",
                (false, true) => "MISSING",
                (false, false) => "optional",
            };
            table.add_row([
                check.name.clone(),
                mark.to_owned(),
                check.detail.clone(),
                check.fix.clone().unwrap_or_default(),
            ]);
        }
        output::line(table)?;
    }
    if report.healthy {
        Ok(())
    } else {
        Err(anyhow::Error::new(NotHealthy))
    }
}

/// A failed required check: already reported, so only the exit code is left to give.
#[derive(Debug)]
struct NotHealthy;

impl std::fmt::Display for NotHealthy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a required check failed (see above)")
    }
}

impl std::error::Error for NotHealthy {}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let context = context::Context::new(cli.home, cli.root, cli.envs_dir);
    let outcome = match cli.command {
        Command::Envs(command) => envs::run(command, &context, cli.json),
        Command::Select { name } => config::select(&context, &name, cli.json),
        Command::Config(command) => config::run(command, &context, cli.json),
        Command::Start { wait, timeout } => runs::start(&context, wait, timeout, cli.json),
        Command::Runs => runs::list(&context, cli.json),
        Command::Status {
            run_id,
            since,
            source,
        } => runs::status(&context, &run_id, since, source, cli.json),
        Command::Results { run_id, source } => runs::results(&context, &run_id, source, cli.json),
        Command::Events {
            run_id,
            since,
            limit,
        } => runs::events(&context, &run_id, since, limit, cli.json),
        Command::Wait {
            run_id,
            until,
            timeout,
            since,
        } => runs::wait(&context, &run_id, until, timeout, since, cli.json),
        Command::Stop { run_id } => runs::stop(&context, &run_id, cli.json),
        Command::Supervise { run_id } => runs::supervise(&context, &run_id),
        Command::Preflight(command) => preflight::run(&context, command, cli.json),
        Command::Doctor => doctor(&context, cli.json),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) if error.is::<NotHealthy>() => ExitCode::FAILURE,
        Err(error) => {
            output::error(&error, cli.json);
            ExitCode::FAILURE
        }
    }
}
