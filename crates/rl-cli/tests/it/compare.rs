//! Did training help? A finished run's checkpoints as pre-flight models (`run:ID@STEP`,
//! `run:ID@base`) and `rl compare`, on the local engine with the tiny model: every number comes
//! from completions sampled from the base and the trained weights, through the run's engine
//! started again on a copy of its folder, which is left as it was.

use serde_json::Value;

use crate::runs::assert_nothing_left;
use crate::training::{SAVE_EVERY_TWO, SHORT_RUN, stack};

#[test]
#[ignore = "needs the test venv and the local engine: `cargo xtask test` runs it"]
fn checkpoints_are_models_and_compare_gives_a_verdict_from_real_samples() {
    let (stack, _engine) = stack(&[SHORT_RUN, SAVE_EVERY_TWO]);
    let id = stack.start();
    let finished = stack.wait(&id, "finished", 900);
    assert_eq!(finished["state"], "completed", "{}", stack.explain(&id));
    let engine_db = stack.run_dir(&id).join("engine/tinker.db");
    let db_before = std::fs::read(&engine_db).unwrap();

    // Refused before anything starts: a step without a saved state, a checkpoint beside
    // another endpoint's model, an endpoint given for checkpoints.
    let refused = |args: &[&str], expected: &str| {
        let output = stack.rl(args);
        assert_eq!(output.status.code(), Some(1), "{output:?}");
        let error: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert!(
            error["error"].as_str().unwrap().contains(expected),
            "{error:#}"
        );
    };
    let at = |step: &str| format!("run:{id}@{step}");
    refused(
        &["test", "--json", "--model", &at("1")],
        "steps with a saved state: ",
    );
    refused(
        &[
            "test",
            "--json",
            "--model",
            &at("4"),
            "--model",
            "qwen/qwen3-8b",
        ],
        "checkpoints only",
    );
    refused(
        &[
            "test",
            "--json",
            "--model",
            &at("4"),
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
        &at("4"),
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
    assert!(served.contains(&format!("as run:{id}@4")), "{served}");
    assert!(
        !test_dir.join("engine").exists(),
        "the engine copy is removed"
    );

    // The comparison: base against the final weights, on the run's environment.
    let compared = stack.json(&["compare", &id, "--prompts", "3", "--group-size", "4"]);
    assert_eq!(compared["run_id"], id.as_str());
    assert_eq!(compared["base"]["model"], at("base"));
    assert_eq!(compared["trained"]["model"], format!("run:{id}"));
    for side in ["base", "trained"] {
        assert_eq!(compared[side]["status"], "succeeded", "{compared:#}");
        assert_eq!(compared[side]["prompts"], 3, "{compared:#}");
        assert_eq!(compared[side]["completions"], 12, "{compared:#}");
        let mean = &compared[side]["mean_score"];
        assert!(
            mean["low"].as_f64().unwrap() <= mean["value"].as_f64().unwrap(),
            "{compared:#}"
        );
    }
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

    // The run's own engine folder was only read.
    assert_eq!(std::fs::read(&engine_db).unwrap(), db_before);
    assert_nothing_left(&stack, &id);
}
