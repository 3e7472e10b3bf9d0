//! Against the real atroposlib 0.4.0 in the test venv: the run config is accepted by the
//! environment CLI, and Python's own reading of the fields agrees with the static one.

use std::process::Command;
use std::time::Duration;

use rl_config::{compare, config_schema, introspect};
use rl_settings::{Caps, RunId, Value};

use crate::{fixture_scan, fixture_tree, service, test_python};

/// `process` validates the YAML, prints the resolved config, then fails at the tokenizer we
/// point at a missing folder: a printed config proves the YAML was accepted, without network.
fn run_process(
    python: &std::path::Path,
    env_file: &str,
    yaml: &std::path::Path,
) -> (String, String) {
    let work = tempfile::tempdir().unwrap();
    let output = Command::new(python)
        .arg(
            fixture_tree()
                .join("tinker_atropos/environments")
                .join(env_file),
        )
        .args(["process", "--config"])
        .arg(yaml)
        .args(["--env.tokenizer_name", "/nonexistent-tokenizer"])
        .env("HF_HUB_OFFLINE", "1")
        .env("WANDB_MODE", "disabled")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .current_dir(work.path())
        .output()
        .unwrap();
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn generated_yaml_is_accepted_by_the_real_environment_cli() {
    let python = test_python();
    let (_home, service) = service();
    service.select("gsm8k_tinker").unwrap();
    service.edit("group_size", &Value::from("12")).unwrap();
    service
        .edit("eval_handling", &Value::from("LIMIT_TRAIN"))
        .unwrap();
    service
        .edit("max_reasoning_tokens", &Value::Int(2048))
        .unwrap();
    let written = service
        .write_run_config(
            &RunId::parse("12345678").unwrap(),
            None,
            &Caps::default(),
            &[],
        )
        .unwrap();

    let (stdout, stderr) = run_process(&python, "gsm8k_tinker.py", &written.path);
    assert!(
        stdout.contains("group_size=12"),
        "config not accepted:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("LIMIT_TRAIN") && stdout.contains("max_reasoning_tokens=2048"),
        "{stdout}"
    );
    assert!(
        stdout.contains("max_token_length=8192"),
        "locked value missing: {stdout}"
    );

    // The same file with a value rl would refuse is rejected by atroposlib too.
    let broken = written.path.with_file_name("broken.yaml");
    let text = std::fs::read_to_string(&written.path)
        .unwrap()
        .replace("group_size: 12", "group_size: twelve");
    std::fs::write(&broken, text).unwrap();
    let (stdout, stderr) = run_process(&python, "gsm8k_tinker.py", &broken);
    assert!(
        stdout.trim().is_empty() && stderr.contains("group_size"),
        "{stdout}\n{stderr}"
    );
}

#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn python_introspection_agrees_with_the_static_reading() {
    let python = test_python();
    let scan = fixture_scan();
    for name in [
        "gsm8k_tinker",
        "word_ladder",
        "math_attr",
        "countdown@countdown.py",
        "arithmetic",
    ] {
        let env = scan.find(name).unwrap();
        let schema = config_schema(&scan, env).unwrap();
        let introspected = introspect(
            &python,
            &env.path_in(&scan.root),
            &env.class_name,
            Duration::from_secs(120),
        )
        .unwrap();
        let disagreements = compare(&schema, &introspected);
        // reasoning_effort is typed with its documented values by rl; the default still agrees.
        assert!(disagreements.is_empty(), "{name}: {disagreements:#?}");
    }
}

#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn introspection_of_a_hanging_environment_is_cut_at_its_timeout() {
    let python = test_python();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hangs.py");
    std::fs::write(&file, "import time\ntime.sleep(600)\n").unwrap();
    let started = std::time::Instant::now();
    let error = introspect(&python, &file, "Hangs", Duration::from_secs(2)).unwrap_err();
    assert!(error.to_string().contains("did not finish"), "{error}");
    assert!(started.elapsed() < Duration::from_secs(60));
}

/// A stand-in for the user's Python: a shell script that ignores its arguments.
fn fake_python(dir: &std::path::Path, body: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("python");
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// An environment that prints without end as it is imported: what is kept of its output is
/// bounded, whatever it prints.
#[test]
fn an_environment_printing_without_end_costs_bounded_memory() {
    const PRINTED: u64 = 200 * 1024 * 1024;
    let dir = tempfile::tempdir().unwrap();
    let python = fake_python(
        dir.path(),
        &format!(
            "head -c {PRINTED} /dev/zero | tr '\\0' x\n\
             head -c {PRINTED} /dev/zero | tr '\\0' y >&2\n\
             exit 1"
        ),
    );
    rl_test_support::reset_peak_memory();
    let error = introspect(&python, &dir.path().join("env.py"), "Env", PATIENCE).unwrap_err();
    let peak = rl_test_support::peak_memory();
    eprintln!("peak resident memory: {} MB", peak >> 20);
    assert!(error.to_string().contains("printed no result"), "{error}");
    assert!(
        peak < PRINTED / 4,
        "the introspection's memory reached {} MB for output of {} MB",
        peak >> 20,
        (2 * PRINTED) >> 20
    );
}

/// A process the environment left behind, holding the output open, does not hold the answer.
#[test]
fn a_process_left_holding_the_output_does_not_hold_the_answer() {
    let dir = tempfile::tempdir().unwrap();
    let guard = rl_test_support::KillOnDrop::new("introspect-held");
    let python = fake_python(
        dir.path(),
        &format!(
            "sh -c 'sleep 300; : {}' &\n\
             echo '{{\"config_class\": \"EnvConfig\", \"fields\": []}}'",
            guard.marker
        ),
    );
    let (answer, answered) = std::sync::mpsc::channel();
    let env_file = dir.path().join("env.py");
    std::thread::spawn(move || answer.send(introspect(&python, &env_file, "Env", PATIENCE)));
    let introspected = answered
        .recv_timeout(PATIENCE)
        .expect("no answer while a process left behind holds the output")
        .unwrap();
    assert_eq!(introspected.config_class.as_deref(), Some("EnvConfig"));
}

/// Generous: these fail only when something never happens.
const PATIENCE: Duration = Duration::from_secs(60);

/// What the import started (a server, a pool's workers) ends with it at the timeout, not only
/// the Python that imported.
#[test]
fn a_timed_out_introspection_leaves_no_process_behind() {
    let dir = tempfile::tempdir().unwrap();
    let cleanup = rl_test_support::KillOnDrop::new("introspect-child");
    let python = fake_python(
        dir.path(),
        &format!("sh -c 'sleep 600; : {}' &\nsleep 600", cleanup.marker),
    );
    let error = introspect(
        &python,
        &dir.path().join("env.py"),
        "Env",
        Duration::from_secs(1),
    )
    .unwrap_err();
    assert!(error.to_string().contains("did not finish"), "{error}");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !rl_test_support::processes_mentioning(&cleanup.marker).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the import's child outlived the introspection"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
