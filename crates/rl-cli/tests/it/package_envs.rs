//! Package-style environments (issue 32): files that import their siblings relatively or
//! through their top package's name, which `python FILE` cannot run, train on the local engine
//! to `completed` — run as modules of their packages by the run's environment and by the
//! pre-flights of its evaluations. The fixtures are an Atropos-shaped checkout
//! (`fixtures/tinker-atropos/atropos-checkout`).

use std::path::{Path, PathBuf};

use rl_test_support::LocalEngine;
use serde_json::Value;

use crate::runs::{Stack, assert_nothing_left};
use crate::test_python;
use crate::training::{SHORT_RUN, lines};

fn checkout() -> PathBuf {
    std::fs::canonicalize(
        rl_test_support::workspace_root().join("fixtures/tinker-atropos/atropos-checkout"),
    )
    .unwrap()
}

/// The local engine's settings with the checkout's `environments/` as the environments folder,
/// `edits` applied, and `environment` selected.
fn stack(environment: &str, edits: &[(&str, &str)]) -> (Stack, LocalEngine) {
    let python = test_python();
    let engine = rl_test_support::local_engine();
    let settings = format!(
        "environments_dir = \"{}\"\n{}",
        checkout().join("environments").display(),
        rl_test_support::local_engine_settings(&python, &engine)
    );
    (Stack::with_settings(settings, edits, environment), engine)
}

/// Trains the selected environment to its end; checks it completed, learnt on every step and
/// ran as `module` from `root`, and that its evaluations (pre-flights of the checkpoint, at
/// steps 0 and 5) scored. Its step rows.
fn trains_to_completed(stack: &Stack, root: &Path, module: &str) -> Vec<Value> {
    let id = stack.start();
    let finished = stack.wait(&id, "finished", 1200);
    assert_eq!(finished["state"], "completed", "{}", stack.explain(&id));
    let dir = stack.run_dir(&id);

    let recorded: Value =
        serde_json::from_slice(&std::fs::read(dir.join("environment.json")).unwrap()).unwrap();
    assert_eq!(
        recorded["package"],
        serde_json::json!({"root": root, "module": module}),
        "{recorded:#}"
    );
    let env_log = std::fs::read_to_string(dir.join("env.log")).unwrap();
    assert!(!env_log.contains("ImportError"), "{env_log}");

    let metrics = lines(&dir.join("metrics.jsonl"));
    let steps: Vec<&Value> = metrics
        .iter()
        .filter(|row| row.get("step").is_some() && row["reward/mean"].is_number())
        .collect();
    assert_eq!(steps.len(), 5, "one row per step: {metrics:#?}");
    let evaluated: Vec<i64> = metrics
        .iter()
        .filter(|row| row["eval/mean_score"].is_number())
        .filter_map(|row| row["step"].as_i64())
        .collect();
    assert_eq!(
        evaluated,
        [0, 5],
        "{metrics:#?}\n{}",
        std::fs::read_to_string(dir.join("trainer.log")).unwrap_or_default()
    );
    for row in &metrics {
        assert!(row.get("eval/failed").is_none(), "{row:#}");
    }
    assert_nothing_left(stack, &id);
    steps.into_iter().cloned().collect()
}

/// The trainer's off-policy bound at its tightest (issues 43 and 56, `max_steps_off_policy`
/// 0: only completions sampled from the very weights a step trains), and truncated completions
/// scored 0, in the run that trains the vowels environment rather than runs of their own. With
/// `max_batches_offpolicy = 1` the environment samples the next batch while a step trains, on
/// the weights before it: groups the bound drops, and the run counts.
const OFF_POLICY_BOUND: (&str, &str) = (
    "learning_rate = 0.01\n",
    "learning_rate = 0.01\nmax_steps_off_policy = 0\ntruncated = \"zero_reward\"\n",
);

/// DAPO's overlong penalty (issue 43), in the run that trains `letter_share`.
const OVERLONG_PENALTY: (&str, &str) = (
    "learning_rate = 0.01\n",
    "learning_rate = 0.01\ntruncated = \"penalty\"\noverlong_band = 4\n",
);

/// A truncation choice other than `mask` masks nothing, and every step says how many
/// completions were truncated and how many scores it lowered.
fn assert_nothing_masked(steps: &[Value]) {
    let trained: Vec<&Value> = steps
        .iter()
        .filter(|row| row["tokens/trained"].as_u64() > Some(0))
        .collect();
    assert!(!trained.is_empty(), "{steps:#?}");
    for row in trained {
        assert!(
            row["train/truncated_share"]
                .as_f64()
                .is_some_and(|share| (0.0..=1.0).contains(&share)),
            "{row:#}"
        );
        assert_eq!(row["train/masked_share"].as_f64(), Some(0.0), "{row:#}");
        assert!(
            row["train/penalised_share"]
                .as_f64()
                .is_some_and(|share| (0.0..=1.0).contains(&share)),
            "{row:#}"
        );
    }
}

/// Every step counts what the bound did, consistently: each skipped group has one reason
/// (stale among them), and the groups it trained are proven no older than the bound. Its
/// environment samples through ManagedServer (the exact tokens), so every completion is
/// matched to a sample the trainer served.
fn assert_off_policy_counted(steps: &[Value]) {
    let count = |row: &Value, key: &str| {
        row[key]
            .as_u64()
            .unwrap_or_else(|| panic!("{key} is not a count in {row:#}"))
    };
    for row in steps {
        let (groups, skipped) = (
            count(row, "batch/groups"),
            count(row, "batch/skipped_groups"),
        );
        let reasons: u64 = ["stale", "zero_advantage", "empty", "malformed", "truncated"]
            .iter()
            .map(|reason| count(row, &format!("batch/{reason}_groups")))
            .sum();
        assert_eq!(reasons, skipped, "{row:#}");
        assert!(skipped <= groups, "{row:#}");
        assert_eq!(count(row, "batch/unknown_age_completions"), 0, "{row:#}");
        if skipped < groups {
            assert_eq!(count(row, "batch/max_age_steps"), 0, "{row:#}");
        } else {
            assert!(row.get("batch/max_age_steps").is_none(), "{row:#}");
        }
    }
    let dropped: u64 = steps
        .iter()
        .map(|row| count(row, "batch/stale_groups"))
        .sum();
    eprintln!("groups dropped as stale over the run: {dropped}");
    assert!(dropped > 0, "{steps:#?}");
}

/// `vowels/vowels_env.py`: `from .scoring import vowel_share` in a package whose parent
/// (`environments/`) is none. Evaluated on every item: each evaluation's pre-flight runs the
/// module with `python -m`.
#[test]
#[ignore = "needs the test venv and the local engine: `cargo xtask test` runs it"]
fn a_package_importing_its_siblings_relatively_trains_to_completed() {
    const EVALUATED: (&str, &str) = (
        "keep_rollouts = 20",
        "keep_rollouts = 20\neval_every = 5\neval_prompts = 2\neval_group_size = 2",
    );
    let (stack, _engine) = stack("vowels", &[SHORT_RUN, EVALUATED, OFF_POLICY_BOUND]);
    let environments = checkout().join("environments");
    let steps = trains_to_completed(&stack, &environments, "vowels.vowels_env");
    assert_off_policy_counted(&steps);
    assert_nothing_masked(&steps);
}

/// `community/letter_share/letter_share_env.py`: `from environments.community.letter_share…`
/// and `from environments.vowels.sampling …`, no `__init__.py` on the way. Evaluated on the
/// items kept out of training (seed 9: 2 of its 6 prompts): each evaluation's pre-flight runs
/// it through rl's environment runner, told the module.
#[test]
#[ignore = "needs the test venv and the local engine: `cargo xtask test` runs it"]
fn a_package_importing_through_its_top_package_trains_to_completed() {
    const EVALUATED_HELD_OUT: (&str, &str) = (
        "keep_rollouts = 20",
        "keep_rollouts = 20\neval_every = 5\neval_prompts = 2\neval_group_size = 2\n\n\
         [held_out]\nfraction = 0.25\nseed = 9",
    );
    let (stack, _engine) = stack(
        "letter_share",
        &[SHORT_RUN, EVALUATED_HELD_OUT, OVERLONG_PENALTY],
    );
    let steps = trains_to_completed(
        &stack,
        &checkout(),
        "environments.community.letter_share.letter_share_env",
    );
    assert_nothing_masked(&steps);
}
