//! `rl`: the command-line face of the workspace. Thin by design: parse arguments, call the
//! library crates, print. Exit codes: 0 success, 1 a failed request, 2 a usage error.

mod config;
mod context;
mod envs;
mod output;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let context = context::Context::new(cli.home, cli.root, cli.envs_dir);
    let outcome = match cli.command {
        Command::Envs(command) => envs::run(command, &context, cli.json),
        Command::Select { name } => config::select(&context, &name, cli.json),
        Command::Config(command) => config::run(command, &context, cli.json),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            output::error(&error, cli.json);
            ExitCode::FAILURE
        }
    }
}
