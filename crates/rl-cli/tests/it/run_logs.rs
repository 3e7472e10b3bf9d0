//! What a run's logs hold once it has run on the local stack: run-api's log no traceback of the
//! readiness check (issue 30 #4), and a component printing megabytes a second no more than the
//! operator's cap, its head and latest output kept, the cap said in status (issue 30 #3).

use std::path::Path;

use serde_json::Value;

use crate::runs::{Stack, component};
use crate::test_python;

/// The environment's command (the default one), after it has printed `lines` numbered noise
/// lines (14 bytes each): a component that floods its log before doing its work.
fn env_printing_noise(lines: u32) -> String {
    format!(
        "[commands]\nenv = [\"sh\", \"-c\", 'seq -f \"noise %07g\" {lines}; exec \"$0\" \"$@\"', \
         \"{{python}}\", \"-m\", \"rl_env\", \"{{env_file}}\", \"serve\", \"--config\", \
         \"{{config}}\"]\n"
    )
}

fn lines_of(log: &Value) -> Vec<String> {
    log["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|line| line.as_str().unwrap().to_owned())
        .collect()
}

/// The bytes of a log and of its tail files.
fn stored_bytes(log: &Path) -> u64 {
    [".tail", ".tail.1"]
        .iter()
        .map(|suffix| format!("{}{suffix}", log.display()).into())
        .chain(std::iter::once(log.to_owned()))
        .filter_map(|path: std::path::PathBuf| std::fs::metadata(path).ok())
        .map(|metadata| metadata.len())
        .sum()
}

/// The readiness check asks run-api only what it answers without raising: atroposlib 0.4.0
/// logs a 5 KB traceback for each `/status-env` asked before the environment registered.
#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn a_start_leaves_no_traceback_in_run_apis_log() {
    let stack = Stack::new(&test_python(), &[]);
    let id = stack.start();
    let finished = stack.wait(&id, "finished", 120);
    assert_eq!(finished["state"], "completed", "{}", stack.explain(&id));
    let api_log = std::fs::read_to_string(stack.run_dir(&id).join("api.log")).unwrap();
    assert!(!api_log.contains("Traceback"), "{api_log}");
    assert!(
        !api_log.contains("Exception in ASGI application"),
        "{api_log}"
    );
    let shown = stack.json(&["runs", "logs", &id, "--component", "api", "--lines", "1000"]);
    let lines = lines_of(&shown[0]);
    assert!(
        lines.iter().all(|line| !line.contains("Traceback")),
        "{lines:#?}"
    );
    // The environment was seen sending, not merely alive past its settling time.
    let events = finished["events"].as_array().unwrap();
    assert!(
        events.iter().any(|event| {
            let message = event["message"].as_str().unwrap_or_default();
            message.starts_with("env ready after") && message.contains("/latest_example")
        }),
        "{events:#?}"
    );
}

/// An environment printing 5 MB before its work: its log stops growing at the cap, keeps its
/// first lines and its latest, and the run's status and `rl runs logs` say it was capped.
#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn a_flooding_component_fills_its_log_only_to_the_cap() {
    const LIMIT: u64 = 65_536;
    let noisy_env = env_printing_noise(400_000);
    let stack = Stack::new(
        &test_python(),
        &[
            ("[run]\n", "[run]\nlog_limit_bytes = 65536\n"),
            ("[commands]\n", &noisy_env),
        ],
    );
    let id = stack.start();
    let finished = stack.wait(&id, "finished", 120);
    assert_eq!(finished["state"], "completed", "{}", stack.explain(&id));

    let env_log = stack.run_dir(&id).join("env.log");
    assert!(
        stored_bytes(&env_log) <= LIMIT,
        "{} bytes",
        stored_bytes(&env_log)
    );
    let head = std::fs::read_to_string(&env_log).unwrap();
    assert!(
        head.starts_with("noise 0000001\nnoise 0000002\n"),
        "{head:.200}"
    );
    assert!(
        head.trim_end().ends_with(
            "[rl] log capped at 65536 bytes: the head above, the latest output below (older \
             lines dropped); the latest output is in env.log.tail, and env.log.tail.1 before it"
        ),
        "{}",
        &head[head.len().saturating_sub(300)..]
    );

    // Status names the capped log and where its latest output is; the others are whole.
    let status = stack.json(&["runs", "status", &id]);
    let env = component(&status, "env");
    assert_eq!(env["log_capped"], true, "{status:#}");
    assert_eq!(
        env["log_tail_path"].as_str().unwrap(),
        format!("{}.tail", env_log.display())
    );
    assert_eq!(component(&status, "trainer")["log_capped"], false);
    let human = stack.rl(&["runs", "status", &id]);
    assert!(
        String::from_utf8_lossy(&human.stdout).contains("log capped"),
        "{}",
        String::from_utf8_lossy(&human.stdout)
    );

    // `rl runs logs` shows the latest lines: the environment's own output after the noise.
    let shown = stack.json(&["runs", "logs", &id, "--component", "env", "--lines", "400"]);
    assert_eq!(shown[0]["capped"], true, "{shown:#}");
    let lines = lines_of(&shown[0]);
    assert!(
        !lines.iter().any(|line| line == "noise 0000001"),
        "{lines:#?}"
    );
    assert!(
        lines.iter().any(|line| !line.starts_with("noise ")),
        "only noise shown: {lines:#?}"
    );
}
