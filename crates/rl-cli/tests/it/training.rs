//! Real training, no mocks: rl's own trainer on the tinker SDK, the local Tinker-compatible
//! engine (skyrl-tx on CPU JAX) that each run starts, the tiny model `cargo xtask` makes and the
//! digits environment, driven through the `rl` binary as a user does.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rl_test_support::LocalEngine;
use serde_json::Value;

use crate::runs::{Stack, assert_nothing_left, is_finished, pid_of, run_processes};
use crate::test_python;

/// A state directory for real training, `edits` applied to `fixtures/local-engine.toml`.
pub(crate) fn stack(edits: &[(&str, &str)]) -> (Stack, LocalEngine) {
    let python = test_python();
    let engine = rl_test_support::local_engine();
    let settings = rl_test_support::local_engine_settings(&python, &engine);
    (Stack::with_settings(settings, edits, "digits"), engine)
}

/// Fewer steps than the demo: enough for two state saves and a final one.
pub(crate) const SHORT_RUN: (&str, &str) = ("total_steps = 12", "total_steps = 5");
pub(crate) const SAVE_EVERY_TWO: (&str, &str) = ("save_every = 4", "save_every = 2");
/// A completion grace of one second, far shorter than a step on this machine's CPU.
const SHORT_GRACE: (&str, &str) = ("completion_grace_secs = 60", "completion_grace_secs = 1");

/// The JSON lines of a file a run writes (none when it is missing).
pub(crate) fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}")))
        .collect()
}

/// Where skyrl-tx 0.3.0 keeps what a `tinker://` path names, in the run's engine folder:
/// sampler weights `tinker://<model>/<name>` as `<model>/sampler_weights/<name>.tar.gz`, a
/// state `tinker://<model>/weights/<name>` as the folder `<model>/<name>.tar.gz`.
pub(crate) fn saved_file(run_dir: &Path, path: &str) -> PathBuf {
    let rest = path
        .strip_prefix("tinker://")
        .unwrap_or_else(|| panic!("not a tinker path: {path}"));
    let checkpoints = run_dir.join("engine/checkpoints");
    match rest.split('/').collect::<Vec<_>>()[..] {
        [model, "weights", name] => checkpoints.join(model).join(format!("{name}.tar.gz")),
        [model, name] => checkpoints
            .join(model)
            .join("sampler_weights")
            .join(format!("{name}.tar.gz")),
        _ => panic!("an unexpected tinker path: {path}"),
    }
}

#[test]
#[ignore = "needs the test venv and the local engine: `cargo xtask test` runs it"]
fn a_run_on_the_local_engine_trains_and_keeps_what_it_saved() {
    // A completion grace shorter than a CPU step (issue 40): a trainer still in its last steps
    // when the environment finishes is waited for while its phase file shows work, and the run
    // completes with its final state saved, never cut short and called completed.
    let (stack, engine) = stack(&[
        SHORT_RUN,
        SAVE_EVERY_TWO,
        SHORT_GRACE,
        crate::algorithm_runs::PPO_WITH_KL,
    ]);
    let id = stack.start();
    // Followed from its start by `rl runs watch`, its output piped: plain lines.
    let watcher = crate::rl_command(stack.home.path())
        .args(["runs", "watch", &id])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let finished = stack.wait(&id, "finished", 900);
    assert_eq!(finished["state"], "completed", "{}", stack.explain(&id));
    let watched = watcher.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&watched.stdout);
    assert_eq!(watched.status.code(), Some(0), "{text}");
    assert!(
        !text.contains('\x1b'),
        "escape codes in plain lines: {text}"
    );
    for step in 1..=5 {
        assert!(
            text.contains(&format!("step {step}/5")),
            "step {step}: {text}"
        );
    }
    assert!(
        text.lines()
            .any(|line| line.starts_with("reward_mean") && line.contains(" last ")),
        "the curves close the plain lines: {text}"
    );
    let dir = stack.run_dir(&id);

    // Losses come from the engine: a number on every step that trained.
    let metrics = lines(&dir.join("metrics.jsonl"));
    let steps: Vec<&Value> = metrics
        .iter()
        .filter(|row| row.get("step").is_some())
        .collect();
    assert_eq!(steps.len(), 5, "one row per step: {metrics:#?}");
    let trained: Vec<f64> = steps
        .iter()
        .filter_map(|row| row["train/loss"].as_f64())
        .collect();
    assert!(
        !trained.is_empty() && trained.iter().all(|loss| loss.is_finite()),
        "the engine's losses: {metrics:#?}"
    );
    for row in &steps {
        assert!(row["reward/mean"].as_f64().is_some(), "{row}");
    }
    assert_counted_and_timed(&dir, &steps);
    crate::algorithm_runs::assert_clipped_and_measured_against_the_base(&steps);

    // Every checkpoint row is a save the engine made, and results report exactly those.
    let checkpoints = lines(&dir.join("checkpoints.jsonl"));
    let names: Vec<&str> = checkpoints
        .iter()
        .map(|row| row["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.first(), Some(&"step_0"), "{checkpoints:#?}");
    assert_eq!(names.last(), Some(&"final"), "{checkpoints:#?}");
    for row in &checkpoints {
        let sampler = row["sampler_path"].as_str().unwrap();
        assert!(
            saved_file(&dir, sampler).exists(),
            "{sampler} is not in the engine's checkpoints: {}",
            stack.explain(&id)
        );
        if let Some(state) = row["state_path"].as_str() {
            assert!(
                saved_file(&dir, state).exists(),
                "{state} is not in the engine's checkpoints"
            );
        }
    }
    let states = checkpoints
        .iter()
        .filter(|row| row["state_path"].is_string())
        .count();
    assert!(
        states >= 2,
        "save_every = 2 and the final state: {checkpoints:#?}"
    );

    let results = stack.json(&["runs", "results", &id]);
    let reported = results["checkpoints"].as_array().unwrap();
    assert_eq!(reported.len(), checkpoints.len(), "{results:#}");
    for (reported, row) in reported.iter().zip(&checkpoints) {
        assert_eq!(reported["path"], row["sampler_path"]);
        assert_eq!(reported["step"], row["step"]);
    }
    assert_eq!(
        results["final_weights"],
        checkpoints.last().unwrap()["sampler_path"]
    );

    // The checkpoints as listed: every one with its size on disk, a best, and no resume
    // point (the run completed).
    let listed = stack.json(&["checkpoints", "list", &id]);
    let listed = &listed["runs"][0];
    assert_eq!(
        listed["checkpoints"].as_array().unwrap().len(),
        checkpoints.len()
    );
    for checkpoint in listed["checkpoints"].as_array().unwrap() {
        assert!(checkpoint["size_bytes"].as_u64().unwrap() > 0, "{listed:#}");
        assert_eq!(checkpoint["resume_point"], false);
    }
    assert!(listed["best_step"].is_i64(), "{listed:#}");

    // The final checkpoint exported as a PEFT adapter folder, and never over one.
    let export = tempfile::tempdir().unwrap();
    let adapter = export.path().join("adapter");
    let last = checkpoints.last().unwrap()["step"]
        .as_i64()
        .unwrap()
        .to_string();
    let adapter_arg = adapter.to_str().unwrap();
    let exported = stack.json(&["checkpoints", "export", &id, &last, adapter_arg]);
    assert_eq!(
        exported["files"].as_array().unwrap().len(),
        2,
        "{exported:#}"
    );
    assert_peft_adapter(&adapter, &engine.base_model);
    let again = stack.rl(&["checkpoints", "export", &id, &last, adapter_arg, "--json"]);
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stdout).contains("exists already"));

    // Rollouts: one file per step that got a batch, bounded by keep_rollouts.
    let rollouts = std::fs::read_dir(dir.join("rollouts")).unwrap().count();
    assert!((1..=20).contains(&rollouts), "{rollouts} rollout files");
    assert_nothing_left(&stack, &id);

    // The saved weights sample, and training changed the policy: a fixed completion's
    // log-probability under the first state differs from the final one's.
    let state = |name: &str| {
        checkpoints
            .iter()
            .find(|row| row["name"] == name)
            .and_then(|row| row["state_path"].as_str())
            .unwrap_or_else(|| panic!("no {name} state: {checkpoints:#?}"))
            .to_owned()
    };
    let sampled = sample_checkpoints(&engine, &dir, &state("final"), &state("step_0"));
    assert!(
        sampled["sample_tokens"].as_u64().unwrap_or_default() > 0,
        "{sampled:#}"
    );
    let (trained, initial) = (
        sampled["logprob"].as_f64().unwrap(),
        sampled["compare_logprob"].as_f64().unwrap(),
    );
    assert!(
        trained.is_finite() && initial.is_finite() && (trained - initial).abs() > 1e-4,
        "the policy did not change: {sampled:#}"
    );
}

/// The parts of a step's time, each `time/<part>_secs` in its metrics row (`eval` only on a
/// step that evaluated).
const STEP_PARTS: [&str; 9] = rl_metrics::STEP_PARTS;

/// Every step row counts exactly the tokens of its rollouts file (prompt, completion and
/// trained tokens of each completion), its totals are the running sums, and its time's parts
/// add up to its total, which the older keys (the wait, the step after it, the evaluation)
/// measure too.
fn assert_counted_and_timed(run_dir: &Path, steps: &[&Value]) {
    let mut totals = [0u64; 3];
    let mut trained_any = false;
    for row in steps {
        let step = row["step"].as_u64().unwrap();
        let rollouts = lines(&run_dir.join(format!("rollouts/step_{step:06}.jsonl")));
        assert!(!rollouts.is_empty(), "step {step} has no rollouts");
        for (i, (kind, column)) in [
            ("prompt", "prompt_tokens"),
            ("sampled", "completion_tokens"),
            ("trained", "trained_tokens"),
        ]
        .into_iter()
        .enumerate()
        {
            let summed: u64 = rollouts
                .iter()
                .map(|rollout| rollout[column].as_u64().unwrap_or(0))
                .sum();
            let counted = row[format!("tokens/{kind}")].as_u64();
            assert_eq!(counted, Some(summed), "step {step}'s {kind} tokens: {row}");
            totals[i] += summed;
            let total = row[format!("tokens/{kind}_total")].as_u64();
            assert_eq!(total, Some(totals[i]), "step {step}'s {kind} total: {row}");
        }
        trained_any |= row["tokens/trained"].as_u64() > Some(0);

        let secs = |key: &str| row[key].as_f64();
        let parts: Vec<(&str, f64)> = STEP_PARTS
            .iter()
            .filter_map(|part| Some((*part, secs(&format!("time/{part}_secs"))?)))
            .collect();
        assert_eq!(
            parts.len(),
            STEP_PARTS.len() - usize::from(row.get("time/eval_secs").is_none()),
            "{row}"
        );
        assert!(parts.iter().all(|(_, value)| *value >= 0.0), "{row}");
        let total = secs("time/total_secs").unwrap();
        let summed: f64 = parts.iter().map(|(_, value)| value).sum();
        assert!(
            (summed - total).abs() <= 1e-6,
            "step {step}'s parts add up to {summed}, not {total}: {row}"
        );
        let outside = secs("time/wait_secs").unwrap()
            + secs("time/step_secs").unwrap()
            + secs("time/eval_secs").unwrap_or(0.0);
        assert!(
            (outside - total).abs() <= 0.05,
            "step {step}: wait + step + eval = {outside}, total {total}: {row}"
        );
        // What is left unnamed (preparing the batch) is a small part of a step.
        let other = secs("time/other_secs").unwrap();
        assert!(
            other <= 0.5 + 0.1 * total,
            "step {step}: {other} s unaccounted for: {row}"
        );
        let largest = parts.iter().fold(
            parts[0],
            |max, part| if part.1 > max.1 { *part } else { max },
        );
        assert_eq!(row["time/bottleneck"], largest.0, "{row}");
        let trained = row["tokens/trained"].as_f64().unwrap();
        let per_sec = secs("throughput/trained_tokens_per_sec").unwrap();
        assert!(
            (per_sec - trained / total).abs() <= 1e-6 * per_sec.max(1.0),
            "{row}"
        );
        if trained > 0.0 {
            assert!(secs("time/forward_backward_secs").unwrap() > 0.0, "{row}");
            assert!(secs("time/optim_secs").unwrap() > 0.0, "{row}");
        }
    }
    assert!(trained_any, "no step trained: {steps:#?}");
}

/// What PEFT's `PeftModel.from_pretrained` reads: a LoRA `adapter_config.json` for the base
/// model, and a safetensors file whose tensors are named as PEFT names them
/// (`base_model.model.….lora_A.weight`).
fn assert_peft_adapter(dir: &Path, base_model: &Path) {
    let config: Value =
        serde_json::from_slice(&std::fs::read(dir.join("adapter_config.json")).unwrap()).unwrap();
    assert_eq!(config["peft_type"], "LORA", "{config:#}");
    assert!(config["r"].as_u64().unwrap() > 0, "{config:#}");
    assert!(
        config["target_modules"].is_array() || config["target_modules"].is_string(),
        "{config:#}"
    );
    let base = config["base_model_name_or_path"]
        .as_str()
        .unwrap_or_default();
    assert!(
        base.is_empty() || Path::new(base) == base_model || base.ends_with("tiny-model"),
        "{config:#}"
    );
    let bytes = std::fs::read(dir.join("adapter_model.safetensors")).unwrap();
    let header_len = usize::try_from(u64::from_le_bytes(bytes[..8].try_into().unwrap())).unwrap();
    let header: Value = serde_json::from_slice(&bytes[8..8 + header_len]).unwrap();
    let names: Vec<&String> = header
        .as_object()
        .unwrap()
        .keys()
        .filter(|name| *name != "__metadata__")
        .collect();
    assert!(
        !names.is_empty()
            && names
                .iter()
                .all(|name| name.starts_with("base_model.model.")
                    && (name.contains(".lora_A.") || name.contains(".lora_B."))),
        "{names:?}"
    );
}

/// `fixtures/local-engine/sample_checkpoints.py`: the run's engine started again on its saved
/// states, one sampled, both scored on a fixed completion.
fn sample_checkpoints(engine: &LocalEngine, run_dir: &Path, state: &str, compare: &str) -> Value {
    let root = crate::workspace_root();
    let mut command = std::process::Command::new(&engine.python);
    command
        .envs(rl_test_support::jax_cache_environment())
        .arg(root.join("fixtures/local-engine/sample_checkpoints.py"))
        .arg("--run-dir")
        .arg(run_dir)
        .arg("--programs")
        .arg(root.join("crates/rl-python/python"))
        .args(["--state", state, "--compare", compare]);
    crate::script_json(&mut command)
}

#[test]
#[ignore = "needs the test venv and the local engine: `cargo xtask test` runs it"]
fn killing_the_engine_fails_the_run_naming_it_and_leaves_nothing() {
    let (stack, _engine) = stack(&[]);
    let (id, running) = stack.start_running();
    let engine = pid_of(&running, "engine").expect("the run's engine");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(engine).unwrap()),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let killed = Instant::now();
    let ended = stack.wait(&id, "finished", 120);
    assert_eq!(ended["state"], "failed", "{}", stack.explain(&id));
    assert!(
        killed.elapsed() < Duration::from_secs(30),
        "seen {:?} after the kill",
        killed.elapsed()
    );
    assert!(
        ended["error"]
            .as_str()
            .unwrap_or_default()
            .contains("engine"),
        "{ended:#}"
    );
    assert_nothing_left(&stack, &id);
}

#[test]
#[ignore = "needs the test venv and the local engine: `cargo xtask test` runs it"]
fn a_failing_step_fails_the_run_with_the_trainers_last_words() {
    let (stack, _engine) = stack(&[
        SHORT_RUN,
        (
            "JAX_PLATFORMS = \"cpu\"",
            "JAX_PLATFORMS = \"cpu\"\nRL_TRAINER_FAIL_AT_STEP = \"2\"",
        ),
    ]);
    let id = stack.start();
    let ended = stack.wait(&id, "finished", 900);
    assert_eq!(ended["state"], "failed", "{}", stack.explain(&id));
    let error = ended["error"].as_str().unwrap_or_default();
    assert!(error.contains("trainer"), "{error}");
    assert!(error.contains("step 2 failed"), "{error}");
    let checkpoints = lines(&stack.run_dir(&id).join("checkpoints.jsonl"));
    assert!(
        checkpoints.iter().all(|row| row["name"] != "final"),
        "a failed run has no final weights: {checkpoints:#?}"
    );
    let results = stack.json(&["runs", "results", &id]);
    assert_eq!(results["final_weights"], Value::Null, "{results:#}");
    assert_nothing_left(&stack, &id);
}

#[test]
#[ignore = "needs the test venv and the local engine: `cargo xtask test` runs it"]
fn stopping_a_training_run_leaves_no_process_and_keeps_its_checkpoints() {
    let (stack, _engine) = stack(&[]);
    let (id, running) = stack.start_running();
    let dir = stack.run_dir(&id);
    let started = Instant::now();
    while lines(&dir.join("checkpoints.jsonl")).len() < 2 {
        let status = stack.json(&["runs", "status", &id]);
        assert!(
            !is_finished(&status) && started.elapsed() < Duration::from_secs(600),
            "no step saved: {}",
            stack.explain(&id)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let stopped = stack.json(&["runs", "stop", &id]);
    assert_eq!(stopped["run"]["state"], "stopped", "{}", stack.explain(&id));
    assert!(run_processes(&running).is_empty());
    let checkpoints = lines(&dir.join("checkpoints.jsonl"));
    assert!(checkpoints.len() >= 2);
    for row in &checkpoints {
        let sampler = row["sampler_path"].as_str().unwrap();
        assert!(saved_file(&dir, sampler).exists(), "{sampler}");
    }
    let results = stack.json(&["runs", "results", &id]);
    assert_eq!(
        results["checkpoints"].as_array().unwrap().len(),
        checkpoints.len()
    );
    assert_nothing_left(&stack, &id);
}

/// A run stopped after a few steps and resumed reaches its last step as a new run: the
/// parent's steps and checkpoints carried over and numbered on, its state loaded (weights and
/// optimizer), in the parent's WandB group; resuming it again while it goes is refused.
#[test]
#[ignore = "needs the test venv and the local engine: `cargo xtask test` runs it"]
fn a_stopped_run_resumed_reaches_its_last_step() {
    let (stack, _engine) = stack(&[("total_steps = 12", "total_steps = 6"), SAVE_EVERY_TWO]);
    let parent = stack.start();
    let parent_dir = stack.run_dir(&parent);
    let deadline = Instant::now() + Duration::from_secs(600);
    // Stopped once step 3 is written: the state of step 2 is saved by then.
    while lines(&parent_dir.join("metrics.jsonl"))
        .iter()
        .filter(|row| row.get("step").is_some())
        .count()
        < 3
    {
        let status = stack.json(&["runs", "status", &parent]);
        assert!(
            !is_finished(&status) && Instant::now() < deadline,
            "the run ended or took too long before its third step: {}",
            stack.explain(&parent)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let stopped = stack.json(&["runs", "stop", &parent]);
    assert_eq!(stopped["run"]["state"], "stopped", "{stopped:#}");
    // Watching a run that ended without completing ends at once, as `runs wait` does.
    let watched = stack.rl(&["runs", "watch", &parent]);
    assert_eq!(watched.status.code(), Some(3), "{watched:?}");
    let parent_checkpoints = lines(&parent_dir.join("checkpoints.jsonl"));
    let resumed_at = parent_checkpoints
        .iter()
        .filter(|row| row["state_path"].is_string())
        .filter_map(|row| row["step"].as_u64())
        .max()
        .unwrap();
    assert!(resumed_at >= 2, "{parent_checkpoints:#?}");

    // The operator changes the held-out slice meanwhile: the continued run keeps its parent's.
    let settings_file = stack.home.path().join("config.toml");
    let mut settings = std::fs::read_to_string(&settings_file).unwrap();
    settings.push_str("\n[held_out]\nfraction = 0.3\nseed = 9\n");
    std::fs::write(&settings_file, settings).unwrap();

    // A state that does not load as it was saved (the step's files replaced by step 0's)
    // fails the resumed run at its start, naming the state, instead of training on.
    let state_of = |step: u64| {
        let row = parent_checkpoints
            .iter()
            .find(|row| row["step"].as_u64() == Some(step))
            .unwrap();
        saved_file(&parent_dir, row["state_path"].as_str().unwrap())
    };
    let (last_state, first_state) = (state_of(resumed_at), state_of(0));
    let kept = parent_dir.join("kept-state");
    std::fs::rename(&last_state, &kept).unwrap();
    let copied = std::process::Command::new("cp")
        .arg("-a")
        .arg(&first_state)
        .arg(&last_state)
        .status()
        .unwrap();
    assert!(copied.success());
    let damaged = stack.json(&["runs", "resume", &parent]);
    let damaged = damaged["run_id"].as_str().unwrap().to_owned();
    let ended = stack.wait(&damaged, "finished", 600);
    assert_eq!(ended["state"], "failed", "{}", stack.explain(&damaged));
    let error = ended["error"].as_str().unwrap_or_default();
    assert!(error.contains("did not load"), "{error}");
    assert_nothing_left(&stack, &damaged);
    // Its files gone, the state is passed over for the one before it, and the answer says so.
    std::fs::remove_dir_all(&last_state).unwrap();
    let listed = stack.json(&["checkpoints", "list", &parent]);
    let gone = listed["runs"][0]["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["step"].as_u64() == Some(resumed_at))
        .unwrap()
        .clone();
    assert_eq!(gone["state_missing"], true, "{listed:#}");
    assert_eq!(gone["resume_point"], false, "{listed:#}");
    let earlier = stack.json(&["runs", "resume", &parent]);
    assert!(
        earlier["message"]
            .as_str()
            .unwrap()
            .contains(&format!("state of step {resumed_at} is missing")),
        "{earlier:#}"
    );
    assert!(
        earlier["resumed_from"]["step"].as_u64().unwrap() < resumed_at,
        "{earlier:#}"
    );
    let earlier = earlier["run_id"].as_str().unwrap().to_owned();
    stack.json(&["runs", "stop", &earlier]);
    assert_nothing_left(&stack, &earlier);
    std::fs::rename(&kept, &last_state).unwrap();

    let resumed = stack.json(&["runs", "resume", &parent]);
    let child = resumed["run_id"].as_str().unwrap().to_owned();
    assert_eq!(
        held_out_of(&stack.run_dir(&child)),
        held_out_of(&parent_dir)
    );
    assert_eq!(held_out_of(&parent_dir), ["0.1", "0"]);
    assert_eq!(
        resumed["resumed_from"],
        serde_json::json!({"run_id": parent, "step": resumed_at, "kind": "resume"}),
        "{resumed:#}"
    );
    assert_eq!(
        resumed["wandb_group"],
        stack.json(&["runs", "status", &parent])["wandb_group"]
    );
    let again = stack.rl(&["runs", "resume", &parent, "--json"]);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("being resumed already"),
        "{}",
        String::from_utf8_lossy(&again.stdout)
    );

    let finished = stack.wait(&child, "finished", 900);
    assert_eq!(finished["state"], "completed", "{}", stack.explain(&child));
    let child_dir = stack.run_dir(&child);
    let steps: Vec<u64> = lines(&child_dir.join("metrics.jsonl"))
        .iter()
        .filter_map(|row| row["step"].as_u64())
        .collect();
    assert_eq!(steps, [1, 2, 3, 4, 5, 6], "{}", stack.explain(&child));
    let parent_rows = lines(&parent_dir.join("metrics.jsonl"));
    let child_rows = lines(&child_dir.join("metrics.jsonl"));
    for step in 1..=resumed_at {
        let row = |rows: &[Value]| {
            rows.iter()
                .find(|row| row["step"].as_u64() == Some(step))
                .cloned()
        };
        assert_eq!(row(&parent_rows), row(&child_rows), "step {step}");
    }
    // Token totals go on from the parent's at the step resumed after.
    let total_at = |step: u64, key: &str| {
        child_rows
            .iter()
            .find(|row| row["step"].as_u64() == Some(step))
            .and_then(|row| row[key].as_u64())
            .unwrap_or_else(|| panic!("step {step} has no {key}: {child_rows:#?}"))
    };
    assert!(
        total_at(resumed_at, "tokens/sampled_total") > 0,
        "{child_rows:#?}"
    );
    for kind in ["prompt", "sampled", "trained"] {
        let key = format!("tokens/{kind}_total");
        for step in resumed_at + 1..=6 {
            assert_eq!(
                total_at(step, &key),
                total_at(step - 1, &key) + total_at(step, &format!("tokens/{kind}")),
                "step {step}'s {key}"
            );
        }
    }
    let checkpoints = lines(&child_dir.join("checkpoints.jsonl"));
    let checkpoint_steps: Vec<u64> = checkpoints
        .iter()
        .filter_map(|row| row["step"].as_u64())
        .collect();
    assert!(
        checkpoint_steps.windows(2).all(|pair| pair[0] < pair[1])
            && checkpoint_steps.last() == Some(&6),
        "{checkpoints:#?}"
    );
    for row in &checkpoints {
        if let Some(state) = row["state_path"].as_str() {
            assert!(
                saved_file(&child_dir, state).exists(),
                "{state} is not in the resumed run's engine folder"
            );
        }
    }
    let trainer_log = std::fs::read_to_string(child_dir.join("trainer.log")).unwrap();
    assert!(
        trainer_log.contains(&format!("continuing after step {resumed_at}")),
        "{trainer_log}"
    );
    assert!(
        trainer_log.contains("verified: the loaded weights are those saved at"),
        "{trainer_log}"
    );
    assert_nothing_left(&stack, &child);

    // The resumed run completed: there is nothing left to resume.
    let done = stack.rl(&["runs", "resume", &child, "--json"]);
    assert_eq!(done.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&done.stdout).contains("completed all its steps"));
}

/// The held-out fraction and seed a run's environment was started with.
fn held_out_of(run_dir: &Path) -> Vec<String> {
    let plan: Value =
        serde_json::from_slice(&std::fs::read(run_dir.join("launch.json")).unwrap()).unwrap();
    let env = plan["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|component| component["component"] == "env")
        .unwrap();
    ["RL_HELD_OUT_FRACTION", "RL_HELD_OUT_SEED"]
        .iter()
        .map(|name| {
            env["env"]
                .as_array()
                .unwrap()
                .iter()
                .find(|pair| pair[0] == *name)
                .map(|pair| pair[1].as_str().unwrap().to_owned())
                .unwrap_or_default()
        })
        .collect()
}

/// What resuming needs of the engine: a state saved with `save_state` and loaded into a fresh
/// client with `load_state_with_optimizer` brings Adam's moments and step count back, so the
/// next step is the one an uninterrupted client takes. The same deterministic CPU computation
/// on the same inputs: the losses agree to rounding (1e-6 relative), while an optimizer
/// restarted from zero moments would take another step (Adam's first step is about the sign of
/// the gradient) and miss by far more.
#[test]
#[ignore = "needs the test venv and the local engine: `cargo xtask test` runs it"]
fn a_saved_state_brings_back_the_optimizer() {
    let engine = rl_test_support::local_engine();
    let root = crate::workspace_root();
    let work = tempfile::tempdir().unwrap();
    let mut command = std::process::Command::new(&engine.python);
    command
        .envs(rl_test_support::jax_cache_environment())
        .arg(root.join("fixtures/local-engine/optimizer_state.py"))
        .arg("--work-dir")
        .arg(work.path())
        .arg("--programs")
        .arg(root.join("crates/rl-python/python"))
        .arg("--base-model")
        .arg(&engine.base_model);
    let losses = crate::script_json(&mut command);
    let number = |key: &str| losses[key].as_f64().unwrap();
    let (uninterrupted, resumed) = (number("uninterrupted"), number("resumed"));
    assert!(
        (uninterrupted - resumed).abs() <= 1e-6 * uninterrupted.abs(),
        "{losses:#}"
    );
    assert!(
        (number("at_state") - uninterrupted).abs() > 1e-4,
        "the step after the state changed nothing: {losses:#}"
    );
}
