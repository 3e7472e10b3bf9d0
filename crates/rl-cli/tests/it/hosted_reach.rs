//! A hosted run that cannot work fails early and says why (issue 40, part 6): a key the Tinker
//! SDK would refuse, a service whose host refuses connections or never answers, a tokenizer
//! the trainer could not load — each named by `rl doctor` and before `rl runs start` starts
//! anything, or by the trainer within seconds, with the setting to change.

use std::net::TcpListener;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::runs::Stack;

/// A port on loopback nothing listens on (the kernel refuses connections to it).
fn refusing_address() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    drop(listener);
    address
}

/// A loopback listener that accepts connections and never answers (a hung service): the kernel
/// completes each connection into the backlog, and no one reads or writes.
fn silent_listener() -> (TcpListener, String) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    (listener, address)
}

/// The local stack run by rl's own trainer at a Tinker service at `service`, with the key
/// required: what a hosted user has, up to the point these checks stop it (no process of the
/// run starts in these tests, so no Python is needed).
fn hosted_at(service: &str, key: &'static str, more_edits: &[(&str, &str)]) -> Stack {
    let python = Path::new("/nonexistent/python3");
    let service_table =
        format!("[locked.tinker]\nbase_url = \"http://{service}\"\n\n[locked.env]\n");
    let mut edits = vec![
        (
            "trainer_needs_tinker_key = false",
            "trainer_needs_tinker_key = true",
        ),
        // rl's own trainer (the default command), whose service and tokenizer rl checks.
        (
            "trainer = [\"{python}\", \"launch_training.py\", \"--config\", \"{config}\", \"--metrics\", \"{run_dir}/metrics.jsonl\"]",
            "",
        ),
        ("[locked.env]\n", service_table.as_str()),
    ];
    edits.extend_from_slice(more_edits);
    let mut stack = Stack::with_settings(
        rl_test_support::local_stack_settings(python),
        &edits,
        "arithmetic",
    );
    stack.tinker_key = Some(key);
    stack
}

/// `rl doctor --json`'s check `name`.
fn doctor_check(stack: &Stack, name: &str) -> Value {
    let output = stack.rl(&["doctor", "--json"]);
    let report: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&output.stderr)));
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|check| check["name"] == name)
        .unwrap_or_else(|| panic!("no check {name}: {report:#}"))
        .clone()
}

/// `rl runs start --json`, refused: its error, and how long it took.
fn refused_start(stack: &Stack) -> (String, Duration) {
    let started = Instant::now();
    let output = stack.rl(&["runs", "start", "--json"]);
    let took = started.elapsed();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let answer: Value = serde_json::from_slice(&output.stdout).unwrap();
    (
        answer["error"].as_str().unwrap_or_default().to_owned(),
        took,
    )
}

/// Nothing of a run exists: none listed, no run folder.
fn assert_nothing_started(stack: &Stack) {
    let runs = stack.json(&["runs", "list"]);
    assert_eq!(runs["runs"].as_array().map(Vec::len), Some(0), "{runs:#}");
    let folders = std::fs::read_dir(stack.home.path().join("runs")).map_or(0, Iterator::count);
    assert_eq!(folders, 0, "a run folder was made");
}

#[test]
fn a_key_the_sdk_would_refuse_is_named_by_doctor_and_refused_before_a_start() {
    let (_service, address) = silent_listener();
    let stack = hosted_at(&address, "sk-test", &[]);
    let check = doctor_check(&stack, "TINKER_API_KEY");
    assert_eq!(check["ok"], false, "{check:#}");
    assert!(
        check["detail"].as_str().unwrap().contains("tml-"),
        "{check:#}"
    );
    assert!(!check.to_string().contains("sk-test"), "the key is shown");

    let (error, took) = refused_start(&stack);
    assert!(
        error.contains("TINKER_API_KEY does not start with tml-"),
        "{error}"
    );
    assert!(error.contains("nothing was started"), "{error}");
    assert!(!error.contains("sk-test"), "the key is shown: {error}");
    // Refused on its form alone: nothing is asked of the network first (issue: < 2 s).
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert_nothing_started(&stack);
}

#[test]
fn a_service_that_refuses_connections_is_named_by_doctor_and_before_a_start() {
    let address = refusing_address();
    let stack = hosted_at(&address, "tml-refused-service-key", &[]);
    let check = doctor_check(&stack, "Tinker service");
    assert_eq!(check["ok"], false, "{check:#}");
    let detail = check["detail"].as_str().unwrap();
    assert!(
        detail.contains(&format!(
            "{address} could not be reached (connection refused"
        )),
        "{detail}"
    );
    assert!(detail.contains("[locked.tinker] base_url"), "{detail}");
    // The tokenizer, a folder on disk, is found.
    let tokenizer = doctor_check(&stack, "tokenizer");
    assert_eq!(tokenizer["ok"], true, "{tokenizer:#}");

    let (error, took) = refused_start(&stack);
    assert!(error.contains(&address), "{error}");
    assert!(error.contains("connection refused"), "{error}");
    assert!(error.contains("[locked.tinker] base_url"), "{error}");
    assert!(took < Duration::from_secs(30), "{took:?}");
    assert_nothing_started(&stack);
}

#[test]
fn a_hub_tokenizer_on_a_machine_without_the_hub_is_named_with_its_setting() {
    let (_service, address) = silent_listener();
    let cache = tempfile::tempdir().unwrap();
    let empty_cache = format!(
        "[child_environment]\nHF_HUB_CACHE = \"{}\"\n",
        cache.path().display()
    );
    // The locked tokenizer a hub name (the default's), offline (HF_HUB_OFFLINE, as the local
    // stack sets it) and not in the (empty) cache.
    let folder = format!(
        "tokenizer_name = \"{}/fixtures/tokenizer\"",
        rl_test_support::workspace_root().display()
    );
    let stack = hosted_at(
        &address,
        "tml-tokenizer-check-key",
        &[
            (&folder, "tokenizer_name = \"Qwen/Qwen3-8B\""),
            ("[child_environment]\n", &empty_cache),
        ],
    );
    let check = doctor_check(&stack, "tokenizer");
    assert_eq!(check["ok"], false, "{check:#}");
    let detail = check["detail"].as_str().unwrap();
    assert!(detail.contains("Qwen/Qwen3-8B"), "{detail}");
    assert!(detail.contains("HF_HUB_OFFLINE"), "{detail}");
    assert!(
        check["fix"]
            .as_str()
            .unwrap()
            .contains("[locked.env] tokenizer_name"),
        "{check:#}"
    );
    // The service accepts connections: that check passes, the tokenizer's refuses the start.
    assert_eq!(doctor_check(&stack, "Tinker service")["ok"], true);
    let (error, _) = refused_start(&stack);
    assert!(error.contains("Qwen/Qwen3-8B"), "{error}");
    assert!(error.contains("[locked.env] tokenizer_name"), "{error}");
    assert_nothing_started(&stack);
}
