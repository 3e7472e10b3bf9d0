//! Did training help? A finished run's checkpoints as pre-flight models (`run:ID@STEP`,
//! `run:ID@base`) and `rl compare`, on the local engine with the tiny model: every number comes
//! from completions sampled from the base and the trained weights, through the run's engine
//! started again on a copy of its folder, which is left as it was.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::runs::assert_nothing_left;
use crate::training::{SAVE_EVERY_TWO, SHORT_RUN, stack};

/// Keep the last checkpoint (and the best and the final weights), pruned as the run ends; and
/// a quarter of the items out of training: with seed 7, 4 of the 12 digits prompts.
const PRUNED_AS_IT_ENDS_FOUR_HELD_OUT: (&str, &str) = (
    "keep_rollouts = 20",
    "keep_rollouts = 20\n\n[checkpoints]\nkeep_last = 1\nprune_when_ended = true\n\n\
     [held_out]\nfraction = 0.25\nseed = 7",
);
const HELD_OUT_PROMPTS: usize = 4;

/// The user messages of the groups a model of a test wrote.
pub(crate) fn asked_prompts(test_dir: &std::path::Path, stem_start: &str) -> BTreeSet<String> {
    let mut asked = BTreeSet::new();
    for entry in std::fs::read_dir(test_dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let groups = path
            .extension()
            .is_some_and(|extension| extension == "jsonl");
        if !(name.starts_with(stem_start) && groups) {
            continue;
        }
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            let group: Value = serde_json::from_str(line).unwrap();
            for messages in group["messages"].as_array().unwrap() {
                for message in messages.as_array().unwrap() {
                    if message["role"] == "user" {
                        asked.insert(message["content"].as_str().unwrap().to_owned());
                    }
                }
            }
        }
    }
    asked
}

/// Every prompt the run's trainer logged a rollout of.
pub(crate) fn trained_prompts(run_dir: &std::path::Path) -> String {
    let mut text = String::new();
    for entry in std::fs::read_dir(run_dir.join("rollouts")).unwrap() {
        text.push_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap());
    }
    text
}

#[test]
#[ignore = "needs the test venv and the local engine: `cargo xtask test` runs it"]
fn checkpoints_are_models_and_compare_gives_a_verdict_from_real_samples() {
    let (stack, _engine) = stack(&[SHORT_RUN, SAVE_EVERY_TWO, PRUNED_AS_IT_ENDS_FOUR_HELD_OUT]);
    let id = stack.start();
    let finished = stack.wait(&id, "finished", 900);
    assert_eq!(finished["state"], "completed", "{}", stack.explain(&id));

    // The operator's policy applied by the supervisor as the run ended: the last checkpoint,
    // the best and the final weights kept, the others' files deleted.
    let pruned_file = stack.run_dir(&id).join("pruned.json");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !pruned_file.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let listed = stack.json(&["checkpoints", "list", &id]);
    let checkpoints = listed["runs"][0]["checkpoints"].as_array().unwrap().clone();
    let pruned: Vec<i64> = checkpoints
        .iter()
        .filter(|checkpoint| checkpoint["pruned"] == true && checkpoint["state_path"].is_string())
        .map(|checkpoint| checkpoint["step"].as_i64().unwrap())
        .collect();
    assert!(!pruned.is_empty(), "{listed:#}");
    for checkpoint in &checkpoints {
        let kept = checkpoint["best"] == true || checkpoint["name"] == "final";
        assert!(!(kept && checkpoint["pruned"] == true), "{listed:#}");
    }
    let engine_db = stack.run_dir(&id).join("engine/tinker.db");
    let db_before = std::fs::read(&engine_db).unwrap();

    // Refused before anything starts: a step without a saved state, a checkpoint beside
    // another endpoint's model, an endpoint given for checkpoints.
    let refused = |args: &[&str], expected: &str| {
        let output = stack.rl(args);
        assert_eq!(output.status.code(), Some(1), "{output:?}");
        let error: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert!(
            error["error"].as_str().unwrap().contains(expected),
            "{error:#}"
        );
    };
    let at = |step: &str| format!("run:{id}@{step}");
    refused(
        &["test", "--json", "--model", &at("1")],
        "steps with a saved state: ",
    );
    // A pruned state is no model any more.
    refused(
        &["test", "--json", "--model", &at(&pruned[0].to_string())],
        "has no saved state",
    );
    refused(
        &[
            "test",
            "--json",
            "--model",
            &at("best"),
            "--model",
            "qwen/qwen3-8b",
        ],
        "checkpoints only",
    );
    refused(
        &[
            "test",
            "--json",
            "--model",
            &at("best"),
            "--base-url",
            "http://127.0.0.1:9/v1",
        ],
        "give no endpoint",
    );

    // A checkpoint and the base model as the models of a pre-flight.
    let report = stack.json(&[
        "test",
        "--model",
        &at("base"),
        "--model",
        &at("best"),
        "--steps",
        "2",
        "--group-size",
        "4",
    ]);
    for model in report["models"].as_array().unwrap() {
        assert_eq!(model["status"], "succeeded", "{report:#}");
        assert_eq!(model["steps_tested"], 2, "{report:#}");
    }
    let test_dir = std::path::PathBuf::from(report["output_dir"].as_str().unwrap());
    let served = std::fs::read_to_string(test_dir.join("server.log")).unwrap();
    assert!(served.contains(&format!("as run:{id}@best")), "{served}");
    assert!(
        !test_dir.join("engine").exists(),
        "the engine copy is removed"
    );

    // The comparison: base against the final weights, on the run's environment, asking the
    // prompts the run kept out of training, each once.
    let compared = stack.json(&["compare", &id, "--prompts", "3", "--group-size", "4"]);
    assert_eq!(compared["prompt_source"], "held-out slice", "{compared:#}");
    assert_eq!(compared["kept_out_of_training"], true, "{compared:#}");
    assert!(
        compared["prompts"]
            .as_str()
            .unwrap()
            .contains("3 distinct items of the held-out slice (0.25 of the items by content, seed 7), which the run never trained on"),
        "{compared:#}"
    );
    let compare_dir = stack
        .home
        .path()
        .join("preflight")
        .join(compared["test_id"].as_str().unwrap());
    let base_prompts = asked_prompts(&compare_dir, "01-");
    assert_eq!(base_prompts.len(), 3, "{base_prompts:?}");
    assert_eq!(asked_prompts(&compare_dir, "02-"), base_prompts);
    let trained_on = trained_prompts(&stack.run_dir(&id));
    assert!(
        trained_on.contains("Write some digits."),
        "no rollouts read"
    );
    for prompt in &base_prompts {
        assert!(!trained_on.contains(prompt.as_str()), "trained on {prompt}");
    }
    assert_eq!(compared["run_id"], id.as_str());
    assert_eq!(compared["base"]["model"], at("base"));
    assert_eq!(compared["trained"]["model"], format!("run:{id}"));
    for side in ["base", "trained"] {
        assert_eq!(compared[side]["status"], "succeeded", "{compared:#}");
        assert_eq!(compared[side]["prompts"], 3, "{compared:#}");
        assert_eq!(compared[side]["completions"], 12, "{compared:#}");
        let mean = &compared[side]["mean_score"];
        assert!(
            mean["low"].as_f64().unwrap() <= mean["value"].as_f64().unwrap(),
            "{compared:#}"
        );
    }
    assert!(
        ["better", "no detectable difference", "worse"]
            .contains(&compared["verdict"].as_str().unwrap()),
        "{compared:#}"
    );
    assert!(
        compared["explanation"]
            .as_str()
            .unwrap()
            .contains("3 prompts (12 completions)"),
        "{compared:#}"
    );
    let shown = stack.json(&["preflight", "show", compared["test_id"].as_str().unwrap()]);
    assert_eq!(shown["test_id"], compared["test_id"], "{shown:#}");

    // More prompts asked than the slice holds: every one of them, once, and the answer says so.
    let all = stack.json(&["compare", &id, "--prompts", "6", "--group-size", "2"]);
    for side in ["base", "trained"] {
        assert_eq!(all[side]["prompts"], HELD_OUT_PROMPTS, "{all:#}");
    }
    assert!(
        all["prompts"].as_str().unwrap().contains("all 4 there are"),
        "{all:#}"
    );

    // A local engine's checkpoints never expire: there is nothing to keep.
    refused(
        &["checkpoints", "keep", "--json", &id, "2", "--days", "1"],
        "never expire",
    );

    // The run's own engine folder was only read.
    assert_eq!(std::fs::read(&engine_db).unwrap(), db_before);
    assert_nothing_left(&stack, &id);
}

/// Hex SHA-256, as the fixture server logs a bearer token.
fn sha256_hex(text: &str) -> String {
    use sha2::Digest as _;
    use std::fmt::Write as _;
    sha2::Sha256::digest(text.as_bytes())
        .iter()
        .fold(String::with_capacity(64), |mut hex, byte| {
            let _ = write!(hex, "{byte:02x}");
            hex
        })
}

#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn a_hosted_runs_checkpoints_are_sampled_at_tinkers_endpoint() {
    // The fixture trainer trains nothing on this machine: its run looks like a hosted one (no
    // engine folder, `tinker://` sampler paths), and the fixture server stands in for Tinker's
    // OpenAI-compatible endpoint, accepting only the run's TINKER_API_KEY.
    const KEY: &str = "tml-hosted-endpoint-key-5f1c";
    let python = crate::test_python();
    let tinker = rl_test_support::FixtureServer::serving(
        &python,
        Some(&sha256_hex(KEY)),
        Some("half-right"),
    );
    let endpoint = format!(
        "[inference]\ntinker_openai_url = \"{}\"\n\n[locked.env]",
        tinker.base_url
    );
    let mut stack = crate::runs::Stack::new(&python, &[("[locked.env]", endpoint.as_str())]);
    stack.tinker_key = Some(KEY);
    let id = stack.start();
    let finished = stack.wait(&id, "finished", 300);
    assert_eq!(finished["state"], "completed", "{}", stack.explain(&id));
    let listed = stack.json(&["checkpoints", "list", &id]);
    let last_sampler = listed["runs"][0]["checkpoints"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["sampler_path"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(last_sampler.starts_with("tinker://"), "{listed:#}");

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

/// The stand-in for the Tinker service's checkpoint routes (`fixtures/tinker-service`), ended
/// when dropped.
struct TinkerService {
    child: std::process::Child,
    url: String,
    log: std::path::PathBuf,
}

impl TinkerService {
    fn start(folder: &std::path::Path, archive: &std::path::Path, key: &str) -> Self {
        use std::io::BufRead as _;
        let log = folder.join("service.jsonl");
        let mut child = std::process::Command::new("python3")
            .arg(
                rl_test_support::workspace_root().join("fixtures/tinker-service/tinker_service.py"),
            )
            .args(["--port", "0", "--require-key-sha256", &sha256_hex(key)])
            .arg("--archive")
            .arg(archive)
            .arg("--log")
            .arg(&log)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        let url = first
            .trim()
            .strip_prefix("listening on ")
            .unwrap()
            .to_owned();
        Self { child, url, log }
    }

    fn requests(&self) -> Vec<Value> {
        crate::training::lines(&self.log)
    }
}

impl Drop for TinkerService {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
#[ignore = "needs the test venv (the tinker SDK): `cargo xtask test` runs it"]
fn a_hosted_checkpoint_is_kept_and_exported_through_the_tinker_sdk() {
    const KEY: &str = "tml-hosted-service-key-93ab";
    let folder = tempfile::tempdir().unwrap();
    // What the service's archive of a sampler checkpoint holds: a PEFT adapter.
    let adapter = folder.path().join("adapter");
    std::fs::create_dir(&adapter).unwrap();
    std::fs::write(
        adapter.join("adapter_config.json"),
        br#"{"r": 8, "peft_type": "LORA"}"#,
    )
    .unwrap();
    std::fs::write(
        adapter.join("adapter_model.safetensors"),
        b"not really tensors",
    )
    .unwrap();
    let archive = folder.path().join("archive.tar.gz");
    let packed = std::process::Command::new("tar")
        .arg("czf")
        .arg(&archive)
        .arg("-C")
        .arg(&adapter)
        .args(["adapter_config.json", "adapter_model.safetensors"])
        .status()
        .unwrap();
    assert!(packed.success());
    let service = TinkerService::start(folder.path(), &archive, KEY);

    // A run of the fixture trainer, which trains nothing here: hosted as far as rl can tell
    // (no engine folder), against the stand-in as its Tinker.
    let python = crate::test_python();
    let tinker = format!(
        "[locked.tinker]\nbase_url = \"{}\"\n\n[locked.env]",
        service.url
    );
    let mut stack = crate::runs::Stack::new(&python, &[("[locked.env]", tinker.as_str())]);
    stack.tinker_key = Some(KEY);
    let id = stack.start();
    let finished = stack.wait(&id, "finished", 300);
    assert_eq!(finished["state"], "completed", "{}", stack.explain(&id));
    let listed = stack.json(&["checkpoints", "list", &id]);
    let last = listed["runs"][0]["checkpoints"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    let step = last["step"].as_i64().unwrap().to_string();
    let sampler = last["sampler_path"].as_str().unwrap().to_owned();
    // One run listed: its sizes and expiries as the service tells them (the stand-in: 1000
    // bytes, a week after a fixed time).
    assert!(sampler.ends_with("/sampler_weights/final"), "{listed:#}");
    assert_eq!(last["size_bytes"], 1000, "{listed:#}");
    assert_eq!(
        last["expires_at"], "2027-01-22T08:00:00+00:00",
        "{listed:#}"
    );
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
    let listed = stack.json(&["checkpoints", "list", &id]);
    let last = listed["runs"][0]["checkpoints"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(
        last["expires_at"], "2027-02-14T08:00:00+00:00",
        "{listed:#}"
    );
    let forever = stack.json(&["checkpoints", "keep", &id, &step, "--forever"]);
    assert!(forever["ttl_seconds"].is_null(), "{forever:#}");
    let listed = stack.json(&["checkpoints", "list", &id]);
    let last = listed["runs"][0]["checkpoints"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert!(last["expires_at"].is_null(), "{listed:#}");
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

    // Exported: the service's archive fetched through the SDK, its adapter written out.
    let out = folder.path().join("exported");
    let exported = stack.json(&["checkpoints", "export", &id, &step, out.to_str().unwrap()]);
    assert_eq!(
        exported["files"].as_array().unwrap().len(),
        2,
        "{exported:#}"
    );
    for name in ["adapter_config.json", "adapter_model.safetensors"] {
        assert_eq!(
            std::fs::read(out.join(name)).unwrap(),
            std::fs::read(adapter.join(name)).unwrap()
        );
    }
    let leftovers: Vec<String> = std::fs::read_dir(stack.run_dir(&id))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("export-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // Refused, saying why: a step it did not save, a bad number of days, the service's own
    // refusal (another key), and no key at all.
    let refused = |stack: &crate::runs::Stack, args: &[&str], expected: &str| {
        let output = stack.rl(args);
        assert_eq!(output.status.code(), Some(1), "{output:?}");
        let error: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert!(
            error["error"].as_str().unwrap().contains(expected),
            "{error:#}"
        );
    };
    refused(
        &stack,
        &["--json", "checkpoints", "keep", &id, "999", "--days", "1"],
        "no checkpoint at step 999",
    );
    refused(
        &stack,
        &["--json", "checkpoints", "keep", &id, &step, "--days", "0"],
        "out of range",
    );
    stack.tinker_key = Some("tml-not-the-key");
    refused(
        &stack,
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
    refused(
        &stack,
        &["--json", "checkpoints", "keep", &id, &step, "--days", "1"],
        "TINKER_API_KEY",
    );

    // The key reached the service only: no file rl wrote holds it.
    assert_no_file_holds(stack.home.path(), KEY);
}

/// Fails when a file under `folder` holds `secret`.
fn assert_no_file_holds(folder: &std::path::Path, secret: &str) {
    let mut folders = vec![folder.to_owned()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else if let Ok(bytes) = std::fs::read(&path) {
                assert!(
                    !String::from_utf8_lossy(&bytes).contains(secret),
                    "{} holds the key",
                    path.display()
                );
            }
        }
    }
}
