//! What a run's records decide, the same for every command: where it trained (the launch
//! record, never whether a folder happens to exist), and which of its checkpoints is the best
//! (one rule for the listing, `run:ID@best` and `rl compare --step best`).

use std::path::Path;

use rl_process::RunState;
use rl_settings::{RunId, run_dir};
use rl_tools::{CompareOptions, InferenceOptions, KeepFor, ToolsError};
use serde_json::{Value, json};

use crate::answers::{FIXTURE_RUN, Fixture, ended_run_with, fixture};

/// A port nothing listens on here; what the run's config names as its engine (and, read as a
/// hosted run's, as its Tinker API).
const OLD_ENGINE_PORT: u16 = 9;

fn write_checkpoints(dir: &Path, rows: &[Value]) {
    let text: String = rows.iter().map(|row| row.to_string() + "\n").collect();
    std::fs::write(dir.join("checkpoints.jsonl"), text).unwrap();
}

fn write_rewards(dir: &Path, rewards: &[(i64, f64)]) {
    let text: String = rewards
        .iter()
        .map(|(step, reward)| json!({"step": step, "reward/mean": reward}).to_string() + "\n")
        .collect();
    std::fs::write(dir.join("metrics.jsonl"), text).unwrap();
}

fn checkpoint(step: i64, state: bool) -> Value {
    json!({
        "step": step,
        "name": format!("step_{step}"),
        "sampler_path": format!("tinker://m/sampler_weights/step_{step}"),
        "state_path": state.then(|| format!("tinker://m/weights/step_{step}")),
    })
}

/// The plan of `rl compare ID --step best`.
fn compare_best(tools: &rl_tools::Tools, id: &RunId) -> rl_tools::ComparePlan {
    tools
        .compare_plan(
            id,
            &CompareOptions {
                step: Some("best".to_owned()),
                ..CompareOptions::default()
            },
        )
        .unwrap()
}

fn refusal(fixture: &Fixture, tool: &str, arguments: Value) -> Value {
    let reply = fixture.call(tool, arguments);
    assert!(!reply["failure"].is_null(), "{reply:#}");
    reply["answer"].clone()
}

/// The refusal of `tool`, which must say `said`.
fn refused_saying(fixture: &Fixture, tool: &str, arguments: Value, said: &str) -> Value {
    let refused = refusal(fixture, tool, arguments);
    assert!(
        refused["error"].as_str().unwrap().contains(said),
        "{refused:#}"
    );
    refused
}

/// Issue 30 #2: a local-engine run was told from a hosted one by its engine folder alone; with
/// the folder moved away, its checkpoints were asked of the address its config names as the
/// Tinker API (its own engine's old loopback port, anyone's once the run ended) with
/// TINKER_API_KEY. Its launch record says it started an engine: every path that would send
/// the key refuses instead, naming the missing folder.
#[test]
fn a_run_that_started_an_engine_is_never_taken_for_a_hosted_one() {
    let fixture = fixture();
    ended_run_with(&fixture, RunState::Completed, Some(OLD_ENGINE_PORT));
    let id = RunId::parse(FIXTURE_RUN).unwrap();
    let dir = run_dir(fixture.home(), &id);
    write_checkpoints(&dir, &[checkpoint(1, true), checkpoint(2, true)]);
    let tools = fixture.registry_tools();
    let missing = "this run's engine folder is missing";

    for (tool, arguments) in [
        (
            "rl_test_inference",
            json!({"models": [format!("run:{id}")]}),
        ),
        ("rl_compare_training", json!({"run_id": FIXTURE_RUN})),
        (
            "rl_compare_training",
            json!({"run_id": FIXTURE_RUN, "step": "best"}),
        ),
    ] {
        let refused = refusal(&fixture, tool, arguments);
        assert!(
            refused["error"].as_str().unwrap().contains(missing),
            "{refused:#}"
        );
        assert_eq!(refused["kind"], "precondition", "{refused:#}");
    }
    let plan = tools.inference_plan(&InferenceOptions {
        models: vec![format!("run:{id}@1")],
        ..InferenceOptions::default()
    });
    assert!(matches!(plan, Err(ToolsError::RunFilesMissing { .. })));
    let keep = tools.keep_checkpoint(&id, 2, KeepFor::Days(1)).unwrap_err();
    assert!(keep.to_string().contains(missing), "{keep}");
    let out = tempfile::tempdir().unwrap();
    let export = tools
        .export_checkpoint(&id, 2, &out.path().join("adapter"))
        .unwrap_err();
    assert!(export.to_string().contains(missing), "{export}");
    let listed = fixture.call("rl_list_checkpoints", json!({"run_id": FIXTURE_RUN}));
    let warnings = &listed["answer"]["runs"][0]["warnings"];
    assert!(
        warnings[0].as_str().unwrap().contains(missing),
        "{listed:#}"
    );

    // With its folder back it is the local run it was: nothing at a service to keep.
    std::fs::create_dir_all(dir.join("engine")).unwrap();
    let keep = tools.keep_checkpoint(&id, 2, KeepFor::Days(1)).unwrap_err();
    assert!(keep.to_string().contains("never expire"), "{keep}");
    let export = tools
        .export_checkpoint(&id, 2, &out.path().join("adapter"))
        .unwrap_err();
    assert!(
        export
            .to_string()
            .contains("not in the run's local engine folder"),
        "{export}"
    );

    // Without its launch record, no one can tell: nothing is asked of anyone.
    std::fs::remove_file(dir.join("launch.json")).unwrap();
    refused_saying(
        &fixture,
        "rl_compare_training",
        json!({"run_id": FIXTURE_RUN}),
        "cannot tell whether it trained on the local engine",
    );
}

/// Issue 30 #8: "best" meant two things: the listing marked the best reward even at a step
/// with no saved state (nothing can load it), while `@best` silently sampled the best saved
/// step. One rule now: the best score among the checkpoints with a saved state not pruned;
/// the listing marks that step, `@best` samples it, and a comparison names it.
#[test]
fn the_best_is_one_step_for_the_listing_the_models_and_the_comparison() {
    let fixture = fixture();
    ended_run_with(&fixture, RunState::Completed, None);
    let id = RunId::parse(FIXTURE_RUN).unwrap();
    let dir = run_dir(fixture.home(), &id);
    // Step 2 has the top reward but no saved state; step 3's state was pruned; of what can be
    // loaded, step 1 beats step 4.
    write_checkpoints(
        &dir,
        &[
            checkpoint(1, true),
            checkpoint(2, false),
            checkpoint(3, true),
            checkpoint(4, true),
        ],
    );
    write_rewards(&dir, &[(1, 0.5), (2, 0.9), (3, 0.8), (4, 0.4)]);
    std::fs::write(dir.join("pruned.json"), "[3]").unwrap();

    let listed = fixture.call("rl_list_checkpoints", json!({"run_id": FIXTURE_RUN}));
    let run = &listed["answer"]["runs"][0];
    assert_eq!(run["best_step"], 1, "{listed:#}");
    assert_eq!(run["best_by"], "reward/mean", "{listed:#}");
    let marked: Vec<&Value> = run["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|checkpoint| checkpoint["best"] == true)
        .map(|checkpoint| &checkpoint["step"])
        .collect();
    assert_eq!(marked, [&json!(1)], "{listed:#}");

    let tools = fixture.registry_tools();
    let plan = tools
        .inference_plan(&InferenceOptions {
            models: vec![format!("run:{id}@best")],
            ..InferenceOptions::default()
        })
        .unwrap();
    assert_eq!(plan.models, ["tinker://m/sampler_weights/step_1"]);
    let compared = compare_best(tools, &id);
    assert_eq!(compared.trained.step, 1);
    assert_eq!(compared.trained.best_by, Some("reward/mean"));
    assert_eq!(compared.test.models[1], "tinker://m/sampler_weights/step_1");
    let last = tools.compare_plan(&id, &CompareOptions::default()).unwrap();
    assert_eq!((last.trained.step, last.trained.best_by), (4, None));

    // Issue 30 #10: with another environment selected (and edited), a comparison still runs
    // the one the run trained, with its edits; it asks no one to `rl select` (which would wipe
    // the current edits), and the selection is left as it was.
    fixture.select("arithmetic");
    fixture.call("rl_edit_config", json!({"field": "group_size", "value": 3}));
    let before = fixture.call("rl_get_current_config", json!({}));
    let elsewhere = tools.compare_plan(&id, &CompareOptions::default()).unwrap();
    assert_eq!(elsewhere.test.environment, last.test.environment);
    assert_eq!(elsewhere.test.env_file, last.test.env_file);
    assert!(
        elsewhere.test.env_file.ends_with("constrained_env.py"),
        "{:?}",
        elsewhere.test.env_file
    );
    assert_eq!(fixture.call("rl_get_current_config", json!({})), before);

    // Evaluated during training: held-out scores decide, over the reward.
    let evaluated: String = [(1, 0.2), (3, 0.9), (4, 0.6)]
        .iter()
        .map(|(step, score)| json!({"step": step, "eval/mean_score": score}).to_string() + "\n")
        .collect();
    let mut metrics = std::fs::read_to_string(dir.join("metrics.jsonl")).unwrap();
    metrics.push_str(&evaluated);
    std::fs::write(dir.join("metrics.jsonl"), metrics).unwrap();
    let listed = fixture.call("rl_list_checkpoints", json!({"run_id": FIXTURE_RUN}));
    let run = &listed["answer"]["runs"][0];
    assert_eq!(
        (&run["best_step"], &run["best_by"]),
        (&json!(4), &json!("eval/mean_score")),
        "{listed:#}"
    );
    let compared = compare_best(tools, &id);
    assert_eq!(
        (compared.trained.step, compared.trained.best_by),
        (4, Some("eval/mean_score"))
    );

    // Nothing saved to choose from: refused, saying what the best is chosen among.
    write_checkpoints(&dir, &[checkpoint(2, false)]);
    refused_saying(
        &fixture,
        "rl_compare_training",
        json!({"run_id": FIXTURE_RUN, "step": "best"}),
        "among those with a saved state",
    );
}

/// A resume trains where its parent did: a local-engine run resumed while the operator's
/// settings train at a service would send the key to the parent's old engine address.
#[test]
fn a_run_is_resumed_only_where_it_trained() {
    let fixture = fixture();
    ended_run_with(&fixture, RunState::Failed, Some(OLD_ENGINE_PORT));
    let id = RunId::parse(FIXTURE_RUN).unwrap();
    let dir = run_dir(fixture.home(), &id);
    std::fs::create_dir_all(dir.join("engine")).unwrap();
    write_checkpoints(&dir, &[checkpoint(0, true), checkpoint(2, true)]);
    refused_saying(
        &fixture,
        "rl_resume_training",
        json!({"run_id": FIXTURE_RUN}),
        "it trained on the local engine",
    );
}
