//! `cargo xtask <task>`: the project's own automation, in Rust so it needs nothing but cargo.

#![allow(clippy::print_stdout, clippy::print_stderr)]

mod bench;
mod demo;
mod fixture_server;
mod graph;
mod node;
mod pins;
mod quick;
mod sample;
mod schedule;
mod slowest;
mod test;
mod vendor;
mod venv;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cargo xtask")]
struct Xtask {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Run every test, snapshot checks included.
    Test(test::TestArgs),
    /// The main job: the whole workflow on the bundled fixtures, no keys, no network.
    Demo,
    /// Make (or find current) every Python the tests run against, as `test` does first; CI runs
    /// it beside the demo so the downloads overlap the build.
    Venvs,
    /// Run every benchmark and write docs/benchmarks.md.
    Bench(bench::BenchArgs),
    /// Fetch the run pages' chart library (uPlot) into the binary's assets, or check them.
    Vendor(vendor::VendorArgs),
    /// Each pinned Python package beside its newest release on PyPI (reports only; exits 0).
    Pins,
    /// The crate graph and each crate's module graph, with every circle named.
    Graph,
}

fn main() -> std::process::ExitCode {
    let task = Xtask::parse().task;
    let root = workspace_root();
    let outcome = std::env::set_current_dir(&root)
        .map_err(anyhow::Error::from)
        .and_then(|()| match task {
            Task::Test(args) => test::run(&root, &args),
            Task::Demo => demo::run(&root),
            Task::Venvs => venv::TestPythons::ensure(&root).map(drop),
            Task::Bench(args) => bench::run(&root, &args),
            Task::Vendor(args) => vendor::run(&root, &args),
            Task::Graph => graph::run(&root),
            Task::Pins => {
                pins::run();
                Ok(())
            }
        });
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("xtask: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_owned)
}

/// `cargo`, without the variables `cargo run` gave this process (`CARGO_PKG_NAME=xtask`,
/// `CARGO_MANIFEST_DIR`, …): build scripts that watch them (ring's, through `cc`) would see
/// them change between a build started here and one started from a shell, and rebuild ring,
/// rustls, reqwest and every crate of rl above them each time (80 s in CI).
pub(crate) fn cargo() -> Command {
    let mut command = Command::new("cargo");
    for (name, _) in std::env::vars_os() {
        let text = name.to_string_lossy();
        if text.starts_with("CARGO_PKG_")
            || matches!(
                text.as_ref(),
                "CARGO_MANIFEST_DIR"
                    | "CARGO_MANIFEST_PATH"
                    | "CARGO_MANIFEST_LINKS"
                    | "CARGO_CRATE_NAME"
                    | "CARGO_BIN_NAME"
                    | "CARGO_PRIMARY_PACKAGE"
            )
        {
            command.env_remove(&name);
        }
    }
    command
}

/// Runs a command, echoing it, and fails when it fails; one that took long says how long, so a
/// slow CI log says where its time went.
pub(crate) fn run_command(command: &mut Command) -> anyhow::Result<()> {
    eprintln!("$ {}", display(command));
    let started = std::time::Instant::now();
    let status = command
        .status()
        .with_context(|| format!("cannot start {}", display(command)))?;
    let took = started.elapsed();
    if took.as_secs() >= 20 {
        eprintln!("xtask: took {:.0?}: {}", took, display(command));
    }
    if !status.success() {
        bail!("`{}` failed ({status})", display(command));
    }
    Ok(())
}

pub(crate) fn display(command: &Command) -> String {
    let mut parts = vec![command.get_program().to_string_lossy().into_owned()];
    parts.extend(
        command
            .get_args()
            .map(|arg| arg.to_string_lossy().into_owned()),
    );
    parts.join(" ")
}

/// `rl ARGS` on the local stack in `home`: the caller's own `RL_*` settings would override the
/// stack's, and no key is needed, so neither is passed on.
pub(crate) fn local_stack_rl(rl: &Path, root: &Path, home: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(rl);
    command.args(args).current_dir(root).env("RL_HOME", home);
    for (name, _) in std::env::vars_os() {
        let text = name.to_string_lossy();
        if (text.starts_with("RL_") && name != "RL_HOME") || text.ends_with("_API_KEY") {
            command.env_remove(name);
        }
    }
    command
}
