//! `rl envs new`: the template is found by discovery and runs in a pre-flight as written.

use serde_json::Value;

use crate::{rl_in, test_python};

#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn a_new_environment_is_discovered_selected_and_preflighted_unchanged() {
    let python = test_python();
    let server = rl_test_support::FixtureServer::start(&python, None);
    let tree = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tree.path().join("tinker_atropos/environments")).unwrap();
    let home = tempfile::tempdir().unwrap();
    let settings = rl_test_support::local_stack_settings(&python);
    let fixture_root = rl_test_support::workspace_root().join("fixtures/tinker-atropos");
    let settings = settings.replace(
        &format!("tinker_atropos_root = \"{}\"", fixture_root.display()),
        &format!("tinker_atropos_root = \"{}\"", tree.path().display()),
    );
    assert!(settings.contains(&tree.path().display().to_string()));
    std::fs::write(home.path().join("config.toml"), settings).unwrap();

    let created = rl_in(home.path(), &["envs", "new", "word_sums", "--json"]);
    assert!(created.status.success(), "{created:?}");
    let created: Value = serde_json::from_slice(&created.stdout).unwrap();
    assert_eq!(created["class_name"], "WordSumsEnv");

    let listed = rl_in(home.path(), &["envs", "list", "--json"]);
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(listed["environments"][0]["name"], "word_sums", "{listed:#}");
    assert!(
        rl_in(home.path(), &["select", "word_sums"])
            .status
            .success()
    );

    let report = rl_in(
        home.path(),
        &[
            "test", // the alias of `rl preflight`, kept for those who learnt it
            "--json",
            "--base-url",
            &server.base_url,
            "--model",
            "always-right",
            "--model",
            "half-right",
            "--steps",
            "2",
            "--group-size",
            "4",
        ],
    );
    assert!(report.status.success(), "{report:?}");
    let report: Value = serde_json::from_slice(&report.stdout).unwrap();
    assert_eq!(report["models_succeeded"], 2, "{report:#}");
    assert_eq!(report["models"][0]["accuracy"], 1.0, "{report:#}");
    assert_eq!(report["models"][1]["accuracy"], 0.5, "{report:#}");

    // A second time: refused, and the first files are untouched.
    let again = rl_in(home.path(), &["envs", "new", "word_sums", "--json"]);
    assert_eq!(again.status.code(), Some(1));
    let error: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert!(error["error"].as_str().unwrap().contains("exists already"));
    let bad = rl_in(home.path(), &["envs", "new", "Bad-Name", "--json"]);
    assert_eq!(bad.status.code(), Some(1));
}
