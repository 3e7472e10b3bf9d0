//! A run trained from `--envs-dir` is continued without it (issue 42, item 5): the selection
//! and the run record the folder they were made in, so `rl config show` and `rl runs fork`
//! find the environment there, not in the configured folder, where it is not.

use serde_json::Value;

use crate::runs::{Stack, assert_nothing_left};
use crate::{test_python, workspace_root};

/// The fixture trainer saves sampler weights only; rl's trainer records a saved state as this
/// row does (at a Tinker service, as the local stack trains, its files are the service's).
fn with_a_saved_state_at_step_2(run_dir: &std::path::Path) {
    let path = run_dir.join("checkpoints.jsonl");
    let rows: Vec<Value> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .map(|mut row: Value| {
            if row["step"] == 2 {
                row["state_path"] = "tinker://fixture/weights/step_2".into();
            }
            row
        })
        .collect();
    assert!(rows.iter().any(|row| row["step"] == 2), "{rows:?}");
    let text = rows.iter().fold(String::new(), |mut text, row| {
        text.push_str(&format!("{row}\n"));
        text
    });
    std::fs::write(&path, text).unwrap();
}

#[test]
#[ignore = "needs the test venv (the local stack's run-api): `cargo xtask test` runs it"]
fn a_run_trained_from_envs_dir_is_shown_and_forked_without_it() {
    let stack = Stack::new(&test_python(), &[]);
    // The environment lives only in a folder of its own, under a file name the configured
    // folder does not have (its data and tokenizer are found from the components' working
    // directory, the tinker-atropos tree).
    let envs = tempfile::tempdir().unwrap();
    std::fs::copy(
        workspace_root()
            .join("fixtures/tinker-atropos/tinker_atropos/environments/arithmetic_env.py"),
        envs.path().join("sums_env.py"),
    )
    .unwrap();
    let envs_dir = envs.path().display().to_string();
    let with_dir = |args: &[&str]| {
        let mut all = vec!["--envs-dir", envs_dir.as_str()];
        all.extend_from_slice(args);
        stack.json(&all)
    };
    let selected = with_dir(&["select", "arithmetic"]);
    let key = selected["key"].as_str().unwrap().to_owned();
    assert!(key.ends_with("@sums_env.py"), "{key}");
    let parent = with_dir(&["runs", "start", "--wait", "finished"]);
    let parent_id = parent["run_id"].as_str().unwrap().to_owned();
    assert_eq!(
        parent["status"],
        "completed",
        "{}",
        stack.explain(&parent_id)
    );
    with_a_saved_state_at_step_2(&stack.run_dir(&parent_id));

    // Without --envs-dir from here on.
    let shown = stack.json(&["config", "show"]);
    assert!(shown.to_string().contains(&key), "{shown:#}");
    let forked = stack.json(&["runs", "fork", &parent_id, "--step", "2"]);
    let fork_id = forked["run_id"].as_str().unwrap().to_owned();
    assert_eq!(forked["resumed_from"]["run_id"], parent_id.as_str());
    let ended = stack.wait(&fork_id, "finished", 300);
    assert_eq!(ended["state"], "completed", "{}", stack.explain(&fork_id));
    let ran = std::fs::read_to_string(stack.run_dir(&fork_id).join("environment.json")).unwrap();
    assert!(
        ran.contains(&envs_dir),
        "the fork ran the recorded folder's file: {ran}"
    );
    assert_nothing_left(&stack, &fork_id);
}
