//! `cargo xtask demo`: the main job, on the bundled fixture tree and the local stack (real
//! atroposlib run-api, the fixture trainer, the arithmetic environment, all on loopback), with a
//! state directory of its own: discover, configure, train to completion, collect results, stop a
//! run, pre-flight against fixture models. No key, no network once the test venv exists.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, bail};

use crate::run_command;

pub(crate) fn run(root: &Path) -> anyhow::Result<()> {
    // The dev profile shares its build with `cargo xtask test`, so CI pays for one build.
    run_command(Command::new("cargo").args(["build", "--quiet", "-p", "rl-cli"]))?;
    let rl = root.join("target/debug/rl");
    let tree = root.join("fixtures/tinker-atropos");
    let python = crate::venv::ensure_test_venv(root)?;
    let home = root.join("target/demo-home");
    if home.exists() {
        std::fs::remove_dir_all(&home)?;
    }
    std::fs::create_dir_all(&home)?;
    let settings = crate::venv::local_stack_settings(root, &python)?;
    std::fs::write(home.join("config.toml"), settings)?;
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

    println!("\n== 6. Train: select the arithmetic environment and start a run on the local stack");
    run_command(&mut rl_with(&["select", "arithmetic"]))?;
    let started = json(&mut rl_with(&["start", "--json"]))?;
    let id = text(&started["id"])?;
    println!("started run {id}; waiting for it to run (readiness gates, no sleeps)");
    run_command(&mut rl_with(&[
        "wait",
        &id,
        "--until",
        "running",
        "--timeout",
        "120",
    ]))?;
    println!("\n== 7. Follow it to the end");
    let finished = json(&mut rl_with(&[
        "wait",
        &id,
        "--until",
        "finished",
        "--timeout",
        "180",
        "--json",
    ]))?;
    run_command(&mut rl_with(&["status", &id]))?;
    if finished["status"]["state"] != "completed" {
        bail!(
            "run {id} ended {}; see target/demo-home/runs/{id}",
            finished["status"]["state"]
        );
    }
    println!("\n== 8. Its results: metrics of every step, final weights, checkpoints, health");
    run_command(&mut rl_with(&["results", &id]))?;
    let results = json(&mut rl_with(&["results", &id, "--json"]))?;
    let weights =
        text(&results["final_weights"]).context("the trainer reported no final weights")?;
    println!("\n== 9. Start another run and stop it while it runs");
    let second = json(&mut rl_with(&["start", "--wait", "running", "--json"]))?;
    let second_id = text(&second["id"])?;
    run_command(&mut rl_with(&["stop", &second_id]))?;
    run_command(&mut rl_with(&["runs"]))?;

    println!(
        "\n== 10. Pre-flight: the arithmetic environment against three \"models\" at once \
         (atroposlib's process mode; the fixture OpenAI server stands in for OpenRouter)"
    );
    let server = crate::fixture_server::FixtureServer::start(root, &python)?;
    run_command(&mut rl_with(&[
        "preflight",
        "run",
        "--base-url",
        &server.base_url,
        "--model",
        "always-right",
        "--model",
        "half-right",
        "--model",
        "always-wrong",
        "--steps",
        "3",
        "--group-size",
        "4",
    ]))?;
    server.stop()?;
    let tests = json(&mut rl_with(&["preflight", "list", "--json"]))?;
    let verdict = tests[0]["verdict"].as_str().unwrap_or("none").to_owned();

    let output = rl_with(&["envs", "list", "--recursive", "--json"]).output()?;
    let scan: serde_json::Value =
        serde_json::from_slice(&output.stdout).context("rl envs list --json printed no JSON")?;
    let count = |key: &str| scan[key].as_array().map_or(0, Vec::len);
    println!(
        "\nSummary: {} environments found in {} (recursive), {} files skipped with a reason, no \
         environment code run; word_ladder selected with 3 edits, 3 bad edits refused; run {id} \
         of arithmetic completed in {:.1} s (weights {weights}); run {second_id} stopped; \
         pre-flight verdict {verdict}. State is in {}.",
        count("environments"),
        tree.display(),
        count("skipped"),
        finished["status"]["elapsed_secs"]
            .as_f64()
            .unwrap_or_default(),
        home.display(),
    );
    Ok(())
}

fn json(command: &mut Command) -> anyhow::Result<serde_json::Value> {
    let output = command.output()?;
    if !output.status.success() {
        bail!(
            "{command:?} failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    serde_json::from_slice(&output.stdout).with_context(|| format!("{command:?} printed no JSON"))
}

fn text(value: &serde_json::Value) -> anyhow::Result<String> {
    value
        .as_str()
        .map(str::to_owned)
        .with_context(|| format!("expected a string, got {value}"))
}
