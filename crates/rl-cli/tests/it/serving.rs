//! A finished local-engine run's checkpoints served (issue 44): detached, used through the
//! official `openai` Python client, listed and stopped; in the foreground, its owner killed by
//! SIGKILL, after which nothing serves. Called from the comparison test, on its run (a run of
//! its own would cost the suite another training).

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::runs::Stack;

/// Lists the models, then asks each for a chat completion, a streamed one, `n = 4` with
/// logprobs and a stop string, and a text completion; prints what it got as one JSON object.
const CLIENT: &str = r#"
import json, sys
from openai import OpenAI
base_url, models = sys.argv[1], sys.argv[2:]
client = OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=300)
listed = [m.id for m in client.models.list().data]
out = {"listed": listed, "models": {}}
messages = [{"role": "user", "content": "Write some digits."}]
for model in models:
    chat = client.chat.completions.create(model=model, messages=messages, max_tokens=8, temperature=1.0)
    chunks = list(client.chat.completions.create(model=model, messages=messages, max_tokens=8, stream=True))
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    many = client.chat.completions.create(model=model, messages=messages, max_tokens=6, n=4, logprobs=True, stop=["\n\n"])
    text = client.completions.create(model=model, prompt="1 2 3", max_tokens=4)
    out["models"][model] = {
        "chat": chat.choices[0].message.content,
        "chat_model": chat.model,
        "chunks": len(chunks),
        "streamed": streamed,
        "n": len(many.choices),
        "logprobs": [len(c.logprobs.content or []) for c in many.choices],
        "finite": all(t.logprob <= 0.0 for c in many.choices for t in (c.logprobs.content or [])),
        "text": text.choices[0].text,
    }
print(json.dumps(out))
"#;

/// Serves the run's last saved checkpoint, another of its steps (`other_step`) and its base
/// model at once, detached, each under its own name; checks them through the official client,
/// the list, the stop; then a foreground server whose owner is killed.
pub(crate) fn a_finished_runs_checkpoints_are_served(
    stack: &Stack,
    id: &str,
    other_step: i64,
    while_served: impl FnOnce(&str, &str),
) {
    let last = format!("run:{id}");
    let other = format!("{id}@{other_step}");
    let base = format!("{id}@base");
    let output = stack.rl(&[
        "--json",
        "checkpoints",
        "serve",
        id,
        &other,
        &base,
        "--detach",
    ]);
    let detached_log = stack.home.path().join("served").join("detached.log");
    assert!(
        output.status.success(),
        "{}\n{}: {}",
        String::from_utf8_lossy(&output.stdout),
        detached_log.display(),
        std::fs::read_to_string(&detached_log).unwrap_or_default()
    );
    let served: Value = serde_json::from_slice(&output.stdout).unwrap();
    let serve_id = served["serve_id"].as_str().unwrap().to_owned();
    let _stops = StopsServing {
        stack,
        serve_id: &serve_id,
    };
    let models: Vec<String> = served["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|model| model.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        models,
        [last.clone(), format!("run:{other}"), format!("run:{base}")],
        "{served:#}"
    );
    let base_url = served["base_url"].as_str().unwrap().to_owned();
    assert!(base_url.starts_with("http://127.0.0.1:"), "{served:#}");
    assert_eq!(served["state"], "ready", "{served:#}");
    let listed = stack.json(&["checkpoints", "served"]);
    assert_eq!(listed["count"], 1, "{listed:#}");
    assert_eq!(listed["served"][0]["serve_id"], serve_id.as_str());
    // The agents' list says the same.
    let by_tool = stack.json(&["tool", "call", "rl_list_served"]);
    assert_eq!(by_tool["served"][0]["state"], "ready", "{by_tool:#}");

    let mut client = std::process::Command::new(crate::test_python());
    client.args(["-c", CLIENT, &base_url]).args(&models);
    let output = client.output().unwrap();
    assert!(
        output.status.success(),
        "the openai client failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let got: Value = serde_json::from_slice(&output.stdout).unwrap();
    let mut listed_models: Vec<&str> = got["listed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    listed_models.sort_unstable();
    let mut expected: Vec<&str> = models.iter().map(String::as_str).collect();
    expected.sort_unstable();
    assert_eq!(listed_models, expected, "{got:#}");
    for model in &models {
        let answers = &got["models"][model.as_str()];
        assert_eq!(answers["chat_model"], model.as_str(), "{got:#}");
        assert!(answers["chunks"].as_u64().unwrap() >= 2, "{got:#}");
        assert_eq!(answers["n"], 4, "{got:#}");
        let logprobs = answers["logprobs"].as_array().unwrap();
        assert!(logprobs.iter().all(|n| n.as_u64() > Some(0)), "{got:#}");
        assert_eq!(answers["finite"], true, "{got:#}");
    }

    while_served(&base_url, &last);

    // Stopped: its owner ends it, every process of it goes, its port closes.
    let dir = stack.home.path().join("served").join(&serve_id);
    assert!(
        !marked_processes(&dir).is_empty(),
        "nothing marked with {}",
        dir.display()
    );
    let arguments = serde_json::json!({ "serve_id": serve_id }).to_string();
    let stopped = stack.json(&["tool", "call", "rl_stop_serving", &arguments]);
    assert_eq!(stopped["ended_by"], "owner", "{stopped:#}");
    wait_for_nothing_serving(&dir, &base_url);
    assert_eq!(stack.json(&["checkpoints", "served"])["count"], 0);
    stack.refused(&["checkpoints", "stop", &serve_id, "--json"], "is up");

    // In the foreground: the rl process killed by SIGKILL, nothing serves on.
    let mut command = crate::rl_command(stack.home.path());
    command
        .args(["--json", "checkpoints", "serve", &format!("{id}@base")])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut owner = command.spawn().unwrap();
    let record = read_record(owner.stdout.take().unwrap());
    let dir = stack
        .home
        .path()
        .join("served")
        .join(record["serve_id"].as_str().unwrap());
    let url = record["base_url"].as_str().unwrap().to_owned();
    assert!(!marked_processes(&dir).is_empty());
    owner.kill().unwrap();
    owner.wait().unwrap();
    wait_for_nothing_serving(&dir, &url);
    // Its record, left behind by the killed owner, is cleared by the next listing.
    assert_eq!(stack.json(&["checkpoints", "served"])["count"], 0);
    assert!(!dir.exists(), "{} is left", dir.display());
}

/// Issue 55: the same checkpoint handed over through the agents' tool (`rl_export_checkpoint`,
/// which MCP and HTTP call as `rl tool call` does): new folders of the exports folder, the
/// merged one byte for byte what `rl checkpoints export --merged` wrote into `cli_out`, the
/// adapter one the files PEFT loads, each answer saying how to load and serve it; a second
/// export to the same folder and a folder name that climbs out are refused.
fn the_agents_export_hands_over_the_same_model(
    stack: &Stack,
    id: &str,
    step: i64,
    cli_out: &Path,
    cli_files: &[String],
) {
    let call = |arguments: Value| {
        stack.json(&[
            "tool",
            "call",
            "rl_export_checkpoint",
            &arguments.to_string(),
        ])
    };
    let exports = stack.home.path().join("exports");
    let merged = call(serde_json::json!({"run_id": id, "step": step.to_string(), "merged": true}));
    let dir = PathBuf::from(merged["dir"].as_str().unwrap());
    assert_eq!(
        dir,
        exports.join(format!("{id}-step-{step}-merged")),
        "{merged:#}"
    );
    assert_eq!(
        (merged["merged"].clone(), merged["step"].clone()),
        (Value::Bool(true), step.into())
    );
    let mut files: Vec<String> = merged["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|file| file.as_str().unwrap().to_owned())
        .collect();
    files.sort_unstable();
    assert_eq!(files, cli_files, "{merged:#}");
    for file in cli_files {
        assert!(
            std::fs::read(dir.join(file)).unwrap() == std::fs::read(cli_out.join(file)).unwrap(),
            "{file} differs from the CLI's export"
        );
    }
    let shown = dir.display().to_string();
    for how in ["load_with", "serve_with"] {
        assert!(merged[how].as_str().unwrap().contains(&shown), "{merged:#}");
    }

    let adapter = call(serde_json::json!({"run_id": id, "step": step.to_string()}));
    let adapter_dir = PathBuf::from(adapter["dir"].as_str().unwrap());
    assert_eq!(
        adapter_dir,
        exports.join(format!("{id}-step-{step}")),
        "{adapter:#}"
    );
    for file in ["adapter_model.safetensors", "adapter_config.json"] {
        assert!(
            adapter["files"].as_array().unwrap().contains(&file.into()),
            "{adapter:#}"
        );
        assert!(adapter_dir.join(file).is_file(), "{file}");
    }
    assert!(adapter["base_model"].is_string(), "{adapter:#}");
    assert!(
        adapter["serve_with"]
            .as_str()
            .unwrap()
            .contains("--enable-lora"),
        "{adapter:#}"
    );

    let again = serde_json::json!({"run_id": id, "step": step.to_string(), "merged": true});
    stack.refused(
        &[
            "tool",
            "call",
            "rl_export_checkpoint",
            &again.to_string(),
            "--json",
        ],
        "exists",
    );
    let climbing = serde_json::json!({"run_id": id, "name": "../outside"});
    stack.refused(
        &[
            "tool",
            "call",
            "rl_export_checkpoint",
            &climbing.to_string(),
            "--json",
        ],
        "not a folder name",
    );
    assert!(!stack.home.path().join("outside").exists());
}

/// The step's checkpoint merged into its base weights (issue 44): a Hugging Face folder whose
/// config and tokenizer transformers reads with no network, and whose log-probabilities on a
/// fixed prompt and completion equal the checkpoint's as the engine computes them (within
/// 1e-3 per token, float32 on a CPU), while the unmerged base's differ (the control); the
/// tokens the running server samples from the checkpoint score the same on the merged model;
/// and transformers, loading the folder's weights with torch, scores the fixed tokens as the
/// checkpoint does.
pub(crate) fn a_merged_export_computes_what_its_checkpoint_computes(
    stack: &Stack,
    id: &str,
    step: i64,
    state_path: &str,
    (served_url, served_model): (&str, &str),
) {
    let out = stack.home.path().join("merged");
    let out_text = out.display().to_string();
    let step_text = step.to_string();
    let merged = stack.json(&[
        "checkpoints",
        "export",
        id,
        &step_text,
        &out_text,
        "--merged",
    ]);
    let files: Vec<&str> = merged["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|file| file.as_str().unwrap())
        .collect();
    for expected in [
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "README.md",
    ] {
        assert!(files.contains(&expected), "{merged:#}");
    }
    // What an upload of the folder publishes: the files the answer names, nothing of rl's own.
    let mut on_disk: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    on_disk.sort_unstable();
    let mut named: Vec<String> = files.iter().map(|file| (*file).to_owned()).collect();
    named.sort_unstable();
    assert_eq!(on_disk, named, "{merged:#}");
    let card = std::fs::read_to_string(out.join("README.md")).unwrap();
    assert!(
        card.contains(id) && card.contains(&format!("step {step}")),
        "{card}"
    );
    the_agents_export_hands_over_the_same_model(stack, id, step, &out, &named);
    // Refused: over an existing folder, and a step without saved weights.
    stack.refused(
        &[
            "checkpoints",
            "export",
            id,
            &step_text,
            &out_text,
            "--merged",
            "--json",
        ],
        "exists",
    );
    let elsewhere = stack.home.path().join("merged-1").display().to_string();
    stack.refused(
        &[
            "checkpoints",
            "export",
            id,
            "1",
            &elsewhere,
            "--merged",
            "--json",
        ],
        "step",
    );
    assert!(!Path::new(&elsewhere).exists());

    let loaded = std::process::Command::new(crate::test_python())
        .env("HF_HUB_OFFLINE", "1")
        .env("TRANSFORMERS_OFFLINE", "1")
        .args([
            "-c",
            concat!(
                "import sys\n",
                "from transformers import AutoConfig, AutoTokenizer\n",
                "config = AutoConfig.from_pretrained(sys.argv[1])\n",
                "tokenizer = AutoTokenizer.from_pretrained(sys.argv[1])\n",
                "print(config.model_type, len(tokenizer('1 2 3')['input_ids']))",
            ),
            &out_text,
        ])
        .output()
        .unwrap();
    assert!(
        loaded.status.success(),
        "{}",
        String::from_utf8_lossy(&loaded.stderr)
    );
    assert!(String::from_utf8_lossy(&loaded.stdout).starts_with("qwen3 "));

    let engine = rl_test_support::local_engine();
    let root = crate::workspace_root();
    let mut command = std::process::Command::new(&engine.python);
    command
        .envs(rl_test_support::jax_cache_environment())
        .arg(root.join("fixtures/local-engine/merged_logprobs.py"))
        .arg("--run-dir")
        .arg(stack.run_dir(id))
        .arg("--programs")
        .arg(root.join("crates/rl-python/python"))
        .args(["--state", state_path, "--merged", &out_text])
        .args(["--served", served_url, "--served-model", served_model]);
    let compared = crate::script_json(&mut command);
    let (merged_diff, base_diff) = (
        compared["max_diff_merged"].as_f64().unwrap(),
        compared["max_diff_base"].as_f64().unwrap(),
    );
    assert!(compared["tokens"].as_u64() > Some(5), "{compared:#}");
    assert!(merged_diff < 1e-3, "the merged model differs: {compared:#}");
    // What the server sampled from the checkpoint, scored on the merged model: one model.
    assert!(compared["served_tokens"].as_u64() > Some(0), "{compared:#}");
    assert!(
        compared["max_diff_served"].as_f64().unwrap() < 1e-3,
        "the served checkpoint differs from the merged one: {compared:#}"
    );
    assert!(
        base_diff > 10.0 * merged_diff.max(1e-4),
        "the control does not differ: {compared:#}"
    );

    // As its user loads it: transformers' AutoModelForCausalLM (torch, float32, no network)
    // scores the same tokens as the checkpoint does on the engine.
    let token_ids = compared["token_ids"].to_string();
    let mut command = std::process::Command::new(rl_test_support::torch_python());
    command
        .env("HF_HUB_OFFLINE", "1")
        .arg(root.join("fixtures/local-engine/transformers_logprobs.py"))
        .args([&out_text, &token_ids]);
    let loaded = crate::script_json(&mut command);
    assert_eq!(loaded["class"], "Qwen3ForCausalLM", "{loaded:#}");
    // The card's metadata as the Hub's own client parses it.
    assert_eq!(loaded["card"]["library_name"], "transformers", "{loaded:#}");
    let checkpoint = compared["checkpoint_logprobs"].as_array().unwrap();
    let by_transformers = loaded["logprobs"].as_array().unwrap();
    assert_eq!(
        by_transformers.len(),
        checkpoint.len(),
        "{loaded:#}\n{compared:#}"
    );
    let largest = checkpoint
        .iter()
        .zip(by_transformers)
        .map(|(a, b)| (a.as_f64().unwrap() - b.as_f64().unwrap()).abs())
        .fold(0.0, f64::max);
    assert!(
        largest < 1e-3,
        "transformers scores the merged model {largest} away from the checkpoint: \
         {loaded:#}\n{compared:#}"
    );
}

/// Stops a detached server when the test ends, as it should have if it failed first: nothing
/// else would end it, its home being gone.
struct StopsServing<'a> {
    stack: &'a Stack,
    serve_id: &'a str,
}

impl Drop for StopsServing<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = self
                .stack
                .rl(&["checkpoints", "stop", self.serve_id, "--json"]);
        }
    }
}

/// The record a foreground `rl --json checkpoints serve` prints once ready.
fn read_record(stdout: std::process::ChildStdout) -> Value {
    let mut text = String::new();
    let mut reader = BufReader::new(stdout);
    let mut line = String::new();
    while reader.read_line(&mut line).unwrap() > 0 {
        text.push_str(&line);
        if line.starts_with('}') {
            break;
        }
        line.clear();
    }
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// Waits (bounded) until no process carries `dir`'s mark and `base_url`'s port is closed.
fn wait_for_nothing_serving(dir: &Path, base_url: &str) {
    let port: u16 = base_url
        .trim_end_matches("/v1")
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while (!marked_processes(dir).is_empty() || rl_process::is_listening(port))
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(marked_processes(dir), Vec::<u32>::new(), "processes left");
    assert!(!rl_process::is_listening(port), "port {port} still listens");
}

/// The processes whose environment marks them as the server's in `dir` (and its engine's).
fn marked_processes(dir: &Path) -> Vec<u32> {
    let mark = format!("{}={}", rl_preflight::TEST_DIR_VARIABLE, dir.display());
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse().ok())
        else {
            continue;
        };
        if !crate::runs::is_alive(pid) {
            continue;
        }
        let environ: PathBuf = entry.path().join("environ");
        if std::fs::read(&environ)
            .is_ok_and(|bytes| bytes.split(|b| *b == 0).any(|var| var == mark.as_bytes()))
        {
            found.push(pid);
        }
    }
    found
}

/// Bad input is refused before anything starts, with an exit code and the tools' JSON error;
/// nothing is served and nothing is left.
#[test]
fn serving_refuses_what_it_cannot_serve_before_anything_starts() {
    let home = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let output = crate::rl_command(home.path()).args(args).output().unwrap();
        let answer: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
        (output.status.code(), answer)
    };
    for (args, expected) in [
        (
            &["--json", "checkpoints", "serve", "0badc0de"][..],
            "no run with id",
        ),
        (
            &["--json", "checkpoints", "serve", "0badc0de@latest"],
            "latest",
        ),
        (
            &["--json", "checkpoints", "serve", "../../etc"],
            "is not valid",
        ),
        (
            &["--json", "checkpoints", "stop", "0badc0de"],
            "no server 0badc0de is up",
        ),
        (
            &["--json", "checkpoints", "stop", "../x"],
            "is no server's id",
        ),
    ] {
        let (code, answer) = run(args);
        assert_eq!(code, Some(1), "{args:?}: {answer:#}");
        let error = answer["error"].as_str().unwrap_or_default();
        assert!(error.contains(expected), "{args:?}: {answer:#}");
    }
    let (code, answer) = run(&["--json", "checkpoints", "serve"]);
    assert_ne!(code, Some(0), "{answer:#}");
    let (code, listed) = run(&["--json", "checkpoints", "served"]);
    assert_eq!(code, Some(0));
    assert_eq!(listed["count"], 0, "{listed:#}");
    assert!(!home.path().join("served").join("0badc0de").exists());
}
