//! `cargo xtask demo`: the main job, on the bundled fixture tree and the embedded local stack
//! (real atroposlib run-api, rl's own trainer on the tinker SDK, the local Tinker-compatible
//! engine on CPU JAX, a tiny model made here), with a state directory of its own: list
//! environments, select one, show and edit its config, pre-flight it against fixture models,
//! then train the digits environment for real with live progress and show what the engine
//! computed: losses, rewards, the checkpoints it saved, a completion sampled from the final
//! weights. No key, no network once the venvs exist.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, bail};

use crate::{local_stack_rl, run_command};

pub(crate) fn run(root: &Path) -> anyhow::Result<()> {
    // The venvs download while rl compiles: on a fresh machine each takes minutes, mostly
    // waiting on the registry, which the build's CPU-bound minutes can hide.
    let pythons = std::thread::spawn({
        let root = root.to_owned();
        move || -> anyhow::Result<_> {
            Ok((
                crate::venv::ensure_test_venv(&root)?,
                crate::venv::ensure_local_engine(&root)?,
            ))
        }
    });
    // The dev profile shares its build with `cargo xtask test`, so CI pays for one build.
    let built = run_command(crate::cargo().args(["build", "--quiet", "-p", "rl-cli"]));
    let (python, engine) = pythons
        .join()
        .map_err(|_| anyhow::anyhow!("provisioning the venvs panicked"))??;
    built?;
    let rl = root.join("target/debug/rl");
    let tree = root.join("fixtures/tinker-atropos");
    let home = root.join("target/demo-home");
    if home.exists() {
        std::fs::remove_dir_all(&home)?;
    }
    std::fs::create_dir_all(&home)?;
    // The tests' JAX cache: programs compiled here are not compiled again by the tests that
    // follow (CI runs the demo first).
    let settings = rl_test_support::with_jax_cache(&crate::venv::local_engine_settings(
        root, &python, &engine,
    )?);
    // The run is also evaluated as it trains: every 4 steps, on a quarter of the prompts that
    // training never sees.
    let anchor = "keep_rollouts = 20";
    if !settings.contains(anchor) {
        bail!("fixtures/local-engine.toml no longer has `{anchor}` under [locked.tinker]");
    }
    let settings = settings.replace(
        anchor,
        "keep_rollouts = 20\neval_every = 4\neval_prompts = 3\neval_group_size = 4\n\n\
         [held_out]\nfraction = 0.25\nseed = 7",
    );
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
        "preflight",
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

    println!(
        "\n== 5. Train for real: the digits environment (reward = the share of digits in a \
         completion) on the local engine, with rl's own trainer and a tiny random Qwen3, \
         evaluated every 4 steps on prompts it never trains on"
    );
    run_command(&mut rl_with(&["select", "digits"]))?;
    run_command(&mut rl_with(&["doctor"]))?;
    let started = json(&mut rl_with(&["runs", "start", "--json"]))?;
    let id = text(&started["run_id"])?;
    println!(
        "started run {id} (engine, API, trainer, environment); following it to the end \
         (readiness gates, no fixed sleeps)"
    );
    let followed = follow(&rl_with, &id, &home);
    if followed.is_err() {
        // Whatever went wrong, the demo leaves no run behind.
        let _ = rl_with(&["runs", "stop", &id]).output();
    }
    let (finished, results) = followed?;
    let weights = text(&results["final_weights"]).context("the trainer saved no final weights")?;
    let trend = show_training(&results)?;
    let state = results["checkpoints"]
        .as_array()
        .and_then(|all| all.last())
        .map(|last| text(&last["state_path"]))
        .context("the results list no checkpoint")??;
    println!(
        "\n== 7. A completion sampled from the final weights (the run's engine started again on \
         its saved state {state})"
    );
    let sample = crate::sample::from_run(root, &engine, &home.join("runs").join(&id), &state)?;
    println!("{sample}");
    println!("\n== 8. Every run");
    run_command(&mut rl_with(&["runs", "list"]))?;
    println!("\n== 9. The same state through the agent tools (what MCP and HTTP answer)");
    run_command(&mut rl_with(&["tool", "call", "rl_list_runs"]))?;

    let listed = json(&mut rl_with(&["envs", "list", "--json"]))?;
    println!(
        "\nSummary: {} environments found in {} without running their code; arithmetic \
         selected, 2 edits kept, 3 bad edits refused; pre-flight verdict {verdict}; run {id} \
         trained digits on the local engine in {:.1} s ({trend}), final weights {weights}. \
         Logs: {}/runs/{id}/*.log and {}/preflight/. State: {}.",
        listed["count"],
        tree.display(),
        finished["elapsed_secs"].as_f64().unwrap_or_default(),
        home.display(),
        home.display(),
        home.display(),
    );
    Ok(())
}

/// Prints each step's loss (the engine's) and reward, and the checkpoints the trainer
/// recorded; returns how the reward moved, said plainly whichever way it went.
fn show_training(results: &serde_json::Value) -> anyhow::Result<String> {
    let history = results["history"]
        .as_array()
        .context("the results have no history")?;
    println!("\n   step   loss (engine)   reward/mean   held-out mean score");
    let mut rewards = Vec::new();
    let mut evaluated = Vec::new();
    for row in history {
        let cell = |key: &str| {
            row[key]
                .as_f64()
                .map_or_else(|| "—".to_owned(), |value| format!("{value:.4}"))
        };
        println!(
            "   {:>4}   {:>13}   {:>11}   {:>19}",
            row["step"],
            cell("loss"),
            cell("reward_mean"),
            cell("eval_mean_score")
        );
        if let Some(reward) = row["reward_mean"].as_f64() {
            rewards.push(reward);
        }
        if let Some(score) = row["eval_mean_score"].as_f64() {
            evaluated.push((row["step"].clone(), score));
        }
    }
    println!("\n   checkpoints (checkpoints.jsonl):");
    for checkpoint in results["checkpoints"].as_array().into_iter().flatten() {
        println!(
            "   step {:>3}  {}{}",
            checkpoint["step"],
            checkpoint["path"].as_str().unwrap_or_default(),
            checkpoint["state_path"]
                .as_str()
                .map_or_else(String::new, |state| format!("  (state {state})"))
        );
    }
    let third = (rewards.len() / 3).max(1);
    if rewards.len() < 2 {
        return Ok("too few steps to tell a trend".to_owned());
    }
    let mean = |values: &[f64]| values.iter().sum::<f64>() / values.len() as f64;
    let first = mean(&rewards[..third]);
    let last = mean(&rewards[rewards.len() - third..]);
    let verdict = if last > first + 0.02 {
        "rose"
    } else if last < first - 0.02 {
        "fell"
    } else {
        "stayed flat"
    };
    let held_out = match (evaluated.first(), evaluated.last()) {
        (Some((from_step, from)), Some((to_step, to))) if evaluated.len() > 1 => format!(
            "; held-out mean score {from:.3} at step {from_step}, {to:.3} at step {to_step}"
        ),
        _ => String::new(),
    };
    Ok(format!(
        "mean reward {verdict}: {first:.3} over the first {third} step(s), {last:.3} over the \
         last {third}{held_out}"
    ))
}

/// Follows run `id` to its end with live progress, then shows its results; returns its final
/// status and results.
fn follow(
    rl_with: &dyn Fn(&[&str]) -> Command,
    id: &str,
    home: &Path,
) -> anyhow::Result<(serde_json::Value, serde_json::Value)> {
    // A run that ended without completing makes the wait exit 3: the status below says why.
    let waited = run_command(&mut rl_with(&[
        "runs",
        "wait",
        id,
        "--until",
        "finished",
        "--timeout",
        "1200",
    ]));
    let finished = json(&mut rl_with(&["runs", "status", id, "--json"]))?;
    run_command(&mut rl_with(&["runs", "status", id]))?;
    if finished["status"] != "completed" {
        bail!(
            "run {id} ended {}; see {}/runs/{id}",
            finished["status"],
            home.display()
        );
    }
    waited?;
    println!("\n== 6. Its results: metrics of every step, final weights, checkpoints, health");
    run_command(&mut rl_with(&["runs", "results", id]))?;
    let results = json(&mut rl_with(&["runs", "results", id, "--json"]))?;
    Ok((finished, results))
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
