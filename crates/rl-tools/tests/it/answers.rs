//! Every tool's answer as an agent gets it (`Registry::call`: the JSON MCP and HTTP return),
//! success and error, over fixture state: the fixture tinker-atropos tree, and a run made in
//! the store as a supervisor would have left it (no training is started). The snapshots are
//! the contract agents rely on: a key that changes shows in review.
//!
//! What varies between machines and calls (the state directory, times, ports, the started
//! run's id and its supervisor) is redacted.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rl_process::{
    Component, ComponentStatus, LaunchPlan, LaunchSpec, NewRun, Phase, ProcessIdentity, RunState,
    RunStore,
};
use rl_settings::{RunConfig, RunEndpoints, RunId, Secrets, Settings, run_dir};
use rl_tools::{Caller, Registry, ToolContext, Tools};
use serde_json::{Value, json};

/// The run made in the store by [`completed_run`].
pub(crate) const FIXTURE_RUN: &str = "0a1b2c3d";
/// A well-formed id no run has.
const UNKNOWN_RUN: &str = "0badc0de";
pub(crate) const TINKER_KEY: &str = "tml-fixture-key-never-shown";

pub(crate) struct Fixture {
    home: tempfile::TempDir,
    registry: Registry,
    runtime: tokio::runtime::Runtime,
}

fn workspace() -> PathBuf {
    rl_test_support::workspace_root()
}

fn settings() -> Settings {
    Settings {
        python: PathBuf::from("/nonexistent/python3"),
        tinker_atropos_root: Some(workspace().join("fixtures/tinker-atropos")),
        // Nothing is looked up on WandB's servers: the answers come from the run folder. A
        // run's checks before it starts find its Tinker service and its tokenizer here.
        child_environment: BTreeMap::from([
            ("WANDB_MODE".to_owned(), "disabled".to_owned()),
            (
                "TINKER_BASE_URL".to_owned(),
                hosted_stand_ins().service.clone(),
            ),
            (
                "HF_HUB_CACHE".to_owned(),
                hosted_stand_ins().hub_cache.path().display().to_string(),
            ),
        ]),
        ..Settings::default()
    }
}

/// What a hosted run's checks before its start look for, on loopback and on disk: a service
/// that accepts connections (none of these runs gets further than its start), and the default
/// tokenizer in a Hugging Face cache.
struct HostedStandIns {
    _listener: std::net::TcpListener,
    service: String,
    hub_cache: tempfile::TempDir,
}

fn hosted_stand_ins() -> &'static HostedStandIns {
    static STAND_INS: std::sync::OnceLock<HostedStandIns> = std::sync::OnceLock::new();
    STAND_INS.get_or_init(|| {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let service = format!("http://{}", listener.local_addr().unwrap());
        let hub_cache = tempfile::tempdir().unwrap();
        let snapshot = hub_cache.path().join("models--Qwen--Qwen3-8B/snapshots/0");
        std::fs::create_dir_all(&snapshot).unwrap();
        std::fs::write(snapshot.join("tokenizer_config.json"), "{}").unwrap();
        HostedStandIns {
            _listener: listener,
            service,
            hub_cache,
        }
    })
}

fn fixture_with(settings: Result<Settings, String>, keys: &[(&str, &str)]) -> Fixture {
    let home = tempfile::tempdir().unwrap();
    let environment: BTreeMap<String, String> = keys
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect();
    let tools = Tools::new(ToolContext {
        home: home.path().to_owned(),
        settings,
        secrets: Secrets::load(home.path(), &environment),
        environment: BTreeMap::new(),
        // A stand-in supervisor that records nothing: the started run stays `starting` until
        // the test ends its process group.
        supervisor: rl_process::SupervisorCommand {
            program: PathBuf::from("/bin/sh"),
            args: vec!["-c".to_owned(), "sleep 60".to_owned(), "sh".to_owned()],
            env: Vec::new(),
        },
        evaluate: rl_process::EvaluateCommand {
            program: PathBuf::from("/bin/false"),
            args: Vec::new(),
        },
        reread: None,
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    Fixture {
        home,
        registry: Registry::new(tools),
        runtime,
    }
}

pub(crate) fn fixture() -> Fixture {
    fixture_with(Ok(settings()), &[("TINKER_API_KEY", TINKER_KEY)])
}

impl Fixture {
    pub(crate) fn home(&self) -> &Path {
        self.home.path()
    }

    pub(crate) fn registry_tools(&self) -> &Tools {
        self.registry.tools()
    }

    /// The reply as a face sees it: the answer, and the kind of failure (HTTP status, MCP
    /// `isError`, exit code).
    fn call_as(&self, caller: Caller, tool: &str, arguments: Value) -> Value {
        let reply = self
            .runtime
            .block_on(self.registry.call(tool, arguments, caller));
        json!({"failure": reply.failure, "answer": reply.value})
    }

    pub(crate) fn call(&self, tool: &str, arguments: Value) -> Value {
        self.call_as(Caller::Person, tool, arguments)
    }

    pub(crate) fn call_as_agent(&self, tool: &str, arguments: Value) -> Value {
        self.call_as(Caller::Agent, tool, arguments)
    }

    /// Paths under the state directory and the workspace, and the given ids (of runs, of tests), as
    /// placeholders, wherever they appear in the answer's text.
    pub(crate) fn scrub(&self, value: Value, run_ids: &[&str]) -> Value {
        let home = self.home().display().to_string();
        let workspace = workspace().display().to_string();
        rl_test_support::scrub_strings(value, &|text| {
            let stand_ins = hosted_stand_ins();
            let mut text = text
                .replace(&home, "[home]")
                .replace(&workspace, "[workspace]")
                .replace(&stand_ins.service, "[service]")
                .replace(
                    stand_ins.service.trim_start_matches("http://"),
                    "[service address]",
                )
                .replace(
                    &stand_ins.hub_cache.path().display().to_string(),
                    "[hub cache]",
                );
            for id in run_ids {
                text = text.replace(id, "[id]");
            }
            rl_test_support::without_stamps(&text)
        })
    }

    pub(crate) fn select(&self, name: &str) {
        let selected = self.call("rl_select_environment", json!({"name": name}));
        assert!(selected["failure"].is_null(), "{selected}");
    }
}

/// Snapshots an answer with what varies from call to call redacted.
macro_rules! assert_answer {
    ($name:expr, $answer:expr) => {
        insta::assert_json_snapshot!($name, $answer, {
            ".**.created_at" => "[time]",
            ".**.updated_at" => "[time]",
            ".**.at" => "[time]",
            ".**.elapsed_secs" => "[seconds]",
            ".**.running_time_minutes" => "[minutes]",
            ".**.next_check_in_seconds" => "[seconds]",
            ".**.api_port" => "[port]",
            ".**.trainer_port" => "[port]",
            ".**.rollout_server_url" => "[url]",
            ".**.base_url" => "[url]",
            ".**.supervisor" => "[process]",
            ".**.wandb_name" => "[wandb name]",
            ".**.wandb_run_name" => "[wandb name]",
        });
    };
}

/// A run as its supervisor leaves it after a clean end: every component started and exited 0,
/// the trainer's metrics file (the fixture's) and a few log lines in its folder.
fn completed_run(fixture: &Fixture) {
    ended_run(fixture, RunState::Completed);
}

/// [`completed_run`] ending in `end` instead.
fn ended_run(fixture: &Fixture, end: RunState) {
    ended_run_with(fixture, end, None);
}

/// [`ended_run`], of a run whose launch started the local engine on `engine_port` when given
/// (its engine folder is not made), else of a hosted run; its launch record as `Runs::start`
/// writes it.
pub(crate) fn ended_run_with(fixture: &Fixture, end: RunState, engine_port: Option<u16>) {
    let home = fixture.home();
    fixture.select("word_ladder");
    let id = RunId::parse(FIXTURE_RUN).unwrap();
    let settings = Settings::clone(&fixture.registry.tools().settings().unwrap());
    let service = rl_config::ConfigService::open(home, settings).unwrap();
    let written = service
        .write_run_config(
            &id,
            Some(RunEndpoints {
                api_port: 8000,
                trainer_port: 8001,
                engine_port,
            }),
            &rl_settings::Caps::default(),
            &[],
        )
        .unwrap();
    let dir = written.path.parent().unwrap().to_owned();
    let components = [Component::Api, Component::Trainer, Component::Env];
    let launched = engine_port
        .map(|_| Component::Engine)
        .into_iter()
        .chain(components);
    LaunchPlan {
        run_id: id.clone(),
        api_port: 8000,
        trainer_port: 8001,
        engine_port,
        components: launched
            .map(|component| LaunchSpec {
                component,
                program: PathBuf::from("/bin/true"),
                args: Vec::new(),
                cwd: dir.clone(),
                env: Vec::new(),
                env_remove: Vec::new(),
                log_path: dir.join(format!("{component}.log")),
            })
            .collect(),
        timing: rl_settings::RunTiming::default(),
        slurm: None,
    }
    .save(home)
    .unwrap();
    let mut store = RunStore::open(home).unwrap();
    store
        .create_run(&NewRun {
            id: id.clone(),
            environment: "word_ladder".to_owned(),
            config_path: written.path,
            api_port: Some(8000),
            trainer_port: Some(8001),
            logs: components
                .iter()
                .map(|component| (*component, dir.join(format!("{component}.log"))))
                .collect(),
            queued: false,
            max_active: None,
            resumed_from: None,
            sweep: None,
        })
        .unwrap();
    for (index, component) in components.into_iter().enumerate() {
        let process = ProcessIdentity {
            pid: 4242 + u32::try_from(index).unwrap(),
            start_ticks: 1,
        };
        store
            .record_component(&id, component, Some(process), ComponentStatus::Running)
            .unwrap();
        let next = match component {
            Component::Api => RunState::Starting(Phase::Trainer),
            Component::Trainer => RunState::Starting(Phase::Env),
            _ => RunState::Running,
        };
        store.transition(&id, next, "").unwrap();
    }
    for component in components.into_iter().rev() {
        store
            .record_component(&id, component, None, ComponentStatus::Exited { code: 0 })
            .unwrap();
    }
    let message = match end {
        RunState::Completed => "the trainer finished",
        _ => "the trainer ended",
    };
    store.transition(&id, end, message).unwrap();
    std::fs::copy(
        workspace().join("fixtures/metrics/complete.jsonl"),
        dir.join("metrics.jsonl"),
    )
    .unwrap();
    std::fs::write(
        dir.join("trainer.log"),
        "step 1\nstep 2\nstep 3\ntraining finished\n",
    )
    .unwrap();
}

#[test]
fn environment_and_configuration_answers() {
    let fixture = fixture();
    let call = |tool: &str, arguments: Value| fixture.scrub(fixture.call(tool, arguments), &[]);

    assert_answer!("list_environments", call("rl_list_environments", json!({})));
    assert_answer!(
        "get_current_config_nothing_selected",
        call("rl_get_current_config", json!({}))
    );
    assert_answer!(
        "select_environment_unknown_with_suggestions",
        call("rl_select_environment", json!({"name": "word_ladr"}))
    );
    assert_answer!(
        "select_environment_ambiguous",
        call("rl_select_environment", json!({"name": "countdown"}))
    );
    assert_answer!(
        "select_environment",
        call("rl_select_environment", json!({"name": "word_ladder"}))
    );
    assert_answer!(
        "get_current_config",
        call("rl_get_current_config", json!({}))
    );
    assert_answer!(
        "edit_config",
        call(
            "rl_edit_config",
            json!({"field": "group_size", "value": 12})
        )
    );
    assert_answer!(
        "edit_config_coerced",
        call(
            "rl_edit_config",
            json!({"field": "max_rungs", "value": "16"})
        )
    );
    assert_answer!(
        "edit_config_unknown_field",
        call("rl_edit_config", json!({"field": "group_sise", "value": 4}))
    );
    assert_answer!(
        "edit_config_locked_field",
        call(
            "rl_edit_config",
            json!({"field": "max_token_length", "value": 10})
        )
    );
    assert_answer!(
        "edit_config_wrong_type",
        call(
            "rl_edit_config",
            json!({"field": "group_size", "value": "many"})
        )
    );
    assert_answer!(
        "edit_config_not_allowed",
        call(
            "rl_edit_config",
            json!({"field": "answer_format", "value": "yaml"})
        )
    );
    assert_answer!(
        "edit_config_out_of_range",
        call(
            "rl_edit_config",
            json!({"field": "max_rungs", "value": 100})
        )
    );
    assert_answer!(
        "edit_config_missing_argument",
        call("rl_edit_config", json!({"field": "group_size"}))
    );
}

#[test]
fn argument_errors() {
    let fixture = fixture();
    let call = |tool: &str, arguments: Value| fixture.scrub(fixture.call(tool, arguments), &[]);
    assert_answer!("unknown_tool", call("rl_train_harder", json!({})));
    assert_answer!(
        "bad_arguments_wrong_type",
        call("rl_check_status", json!({"run_id": 5}))
    );
    assert_answer!(
        "bad_arguments_not_an_object",
        call("rl_check_status", json!([1, 2]))
    );
    assert_answer!(
        "bad_arguments_unknown_key",
        call(
            "rl_check_status",
            json!({"run_id": UNKNOWN_RUN, "extra": true})
        )
    );
    assert_answer!(
        "list_environments_unknown_key",
        call("rl_list_environments", json!({"depth": 2}))
    );
}

/// A start's caps are checked as every argument is: a wrong type or a value out of bounds is
/// refused by name, and a cost cap without any price is refused before anything starts.
#[test]
fn caps_arguments_are_checked_before_a_start() {
    let fixture = fixture();
    fixture.select("word_ladder");
    for (arguments, expected) in [
        (json!({"max_cost": "ten"}), "invalid type: string \"ten\""),
        (json!({"max_tokens": 1.5}), "invalid type: floating point"),
        (json!({"max_tokens": -3}), "invalid value: integer `-3`"),
        (json!({"max_caps": 3}), "unknown field `max_caps`"),
        (
            json!({"max_hours": 0}),
            "max_hours is not valid: must be a number above 0",
        ),
        (
            json!({"max_cost": 2.0}),
            "max_cost is not valid: 2 needs a price",
        ),
    ] {
        let answer = fixture.call("rl_start_training", arguments.clone());
        let error = answer["answer"]["error"].as_str().unwrap_or_default();
        assert!(error.contains(expected), "{arguments}: {answer:#}");
    }
    let resumed = fixture.call(
        "rl_resume_training",
        json!({"run_id": FIXTURE_RUN, "max_tokens": "many"}),
    );
    let error = resumed["answer"]["error"].as_str().unwrap_or_default();
    assert!(error.contains("invalid type: string"), "{resumed:#}");
    let runs = fixture.call("rl_list_runs", json!({}));
    assert_eq!(
        runs["answer"]["runs"],
        json!([]),
        "nothing started: {runs:#}"
    );
}

#[test]
fn run_answers() {
    let fixture = fixture();
    completed_run(&fixture);
    let run = json!({"run_id": FIXTURE_RUN});
    let call = |tool: &str, arguments: Value| fixture.scrub(fixture.call(tool, arguments), &[]);

    assert_answer!("list_runs", call("rl_list_runs", json!({})));
    assert_answer!("check_status", call("rl_check_status", run.clone()));
    assert_answer!(
        "check_status_since",
        call(
            "rl_check_status",
            json!({"run_id": FIXTURE_RUN, "since": 9})
        )
    );
    assert_answer!("get_results", call("rl_get_results", run.clone()));
    assert_answer!(
        "stop_training_already_ended",
        call("rl_stop_training", run.clone())
    );
    assert_answer!(
        "get_results_unknown_run",
        call("rl_get_results", json!({"run_id": UNKNOWN_RUN}))
    );
    assert_answer!(
        "check_status_unknown_run",
        call("rl_check_status", json!({"run_id": UNKNOWN_RUN}))
    );
    assert_answer!(
        "stop_training_malformed_run_id",
        call("rl_stop_training", json!({"run_id": "../etc"}))
    );
    assert_answer!(
        "resume_training_completed",
        call("rl_resume_training", run.clone())
    );
    assert_answer!(
        "resume_training_unknown_run",
        call("rl_resume_training", json!({"run_id": UNKNOWN_RUN}))
    );

    // Agents may check a going run once per interval (the limited answer is asserted of a
    // going run in rl-cli's `tools.rs`); a run that has ended changes no more and is read
    // without limit.
    let agent = |tool: &str, arguments: Value| {
        fixture.scrub(fixture.call_as(Caller::Agent, tool, arguments), &[])
    };
    let first = agent("rl_check_status", run.clone());
    assert!(first["failure"].is_null(), "{first}");
    let second = agent("rl_check_status", run);
    assert!(second["answer"]["rate_limited"].is_null(), "{second}");
    assert_eq!(
        second["answer"]["status"], first["answer"]["status"],
        "{second}"
    );
}

#[test]
fn start_answers() {
    let without_key = fixture_with(Ok(settings()), &[]);
    without_key.select("word_ladder");
    assert_answer!(
        "start_training_missing_key",
        without_key.scrub(without_key.call("rl_start_training", json!({})), &[])
    );
    let nothing_selected = fixture();
    assert_answer!(
        "start_training_nothing_selected",
        nothing_selected.scrub(nothing_selected.call("rl_start_training", json!({})), &[])
    );

    let fixture = fixture();
    fixture.select("word_ladder");
    let started = fixture.call("rl_start_training", json!({}));
    let store = RunStore::open(fixture.home()).unwrap();
    let runs = store.runs().unwrap();
    let supervisor = runs.first().and_then(|run| run.supervisor);
    // The stand-in supervisor's group ends before any assertion can fail.
    if let Some(supervisor) = supervisor {
        let group = nix::unistd::Pid::from_raw(i32::try_from(supervisor.pid).unwrap());
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
    }
    assert!(started["failure"].is_null(), "{started}");
    let id = runs[0].id.clone();
    assert!(
        !started.to_string().contains(TINKER_KEY),
        "the key is never in an answer"
    );
    assert_answer!("start_training", fixture.scrub(started, &[&id]));
}

/// A failed run with saved states resumes from the last one before its last step, as a new run
/// that carries its steps and checkpoints; without a state, or with its environment changed,
/// it is refused with the reason.
#[test]
fn resume_answers() {
    let fixture = fixture();
    ended_run(&fixture, RunState::Failed);
    let parent = run_dir(fixture.home(), &RunId::parse(FIXTURE_RUN).unwrap());
    let call = |arguments: Value| fixture.call("rl_resume_training", arguments);
    let run = json!({"run_id": FIXTURE_RUN});

    assert_answer!(
        "resume_training_no_state",
        fixture.scrub(call(run.clone()), &[])
    );

    std::fs::write(
        parent.join("checkpoints.jsonl"),
        concat!(
            "{\"step\": 0, \"name\": \"step_0\", \"sampler_path\": \"tinker://p/step_0\", \"state_path\": \"tinker://p/weights/step_0\"}\n",
            "{\"step\": 2, \"name\": \"step_2\", \"sampler_path\": \"tinker://p/step_2\", \"state_path\": \"tinker://p/weights/step_2\"}\n",
            "{\"step\": 3, \"name\": \"step_3\", \"sampler_path\": \"tinker://p/step_3\", \"state_path\": null}\n",
        ),
    )
    .unwrap();
    assert_answer!(
        "list_checkpoints",
        fixture.scrub(
            fixture.call("rl_list_checkpoints", json!({"run_id": FIXTURE_RUN})),
            &[]
        )
    );
    let environment: Value =
        serde_json::from_slice(&std::fs::read(parent.join("environment.json")).unwrap()).unwrap();
    let env_file = PathBuf::from(
        environment["environment"]["environments_dir"]
            .as_str()
            .unwrap(),
    )
    .join(environment["environment"]["file"].as_str().unwrap());
    let original = std::fs::read(&env_file).unwrap();
    let mut changed = original.clone();
    changed.extend_from_slice(b"\n# changed after the run\n");
    std::fs::write(&env_file, &changed).unwrap();
    let refused = call(run.clone());
    std::fs::write(&env_file, &original).unwrap();
    assert_answer!(
        "resume_training_environment_changed",
        fixture.scrub(refused, &[])
    );

    let resumed = call(run);
    let store = RunStore::open(fixture.home()).unwrap();
    let runs = store.runs().unwrap();
    // The stand-in supervisor's group ends before any assertion can fail.
    for run in &runs {
        if let Some(supervisor) = run.supervisor {
            let group = nix::unistd::Pid::from_raw(i32::try_from(supervisor.pid).unwrap());
            let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
            // Gone before the answers below list the active runs (a signal is not a death).
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while rl_process::ProcessIdentity::of(supervisor.pid).is_some_and(|p| p.is_alive())
                && std::time::Instant::now() < deadline
            {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    }
    assert!(resumed["failure"].is_null(), "{resumed}");
    let child = resumed["answer"]["run_id"].as_str().unwrap().to_owned();
    assert_eq!(
        resumed["answer"]["resumed_from"],
        json!({"run_id": FIXTURE_RUN, "step": 2, "kind": "resume"})
    );
    let child_dir = run_dir(fixture.home(), &RunId::parse(&child).unwrap());
    let config = RunConfig::read(&child_dir.join("config.yaml")).unwrap();
    assert_eq!(
        (
            config.tinker.get("resume_state"),
            config.tinker.get("starting_step")
        ),
        (
            Some(&rl_settings::Value::from("tinker://p/weights/step_2")),
            Some(&rl_settings::Value::Int(2))
        )
    );
    let steps = |dir: &Path, file: &str| -> Vec<u64> {
        std::fs::read_to_string(dir.join(file))
            .unwrap()
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok()?["step"].as_u64())
            .collect()
    };
    assert_eq!(steps(&child_dir, "checkpoints.jsonl"), [0, 2]);
    assert!(steps(&parent, "metrics.jsonl").iter().any(|step| *step > 2));
    assert!(
        steps(&child_dir, "metrics.jsonl")
            .iter()
            .all(|step| *step <= 2)
    );
    assert_answer!("resume_training", fixture.scrub(resumed, &[&child]));
    let all = fixture.call("rl_list_checkpoints", json!({}));
    assert_eq!(all["answer"]["count"], 2, "{all}");
    assert_answer!(
        "list_checkpoints_unknown_run",
        fixture.scrub(
            fixture.call("rl_list_checkpoints", json!({"run_id": UNKNOWN_RUN})),
            &[&child]
        )
    );
}

/// Pruning keeps the last `keep_last`, the best, the final weights and the resume point, and
/// deletes the other checkpoints' files on the local engine; what was pruned is listed so, and
/// cannot be exported.
#[test]
fn prune_answers() {
    let fixture = fixture_with(
        Ok(Settings {
            checkpoints: rl_settings::CheckpointPolicy {
                keep_last: 1,
                ..Default::default()
            },
            ..settings()
        }),
        &[("TINKER_API_KEY", TINKER_KEY)],
    );
    // A local-engine run: its checkpoints are files in its engine folder.
    ended_run_with(&fixture, RunState::Failed, Some(8002));
    let dir = run_dir(fixture.home(), &RunId::parse(FIXTURE_RUN).unwrap());
    let engine = dir.join("engine/checkpoints/m");
    let mut rows = String::new();
    for step in 0..=5 {
        let state = (step % 2 == 0).then(|| format!("tinker://m/weights/step_{step}"));
        rows.push_str(
            &json!({"step": step, "name": format!("step_{step}"),
                    "sampler_path": format!("tinker://m/step_{step}"), "state_path": state})
            .to_string(),
        );
        rows.push('\n');
        std::fs::create_dir_all(engine.join("sampler_weights")).unwrap();
        std::fs::write(
            engine.join(format!("sampler_weights/step_{step}.tar.gz")),
            [0u8; 100],
        )
        .unwrap();
        if step % 2 == 0 {
            std::fs::create_dir_all(engine.join(format!("step_{step}.tar.gz/checkpoint_0")))
                .unwrap();
            std::fs::write(
                engine.join(format!("step_{step}.tar.gz/checkpoint_0/data")),
                [0u8; 1000],
            )
            .unwrap();
        }
    }
    std::fs::write(dir.join("checkpoints.jsonl"), rows).unwrap();
    let rewards = [0.1, 0.9, 0.3, 0.2, 0.1];
    let metrics = rewards
        .iter()
        .zip(1..)
        .fold(String::new(), |mut text, (reward, step)| {
            text.push_str(&json!({"step": step, "reward/mean": reward}).to_string());
            text.push('\n');
            text
        });
    std::fs::write(dir.join("metrics.jsonl"), metrics).unwrap();
    let call = |tool: &str, arguments: Value| fixture.scrub(fixture.call(tool, arguments), &[]);

    let tools = fixture.registry.tools();
    let id = RunId::parse(FIXTURE_RUN).unwrap();
    let pruned = serde_json::to_value(tools.prune_checkpoints(&id).unwrap()).unwrap();
    // The reward peaks at step 2 (the best); the resume point is step 4, the last state
    // before the last step; the last step is 5.
    assert_eq!(pruned["kept"], json!([2, 4, 5]), "{pruned:#}");
    assert_eq!(pruned["removed"], json!([0, 1, 3]), "{pruned:#}");
    assert_eq!(pruned["freed_bytes"], 3 * 100 + 1000);
    let sampler = |step: i32| engine.join(format!("sampler_weights/step_{step}.tar.gz"));
    for step in [0, 1, 3] {
        assert!(!sampler(step).exists());
        assert!(!engine.join(format!("step_{step}.tar.gz")).exists());
    }
    for step in [2, 4, 5] {
        assert!(sampler(step).exists());
    }
    assert!(engine.join("step_4.tar.gz/checkpoint_0/data").exists());
    assert_answer!(
        "list_checkpoints_pruned",
        call("rl_list_checkpoints", json!({"run_id": FIXTURE_RUN}))
    );
    let again = tools.prune_checkpoints(&id).unwrap();
    assert!(again.removed.is_empty(), "{again:?}");
    let out = tempfile::tempdir().unwrap();
    let refused = tools
        .export_checkpoint(&id, 1, &out.path().join("adapter"))
        .unwrap_err();
    assert!(refused.to_string().contains("were pruned"), "{refused}");
}

#[test]
fn health_and_preflight_answers() {
    let fixture = fixture();
    let call = |tool: &str, arguments: Value| fixture.scrub(fixture.call(tool, arguments), &[]);
    assert_answer!("health_check", call("rl_health_check", json!({})));
    assert_answer!(
        "test_inference_nothing_selected",
        call("rl_test_inference", json!({}))
    );
    fixture.select("word_ladder");
    assert_answer!(
        "test_inference_missing_key",
        call("rl_test_inference", json!({"num_steps": 2}))
    );
    assert_answer!(
        "test_inference_group_size_out_of_range",
        call("rl_test_inference", json!({"group_size": 1000}))
    );
    assert_answer!(
        "test_inference_num_steps_out_of_range",
        call("rl_test_inference", json!({"num_steps": 0}))
    );
    assert_answer!(
        "test_inference_checkpoint_of_no_run",
        call("rl_test_inference", json!({"models": ["run:0badc0de@2"]}))
    );
    assert_answer!(
        "test_inference_checkpoint_beside_a_model",
        call(
            "rl_test_inference",
            json!({"models": ["run:0badc0de", "qwen/qwen3-8b"]})
        )
    );
    assert_answer!(
        "test_inference_checkpoint_bad_step",
        call(
            "rl_test_inference",
            json!({"models": ["run:0badc0de@latest"]})
        )
    );
    let long = format!("run:0badc0de@{}", "9".repeat(100_000));
    let answer = call("rl_test_inference", json!({ "models": [long] }));
    assert_eq!(answer["failure"], "bad_request", "{answer}");
    assert!(
        answer.to_string().len() < 2_000,
        "the id is not echoed whole"
    );
    assert_answer!(
        "compare_training_unknown_run",
        call("rl_compare_training", json!({"run_id": "0badc0de"}))
    );
    assert_answer!(
        "compare_training_num_steps_out_of_range",
        call(
            "rl_compare_training",
            json!({"run_id": "0badc0de", "num_steps": 101})
        )
    );
    assert_answer!(
        "compare_training_unknown_argument",
        call(
            "rl_compare_training",
            json!({"run_id": "0badc0de", "model": "x"})
        )
    );
    for wrong in [json!("pass@3"), json!(1), json!({"measure": "mean_score"})] {
        let answer = call(
            "rl_compare_training",
            json!({"run_id": "0badc0de", "measure": wrong}),
        );
        assert_eq!(answer["failure"], "bad_request", "{answer}");
    }
    // Serving: refused before anything starts, nothing served.
    assert_answer!(
        "serve_checkpoint_unknown_run",
        call("rl_serve_checkpoint", json!({"run_id": "0badc0de"}))
    );
    for wrong in [
        json!({}),
        json!({"run_id": "0badc0de", "step": "latest"}),
        json!({"run_id": "0badc0de", "port": "80"}),
        json!({"run_id": "0badc0de", "with_base": "yes"}),
        json!({"run_id": ["0badc0de"]}),
    ] {
        let answer = call("rl_serve_checkpoint", wrong.clone());
        assert_eq!(answer["failure"], "bad_request", "{wrong}: {answer}");
    }
    assert_answer!("list_served_none", call("rl_list_served", json!({})));
    assert_answer!(
        "stop_serving_none_up",
        call("rl_stop_serving", json!({"serve_id": "0badc0de"}))
    );
    let answer = call("rl_stop_serving", json!({"serve_id": "../../etc"}));
    assert_eq!(answer["failure"], "bad_request", "{answer}");
    assert_answer!(
        "compare_training_unknown_measure",
        call(
            "rl_compare_training",
            json!({"run_id": "0badc0de", "measure": "pass@3"})
        )
    );
}

/// A broken `config.toml` fails the tools that need the settings, saying what to fix; the
/// runs stay reachable.
#[test]
fn answers_with_unreadable_settings() {
    let fixture = fixture_with(
        Err("status_check_interval_secs: expected a number, got \"soon\"".to_owned()),
        &[],
    );
    let call = |tool: &str, arguments: Value| fixture.scrub(fixture.call(tool, arguments), &[]);
    assert_answer!(
        "list_environments_unreadable_settings",
        call("rl_list_environments", json!({}))
    );
    assert_answer!("list_runs_empty", call("rl_list_runs", json!({})));
}

/// The pre-flight's answer: the report with the original tool's keys beside it. Against the
/// fixture OpenAI server, whose models answer by rule, so the figures are fixed.
#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn preflight_answer() {
    let python = rl_test_support::test_python();
    let server = rl_test_support::FixtureServer::start(&python, None);
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "{}\n[inference]\nbase_url = \"{}\"\nmodels = [\"always-right\", \"half-right\"]\n",
            rl_test_support::local_stack_settings(&python),
            server.base_url
        ),
    )
    .unwrap();
    let settings = rl_config::load_settings(home.path(), std::iter::empty()).unwrap();
    let fixture = fixture_with(Ok(settings), &[]);
    // The state directory is the one holding the settings.
    let fixture = Fixture {
        registry: Registry::new(Tools::new(ToolContext {
            home: home.path().to_owned(),
            ..fixture.registry.tools().context().clone()
        })),
        home,
        runtime: fixture.runtime,
    };
    fixture.select("arithmetic");
    let answer = fixture.call(
        "rl_test_inference",
        json!({"num_steps": 2, "group_size": 4}),
    );
    assert!(answer["failure"].is_null(), "{answer}");
    let test_id = answer["answer"]["test_id"].as_str().unwrap().to_owned();
    let answer = fixture.scrub(answer, &[&test_id]);
    insta::assert_json_snapshot!("test_inference", answer, {
        ".**.started_at" => "[time]",
        ".**.duration_secs" => "[seconds]",
        ".**.base_url" => "[url]",
        ".**.test_id" => "[test_id]",
    });
}
