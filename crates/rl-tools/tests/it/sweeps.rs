//! `rl_start_sweep`, `rl_check_sweep` and `rl_stop_sweep` as agents see them: a grid checked
//! whole before anything starts, its first runs started within `max_parallel` and the rest
//! queued, the table, the agents' check limit, and every refusal with nothing started.

use rl_process::RunStore;
use serde_json::{Value, json};

use crate::answers::{Fixture, fixture};

macro_rules! assert_sweep_answer {
    ($name:expr, $answer:expr) => {
        insta::assert_json_snapshot!($name, $answer, {
            ".**.created_at" => "[time]",
            ".**.updated_at" => "[time]",
            ".**.next_check_in_seconds" => "[seconds]",
        });
    };
}

/// The sweeps' and runs' ids in the store, to scrub from answers.
fn ids(fixture: &Fixture) -> Vec<String> {
    let store = RunStore::open(fixture.home()).unwrap();
    let mut ids: Vec<String> = store
        .runs()
        .unwrap()
        .into_iter()
        .map(|run| run.id)
        .collect();
    ids.extend(store.sweeps().unwrap().into_iter().map(|sweep| sweep.id));
    ids
}

fn scrubbed(fixture: &Fixture, answer: Value) -> Value {
    let ids = ids(fixture);
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    fixture.scrub(answer, &ids)
}

/// Ends the stand-in supervisors' groups (they record nothing and sleep).
fn end_supervisors(fixture: &Fixture) {
    for run in RunStore::open(fixture.home()).unwrap().runs().unwrap() {
        if let Some(supervisor) = run.supervisor {
            let group = nix::unistd::Pid::from_raw(i32::try_from(supervisor.pid).unwrap());
            let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
        }
    }
}

#[test]
fn sweep_answers() {
    let fixture = fixture();
    fixture.select("word_ladder");
    let nothing_started = |fixture: &Fixture| {
        let store = RunStore::open(fixture.home()).unwrap();
        assert!(store.runs().unwrap().is_empty());
        assert!(store.sweeps().unwrap().is_empty());
    };
    for (name, arguments) in [
        (
            "start_sweep_locked_field",
            json!({"settings": {"max_token_length": [512, 1024]}}),
        ),
        (
            "start_sweep_unknown_field",
            json!({"settings": {"learning_rat": ["1e-4"]}}),
        ),
        (
            "start_sweep_bad_value",
            json!({"settings": {"group_size": [8, "many"]}}),
        ),
        (
            "start_sweep_no_values",
            json!({"settings": {"group_size": []}}),
        ),
        ("start_sweep_nothing_set", json!({"settings": {}})),
        (
            "start_sweep_too_many_points",
            json!({"settings": {
                "group_size": [1, 2, 3, 4, 5, 6, 7, 8],
                "learning_rate": [1, 2, 3, 4, 5, 6, 7, 8],
                "save_every": [1, 2]
            }}),
        ),
        (
            "start_sweep_no_parallel",
            json!({"settings": {"group_size": [2]}, "max_parallel": 0}),
        ),
        (
            "start_sweep_bad_metric",
            json!({"settings": {"group_size": [2]}, "metric": "two words"}),
        ),
        (
            "start_sweep_unknown_metric",
            json!({"settings": {"group_size": [2]}, "metric": "nosuch"}),
        ),
        (
            "start_sweep_cost_cap_without_price",
            json!({"settings": {"group_size": [2]}, "max_cost": 1.0}),
        ),
        (
            "start_sweep_unknown_argument",
            json!({"settings": {"group_size": [2]}, "parallel": 2}),
        ),
        (
            "start_sweep_settings_not_lists",
            json!({"settings": {"group_size": 2}}),
        ),
        (
            "start_sweep_same_point_twice",
            json!({"settings": {"group_size": [8, "8"]}}),
        ),
        (
            "start_sweep_huge_field_name",
            json!({"settings": {"x".repeat(100_000): [1]}}),
        ),
    ] {
        let answer = fixture.call("rl_start_sweep", arguments);
        assert!(!answer["failure"].is_null(), "{name}: {answer:#}");
        assert_sweep_answer!(name, scrubbed(&fixture, answer));
        nothing_started(&fixture);
    }

    let started = fixture.call(
        "rl_start_sweep",
        json!({
            "settings": {"group_size": [2, 4], "learning_rate": ["1e-4", 3e-4]},
            "max_parallel": 2
        }),
    );
    assert!(started["failure"].is_null(), "{started:#}");
    let sweep_id = started["answer"]["sweep_id"].as_str().unwrap().to_owned();
    let store = RunStore::open(fixture.home()).unwrap();
    assert_eq!(store.runs().unwrap().len(), 2, "two places, two runs");
    let recorded = store.sweeps().unwrap();
    assert_eq!(recorded[0].points.len(), 4);
    assert_sweep_answer!("start_sweep", scrubbed(&fixture, started));

    let checked = fixture.call("rl_check_sweep", json!({"sweep_id": sweep_id}));
    assert!(checked["failure"].is_null(), "{checked:#}");
    assert_eq!(checked["answer"]["waiting"], 2);
    assert_sweep_answer!("check_sweep", scrubbed(&fixture, checked));
    // Agents are held to the operator's interval, per sweep.
    let first = fixture.call_as_agent("rl_check_sweep", json!({"sweep_id": sweep_id}));
    assert!(first["answer"]["rate_limited"].is_null(), "{first:#}");
    let again = fixture.call_as_agent("rl_check_sweep", json!({"sweep_id": sweep_id}));
    assert_sweep_answer!("check_sweep_rate_limited", scrubbed(&fixture, again));

    for (name, arguments) in [
        ("check_sweep_unknown", json!({"sweep_id": "sw-0badc0de"})),
        ("check_sweep_bad_id", json!({"sweep_id": "../../etc"})),
    ] {
        let answer = fixture.call("rl_check_sweep", arguments);
        assert!(!answer["failure"].is_null(), "{name}: {answer:#}");
        assert_sweep_answer!(name, scrubbed(&fixture, answer));
    }
    end_supervisors(&fixture);
}
