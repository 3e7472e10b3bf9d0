//! `cargo xtask demo`: the main job, on the bundled fixture tree. It grows with the workspace:
//! today discovery; the run lifecycle joins it when it exists.

use std::path::Path;
use std::process::Command;

use anyhow::Context;

use crate::run_command;

pub(crate) fn run(root: &Path) -> anyhow::Result<()> {
    // The dev profile shares its build with `cargo xtask test`, so CI pays for one build.
    run_command(Command::new("cargo").args(["build", "--quiet", "-p", "rl-cli"]))?;
    let rl = root.join("target/debug/rl");
    let tree = root.join("fixtures/tinker-atropos");
    let rl_with = |args: &[&str]| {
        let mut command = Command::new(&rl);
        command.args(args).arg("--root").arg(&tree);
        command
    };

    println!("\n== 1. Environments of the fixture tree (top level, like the original tool)");
    run_command(&mut rl_with(&["envs", "list"]))?;
    println!("\n== 2. One environment, with where its config class comes from");
    run_command(&mut rl_with(&["envs", "show", "gsm8k_harder"]))?;
    println!("\n== 3. A name two environments share is selected by key");
    run_command(&mut rl_with(&["envs", "show", "countdown@countdown_v2.py"]))?;

    let output = rl_with(&["envs", "list", "--recursive", "--json"]).output()?;
    let scan: serde_json::Value =
        serde_json::from_slice(&output.stdout).context("rl envs list --json printed no JSON")?;
    let count = |key: &str| scan[key].as_array().map_or(0, Vec::len);
    println!(
        "\nSummary: {} environments found in {} (recursive), {} files skipped with a reason, no \
         environment code run.",
        count("environments"),
        tree.display(),
        count("skipped"),
    );
    Ok(())
}
