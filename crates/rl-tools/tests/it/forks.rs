//! `rl_fork_training` and `rl_resume_training`'s extension, as agents see them: a fork of a
//! saved step with a changed setting starts a run that records its lineage and continues the
//! parent's rows up to that step; what the saved state fixes, a step without a state and an
//! extension of no steps are refused with the reason, nothing started.

use std::path::Path;

use rl_process::{RunState, RunStore};
use rl_settings::{RunConfig, RunId, run_dir};
use serde_json::{Value, json};

use crate::answers::{FIXTURE_RUN, Fixture, ended_run_with, fixture};

/// Paths under the state directory and the workspace, and the given run ids, as placeholders.
fn scrubbed(fixture: &Fixture, value: Value, run_ids: &[&str]) -> Value {
    let home = fixture.home().display().to_string();
    let workspace = rl_test_support::workspace_root().display().to_string();
    rl_test_support::scrub_strings(value, &|text| {
        let mut text = text
            .replace(&home, "[home]")
            .replace(&workspace, "[workspace]");
        for id in run_ids {
            text = text.replace(id, "[id]");
        }
        rl_test_support::without_stamps(&text)
    })
}

macro_rules! assert_fork_answer {
    ($name:expr, $answer:expr) => {
        insta::assert_json_snapshot!($name, $answer, {
            ".**.created_at" => "[time]",
            ".**.updated_at" => "[time]",
            ".**.at" => "[time]",
            ".**.elapsed_secs" => "[seconds]",
            ".**.api_port" => "[port]",
            ".**.trainer_port" => "[port]",
            ".**.rollout_server_url" => "[url]",
            ".**.base_url" => "[url]",
            ".**.supervisor" => "[process]",
            ".**.wandb_name" => "[wandb name]",
            ".**.wandb_run_name" => "[wandb name]",
        });
    };
}

/// The parent's saved states: steps 0 and 2 (step 3 saved sampler weights only).
fn with_saved_states(parent: &Path) {
    std::fs::write(
        parent.join("checkpoints.jsonl"),
        concat!(
            "{\"step\": 0, \"name\": \"step_0\", \"sampler_path\": \"tinker://p/step_0\", \"state_path\": \"tinker://p/weights/step_0\"}\n",
            "{\"step\": 2, \"name\": \"step_2\", \"sampler_path\": \"tinker://p/step_2\", \"state_path\": \"tinker://p/weights/step_2\"}\n",
            "{\"step\": 3, \"name\": \"step_3\", \"sampler_path\": \"tinker://p/step_3\", \"state_path\": null}\n",
        ),
    )
    .unwrap();
}

/// Ends the stand-in supervisors' groups, waiting until they are gone.
fn end_supervisors(fixture: &Fixture) {
    let store = RunStore::open(fixture.home()).unwrap();
    for run in store.runs().unwrap() {
        if let Some(supervisor) = run.supervisor {
            let group = nix::unistd::Pid::from_raw(i32::try_from(supervisor.pid).unwrap());
            let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while rl_process::ProcessIdentity::of(supervisor.pid).is_some_and(|p| p.is_alive())
                && std::time::Instant::now() < deadline
            {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    }
}

fn run_count(fixture: &Fixture) -> usize {
    RunStore::open(fixture.home())
        .unwrap()
        .runs()
        .unwrap()
        .len()
}

#[test]
fn fork_answers() {
    let fixture = fixture();
    ended_run_with(&fixture, RunState::Failed, None);
    let parent = run_dir(fixture.home(), &RunId::parse(FIXTURE_RUN).unwrap());
    with_saved_states(&parent);
    let fork = |step: u64, settings: Value| {
        scrubbed(
            &fixture,
            fixture.call(
                "rl_fork_training",
                json!({"run_id": FIXTURE_RUN, "step": step, "settings": settings}),
            ),
            &[],
        )
    };

    for (name, refused) in [
        ("fork_training_unsaved_step", fork(1, json!({}))),
        ("fork_training_lora_rank", fork(2, json!({"lora_rank": 8}))),
        (
            "fork_training_base_model",
            fork(2, json!({"base_model": "Qwen/Qwen3-8B"})),
        ),
        (
            "fork_training_unknown_field",
            fork(2, json!({"learning_rat": "1e-5"})),
        ),
        (
            "fork_training_bad_value",
            fork(2, json!({"learning_rate": "fast"})),
        ),
        (
            "fork_training_locked_field",
            fork(2, json!({"total_steps": 2})),
        ),
    ] {
        assert!(!refused["failure"].is_null(), "{name}: {refused}");
        assert_fork_answer!(name, refused);
    }
    assert_eq!(run_count(&fixture), 1, "a refused fork starts nothing");
    let bad_arguments = fixture.call(
        "rl_fork_training",
        json!({"run_id": FIXTURE_RUN, "step": -1}),
    );
    assert_eq!(bad_arguments["failure"], "bad_request", "{bad_arguments}");

    let forked = fixture.call(
        "rl_fork_training",
        json!({"run_id": FIXTURE_RUN, "step": 2, "settings": {"learning_rate": "1e-5"}}),
    );
    end_supervisors(&fixture);
    assert!(forked["failure"].is_null(), "{forked}");
    let child = forked["answer"]["run_id"].as_str().unwrap().to_owned();
    assert_eq!(
        forked["answer"]["resumed_from"],
        json!({"run_id": FIXTURE_RUN, "step": 2, "kind": "fork",
               "changes": {"learning_rate": 1e-5}})
    );
    let child_dir = run_dir(fixture.home(), &RunId::parse(&child).unwrap());
    let config = RunConfig::read(&child_dir.join("config.yaml")).unwrap();
    let trainer = config.trainer().unwrap();
    assert_eq!(trainer.learning_rate, 1e-5);
    assert_eq!(
        config.tinker.get("resume_state"),
        Some(&rl_settings::Value::from("tinker://p/weights/step_2"))
    );
    assert_fork_answer!("fork_training", scrubbed(&fixture, forked, &[&child]));

    // Forks are branches: a second of the same parent is not a second going continuation.
    let again = fixture.call(
        "rl_fork_training",
        json!({"run_id": FIXTURE_RUN, "step": 0}),
    );
    end_supervisors(&fixture);
    assert!(again["failure"].is_null(), "{again}");
}

#[test]
fn extension_answers() {
    let fixture = fixture();
    ended_run_with(&fixture, RunState::Completed, None);
    let parent = run_dir(fixture.home(), &RunId::parse(FIXTURE_RUN).unwrap());
    let total = RunConfig::read(&parent.join("config.yaml"))
        .unwrap()
        .trainer()
        .unwrap()
        .total_steps;
    std::fs::write(
        parent.join("checkpoints.jsonl"),
        format!(
            "{{\"step\": 0, \"name\": \"step_0\", \"sampler_path\": \"tinker://p/step_0\", \"state_path\": \"tinker://p/weights/step_0\"}}\n\
             {{\"step\": {total}, \"name\": \"final\", \"sampler_path\": \"tinker://p/final\", \"state_path\": \"tinker://p/weights/final\"}}\n"
        ),
    )
    .unwrap();
    let extend = |steps: Value| {
        scrubbed(
            &fixture,
            fixture.call(
                "rl_resume_training",
                json!({"run_id": FIXTURE_RUN, "steps": steps}),
            ),
            &[],
        )
    };
    // The final state is a fork's too, but a fork of it with the same total trains nothing.
    let past_the_end = fixture.call(
        "rl_fork_training",
        json!({"run_id": FIXTURE_RUN, "step": total}),
    );
    assert_fork_answer!(
        "fork_training_past_the_last_step",
        scrubbed(&fixture, past_the_end, &[])
    );
    assert_fork_answer!("resume_training_no_steps", extend(json!(0)));
    assert_fork_answer!("resume_training_too_many_steps", extend(json!(1_000_000)));
    assert_eq!(extend(json!(-3))["failure"], "bad_request");
    assert_eq!(run_count(&fixture), 1, "a refused extension starts nothing");

    let extended = fixture.call(
        "rl_resume_training",
        json!({"run_id": FIXTURE_RUN, "steps": 3}),
    );
    end_supervisors(&fixture);
    assert!(extended["failure"].is_null(), "{extended}");
    let child = extended["answer"]["run_id"].as_str().unwrap().to_owned();
    assert_eq!(
        extended["answer"]["resumed_from"],
        json!({"run_id": FIXTURE_RUN, "step": total, "kind": "extension",
               "changes": {"total_steps": total + 3}})
    );
    let child_dir = run_dir(fixture.home(), &RunId::parse(&child).unwrap());
    let config = RunConfig::read(&child_dir.join("config.yaml")).unwrap();
    assert_eq!(config.trainer().unwrap().total_steps, total + 3);
    assert_fork_answer!(
        "resume_training_extension",
        scrubbed(&fixture, extended, &[&child])
    );
}

/// A failed run given more steps continues from its resume point, its total raised.
#[test]
fn an_ended_run_given_more_steps_continues_from_its_resume_point() {
    let fixture = fixture();
    ended_run_with(&fixture, RunState::Failed, None);
    let parent = run_dir(fixture.home(), &RunId::parse(FIXTURE_RUN).unwrap());
    with_saved_states(&parent);
    let total = RunConfig::read(&parent.join("config.yaml"))
        .unwrap()
        .trainer()
        .unwrap()
        .total_steps;
    let extended = fixture.call(
        "rl_resume_training",
        json!({"run_id": FIXTURE_RUN, "steps": 2}),
    );
    end_supervisors(&fixture);
    assert!(extended["failure"].is_null(), "{extended}");
    assert_eq!(
        extended["answer"]["resumed_from"],
        json!({"run_id": FIXTURE_RUN, "step": 2, "kind": "extension",
               "changes": {"total_steps": total + 2}})
    );
}
