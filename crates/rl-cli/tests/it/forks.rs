//! Forks and extensions on the local engine, through the `rl` binary: one completed run is
//! forked from its step 4 with another learning rate and extended by 3 steps, both at once; a
//! refused fork or extension starts nothing.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::runs::{Stack, assert_nothing_left};
use crate::training::{SAVE_EVERY_TWO, lines, saved_file, stack};

/// The parent's learning rate is rl's default (a line in `[locked.tinker]` would be the
/// operator's, which a fork may not change); the fork's is this.
const FORK_LEARNING_RATE: f64 = 0.01;

/// The rows of a run's `metrics.jsonl` by step (event rows left out).
pub(crate) fn steps_of(stack: &Stack, id: &str) -> BTreeMap<u64, Value> {
    lines(&stack.run_dir(id).join("metrics.jsonl"))
        .into_iter()
        .filter(|row| row.get("event").is_none())
        .filter_map(|row| Some((row["step"].as_u64()?, row)))
        .collect()
}

/// Waits until going run `id` has written `steps` steps (within 10 minutes).
pub(crate) fn wait_for_steps(stack: &Stack, id: &str, steps: usize) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(600);
    while steps_of(stack, id).len() < steps {
        let status = stack.json(&["runs", "status", id]);
        assert!(
            !crate::runs::is_finished(&status) && std::time::Instant::now() < deadline,
            "the run ended or took too long before its step {steps}: {}",
            stack.explain(id)
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

/// How many runs the state directory holds.
fn run_count(stack: &Stack) -> usize {
    stack.json(&["runs", "list"])["runs"]
        .as_array()
        .map_or(0, Vec::len)
}

/// `rl ARGS --json` refused (exit 1) with an error holding `expected`, or (`usage`) refused by
/// the argument parser (exit 2).
fn refused(stack: &Stack, args: &[&str], expected: &str) {
    let mut all = args.to_vec();
    all.push("--json");
    let output = stack.rl(&all);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        matches!(output.status.code(), Some(1 | 2)),
        "rl {args:?} was not refused: {said}"
    );
    assert!(said.contains(expected), "rl {args:?}: {said}");
}

#[test]
#[ignore = "needs the test venv and the local engine: `cargo xtask test` runs it"]
fn a_completed_run_forked_at_step_4_and_extended_by_3_steps_goes_on_from_its_states() {
    let (stack, _engine) = stack(&[
        ("total_steps = 12", "total_steps = 6"),
        SAVE_EVERY_TWO,
        ("learning_rate = 0.01\n", ""),
    ]);
    let parent = stack.start();
    let ended = stack.wait(&parent, "finished", 900);
    assert_eq!(ended["state"], "completed", "{}", stack.explain(&parent));
    let parent_dir = stack.run_dir(&parent);
    let parent_steps = steps_of(&stack, &parent);
    assert_eq!(
        parent_steps.keys().copied().collect::<Vec<_>>(),
        [1, 2, 3, 4, 5, 6]
    );
    let parent_rate = parent_steps[&5]["train/learning_rate"].as_f64().unwrap();
    assert!(
        (parent_rate - FORK_LEARNING_RATE).abs() > 1e-9,
        "{parent_rate}"
    );

    // Refused with the reason, nothing started or written.
    for (args, expected) in [
        (
            vec!["runs", "fork", parent.as_str(), "--step", "3"],
            "the steps it can be forked from are 0, 2, 4, 6",
        ),
        (
            vec![
                "runs",
                "fork",
                parent.as_str(),
                "--step",
                "4",
                "--set",
                "lora_rank=4",
            ],
            "another rank cannot load it",
        ),
        (
            vec![
                "runs",
                "fork",
                parent.as_str(),
                "--step",
                "4",
                "--set",
                "base_model=gpt2",
            ],
            "parent's base model",
        ),
        (
            vec![
                "runs",
                "fork",
                parent.as_str(),
                "--step",
                "4",
                "--set",
                "learning_rate=fast",
            ],
            "learning_rate",
        ),
        (
            vec![
                "runs",
                "fork",
                parent.as_str(),
                "--step",
                "4",
                "--set",
                "no_such_field=1",
            ],
            "unknown field 'no_such_field'",
        ),
        (
            vec![
                "runs",
                "fork",
                parent.as_str(),
                "--step",
                "4",
                "--set",
                "learning_rate",
            ],
            "is not FIELD=VALUE",
        ),
        (
            vec!["runs", "fork", parent.as_str(), "--step", "6"],
            "is not before the fork's last step (6)",
        ),
        // `--json` keeps the tools' words: the call with its `steps`.
        (
            vec!["runs", "resume", parent.as_str()],
            r#"rl_resume_training {\"run_id\": "#,
        ),
        (
            vec!["runs", "resume", parent.as_str(), "--steps", "+0"],
            "from 1 to 100000",
        ),
        (
            vec!["runs", "resume", parent.as_str(), "--steps", "-3"],
            "is not a number of more steps",
        ),
        (
            vec!["runs", "resume", parent.as_str(), "--steps", "+1000000"],
            "from 1 to 100000",
        ),
    ] {
        refused(&stack, &args, expected);
    }
    assert_eq!(
        run_count(&stack),
        1,
        "a refused fork or extension starts nothing"
    );
    assert_eq!(
        std::fs::read_dir(stack.home.path().join("runs"))
            .unwrap()
            .count(),
        1,
        "nor writes a run folder"
    );

    // The fork and the extension go at once: forks are branches, not the parent's one
    // continuation.
    let rate = FORK_LEARNING_RATE.to_string();
    let forked = stack.json(&[
        "runs",
        "fork",
        &parent,
        "--step",
        "4",
        "--set",
        &format!("learning_rate={rate}"),
    ]);
    let fork_id = forked["run_id"].as_str().unwrap().to_owned();
    assert_eq!(
        forked["resumed_from"],
        json!({"run_id": parent, "step": 4, "kind": "fork",
               "changes": {"learning_rate": FORK_LEARNING_RATE}}),
        "{forked:#}"
    );
    assert_eq!(
        forked["wandb_group"],
        stack.json(&["runs", "status", &parent])["wandb_group"]
    );
    let extended = stack.json(&["runs", "resume", &parent, "--steps", "+3"]);
    let extension = extended["run_id"].as_str().unwrap().to_owned();
    assert_eq!(
        extended["resumed_from"],
        json!({"run_id": parent, "step": 6, "kind": "extension",
               "changes": {"total_steps": 9}}),
        "{extended:#}"
    );

    let fork_end = stack.wait(&fork_id, "finished", 900);
    assert_eq!(
        fork_end["state"],
        "completed",
        "{}",
        stack.explain(&fork_id)
    );
    let fork_steps = steps_of(&stack, &fork_id);
    assert_eq!(
        fork_steps.keys().copied().collect::<Vec<_>>(),
        [1, 2, 3, 4, 5, 6]
    );
    for step in 1..=4 {
        assert_eq!(
            fork_steps[&step], parent_steps[&step],
            "step {step} is the parent's"
        );
    }
    for step in [5, 6] {
        assert_eq!(
            fork_steps[&step]["train/learning_rate"].as_f64(),
            Some(FORK_LEARNING_RATE),
            "step {step}: {:#}",
            fork_steps[&step]
        );
    }
    let fork_dir = stack.run_dir(&fork_id);
    let checkpoints: Vec<u64> = lines(&fork_dir.join("checkpoints.jsonl"))
        .iter()
        .filter_map(|row| row["step"].as_u64())
        .collect();
    let own: Vec<u64> = checkpoints
        .iter()
        .copied()
        .filter(|step| *step > 4)
        .collect();
    assert_eq!(own.first(), Some(&5), "{checkpoints:?}");
    assert_eq!(own.last(), Some(&6), "{checkpoints:?}");
    // The weights it starts from are the parent's at step 4: the log-probabilities of the
    // probe tokens, taken after the load, are those recorded when step 4's state was saved.
    let state_4 = lines(&parent_dir.join("checkpoints.jsonl"))
        .into_iter()
        .find(|row| row["step"].as_u64() == Some(4))
        .and_then(|row| row["state_path"].as_str().map(str::to_owned))
        .unwrap();
    assert!(saved_file(&fork_dir, &state_4).exists());
    let trainer_log = std::fs::read_to_string(fork_dir.join("trainer.log")).unwrap();
    let verified = trainer_log
        .lines()
        .find(|line| {
            line.contains(&format!(
                "verified: the loaded weights are those saved at {state_4}"
            ))
        })
        .unwrap_or_else(|| panic!("{trainer_log}"));
    let moved: f64 = verified
        .rsplit("by at most ")
        .next()
        .and_then(|rest| rest.strip_suffix(" nats"))
        .and_then(|number| number.parse().ok())
        .unwrap_or_else(|| panic!("{verified}"));
    assert!(moved <= 1e-3, "{verified}");
    let status = stack.rl(&["runs", "status", &fork_id]);
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        text.contains(&format!(
            "forked from run {parent} at step 4 (learning_rate={rate})"
        )),
        "{text}"
    );
    assert_nothing_left(&stack, &fork_id);

    let extension_end = stack.wait(&extension, "finished", 900);
    assert_eq!(
        extension_end["state"],
        "completed",
        "{}",
        stack.explain(&extension)
    );
    let extension_steps = steps_of(&stack, &extension);
    assert_eq!(
        extension_steps.keys().copied().collect::<Vec<_>>(),
        [1, 2, 3, 4, 5, 6, 7, 8, 9]
    );
    let last = lines(&stack.run_dir(&extension).join("checkpoints.jsonl"))
        .into_iter()
        .filter_map(|row| row["step"].as_u64())
        .max();
    assert_eq!(last, Some(9));
    let status = stack.rl(&["runs", "status", &extension]);
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        text.contains(&format!(
            "extended from run {parent} at step 6 (total_steps=9)"
        )),
        "{text}"
    );
    assert_nothing_left(&stack, &extension);
}

/// A run still training is forked from a step it saved: the fork takes the parent's engine
/// database as one snapshot while the parent's engine writes it, and both complete.
#[test]
#[ignore = "needs the test venv and the local engine: `cargo xtask test` runs it"]
fn a_going_run_forked_from_a_saved_step_completes_beside_it() {
    let (stack, _engine) = stack(&[("total_steps = 12", "total_steps = 6"), SAVE_EVERY_TWO]);
    let parent = stack.start();
    // Step 2's state is saved once step 3 is written.
    wait_for_steps(&stack, &parent, 3);
    let forked = stack.json(&["runs", "fork", &parent, "--step", "2"]);
    let fork_id = forked["run_id"].as_str().unwrap().to_owned();
    assert_eq!(
        forked["resumed_from"],
        json!({"run_id": parent, "step": 2, "kind": "fork"}),
        "{forked:#}"
    );
    let fork_end = stack.wait(&fork_id, "finished", 900);
    assert_eq!(
        fork_end["state"],
        "completed",
        "{}",
        stack.explain(&fork_id)
    );
    assert_eq!(
        steps_of(&stack, &fork_id)
            .keys()
            .copied()
            .collect::<Vec<_>>(),
        [1, 2, 3, 4, 5, 6]
    );
    let parent_end = stack.wait(&parent, "finished", 900);
    assert_eq!(
        parent_end["state"],
        "completed",
        "{}",
        stack.explain(&parent)
    );
    assert_nothing_left(&stack, &fork_id);
    assert_nothing_left(&stack, &parent);
}
