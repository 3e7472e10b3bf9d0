//! `rl`: the command-line face of the workspace. Thin by design: parse arguments, call the
//! operations of rl-tools (the same ones agents reach over MCP and HTTP), print. Exit codes:
//! 0 success, 1 a failed request, 2 a usage error.

mod as_commands;
mod checkpoints;
mod compare;
mod config;
mod context;
mod curves;
mod envs;
mod mcp;
mod mcp_config;
mod output;
mod preflight;
mod run_views;
mod runs;
mod serve;
mod serving;
mod setup;
mod sweep;
mod tool;
mod watch;
mod work;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

/// Parsing thousands of Python files is allocation-heavy; mimalloc cuts the scan's time
/// noticeably against glibc's malloc (see docs/decisions.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `rl --version`: the package version and the commit it was built from.
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("RL_COMMIT"), ")");

#[derive(Debug, Parser)]
#[command(
    name = "rl",
    version = VERSION,
    about = "Reinforcement-learning runs on Atropos and verifiers environments"
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
    /// Print JSON instead of tables (the same JSON the agent tools answer with).
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Discover environments, or write a new one from rl's template.
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
    /// Start, watch, stop and collect training runs.
    #[command(subcommand)]
    Runs(runs::RunsCommand),
    /// Try several settings at once: a grid of runs, a few at a time, ranked.
    #[command(subcommand)]
    Sweep(sweep::SweepCommand),
    /// List what runs saved; export a checkpoint as a PEFT adapter.
    #[command(subcommand)]
    Checkpoints(checkpoints::CheckpointsCommand),
    /// Did training help? A run's checkpoint against its base model on the run's
    /// environment, with confidence intervals and a verdict.
    Compare(compare::CompareArgs),
    /// Pre-flight: the selected environment against several models, before training.
    #[command(visible_alias = "test")]
    Preflight(preflight::PreflightCommand),
    /// Make the Python a run needs (and with `--engine local` the local engine's) in the
    /// state directory, and point config.toml at it; idempotent, and repairs what is missing.
    Setup(setup::SetupArgs),
    /// Check what rl needs: Python, atroposlib, the tree and its environments, keys, state.
    Doctor,
    /// The agent tools (`rl_*`) as agents call them: list, schemas, call one.
    #[command(subcommand)]
    Tool(tool::ToolCommand),
    /// Serve the agent tools over the Model Context Protocol on stdin/stdout.
    Mcp {
        /// Print the configuration that connects this MCP client to rl, instead of serving.
        #[arg(long, value_enum, value_name = "CLIENT")]
        print_config: Option<mcp_config::McpClient>,
    },
    /// Serve the RL API over HTTP (loopback only unless told otherwise).
    Serve(serve::ServeArgs),
    /// Print a shell completion script (e.g. `rl completions bash > ~/.local/share/bash-completion/completions/rl`).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// The supervisor of one run (started by `rl runs start`, detached).
    #[command(hide = true)]
    Supervise { run_id: String },
    /// The worker of a long tool call started without waiting (started by the tools, detached).
    #[command(hide = true)]
    Work,
}

/// Exits 1 when a required check fails, so scripts can gate on it.
fn doctor(context: &context::Context, as_json: bool) -> anyhow::Result<()> {
    let report = context.tools()?.health_check();
    if as_json {
        output::json(&report)?;
    } else {
        let mut table = output::table(&["check", "", "found", "fix"]);
        for check in &report.checks {
            let (mark, tone) = match (check.ok, check.required) {
                (true, _) => ("ok", output::Tone::Good),
                (false, true) => ("MISSING", output::Tone::Bad),
                (false, false) => ("optional", output::Tone::Quiet),
            };
            table.add_row([
                output::cell(&check.name),
                output::toned(mark, tone),
                output::cell(output::for_people(&check.detail)),
                output::cell(output::for_people(check.fix.as_deref().unwrap_or_default())),
            ]);
        }
        output::line(table)?;
        if let Some(losses) = &report.losses {
            output::loss_table(losses)?;
        }
    }
    if report.healthy {
        Ok(())
    } else {
        Err(anyhow::Error::new(output::AlreadyReported(1)))
    }
}

/// A command line clap refused: with `--json` among the arguments, the refusal as the tools'
/// error object on stdout (an agent reads stdout only), else clap's own text; exit 2 either
/// way (help and version asked for exit 0).
fn usage_error(refusal: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        refusal.kind(),
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
    ) || !json_asked(std::env::args_os().skip(1))
    {
        refusal.exit()
    }
    // Plain text (no colour), clap's "error: " dropped: the first line is the cause.
    let text = refusal.render().to_string();
    let cause = text
        .lines()
        .find(|line| !line.trim().is_empty())
        .unwrap_or("the command line is not one rl understands");
    let cause = cause.strip_prefix("error: ").unwrap_or(cause);
    let mut answer = output::error_json(anyhow::anyhow!("{cause}"), None);
    if let Some(object) = answer.as_object_mut() {
        object.insert("usage".to_owned(), text.trim_end().into());
    }
    let _ = output::json(&answer);
    ExitCode::from(2)
}

/// Whether `--json` is among the arguments (before a `--` that ends the options).
fn json_asked(arguments: impl Iterator<Item = std::ffi::OsString>) -> bool {
    arguments
        .take_while(|argument| argument != "--")
        .any(|argument| argument == "--json")
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(refusal) => return usage_error(&refusal),
    };
    let context = context::Context::new(cli.home, cli.root, cli.envs_dir);
    let as_json = cli.json;
    // A sweep outlives whoever started it: any command (but the detached ones and those that
    // touch no state) gives a sweep whose driver is gone a new one.
    if !matches!(
        cli.command,
        Command::Supervise { .. }
            | Command::Work
            | Command::Completions { .. }
            | Command::Sweep(sweep::SweepCommand::Drive { .. })
            | Command::Mcp {
                print_config: Some(_)
            }
    ) {
        context.resume_sweeps();
    }
    let outcome = match cli.command {
        Command::Envs(command) => envs::run(command, &context, as_json),
        Command::Select { name } => config::select(&context, &name, as_json),
        Command::Config(command) => config::run(command, &context, as_json),
        Command::Runs(command) => runs::run(command, &context, as_json),
        Command::Sweep(command) => sweep::run(command, &context, as_json),
        Command::Checkpoints(command) => checkpoints::run(command, &context, as_json),
        Command::Preflight(command) => preflight::run(&context, command, as_json),
        Command::Compare(args) => compare::run(&context, args, as_json),
        Command::Setup(args) => setup::run(&context, &args, as_json),
        Command::Doctor => doctor(&context, as_json),
        Command::Tool(command) => tool::run(command, &context, as_json),
        Command::Mcp {
            print_config: Some(client),
        } => mcp_config::print(&context, client),
        Command::Mcp { print_config: None } => mcp::run(&context),
        Command::Serve(args) => serve::run(&context, args),
        Command::Completions { shell } => {
            let mut command = Cli::command();
            clap_complete::generate(shell, &mut command, "rl", &mut std::io::stdout());
            Ok(())
        }
        Command::Supervise { run_id } => runs::supervise(&context, &run_id),
        Command::Work => work::run(&context),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            if let Some(output::AlreadyReported(code)) =
                error.downcast_ref::<output::AlreadyReported>()
            {
                ExitCode::from(*code)
            } else {
                // The names an error answer offers (environments, fields) need the tools.
                let tools = as_json.then(|| context.tools().ok()).flatten();
                output::error(error, as_json, tools.as_ref());
                ExitCode::FAILURE
            }
        }
    }
}
