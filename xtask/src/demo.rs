//! `cargo xtask demo`: the main job, on the bundled fixture tree and the local stack (real
//! atroposlib run-api, the fixture trainer, the arithmetic environment, all on loopback), with a
//! state directory of its own: list environments, select one, show and edit its config,
//! pre-flight it against fixture models, train it to completion with live progress, collect the
//! results, list runs. No key, no network once the test venv exists.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, bail};

use crate::{local_stack_rl, run_command};

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
        // The demo promises no keys: the local stack needs none, and none of the caller's leak in.
        let mut command = local_stack_rl(&rl, root, &home, args);
        command.arg("--root").arg(&tree);
        command
    };

    println!("\n== 1. Environments of the fixture tree (top level, like the original tool)");
    run_command(&mut rl_with(&["envs", "list"]))?;
    println!("\n== 2. Select one");
    run_command(&mut rl_with(&["select", "arithmetic"]))?;
    println!("\n== 3. Its configuration, and edits: checked against each field's type");
    run_command(&mut rl_with(&["config", "show"]))?;
    run_command(&mut rl_with(&["config", "set", "group_size", "8"]))?;
    run_command(&mut rl_with(&[
        "config",
        "set",
        "wandb_project",
        "arithmetic-demo",
    ]))?;
    println!("Bad edits are refused with the reason, and change nothing:");
    for (field, value) in [
        ("group_size", "many"),
        ("max_token_length", "4096"),
        ("group_sise", "8"),
    ] {
        let status = rl_with(&["config", "set", field, value]).status()?;
        if status.success() {
            bail!("`rl config set {field} {value}` should have been refused");
        }
    }
    run_command(&mut rl_with(&["config", "diff"]))?;

    println!(
        "\n== 4. Pre-flight: the environment against three \"models\" at once (atroposlib's \
         process mode; the fixture OpenAI server stands in for OpenRouter)"
    );
    let server = crate::fixture_server::FixtureServer::start(root, &python)?;
    run_command(&mut rl_with(&[
        "test",
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
    let tests = json(&mut rl_with(&["test", "list", "--json"]))?;
    let verdict = tests[0]["verdict"].as_str().unwrap_or("none").to_owned();

    println!("\n== 5. Train: start a run on the local stack (API, trainer, environment)");
    let started = json(&mut rl_with(&["runs", "start", "--json"]))?;
    let id = text(&started["run_id"])?;
    println!("started run {id}; following it to the end (readiness gates, no fixed sleeps)");
    let followed = follow(&rl_with, &id, &home);
    if followed.is_err() {
        // Whatever went wrong, the demo leaves no run behind.
        let _ = rl_with(&["runs", "stop", &id]).output();
    }
    let (finished, weights) = followed?;
    println!("\n== 7. Every run");
    run_command(&mut rl_with(&["runs", "list"]))?;
    println!("\n== 8. The same state through the agent tools (what MCP and HTTP answer)");
    run_command(&mut rl_with(&["tool", "call", "rl_list_runs"]))?;

    let listed = json(&mut rl_with(&["envs", "list", "--json"]))?;
    println!(
        "\nSummary: {} environments found in {} without running their code; arithmetic \
         selected, 2 edits kept, 3 bad edits refused; pre-flight verdict {verdict}; run {id} \
         completed in {:.1} s with final weights {weights}. Logs: {}/runs/{id}/*.log and \
         {}/preflight/. State: {}.",
        listed["count"],
        tree.display(),
        finished["elapsed_secs"].as_f64().unwrap_or_default(),
        home.display(),
        home.display(),
        home.display(),
    );
    Ok(())
}

/// Follows run `id` to its end with live progress, then shows its results; returns its final
/// status and weights.
fn follow(
    rl_with: &dyn Fn(&[&str]) -> Command,
    id: &str,
    home: &Path,
) -> anyhow::Result<(serde_json::Value, String)> {
    run_command(&mut rl_with(&[
        "runs",
        "wait",
        id,
        "--until",
        "finished",
        "--timeout",
        "300",
    ]))?;
    let finished = json(&mut rl_with(&["runs", "status", id, "--json"]))?;
    run_command(&mut rl_with(&["runs", "status", id]))?;
    if finished["status"] != "completed" {
        bail!(
            "run {id} ended {}; see {}/runs/{id}",
            finished["status"],
            home.display()
        );
    }
    println!("\n== 6. Its results: metrics of every step, final weights, checkpoints, health");
    run_command(&mut rl_with(&["runs", "results", id]))?;
    let results = json(&mut rl_with(&["runs", "results", id, "--json"]))?;
    let weights =
        text(&results["final_weights"]).context("the trainer reported no final weights")?;
    Ok((finished, weights))
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
