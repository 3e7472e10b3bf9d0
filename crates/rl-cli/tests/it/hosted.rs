//! A hosted run's checkpoints: sampled at Tinker's OpenAI-compatible endpoint, kept past their
//! expiry, listed with their sizes and expiries and exported through the official SDK, against
//! stand-ins for the service (`fixtures/openai-server`, `fixtures/tinker-service`). The fixture
//! trainer trains nothing on this machine, so its run is hosted as far as rl can tell: no
//! engine folder, `tinker://` paths.

use std::collections::BTreeSet;

use serde_json::Value;

use rl_test_support::{ServiceOptions, TinkerService, sha256_hex};

use crate::hosted_training::assert_no_file_holds;
use crate::runs::Stack;

/// Run `id`'s last checkpoint, as `rl checkpoints list ID` shows it.
fn last_checkpoint(stack: &Stack, id: &str) -> Value {
    let listed = stack.json(&["checkpoints", "list", id]);
    listed["runs"][0]["checkpoints"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed:#}"))
        .last()
        .unwrap_or_else(|| panic!("no checkpoint: {listed:#}"))
        .clone()
}

/// A completed run of the fixture trainer with `table` (a TOML table of config.toml) and
/// TINKER_API_KEY `key`, and its last checkpoint as `rl checkpoints list` shows it.
fn hosted_run(python: &std::path::Path, table: &str, key: &'static str) -> (Stack, String, Value) {
    let settings = format!("{table}\n\n[locked.env]");
    let mut stack = Stack::new(python, &[("[locked.env]", settings.as_str())]);
    stack.tinker_key = Some(key);
    let id = stack.start();
    let finished = stack.wait(&id, "finished", 300);
    assert_eq!(finished["state"], "completed", "{}", stack.explain(&id));
    let last = last_checkpoint(&stack, &id);
    assert!(
        last["sampler_path"]
            .as_str()
            .unwrap()
            .starts_with("tinker://"),
        "{last:#}"
    );
    (stack, id, last)
}

#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn a_hosted_runs_checkpoints_are_sampled_at_tinkers_endpoint() {
    // The fixture server stands in for Tinker's OpenAI-compatible endpoint, accepting only the
    // run's TINKER_API_KEY.
    const KEY: &str = "tml-hosted-endpoint-key-5f1c";
    let python = crate::test_python();
    let tinker = rl_test_support::FixtureServer::serving(
        &python,
        Some(&sha256_hex(KEY)),
        Some("half-right"),
    );
    // Its Tinker API is the service's stand-in, which answers `rl checkpoints list` at once as
    // the service does. Left unset, the listing went to the hosted Tinker (with this test's
    // key), and on a machine that cannot reach it the SDK's client retried for five minutes.
    let folder = tempfile::tempdir().unwrap();
    let service = TinkerService::start(
        folder.path(),
        &ServiceOptions {
            key: Some(KEY),
            ..ServiceOptions::default()
        },
    );
    let endpoint = format!(
        "[inference]\ntinker_openai_url = \"{}\"\n\n[locked.tinker]\nbase_url = \"{}\"",
        tinker.base_url, service.url
    );
    let (mut stack, id, last) = hosted_run(&python, &endpoint, KEY);
    let last_sampler = last["sampler_path"].as_str().unwrap().to_owned();

    // A pre-flight of the base model and the last checkpoint, asked by their Tinker names.
    let report = stack.json(&[
        "test",
        "--model",
        &format!("run:{id}@base"),
        "--model",
        &format!("run:{id}"),
        "--steps",
        "1",
        "--group-size",
        "2",
    ]);
    let tested: Vec<&str> = report["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|model| model["model"].as_str().unwrap())
        .collect();
    assert_eq!(tested.len(), 2, "{report:#}");
    assert_eq!(tested[1], last_sampler, "{report:#}");
    for model in report["models"].as_array().unwrap() {
        assert_eq!(model["status"], "succeeded", "{report:#}");
    }
    let requests = tinker.requests();
    let asked: BTreeSet<&str> = requests
        .iter()
        .filter_map(|request| request["model"].as_str())
        .collect();
    assert!(asked.contains(last_sampler.as_str()), "{requests:#?}");
    assert!(asked.contains(tested[0]), "{requests:#?}");
    assert!(
        requests
            .iter()
            .all(|request| request["auth_sha256"] == sha256_hex(KEY).as_str()),
        "{requests:#?}"
    );

    // The base model the next run trains, before any run would: the same name at the same
    // endpoint with the same key (issue 55 #2). It is tested alone, and where runs sample it.
    let next_base = crate::compare::next_base_test(&stack);
    assert_eq!(next_base["models"][0]["model"], tested[0], "{next_base:#}");
    assert_eq!(
        next_base["models"][0]["status"], "succeeded",
        "{next_base:#}"
    );
    assert!(
        tinker
            .requests()
            .iter()
            .all(|request| request["auth_sha256"] == sha256_hex(KEY).as_str())
    );
    stack.refused(
        &[
            "test",
            "--json",
            "--model",
            "base",
            "--model",
            "qwen/qwen3-8b",
        ],
        "is tested alone",
    );
    stack.refused(
        &[
            "test",
            "--json",
            "--model",
            "base",
            "--base-url",
            "http://127.0.0.1:9/v1",
        ],
        "give no endpoint",
    );

    // `rl compare` of a hosted run goes the same way, to a verdict.
    let compared = stack.json(&["compare", &id, "--prompts", "2", "--group-size", "2"]);
    assert_eq!(
        compared["trained"]["model"],
        last_sampler.as_str(),
        "{compared:#}"
    );
    assert_eq!(compared["base"]["status"], "succeeded", "{compared:#}");
    assert!(compared["verdict"].is_string(), "{compared:#}");

    // The key went to the endpoint only: no file rl wrote holds it.
    assert_no_file_holds(stack.home.path(), KEY);

    // Without the key, the test is refused before anything starts.
    stack.tinker_key = None;
    let refused = stack.rl(&["test", "--json", "--model", &format!("run:{id}")]);
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");
    let error: Value = serde_json::from_slice(&refused.stdout).unwrap();
    assert!(
        error["error"].as_str().unwrap().contains("TINKER_API_KEY"),
        "{error:#}"
    );
}

#[test]
#[ignore = "needs the test venv (the tinker SDK): `cargo xtask test` runs it"]
fn a_hosted_checkpoint_is_kept_through_the_tinker_sdk() {
    const KEY: &str = "tml-hosted-service-key-93ab";
    let folder = tempfile::tempdir().unwrap();
    let service = TinkerService::start(
        folder.path(),
        &ServiceOptions {
            key: Some(KEY),
            ..ServiceOptions::default()
        },
    );

    // Its Tinker is the stand-in.
    let python = crate::test_python();
    let tinker = format!("[locked.tinker]\nbase_url = \"{}\"", service.url);
    let (mut stack, id, last) = hosted_run(&python, &tinker, KEY);
    let step = last["step"].as_i64().unwrap().to_string();
    let sampler = last["sampler_path"].as_str().unwrap().to_owned();
    // One run listed: its sizes and expiries as the service tells them (the stand-in: 1000
    // bytes, a week after a fixed time).
    assert!(sampler.ends_with("/sampler_weights/final"), "{last:#}");
    assert_eq!(last["size_bytes"], 1000, "{last:#}");
    assert_eq!(last["expires_at"], "2027-01-22T08:00:00+00:00", "{last:#}");
    let everything = stack.json(&["checkpoints", "list"]);
    assert!(
        everything["runs"][0]["checkpoints"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()["expires_at"]
            .is_null()
    );
    let lists = |service: &TinkerService| {
        service
            .requests()
            .iter()
            .filter(|request| request["path"].as_str().unwrap().ends_with("/checkpoints"))
            .count()
    };
    assert_eq!(lists(&service), 1, "every run's listing asks no service");

    // Kept for 30 days, then for ever: the SDK's TTL route, with the run's key.
    let kept = stack.json(&["checkpoints", "keep", &id, &step, "--days", "30"]);
    assert_eq!(kept["ttl_seconds"], 30 * 86_400, "{kept:#}");
    assert_eq!(kept["paths"][0], sampler.as_str(), "{kept:#}");
    let last = last_checkpoint(&stack, &id);
    assert_eq!(last["expires_at"], "2027-02-14T08:00:00+00:00", "{last:#}");
    let forever = stack.json(&["checkpoints", "keep", &id, &step, "--forever"]);
    assert!(forever["ttl_seconds"].is_null(), "{forever:#}");
    let last = last_checkpoint(&stack, &id);
    assert!(last["expires_at"].is_null(), "{last:#}");
    let (training_run, checkpoint) = sampler["tinker://".len()..].split_once('/').unwrap();
    let ttl_path = format!("/api/v1/training_runs/{training_run}/checkpoints/{checkpoint}/ttl");
    let set: Vec<Value> = service
        .requests()
        .into_iter()
        .filter(|request| request["method"] == "PUT")
        .collect();
    assert_eq!(set.len(), 2, "{set:#?}");
    assert_eq!(set[0]["path"], ttl_path.as_str(), "{set:#?}");
    assert_eq!(set[0]["body"]["ttl_seconds"], 30 * 86_400, "{set:#?}");
    assert!(set[1]["body"]["ttl_seconds"].is_null(), "{set:#?}");
    assert!(
        service
            .requests()
            .iter()
            .filter(|request| !request["path"].as_str().unwrap().starts_with("/download/"))
            .all(|request| request["key_sha256"] == sha256_hex(KEY).as_str()),
        "{:#?}",
        service.requests()
    );

    // Refused, saying why: a step it did not save, a bad number of days, the service's own
    // refusal (another key), and no key at all.
    stack.refused(
        &["--json", "checkpoints", "keep", &id, "999", "--days", "1"],
        "no checkpoint at step 999",
    );
    stack.refused(
        &["--json", "checkpoints", "keep", &id, &step, "--days", "0"],
        "out of range",
    );
    stack.tinker_key = Some("tml-not-the-key");
    stack.refused(
        &["--json", "checkpoints", "keep", &id, &step, "--days", "1"],
        "refused or failed",
    );
    // A listing still answers, saying what it could not learn.
    let listed = stack.json(&["checkpoints", "list", &id]);
    assert!(
        listed["runs"][0]["warnings"][0]
            .as_str()
            .unwrap()
            .contains("did not tell sizes and expiries"),
        "{listed:#}"
    );
    stack.tinker_key = None;
    stack.refused(
        &["--json", "checkpoints", "keep", &id, &step, "--days", "1"],
        "TINKER_API_KEY",
    );

    // The key reached the service only: no file rl wrote holds it.
    assert_no_file_holds(stack.home.path(), KEY);
}

/// Issue 30 #2: a run whose launch started the local engine is local whatever its folder holds
/// now. With its engine folder moved away it was taken for hosted, and TINKER_API_KEY went to
/// the address its config names as the Tinker API: its own engine's old loopback port, which
/// any process may own once the run has ended. Here a fixture server holds that port (the run's
/// launch record names it as its engine's, its config as `tinker.base_url`, as a local run's
/// do), and nothing may reach it: every command refuses, naming the missing folder.
#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn a_run_that_started_an_engine_sends_no_key_once_its_engine_folder_is_gone() {
    const KEY: &str = "tml-old-engine-port-key-7d2e";
    let python = crate::test_python();
    let squatter = rl_test_support::FixtureServer::serving(&python, None, Some("always-right"));
    let engine_url = squatter.base_url.trim_end_matches("/v1").to_owned();
    let port: u16 = engine_url.rsplit(':').next().unwrap().parse().unwrap();
    let tinker = format!("[locked.tinker]\nbase_url = \"{engine_url}\"");
    let (mut stack, id, last) = hosted_run(&python, &tinker, KEY);
    let step = last["step"].as_i64().unwrap().to_string();
    // The listing above asked the service its config names, as a hosted run's does.
    let asked_as_hosted = squatter.requests();

    // The launch record as a local run's: its engine started first, on that port.
    let launch_path = stack.run_dir(&id).join("launch.json");
    let mut launch: Value = serde_json::from_slice(&std::fs::read(&launch_path).unwrap()).unwrap();
    let mut engine = launch["components"][0].clone();
    engine["component"] = "engine".into();
    engine["log_path"] = stack
        .run_dir(&id)
        .join("engine.log")
        .display()
        .to_string()
        .into();
    launch["components"]
        .as_array_mut()
        .unwrap()
        .insert(0, engine);
    launch["engine_port"] = port.into();
    std::fs::write(&launch_path, serde_json::to_vec_pretty(&launch).unwrap()).unwrap();
    assert!(!stack.run_dir(&id).join("engine").exists());

    let missing = "this run's engine folder is missing";
    stack.refused(&["--json", "compare", &id, "--prompts", "1"], missing);
    stack.refused(
        &["--json", "compare", &id, "--prompts", "1", "--step", "best"],
        missing,
    );
    stack.refused(
        &[
            "--json",
            "test",
            "--model",
            &format!("run:{id}"),
            "--steps",
            "1",
        ],
        missing,
    );
    stack.refused(
        &["--json", "checkpoints", "keep", &id, &step, "--days", "1"],
        missing,
    );
    let out = stack.home.path().join("exported");
    stack.refused(
        &[
            "--json",
            "checkpoints",
            "export",
            &id,
            &step,
            &out.display().to_string(),
        ],
        missing,
    );
    assert!(!out.exists());
    // A listing still answers, saying why it knows no sizes.
    let listed = stack.json(&["checkpoints", "list", &id]);
    assert!(
        listed["runs"][0]["warnings"][0]
            .as_str()
            .unwrap()
            .contains(missing),
        "{listed:#}"
    );

    // Without a launch record, rl cannot tell, and asks nobody either.
    std::fs::remove_file(&launch_path).unwrap();
    stack.refused(
        &["--json", "compare", &id, "--prompts", "1"],
        "cannot tell whether it trained on the local engine",
    );
    stack.refused(
        &["--json", "checkpoints", "keep", &id, &step, "--days", "1"],
        "cannot tell whether it trained on the local engine",
    );

    assert_eq!(squatter.requests(), asked_as_hosted, "the key went out");
    stack.tinker_key = None;
    assert_no_file_holds(stack.home.path(), KEY);
}
