//! What a run costs as it goes, and a cap that ends it `capped`: real training on the local
//! engine, driven through the `rl` binary (issue 34).

use serde_json::Value;

use crate::runs::{Stack, assert_nothing_left};
use crate::training::{lines, stack};

/// The digits environment's prompt is 27 tokens and a completion at most 16: with the
/// environment's `max_token_length` at 44, a sequence trains at most 43 tokens, and a step's
/// batch of 64 at most 2752.
const MAX_TOKEN_LENGTH: &str = "max_token_length = 44";
const MAX_TRAINER_LENGTH: &str = "max_token_trainer_length = 44";
const MOST_TRAINED_PER_STEP: f64 = 64.0 * 43.0;

/// `rl runs wait ID --until finished` for up to `timeout` seconds: the run's status once it
/// ended; with `code`, the wait's exit code it must give (0 completed, 3 ended otherwise).
pub(crate) fn wait_until_finished(
    stack: &Stack,
    id: &str,
    timeout: u32,
    code: Option<i32>,
) -> Value {
    let timeout = timeout.to_string();
    let args = [
        "runs",
        "wait",
        id,
        "--until",
        "finished",
        "--timeout",
        &timeout,
        "--json",
    ];
    let output = stack.rl(&args);
    let outcome: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!(
            "rl {args:?}: {error}: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    assert_eq!(
        outcome["timed_out"],
        false,
        "run {id} did not finish: {}",
        stack.explain(id)
    );
    if let Some(code) = code {
        assert_eq!(output.status.code(), Some(code), "{outcome:#}");
    }
    outcome["status"].clone()
}

/// The rows of a run's metrics file that are steps (not events).
fn step_rows(stack: &Stack, id: &str) -> Vec<Value> {
    lines(&stack.run_dir(id).join("metrics.jsonl"))
        .into_iter()
        .filter(|row| row.get("step").is_some() && row.get("event").is_none())
        .collect()
}

fn number(row: &Value, key: &str) -> f64 {
    row[key]
        .as_f64()
        .unwrap_or_else(|| panic!("no {key} in {row:#}"))
}

/// A run with a price and a cap that its third step would pass ends `capped` after step 2's
/// state is saved, says why; a resume with the cap as it is trains no step (its parent spent
/// it); one with the cap raised runs to completion, and the runs' costs add up.
#[test]
#[ignore = "needs the test venv and the local engine: `cargo xtask test` runs it"]
fn a_run_capped_before_its_third_step_resumes_to_completion_and_its_costs_add_up() {
    // One unit per trained token. Step 1 may start: its bound (64 sequences of 44 tokens) is
    // below the cap. Step 2 may: the spend and the next step predicted are 2 × step 1 ≤ the
    // cap. Step 3 may not: after two steps they are 1.5 × (step 1 + step 2), above the cap
    // unless the steps trained under two thirds of their most (skipped groups train nothing).
    let cap = 2.0 * MOST_TRAINED_PER_STEP;
    let costs = format!(
        "[prices]\ncurrency = \"TOK\"\ntrained_per_million = 1000000.0\n\n[caps]\nmax_cost = {cap:?}\n\n[run]"
    );
    let (stack, _engine) = stack(&[
        ("total_steps = 12", "total_steps = 6"),
        ("max_token_length = 256", MAX_TOKEN_LENGTH),
        ("max_token_trainer_length = 256", MAX_TRAINER_LENGTH),
        ("[run]", costs.as_str()),
    ]);
    let parent = stack.start();
    let ended = wait_until_finished(&stack, &parent, 900, Some(3));
    let parent_rows = step_rows(&stack, &parent);
    assert_eq!(
        ended["state"],
        "capped",
        "{parent_rows:#?}\n{}",
        stack.explain(&parent)
    );
    let steps: Vec<u64> = parent_rows
        .iter()
        .filter_map(|row| row["step"].as_u64())
        .collect();
    assert_eq!(steps, [1, 2], "{}", stack.explain(&parent));
    for row in &parent_rows {
        assert_eq!(number(row, "cost/step"), number(row, "tokens/trained"));
    }
    let parent_total = number(&parent_rows[1], "cost/total");
    assert_eq!(
        parent_total,
        number(&parent_rows[0], "cost/step") + number(&parent_rows[1], "cost/step")
    );
    assert!(number(&parent_rows[1], "cost/estimate_at_completion") > parent_total);

    // The cap's row, after step 2's state was saved (save_every 4: the cap saved it).
    let metrics = lines(&stack.run_dir(&parent).join("metrics.jsonl"));
    let capped = metrics.last().unwrap();
    assert_eq!(capped["event"], "capped", "{metrics:#?}");
    assert_eq!(
        (&capped["step"], &capped["cap"], &capped["currency"]),
        (
            &Value::from(2),
            &Value::from("max_cost"),
            &Value::from("TOK")
        ),
        "{capped:#}"
    );
    assert_eq!(number(capped, "spent"), parent_total);
    assert!(number(capped, "spent") + number(capped, "next_step") > cap);
    let checkpoints = lines(&stack.run_dir(&parent).join("checkpoints.jsonl"));
    let saved = checkpoints.last().unwrap();
    assert_eq!(saved["step"], 2, "{checkpoints:#?}");
    assert!(saved["state_path"].as_str().is_some(), "{checkpoints:#?}");

    // Its status says why, and that a resume continues it; a cap is no failure.
    let status = stack.json(&["runs", "status", &parent]);
    assert!(status.get("error").is_none(), "{status:#}");
    let said = status["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|event| event["message"].as_str())
        .find(|message| message.contains("max_cost"))
        .unwrap_or_else(|| panic!("no event names the cap: {status:#}"))
        .to_owned();
    assert!(
        said.contains("before step 3/6")
            && said.contains(&format!(r#"rl_resume_training {{"run_id": "{parent}"}}"#)),
        "{said}"
    );
    // At the shell, the command that continues it.
    let told = stack.rl(&["runs", "status", &parent]);
    let told = String::from_utf8_lossy(&told.stdout);
    assert!(
        told.contains(&format!("`rl runs resume {parent}`")),
        "{told}"
    );
    let trainer_log = std::fs::read_to_string(stack.run_dir(&parent).join("trainer.log")).unwrap();
    assert!(
        trainer_log.contains("rl-trainer: capped: "),
        "{trainer_log}"
    );
    assert_nothing_left(&stack, &parent);

    // Resumed under the same cap, the run trains no step: what its parent spent counts.
    let held = stack.json(&["runs", "resume", &parent]);
    let held = held["run_id"].as_str().unwrap().to_owned();
    let ended = wait_until_finished(&stack, &held, 900, Some(3));
    assert_eq!(ended["state"], "capped", "{}", stack.explain(&held));
    let held_metrics = lines(&stack.run_dir(&held).join("metrics.jsonl"));
    let capped = held_metrics.last().unwrap();
    assert_eq!(
        (&capped["event"], &capped["step"], &capped["spent"]),
        (
            &Value::from("capped"),
            &Value::from(2),
            &Value::from(parent_total)
        ),
        "{held_metrics:#?}"
    );
    assert!(
        step_rows(&stack, &held)
            .iter()
            .all(|row| row["step"].as_u64() <= Some(2)),
        "{held_metrics:#?}"
    );
    assert_nothing_left(&stack, &held);

    // The cap raised out of the way, the run continues from step 2's state to its end.
    let config = stack.home.path().join("config.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace(&format!("max_cost = {cap:?}"), "max_cost = 1000000.0"),
    )
    .unwrap();
    let resumed = stack.json(&["runs", "resume", &parent]);
    let child = resumed["run_id"].as_str().unwrap().to_owned();
    assert_eq!(
        resumed["resumed_from"],
        serde_json::json!({"run_id": parent, "step": 2, "kind": "resume"}),
        "{resumed:#}"
    );
    let finished = wait_until_finished(&stack, &child, 900, Some(0));
    assert_eq!(finished["state"], "completed", "{}", stack.explain(&child));
    let child_metrics = lines(&stack.run_dir(&child).join("metrics.jsonl"));
    assert!(
        child_metrics.iter().all(|row| row["event"] != "capped"),
        "the parent's cap is its own end, not carried over: {child_metrics:#?}"
    );
    let child_rows = step_rows(&stack, &child);
    let steps: Vec<u64> = child_rows
        .iter()
        .filter_map(|row| row["step"].as_u64())
        .collect();
    assert_eq!(steps, [1, 2, 3, 4, 5, 6], "{}", stack.explain(&child));
    // The parent's figures carried over; the child's own spend is its steps 3 to 6.
    assert_eq!(number(&child_rows[1], "cost/total"), parent_total);
    let own: f64 = child_rows[2..]
        .iter()
        .map(|row| number(row, "cost/step"))
        .sum();
    let last = number(&child_rows[5], "cost/total");
    assert!(
        (parent_total + own - last).abs() < 1e-6,
        "{parent_total} + {own} != {last}: {child_rows:#?}"
    );
    assert_eq!(number(&child_rows[5], "cost/estimate_at_completion"), last);
    assert_nothing_left(&stack, &child);
}

/// Caps hold from the first step: a run whose time cap has passed before its first step, and
/// one whose first step could pass its cost cap (64 sequences of up to 256 tokens at one
/// unit each), end `capped` having trained no step, and say which bound stopped them.
#[test]
#[ignore = "needs the test venv and the local engine: `cargo xtask test` runs it"]
fn a_run_whose_first_step_would_pass_a_cap_trains_no_step() {
    let (stack, _engine) = stack(&[(
        "[run]",
        "[prices]\ncurrency = \"TOK\"\ntrained_per_million = 1000000.0\n\n[run]",
    )]);
    for (flag, value, said) in [
        ("--max-hours", "0.0001", "max_hours 0.0001: this run used"),
        (
            "--max-cost",
            "1000",
            "its next step would take up to 16384 more (a first step's bound",
        ),
    ] {
        let started = stack.json(&["runs", "start", flag, value]);
        let id = started["id"].as_str().unwrap().to_owned();
        let ended = wait_until_finished(&stack, &id, 900, Some(3));
        assert_eq!(ended["state"], "capped", "{}", stack.explain(&id));
        assert!(
            step_rows(&stack, &id).is_empty(),
            "{flag} {value}: trained a step: {}",
            stack.explain(&id)
        );
        let status = stack.json(&["runs", "status", &id]);
        let events = status["events"].as_array().unwrap();
        assert!(
            events.iter().any(|event| {
                event["message"].as_str().is_some_and(|message| {
                    message.contains("before step 1/") && message.contains(said)
                })
            }),
            "{flag} {value}: {status:#}"
        );
        assert_nothing_left(&stack, &id);
    }
}
