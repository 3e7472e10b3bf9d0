//! Against the real atroposlib 0.4.0 in the test venv: the run config is accepted by the
//! environment CLI, and Python's own reading of the fields agrees with the static one.

use std::process::Command;
use std::time::Duration;

use rl_config::{RunId, Value, compare, config_schema, introspect};

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
        .write_run_config(&RunId::parse("12345678").unwrap(), None)
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
