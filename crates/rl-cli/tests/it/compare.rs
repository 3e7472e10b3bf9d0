//! Did training help? A finished run's checkpoints as pre-flight models (`run:ID@STEP`,
//! `run:ID@base`) and `rl compare`, on the local engine with the tiny model: every number comes
//! from completions sampled from the base and the trained weights, through the run's engine
//! started again on a copy of its folder, which is left as it was.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::runs::assert_nothing_left;
use crate::training::{SAVE_EVERY_TWO, SHORT_RUN, stack};

/// Keep the last checkpoint (and the best and the final weights), pruned as the run ends; and
/// a quarter of the items out of training: with seed 7, 4 of the 12 digits prompts.
const PRUNED_AS_IT_ENDS_FOUR_HELD_OUT: (&str, &str) = (
    "keep_rollouts = 20",
    "keep_rollouts = 20\n\n[checkpoints]\nkeep_last = 2\nprune_when_ended = true\n\n\
     [held_out]\nfraction = 0.25\nseed = 7",
);
const HELD_OUT_PROMPTS: usize = 4;

/// The user messages of the groups a model of a test wrote.
pub(crate) fn asked_prompts(test_dir: &std::path::Path, stem_start: &str) -> BTreeSet<String> {
    let mut asked = BTreeSet::new();
    for entry in std::fs::read_dir(test_dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let groups = path
            .extension()
            .is_some_and(|extension| extension == "jsonl");
        if !(name.starts_with(stem_start) && groups) {
            continue;
        }
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            let group: Value = serde_json::from_str(line).unwrap();
            for messages in group["messages"].as_array().unwrap() {
                for message in messages.as_array().unwrap() {
                    if message["role"] == "user" {
                        asked.insert(message["content"].as_str().unwrap().to_owned());
                    }
                }
            }
        }
    }
    asked
}

/// Every prompt the run's trainer logged a rollout of.
pub(crate) fn trained_prompts(run_dir: &std::path::Path) -> String {
    let mut text = String::new();
    for entry in std::fs::read_dir(run_dir.join("rollouts")).unwrap() {
        text.push_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap());
    }
    text
}

#[test]
#[ignore = "needs the test venv and the local engine: `cargo xtask test` runs it"]
fn checkpoints_are_models_and_compare_gives_a_verdict_from_real_samples() {
    let (stack, _engine) = stack(&[SHORT_RUN, SAVE_EVERY_TWO, PRUNED_AS_IT_ENDS_FOUR_HELD_OUT]);

    // Before any run, the base model the run will train, through an engine started for the
    // test and ended with it (issue 55 #2).
    let next_base = next_base_test(&stack);
    assert_eq!(next_base["models"][0]["model"], "base", "{next_base:#}");
    assert_eq!(
        next_base["models"][0]["status"], "succeeded",
        "{next_base:#}"
    );
    let next_base_dir = std::path::PathBuf::from(next_base["output_dir"].as_str().unwrap());
    let served = std::fs::read_to_string(next_base_dir.join("server.log")).unwrap();
    assert!(served.contains("serving base on"), "{served}");
    assert!(
        !next_base_dir.join("engine").exists(),
        "its engine folder is removed"
    );
    let left = rl_test_support::processes_mentioning(&next_base_dir.display().to_string());
    assert!(left.is_empty(), "{left:?}");

    let id = stack.start();
    let finished = stack.wait(&id, "finished", 900);
    assert_eq!(finished["state"], "completed", "{}", stack.explain(&id));

    // The operator's policy applied by the supervisor as the run ended: the last checkpoint,
    // the best and the final weights kept, the others' files deleted.
    let pruned_file = stack.run_dir(&id).join("pruned.json");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !pruned_file.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let listed = stack.json(&["checkpoints", "list", &id]);
    let checkpoints = listed["runs"][0]["checkpoints"].as_array().unwrap().clone();
    let pruned: Vec<i64> = checkpoints
        .iter()
        .filter(|checkpoint| checkpoint["pruned"] == true && checkpoint["state_path"].is_string())
        .map(|checkpoint| checkpoint["step"].as_i64().unwrap())
        .collect();
    assert!(!pruned.is_empty(), "{listed:#}");
    for checkpoint in &checkpoints {
        let kept = checkpoint["best"] == true || checkpoint["name"] == "final";
        assert!(!(kept && checkpoint["pruned"] == true), "{listed:#}");
    }
    let engine_db = stack.run_dir(&id).join("engine/tinker.db");
    let db_before = std::fs::read(&engine_db).unwrap();

    // Refused before anything starts: a step without a saved state, a checkpoint beside
    // another endpoint's model, an endpoint given for checkpoints.
    let at = |step: &str| format!("run:{id}@{step}");
    stack.refused(
        &["test", "--json", "--model", &at("1")],
        "steps with a saved state: ",
    );
    // A pruned state is no model any more.
    stack.refused(
        &["test", "--json", "--model", &at(&pruned[0].to_string())],
        "has no saved state",
    );
    stack.refused(
        &[
            "test",
            "--json",
            "--model",
            &at("best"),
            "--model",
            "qwen/qwen3-8b",
        ],
        "checkpoints only",
    );
    stack.refused(
        &[
            "test",
            "--json",
            "--model",
            &at("best"),
            "--base-url",
            "http://127.0.0.1:9/v1",
        ],
        "give no endpoint",
    );

    // A checkpoint and the base model as the models of a pre-flight.
    let report = stack.json(&[
        "test",
        "--model",
        &at("base"),
        "--model",
        &at("best"),
        "--steps",
        "2",
        "--group-size",
        "4",
    ]);
    for model in report["models"].as_array().unwrap() {
        assert_eq!(model["status"], "succeeded", "{report:#}");
        assert_eq!(model["steps_tested"], 2, "{report:#}");
    }
    let test_dir = std::path::PathBuf::from(report["output_dir"].as_str().unwrap());
    let served = std::fs::read_to_string(test_dir.join("server.log")).unwrap();
    assert!(served.contains(&format!("as run:{id}@best")), "{served}");
    assert!(
        !test_dir.join("engine").exists(),
        "the engine copy is removed"
    );

    // The comparison: base against the final weights, on the run's environment, asking the
    // prompts the run kept out of training, each once.
    let compared = stack.json(&["compare", &id, "--prompts", "3", "--group-size", "4"]);
    assert_eq!(compared["prompt_source"], "held-out slice", "{compared:#}");
    assert_eq!(compared["kept_out_of_training"], true, "{compared:#}");
    assert!(
        compared["prompts"]
            .as_str()
            .unwrap()
            .contains("3 distinct items of the held-out slice (0.25 of the items by content, seed 7), which the run never trained on"),
        "{compared:#}"
    );
    let compare_dir = stack
        .home
        .path()
        .join("preflight")
        .join(compared["test_id"].as_str().unwrap());
    let base_prompts = asked_prompts(&compare_dir, "01-");
    assert_eq!(base_prompts.len(), 3, "{base_prompts:?}");
    assert_eq!(asked_prompts(&compare_dir, "02-"), base_prompts);
    let trained_on = trained_prompts(&stack.run_dir(&id));
    assert!(
        trained_on.contains("Write some digits."),
        "no rollouts read"
    );
    for prompt in &base_prompts {
        assert!(!trained_on.contains(prompt.as_str()), "trained on {prompt}");
    }
    assert_eq!(compared["run_id"], id.as_str());
    assert_eq!(compared["base"]["model"], at("base"));
    // The last saved state, named by its step (issue 30 #8: the answer says what it compared).
    let last_saved = checkpoints
        .iter()
        .filter(|checkpoint| checkpoint["state_path"].is_string() && checkpoint["pruned"] != true)
        .filter_map(|checkpoint| checkpoint["step"].as_i64())
        .max()
        .unwrap();
    assert_eq!(compared["step"], last_saved, "{compared:#}");
    assert!(compared["best_by"].is_null(), "{compared:#}");
    assert_eq!(compared["trained"]["model"], at(&last_saved.to_string()));
    for side in ["base", "trained"] {
        assert_eq!(compared[side]["status"], "succeeded", "{compared:#}");
        assert_eq!(compared[side]["prompts"], 3, "{compared:#}");
        assert_eq!(compared[side]["completions"], 12, "{compared:#}");
        let mean = &compared[side]["mean_score"];
        assert!(
            mean["low"].as_f64().unwrap() <= mean["value"].as_f64().unwrap(),
            "{compared:#}"
        );
        // pass@k and best-of-n of the 4 completions each prompt got (issue 44).
        assert_eq!(compared[side]["n"], 4, "{compared:#}");
        let best = compared[side]["best_of_n"]["value"].as_f64().unwrap();
        assert!(
            best >= mean["value"].as_f64().unwrap() - 1e-9,
            "{compared:#}"
        );
        if compared["correct_from"].is_number() {
            let pass = |key: &str| compared[side][key]["value"].as_f64().unwrap();
            assert!(pass("pass_at_n") >= pass("pass_at_1"), "{compared:#}");
            assert!((0.0..=1.0).contains(&pass("pass_at_n")), "{compared:#}");
        }
    }
    assert_eq!(compared["measure"], "mean_score", "{compared:#}");
    assert!(
        ["better", "no detectable difference", "worse"]
            .contains(&compared["verdict"].as_str().unwrap()),
        "{compared:#}"
    );
    assert!(
        compared["explanation"]
            .as_str()
            .unwrap()
            .contains("3 prompts (12 completions)"),
        "{compared:#}"
    );
    let shown = stack.json(&["preflight", "show", compared["test_id"].as_str().unwrap()]);
    assert_eq!(shown["test_id"], compared["test_id"], "{shown:#}");

    // More prompts asked than the slice holds: every one of them, once, and the answer says so;
    // of the best checkpoint, the one `rl checkpoints list` marks (issue 30 #8).
    let all = stack.json(&[
        "compare",
        &id,
        "--prompts",
        "6",
        "--group-size",
        "2",
        "--step",
        "best",
        "--measure",
        "best_of_n",
    ]);
    // The verdict rests on the measure asked, and says so.
    assert_eq!(all["measure"], "best_of_n", "{all:#}");
    assert!(
        all["explanation"].as_str().unwrap().contains("best-of-2"),
        "{all:#}"
    );
    assert_eq!(
        all["step"], listed["runs"][0]["best_step"],
        "{all:#}\n{listed:#}"
    );
    assert_eq!(all["best_by"], listed["runs"][0]["best_by"], "{all:#}");
    let mut marked: Vec<&Value> = checkpoints
        .iter()
        .filter(|checkpoint| checkpoint["best"] == true)
        .map(|checkpoint| &checkpoint["step"])
        .collect();
    marked.dedup();
    assert_eq!(marked, [&all["step"]], "{listed:#}");
    for side in ["base", "trained"] {
        assert_eq!(all[side]["prompts"], HELD_OUT_PROMPTS, "{all:#}");
    }
    assert!(
        all["prompts"].as_str().unwrap().contains("all 4 there are"),
        "{all:#}"
    );

    // A local engine's checkpoints never expire: there is nothing to keep.
    stack.refused(
        &["checkpoints", "keep", "--json", &id, "2", "--days", "1"],
        "never expire",
    );

    // Served for use: detached and stopped, and in the foreground with its owner killed; and
    // merged into its base weights.
    let last_state = checkpoints
        .iter()
        .find(|checkpoint| checkpoint["step"] == last_saved && checkpoint["state_path"].is_string())
        .and_then(|checkpoint| checkpoint["state_path"].as_str())
        .unwrap();
    // Two trained steps at once: the last and another the policy kept.
    let other_step = checkpoints
        .iter()
        .filter(|checkpoint| checkpoint["state_path"].is_string() && checkpoint["pruned"] != true)
        .filter_map(|checkpoint| checkpoint["step"].as_i64())
        .find(|step| *step != last_saved)
        .unwrap_or_else(|| panic!("one kept step only: {listed:#}"));
    crate::serving::a_finished_runs_checkpoints_are_served(
        &stack,
        &id,
        other_step,
        |url, model| {
            crate::serving::a_merged_export_computes_what_its_checkpoint_computes(
                &stack,
                &id,
                last_saved,
                last_state,
                (url, model),
            );
        },
    );

    // The run's own engine folder was only read.
    assert_eq!(std::fs::read(&engine_db).unwrap(), db_before);
    assert_nothing_left(&stack, &id);

    // Its engine folder emptied of checkpoints: refused before an engine starts, naming the
    // files that are gone (issue 42 #6), not two models `not_started` and exit 0.
    let saved_files = stack.run_dir(&id).join("engine").join("checkpoints");
    let aside = stack.run_dir(&id).join("checkpoints-aside");
    std::fs::rename(&saved_files, &aside).unwrap();
    stack.refused(
        &["--json", "compare", &id, "--prompts", "1"],
        "are missing from the run's engine folder",
    );
    std::fs::rename(&aside, &saved_files).unwrap();

    its_engine_folder_gone_no_key_goes_anywhere(stack, &id, &last_saved.to_string());
}

/// A pre-flight of one group of two of the base model the next run trains (`base`).
pub(crate) const NEXT_BASE_TEST: [&str; 7] = [
    "test",
    "--model",
    "base",
    "--steps",
    "1",
    "--group-size",
    "2",
];

pub(crate) fn next_base_test(stack: &crate::runs::Stack) -> Value {
    stack.json(&NEXT_BASE_TEST)
}

/// Issue 30 #2: with its engine folder moved away, this local run was taken for a hosted one,
/// and TINKER_API_KEY went to the address its config names as its Tinker API: its engine's
/// old loopback port, which any process may own now. Here one does, and logs what reaches it:
/// nothing may; every command refuses, naming the missing folder. The folder put back, the run
/// is the local run it was.
fn its_engine_folder_gone_no_key_goes_anywhere(
    mut stack: crate::runs::Stack,
    id: &str,
    step: &str,
) {
    const KEY: &str = "tml-never-to-the-old-engine-port-41c9";
    let launch: Value =
        serde_json::from_slice(&std::fs::read(stack.run_dir(id).join("launch.json")).unwrap())
            .unwrap();
    let port = u16::try_from(launch["engine_port"].as_u64().unwrap()).unwrap();
    let squatter = rl_test_support::FixtureServer::serving_on(
        &crate::test_python(),
        port,
        None,
        Some("always-right"),
    );
    let engine = stack.run_dir(id).join("engine");
    let moved = stack.run_dir(id).join("engine-moved-away");
    std::fs::rename(&engine, &moved).unwrap();
    stack.tinker_key = Some(KEY);
    let missing = "this run's engine folder is missing";
    stack.refused(&["--json", "compare", id, "--prompts", "1"], missing);
    stack.refused(
        &["--json", "compare", id, "--prompts", "1", "--step", "best"],
        missing,
    );
    stack.refused(
        &["--json", "test", "--model", &format!("run:{id}@best")],
        missing,
    );
    stack.refused(
        &["--json", "checkpoints", "keep", id, step, "--days", "1"],
        missing,
    );
    let out = stack.home.path().join("exported");
    let out_text = out.display().to_string();
    stack.refused(
        &["--json", "checkpoints", "export", id, step, &out_text],
        missing,
    );
    let listed = stack.json(&["checkpoints", "list", id]);
    assert!(
        listed["runs"][0]["warnings"][0]
            .as_str()
            .unwrap()
            .contains(missing),
        "{listed:#}"
    );
    assert_eq!(squatter.requests(), Vec::<Value>::new(), "the key went out");
    std::fs::rename(&moved, &engine).unwrap();
    stack.refused(
        &["--json", "checkpoints", "keep", id, step, "--days", "1"],
        "never expire",
    );
    assert_eq!(squatter.requests(), Vec::<Value>::new());
    crate::hosted_training::assert_no_file_holds(stack.home.path(), KEY);
}
