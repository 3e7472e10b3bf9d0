//! `cargo xtask demo`: the main job, on the bundled fixture tree, with a state directory of its
//! own. It grows with the workspace: today discovery and configuration; the run lifecycle joins
//! it when it exists.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, bail};

use crate::run_command;

pub(crate) fn run(root: &Path) -> anyhow::Result<()> {
    // The dev profile shares its build with `cargo xtask test`, so CI pays for one build.
    run_command(Command::new("cargo").args(["build", "--quiet", "-p", "rl-cli"]))?;
    let rl = root.join("target/debug/rl");
    let tree = root.join("fixtures/tinker-atropos");
    let home = root.join("target/demo-home");
    if home.exists() {
        std::fs::remove_dir_all(&home)?;
    }
    let rl_with = |args: &[&str]| {
        let mut command = Command::new(&rl);
        command
            .args(args)
            .arg("--root")
            .arg(&tree)
            .env("RL_HOME", &home);
        command
    };

    println!("\n== 1. Environments of the fixture tree (top level, like the original tool)");
    run_command(&mut rl_with(&["envs", "list"]))?;
    println!("\n== 2. One environment, with where its config class comes from");
    run_command(&mut rl_with(&["envs", "show", "gsm8k_harder"]))?;
    println!("\n== 3. Select an environment and edit its configuration");
    run_command(&mut rl_with(&["select", "word_ladder"]))?;
    run_command(&mut rl_with(&["config", "set", "group_size", "12"]))?;
    run_command(&mut rl_with(&["config", "set", "difficulty", "easy"]))?;
    run_command(&mut rl_with(&[
        "config",
        "set",
        "wandb_project",
        "word-ladders",
    ]))?;
    println!("\n== 4. Bad edits are refused with the reason, and change nothing");
    for (field, value) in [
        ("max_rungs", "99"),
        ("max_token_length", "4096"),
        ("group_sise", "8"),
    ] {
        let status = rl_with(&["config", "set", field, value]).status()?;
        if status.success() {
            bail!("`rl config set {field} {value}` should have been refused");
        }
    }
    println!("\n== 5. What changed since selection");
    run_command(&mut rl_with(&["config", "diff"]))?;

    let output = rl_with(&["envs", "list", "--recursive", "--json"]).output()?;
    let scan: serde_json::Value =
        serde_json::from_slice(&output.stdout).context("rl envs list --json printed no JSON")?;
    let count = |key: &str| scan[key].as_array().map_or(0, Vec::len);
    println!(
        "\nSummary: {} environments found in {} (recursive), {} files skipped with a reason, no \
         environment code run; word_ladder selected with 3 edits, 3 bad edits refused. State is \
         in {}.",
        count("environments"),
        tree.display(),
        count("skipped"),
        home.display(),
    );
    Ok(())
}
