//! Integration tests of rl-tools: every tool's answer (`answers`, and the metrics part of the
//! results for each metrics file in `metrics_files`), and the requirements check on a machine
//! as it is and as it breaks.

#![allow(clippy::unwrap_used)]

mod answers;
mod environment_kinds;
mod forks;
mod metrics_files;
mod nested_environments;
mod preflight_views;
mod run_records;
mod sweeps;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rl_settings::{Secrets, Settings};
use rl_tools::{Check, HealthReport, Probes, health_check};

fn settings(python: &Path, root: Option<PathBuf>) -> Settings {
    Settings {
        python: python.to_owned(),
        tinker_atropos_root: root,
        recursive_discovery: true,
        ..Settings::default()
    }
}

fn fixture_root() -> PathBuf {
    rl_test_support::workspace_root().join("fixtures/tinker-atropos")
}

fn named<'a>(report: &'a HealthReport, name: &str) -> &'a Check {
    report
        .checks
        .iter()
        .find(|check| check.name == name)
        .unwrap_or_else(|| panic!("no check {name} in {report:#?}"))
}

fn secrets_with(home: &Path, pairs: &[(&str, &str)]) -> Secrets {
    let environment: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    Secrets::load(home, &environment)
}

#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn the_test_venv_and_the_fixture_tree_are_healthy_with_a_tinker_key() {
    let python = rl_test_support::test_python();
    let home = tempfile::tempdir().unwrap();
    let key = "tml-key-never-shown-123";
    // The service on loopback (it accepts connections), the tokenizer a folder on disk.
    let service = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut settings = settings(&python, Some(fixture_root()));
    settings.locked.tinker.insert(
        "base_url".to_owned(),
        format!("http://{}", service.local_addr().unwrap()).into(),
    );
    let tokenizer = rl_test_support::workspace_root().join("fixtures/tokenizer");
    settings.locked.env.insert(
        "tokenizer_name".to_owned(),
        tokenizer.display().to_string().into(),
    );
    let report = health_check(
        home.path(),
        Ok(&settings),
        &secrets_with(home.path(), &[("TINKER_API_KEY", key)]),
        &Probes::default(),
    );
    assert!(report.healthy, "{report:#?}");
    assert!(named(&report, "python").detail.starts_with("3."));
    assert_eq!(named(&report, "atroposlib").detail, "0.4.0");
    assert!(named(&report, "environments").detail.starts_with("20 in "));
    let sdk = format!("tinker {}", rl_python::SDK.version);
    assert!(
        named(&report, "trainer").detail.contains(&sdk),
        "{report:#?}"
    );
    assert_eq!(
        named(&report, "tinker SDK").detail,
        format!("{} (what rl was built for)", rl_python::SDK.version)
    );
    assert!(named(&report, "TINKER_API_KEY").ok);
    assert!(named(&report, "Tinker service").ok, "{report:#?}");
    assert!(named(&report, "tokenizer").ok, "{report:#?}");
    // Optional keys missing: reported with their fix, the machine still fit.
    let wandb = named(&report, "WANDB_API_KEY");
    assert!(!wandb.ok && !wandb.required && wandb.fix.is_some());
    assert!(named(&report, "state directory").ok);
    assert!(!serde_json::to_string(&report).unwrap().contains(key));
}

#[test]
fn each_missing_requirement_is_named_with_its_fix() {
    let home = tempfile::tempdir().unwrap();
    let report = health_check(
        &home.path().join("state"),
        Ok(&settings(Path::new("/nonexistent/python3"), None)),
        &secrets_with(home.path(), &[]),
        &Probes::default(),
    );
    assert!(!report.healthy);
    for name in ["python", "atroposlib", "environments", "TINKER_API_KEY"] {
        let check = named(&report, name);
        assert!(!check.ok, "{name}: {check:?}");
        assert!(check.fix.is_some(), "{name} has no fix");
    }
    assert!(
        named(&report, "python")
            .detail
            .contains("/nonexistent/python3")
    );
    assert!(
        named(&report, "environments")
            .fix
            .as_deref()
            .unwrap()
            .contains("RL_TINKER_ATROPOS_ROOT")
    );
    // The state directory is created when missing; only an unwritable one fails.
    assert!(named(&report, "state directory").ok);
}

#[test]
fn a_program_that_is_not_python_and_a_tree_without_environments_are_findings() {
    let home = tempfile::tempdir().unwrap();
    let empty_tree = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(empty_tree.path().join("tinker_atropos/environments")).unwrap();
    let mut settings = settings(Path::new("/bin/echo"), Some(empty_tree.path().to_owned()));
    settings.trainer_needs_tinker_key = false;
    let report = health_check(
        home.path(),
        Ok(&settings),
        &secrets_with(home.path(), &[]),
        &Probes::default(),
    );
    assert!(named(&report, "python").detail.contains("is not a Python"));
    assert!(
        named(&report, "environments")
            .detail
            .starts_with("no environment in")
    );
    // A trainer that needs no key (the local stack) makes the key optional.
    assert!(!named(&report, "TINKER_API_KEY").required);
}

#[test]
fn an_unwritable_state_directory_fails() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("not-a-dir");
    std::fs::write(&file, b"x").unwrap();
    let report = health_check(
        &file,
        Ok(&settings(Path::new("/nonexistent/python3"), None)),
        &secrets_with(home.path(), &[]),
        &Probes::default(),
    );
    let state = named(&report, "state directory");
    assert!(!state.ok);
    assert!(state.fix.as_deref().unwrap().contains("RL_HOME"));
}

/// Twenty callers asking for the machine's health at once start one Python, not twenty: what
/// a Python says of itself is kept briefly and asked once at a time.
#[test]
fn callers_asking_at_once_share_one_probe_of_the_python() {
    use std::os::unix::fs::PermissionsExt;
    let home = tempfile::tempdir().unwrap();
    let started = home.path().join("started");
    let python = home.path().join("python");
    std::fs::write(
        &python,
        format!(
            "#!/bin/sh\necho started >> '{}'\nsleep 0.3\necho not-json\n",
            started.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).unwrap();
    let settings = settings(&python, None);
    let secrets = secrets_with(home.path(), &[]);
    let probes = Probes::default();
    std::thread::scope(|scope| {
        for _ in 0..20 {
            scope.spawn(|| {
                let report = health_check(home.path(), Ok(&settings), &secrets, &probes);
                assert!(named(&report, "python").detail.contains("is not a Python"));
            });
        }
    });
    let runs = std::fs::read_to_string(&started).unwrap().lines().count();
    assert_eq!(runs, 1, "the Python was started {runs} times");
}

#[test]
fn a_file_shadowing_the_standard_library_is_a_finding_naming_it() {
    let home = tempfile::tempdir().unwrap();
    let tree = tempfile::tempdir().unwrap();
    let envs = tree.path().join("tinker_atropos/environments");
    std::fs::create_dir_all(&envs).unwrap();
    std::fs::write(envs.join("good.py"), rl_test_support::GOOD_ENVIRONMENT).unwrap();
    std::fs::write(envs.join("json.py"), "def loads(text):\n    return text\n").unwrap();
    let settings = settings(Path::new("/bin/echo"), Some(tree.path().to_owned()));
    let report = health_check(
        home.path(),
        Ok(&settings),
        &secrets_with(home.path(), &[]),
        &Probes::default(),
    );
    assert!(named(&report, "environments").ok);
    let shadowing = named(&report, "environment file names");
    assert!(!shadowing.ok && shadowing.required, "{shadowing:?}");
    assert!(
        shadowing
            .detail
            .starts_with("json.py shadows Python's standard library module `json`"),
        "{shadowing:?}"
    );
    assert_eq!(shadowing.fix.as_deref(), Some("rename json.py"));
}

#[test]
fn a_long_inheritance_chain_is_no_file_name_finding() {
    let home = tempfile::tempdir().unwrap();
    let tree = tempfile::tempdir().unwrap();
    let envs = tree.path().join("tinker_atropos/environments");
    std::fs::create_dir_all(&envs).unwrap();
    let mut chain =
        String::from("from atroposlib.envs.base import BaseEnv\nclass C0(BaseEnv): pass\n");
    for i in 1..100 {
        chain.push_str(&format!("class C{i}(C{}): pass\n", i - 1));
    }
    std::fs::write(envs.join("chain.py"), chain).unwrap();
    let settings = settings(Path::new("/bin/echo"), Some(tree.path().to_owned()));
    let report = health_check(
        home.path(),
        Ok(&settings),
        &secrets_with(home.path(), &[]),
        &Probes::default(),
    );
    assert!(named(&report, "environments").ok);
    assert!(
        !report
            .checks
            .iter()
            .any(|check| check.name == "environment file names"),
        "{report:#?}"
    );
}
