//! Training runs for real: atroposlib 0.4.0's run-api, the fixture trainer and the arithmetic
//! environment on loopback (the local stack), driven through the `rl` binary as users do,
//! each `rl` call a separate process.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use rl_process::members_of_group;
use serde_json::Value;

use crate::{test_python, workspace_root};

/// A made-up key: it must reach the trainer through its environment and nowhere else.
pub(crate) const FAKE_TINKER_KEY: &str = "tml-fake-0123456789abcdef";
/// A made-up provider key: it reaches an environment only where the operator allows it.
pub(crate) const FAKE_OPENROUTER_KEY: &str = "sk-or-fake-0123456789abcdef";

/// `sh -c` wrapper that sleeps before starting the real command: a component that is slow to
/// become ready, so a stop can be made in its phase.
const SLOW_START: &str = r#""sh", "-c", "sleep 60; exec \"$0\" \"$@\"""#;

/// Trainer steps of 5 s instead of 0.2 s: the run stays `running` for half a minute.
pub(crate) const SLOW_STEPS: (&str, &str) = (
    "RL_FIXTURE_TRAINER_STEP_SECONDS = \"0.2\"",
    "RL_FIXTURE_TRAINER_STEP_SECONDS = \"5\"",
);

pub(crate) struct Stack {
    pub(crate) home: tempfile::TempDir,
    /// Set as TINKER_API_KEY for every `rl` call when present.
    pub(crate) tinker_key: Option<&'static str>,
}

impl Stack {
    /// The local stack with `edits` applied to `fixtures/local-stack.toml` as (old, new) text.
    pub(crate) fn new(python: &Path, edits: &[(&str, &str)]) -> Self {
        Self::with_settings(
            rl_test_support::local_stack_settings(python),
            edits,
            "arithmetic",
        )
    }

    /// A state directory with `settings` (edited as (old, new) text) and `environment` selected.
    pub(crate) fn with_settings(
        mut settings: String,
        edits: &[(&str, &str)],
        environment: &str,
    ) -> Self {
        for (old, new) in edits {
            assert!(settings.contains(old), "the settings have no '{old}'");
            settings = settings.replace(old, new);
        }
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("config.toml"), settings).unwrap();
        let stack = Self {
            home,
            tinker_key: None,
        };
        stack.json(&["select", environment]);
        stack
    }

    pub(crate) fn rl(&self, args: &[&str]) -> Output {
        let mut command = crate::rl_command(self.home.path());
        command.args(args);
        if let Some(key) = self.tinker_key {
            command.env("TINKER_API_KEY", key);
        }
        command.output().unwrap()
    }

    /// Runs `args` (which ask for JSON) and checks they are refused with an error saying
    /// `expected`.
    pub(crate) fn refused(&self, args: &[&str], expected: &str) {
        let error = refusal(&self.rl(args));
        assert!(
            error["error"].as_str().unwrap().contains(expected),
            "{error:#}"
        );
    }

    pub(crate) fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.push("--json");
        crate::success_json(args, &self.rl(&all))
    }

    pub(crate) fn start(&self) -> String {
        let status = self.json(&["runs", "start"]);
        status["id"].as_str().unwrap().to_owned()
    }

    /// Starts a run and waits until it is running. On the local engine that is the engine's
    /// and the trainer's start (JAX) and a first sampled group: about 25 s on an idle 2-core
    /// machine (benchmarks.md), so the wait allows far more; it ends as soon as the run does.
    pub(crate) fn start_running(&self) -> (String, Value) {
        let id = self.start();
        let running = self.wait(&id, "running", 600);
        assert_eq!(running["state"], "running", "{}", self.explain(&id));
        (id, running)
    }

    /// `rl runs start --wait finished --json` in the background (its stdout piped), and the id
    /// of the run it started, once listed.
    #[expect(
        clippy::zombie_processes,
        reason = "returned to the caller, who waits for it"
    )]
    pub(crate) fn start_waiting_for_the_end(&self) -> (std::process::Child, String) {
        let mut caller = Command::new(env!("CARGO_BIN_EXE_rl"))
            .args(["runs", "start", "--wait", "finished", "--json"])
            .env("RL_HOME", self.home.path())
            .current_dir(workspace_root())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let started = Instant::now();
        loop {
            let runs = self.json(&["runs", "list"]);
            if let Some(id) = runs["runs"][0]["run_id"].as_str() {
                return (caller, id.to_owned());
            }
            if started.elapsed() > Duration::from_secs(30) {
                let _ = caller.kill();
                let _ = caller.wait();
                panic!("no run appeared");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits, and checks the exit code tells a script what the wait found: 0 reached (a
    /// completed run, when waiting for the end), 3 ended without completing, 4 timed out.
    pub(crate) fn wait(&self, id: &str, until: &str, timeout_secs: u32) -> Value {
        let args = [
            "runs",
            "wait",
            id,
            "--until",
            until,
            "--timeout",
            &timeout_secs.to_string(),
            "--json",
        ];
        let output = self.rl(&args);
        let outcome: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
            panic!(
                "rl {args:?}: {error}: {}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            )
        });
        let state = outcome["status"]["state"].as_str().unwrap_or_default();
        let expected = match (state, outcome["timed_out"].as_bool()) {
            ("failed" | "stopped" | "lost", _) => 3,
            (_, Some(true)) => 4,
            _ => 0,
        };
        assert_eq!(
            output.status.code(),
            Some(expected),
            "rl {args:?} ended with {} for a {state} run: {outcome}",
            output.status
        );
        assert_eq!(
            outcome["timed_out"],
            false,
            "run {id} did not reach {until}: {}",
            self.explain(id)
        );
        outcome["status"].clone()
    }

    /// Waits until the run is in `state` (a label such as `starting: trainer`) and, while
    /// starting, the phase's component has been launched: the phase is recorded before its
    /// launch, and a stop in between rightly launches nothing.
    pub(crate) fn wait_for_label(&self, id: &str, label: &str) -> Value {
        let started = Instant::now();
        loop {
            let status = self.json(&["runs", "status", id]);
            let launched = label
                .strip_prefix("starting: ")
                .is_none_or(|name| component(&status, name)["status"] == "running");
            if label_of(&status) == label && launched {
                return status;
            }
            assert!(
                !is_finished(&status) && started.elapsed() < Duration::from_secs(120),
                "run {id} never reached '{label}': {}",
                self.explain(id)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Status, events and log tails, for assertion messages.
    pub(crate) fn explain(&self, id: &str) -> String {
        let status = self.rl(&["runs", "status", id]);
        let dir = self.home.path().join("runs").join(id);
        let mut text = String::from_utf8_lossy(&status.stdout).into_owned();
        for log in ["supervisor", "engine", "api", "trainer", "env"] {
            let content =
                std::fs::read_to_string(dir.join(format!("{log}.log"))).unwrap_or_default();
            let lines: Vec<&str> = content.lines().collect();
            let tail = lines[lines.len().saturating_sub(20)..].join("\n");
            text.push_str(&format!("\n--- {log}.log\n{tail}"));
        }
        text
    }

    pub(crate) fn run_dir(&self, id: &str) -> PathBuf {
        self.home.path().join("runs").join(id)
    }
}

/// The `{"error": ...}` answer of a refused `--json` call (exit code 1).
fn refusal(output: &Output) -> Value {
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    serde_json::from_slice(&output.stdout).unwrap()
}

pub(crate) fn label_of(status: &Value) -> String {
    match status["phase"].as_str() {
        Some(phase) => format!("{}: {phase}", status["state"].as_str().unwrap()),
        None => status["state"].as_str().unwrap().to_owned(),
    }
}

pub(crate) fn is_finished(status: &Value) -> bool {
    matches!(
        status["state"].as_str(),
        Some("stopped" | "completed" | "failed" | "lost" | "capped")
    )
}

pub(crate) fn component<'a>(status: &'a Value, name: &str) -> &'a Value {
    status["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["component"] == name)
        .unwrap()
}

/// The pid of `name`'s process, when the run has that component and it was launched.
pub(crate) fn pid_of(status: &Value, name: &str) -> Option<u32> {
    status["components"]
        .as_array()?
        .iter()
        .find(|c| c["component"] == name)?["process"]["pid"]
        .as_u64()
        .map(|p| u32::try_from(p).unwrap())
}

/// Every live process of the run's process groups.
pub(crate) fn run_processes(status: &Value) -> Vec<u32> {
    ["engine", "api", "trainer", "env"]
        .into_iter()
        .filter_map(|name| pid_of(status, name))
        .flat_map(|pgid| members_of_group(i32::try_from(pgid).unwrap()))
        .collect()
}

/// The variables of process `pid` (`NAME=value` each), read from /proc; none once it is gone.
pub(crate) fn environ_of(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/environ"))
        .map(|bytes| {
            bytes
                .split(|byte| *byte == 0)
                .map(|entry| String::from_utf8_lossy(entry).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Every live process whose environment holds run `id`'s `RL_RUN_ID`: its components and
/// whatever they started, wherever it went.
pub(crate) fn processes_of_run(id: &str) -> Vec<u32> {
    let mark = format!("RL_RUN_ID={id}");
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| environ_of(*pid).contains(&mark))
        .collect()
}

fn ports(status: &Value) -> [u16; 2] {
    ["api_port", "trainer_port"].map(|k| u16::try_from(status[k].as_u64().unwrap()).unwrap())
}

pub(crate) fn assert_nothing_left(stack: &Stack, id: &str) {
    let status = stack.json(&["runs", "status", id]);
    // The supervisor exits once it has ended everything; a failure is recorded before that,
    // and each component left may take its `stop_grace_secs` (10 s on the local engine).
    let started = Instant::now();
    while status["supervisor"]["pid"]
        .as_u64()
        .is_some_and(|pid| is_alive(u32::try_from(pid).unwrap()))
        && started.elapsed() < Duration::from_secs(120)
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left = run_processes(&status);
    assert!(
        left.is_empty(),
        "processes left: {left:?}\n{}",
        stack.explain(id)
    );
    for port in ports(&status) {
        assert!(!rl_process::is_listening(port), "port {port} still listens");
    }
}

pub(crate) fn is_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

pub(crate) fn state_events(status: &Value) -> Vec<String> {
    status["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "state")
        .map(|e| e["message"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn a_run_goes_from_starting_to_running_to_completed_with_keys_only_in_the_environment() {
    let python = test_python();
    // Slow steps: `running` lasts long enough to be seen and read on a loaded machine.
    let mut stack = Stack::new(
        &python,
        &[
            (
                "trainer_needs_tinker_key = false",
                "trainer_needs_tinker_key = true",
            ),
            SLOW_STEPS,
        ],
    );
    stack.tinker_key = Some(FAKE_TINKER_KEY);
    // A provider key rl holds (from `.env`) that no setting allows environments.
    let dotenv = stack.home.path().join(".env");
    std::fs::write(
        &dotenv,
        format!("OPENROUTER_API_KEY={FAKE_OPENROUTER_KEY}\n"),
    )
    .unwrap();
    std::fs::set_permissions(&dotenv, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (id, running) = stack.start_running();

    // While it runs: the key is in the trainer's environment, in no command line of the run,
    // and not given to the API at all.
    let supervisor = running["supervisor"]["pid"].as_u64().unwrap();
    let mut pids = run_processes(&running);
    pids.push(u32::try_from(supervisor).unwrap());
    for pid in &pids {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&cmdline).contains(FAKE_TINKER_KEY),
            "key in the command line of {pid}"
        );
    }
    let environ = |name: &str| {
        let pid = pid_of(&running, name).unwrap();
        String::from_utf8_lossy(&std::fs::read(format!("/proc/{pid}/environ")).unwrap())
            .into_owned()
    };
    assert!(environ("trainer").contains(&format!("TINKER_API_KEY={FAKE_TINKER_KEY}")));
    assert!(!environ("api").contains("TINKER_API_KEY"));
    assert!(!environ("env").contains("TINKER_API_KEY"));
    // The provider key reaches the supervisor, and no component: none is allowed environments.
    let supervisor_pid = u32::try_from(supervisor).unwrap();
    assert!(
        environ_of(supervisor_pid).contains(&format!("OPENROUTER_API_KEY={FAKE_OPENROUTER_KEY}"))
    );
    let of_run = processes_of_run(&id);
    for name in ["api", "trainer", "env"] {
        assert!(of_run.contains(&pid_of(&running, name).unwrap()), "{name}");
    }
    for pid in of_run {
        assert!(
            !environ_of(pid)
                .iter()
                .any(|variable| variable.starts_with("OPENROUTER_API_KEY=")),
            "the provider key reached {pid}"
        );
    }
    // The supervisor, alive for the whole run, keeps its allocator lean (benchmarks.md).
    let supervisor_environ = std::fs::read(format!("/proc/{supervisor}/environ")).unwrap();
    assert!(
        String::from_utf8_lossy(&supervisor_environ).contains("MIMALLOC_ARENA_EAGER_COMMIT=0\0")
    );
    // WandB writes the run's own files into the run folder, where metrics are read from.
    let wandb_dir = format!("WANDB_DIR={}\0", stack.run_dir(&id).display());
    assert!(environ("trainer").contains(&wandb_dir));
    assert!(environ("env").contains(&wandb_dir));

    let finished = stack.wait(&id, "finished", 120);
    assert_eq!(finished["state"], "completed", "{}", stack.explain(&id));
    let states = state_events(&finished);
    let expected = [
        "created; starting: api",
        "starting: trainer",
        "starting: env",
    ];
    assert_eq!(&states[..3], expected, "{states:#?}");
    assert!(states[3].starts_with("running"), "{states:#?}");
    assert!(states[4].starts_with("completed"), "{states:#?}");
    assert_eq!(component(&finished, "trainer")["status"], "exited");
    assert_eq!(component(&finished, "trainer")["code"], 0);
    assert_nothing_left(&stack, &id);

    // The run folder: config with the run's own ports, logs, the trainer's metrics; no key.
    let dir = stack.run_dir(&id);
    let config = std::fs::read_to_string(dir.join("config.yaml")).unwrap();
    let [api_port, trainer_port] = ports(&finished);
    assert!(config.contains(&format!("rollout_server_url: http://127.0.0.1:{api_port}")));
    assert!(config.contains(&format!("base_url: http://127.0.0.1:{trainer_port}/v1")));
    let trainer_log = std::fs::read_to_string(dir.join("trainer.log")).unwrap();
    assert!(
        trainer_log.contains("Final weights are available here: tinker://"),
        "{trainer_log}"
    );
    assert!(dir.join("metrics.jsonl").exists());

    // Its metrics, read from its own metrics file: every step, and the weights it saved.
    let status = stack.json(&["runs", "status", &id]);
    assert_eq!(status["metrics_source"], "metrics_file", "{status:#}");
    assert_eq!(status["metrics"]["step"], 6, "{status:#}");
    assert!(status["metrics"]["reward_mean"].is_number(), "{status:#}");
    assert!(status["metrics"]["loss"].is_number(), "{status:#}");
    assert_eq!(status["metrics"]["percent_correct"], Value::Null);
    assert_eq!(status["health"]["window"]["last_step"], 6, "{status:#}");
    let results = stack.json(&["runs", "results", &id]);
    assert_eq!(results["status"], "completed");
    assert_eq!(results["metrics"]["step"], 6, "{results:#}");
    assert!(results["metrics"]["reward_mean"].is_number());
    assert!(results["metrics"]["loss"].is_number());
    assert_eq!(results["history"].as_array().unwrap().len(), 6);
    assert!(results["final_metrics"]["train/loss"].is_number());
    let weights = results["final_weights"].as_str().unwrap();
    assert!(
        weights.starts_with("tinker://fixture-") && weights.ends_with("/sampler_weights/final"),
        "{weights}"
    );
    let checkpoints = results["checkpoints"].as_array().unwrap();
    assert_eq!(checkpoints.len(), 6, "{results:#}");
    assert_eq!(checkpoints[5]["step"], 6);
    assert!(results["wandb_run_name"].as_str().unwrap().ends_with(&id));
    assert_eq!(results["metrics_errors"], serde_json::json!([]));
    // Other sources on request: no WandB file has this run (WandB was disabled), yet the
    // trainer's checkpoints file still tells its weights; and WandB's servers are not asked
    // for a run that does not log there.
    let from_files = stack.json(&["runs", "results", &id, "--source", "wandb-files"]);
    assert_eq!(from_files["status"], "completed");
    assert_eq!(from_files["source"], "checkpoints_file", "{from_files:#}");
    assert_eq!(from_files["metrics"]["step"], Value::Null);
    assert_eq!(
        from_files["final_weights"], results["final_weights"],
        "checkpoints.jsonl decides, whichever source the numbers come from"
    );
    assert_eq!(from_files["checkpoints"], results["checkpoints"]);
    let refused = refusal(&stack.rl(&["runs", "results", &id, "--source", "wandb-api", "--json"]));
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("use_wandb = false"),
        "{refused}"
    );
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let content = std::fs::read(&path).unwrap();
        assert!(
            !String::from_utf8_lossy(&content).contains(FAKE_TINKER_KEY),
            "key written to {}",
            path.display()
        );
    }
    let database = std::fs::read(stack.home.path().join("runs.db")).unwrap();
    assert!(!String::from_utf8_lossy(&database).contains(FAKE_TINKER_KEY));

    let again = stack.rl(&["runs", "stop", &id]);
    assert!(again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("has already completed; nothing to stop")
    );
}

#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn a_missing_tinker_key_is_refused_before_anything_starts() {
    let python = test_python();
    let stack = Stack::new(
        &python,
        &[(
            "trainer_needs_tinker_key = false",
            "trainer_needs_tinker_key = true",
        )],
    );
    let answer = refusal(&stack.rl(&["runs", "start", "--json"]));
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .starts_with("TINKER_API_KEY is not set"),
        "{answer}"
    );
    assert_eq!(
        stack.json(&["runs", "list"]),
        serde_json::json!({"runs": [], "count": 0})
    );
    assert!(!stack.home.path().join("runs").exists());
}

/// A stop in each phase: the components after that phase are never launched, those before are
/// stopped in reverse order, nothing of the run is left, and the ports are free.
#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn a_stop_in_each_phase_stops_what_runs_and_launches_nothing_more() {
    let python = test_python();
    let slow_api = format!(
        "[commands]\napi = [{SLOW_START}, \"{{python}}\", \"-m\", \"atroposlib.cli.run_api\", \"--host\", \"127.0.0.1\", \"--port\", \"{{api_port}}\"]\n"
    );
    let slow_env = format!(
        "[commands]\nenv = [{SLOW_START}, \"{{python}}\", \"{{env_file}}\", \"serve\", \"--config\", \"{{config}}\"]\n"
    );
    // The environment, run by rl's runner, is launched first (its setup while the others start:
    // issue 40); the slow environment command below is not rl's runner and starts last.
    let cases: [(&str, (&str, &str), &[&str]); 4] = [
        ("starting: api", ("[commands]\n", &slow_api), &["trainer"]),
        (
            "starting: trainer",
            (
                "RL_FIXTURE_TRAINER_STEP_SECONDS = \"0.2\"",
                "RL_FIXTURE_TRAINER_STARTUP_DELAY = \"60\"",
            ),
            &[],
        ),
        ("starting: env", ("[commands]\n", &slow_env), &[]),
        ("running", SLOW_STEPS, &[]),
    ];
    for (phase, edit, never_started) in cases {
        let stack = Stack::new(&python, &[edit]);
        let id = stack.start();
        stack.wait_for_label(&id, phase);
        let report = stack.json(&["runs", "stop", &id]);
        assert_eq!(report["stopped"], true);
        let status = &report["run"];
        assert_eq!(
            status["state"],
            "stopped",
            "{phase}: {}",
            stack.explain(&id)
        );
        for name in never_started {
            assert_eq!(
                component(status, name)["status"],
                "not_started",
                "{phase}: {name} was launched after the stop"
            );
        }
        let stops: Vec<String> = status["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] == "stop")
            .map(|e| {
                e["message"]
                    .as_str()
                    .unwrap()
                    .split(' ')
                    .next()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        let expected: Vec<&str> = ["env", "trainer", "api"]
            .into_iter()
            .filter(|c| !never_started.contains(c))
            .collect();
        assert_eq!(stops, expected, "{phase}: stop order");
        assert_nothing_left(&stack, &id);
    }
}

/// kill -9 of one component: the run fails naming it within 2 s of the kill (measured by the
/// store's own clock), and the others are stopped.
#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn a_killed_component_fails_the_run_naming_it_and_leaves_no_orphan() {
    let python = test_python();
    for victim in ["api", "trainer", "env"] {
        let stack = Stack::new(
            &python,
            &[(
                "RL_FIXTURE_TRAINER_STEP_SECONDS = \"0.2\"",
                "RL_FIXTURE_TRAINER_STEP_SECONDS = \"5\"",
            )],
        );
        let (id, running) = stack.start_running();
        let pid = pid_of(&running, victim).unwrap();
        let killed_at = jiff::Timestamp::now();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap()),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        let failed = stack.wait(&id, "finished", 30);
        assert_eq!(failed["state"], "failed", "{}", stack.explain(&id));
        let error = failed["error"].as_str().unwrap();
        assert!(
            error.starts_with(&format!("{victim} was ended by SIGKILL")),
            "{victim}: {error}"
        );
        let recorded = failed["events"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["kind"] == "state" && e["message"].as_str().unwrap().starts_with("failed"))
            .unwrap();
        let recorded_at: jiff::Timestamp = recorded["at"].as_str().unwrap().parse().unwrap();
        let reaction = recorded_at.duration_since(killed_at).as_secs_f64();
        assert!(
            reaction < 2.0,
            "{victim}: failure recorded {reaction:.2} s after the kill"
        );
        assert_nothing_left(&stack, &id);
    }
}

/// The process that started the run is SIGKILLed while it waits; the run goes on, and a new
/// process sees it, follows its events and stops it.
#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn a_run_outlives_its_caller_and_a_new_process_stops_it() {
    let python = test_python();
    let stack = Stack::new(&python, &[SLOW_STEPS]);
    let (mut caller, id) = stack.start_waiting_for_the_end();
    stack.wait(&id, "running", 120);
    caller.kill().unwrap();
    caller.wait().unwrap();

    // The operator breaks config.toml meanwhile: new runs are refused, saying why, but the
    // running one can still be watched and stopped.
    let settings = stack.home.path().join("config.toml");
    let good = std::fs::read_to_string(&settings).unwrap();
    std::fs::write(
        &settings,
        format!("status_check_interval_secs = \"soon\"\n{good}"),
    )
    .unwrap();
    let refused = stack.rl(&["runs", "start"]);
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("status_check_interval_secs"),
        "{refused:?}"
    );

    std::thread::sleep(Duration::from_millis(500));
    let status = stack.json(&["runs", "status", &id]);
    assert_eq!(status["state"], "running", "{}", stack.explain(&id));
    let cursor = status["next_since"].as_i64().unwrap();
    let report = stack.json(&["runs", "stop", &id]);
    assert_eq!(report["run"]["state"], "stopped");
    let newer = stack.json(&["runs", "events", &id, "--since", &cursor.to_string()]);
    let events = newer["events"].as_array().unwrap();
    assert!(events.iter().all(|e| e["seq"].as_i64().unwrap() > cursor));
    assert!(
        events
            .iter()
            .any(|e| e["message"] == "stopping: stop requested")
    );
    assert_nothing_left(&stack, &id);
}

/// A script reads from the exit code whether what it waited for happened: a wait that times
/// out is 4, a run stopped under a `--wait finished` is 3, never 0.
#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn waits_tell_a_script_by_their_exit_code_whether_the_run_completed() {
    let python = test_python();
    let stack = Stack::new(&python, &[SLOW_STEPS]);
    let (caller, id) = stack.start_waiting_for_the_end();
    stack.wait(&id, "running", 120);
    let early = stack.rl(&[
        "runs",
        "wait",
        &id,
        "--until",
        "finished",
        "--timeout",
        "0.2",
    ]);
    assert_eq!(early.status.code(), Some(4), "{early:?}");

    // With one unfinished run allowed, a second start is refused and leaves nothing behind.
    let settings = stack.home.path().join("config.toml");
    let good = std::fs::read_to_string(&settings).unwrap();
    std::fs::write(&settings, format!("max_active_runs = 1\n{good}")).unwrap();
    let refused = stack.rl(&["runs", "start"]);
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("max_active_runs is 1"),
        "{refused:?}"
    );
    let folders = std::fs::read_dir(stack.home.path().join("runs"))
        .unwrap()
        .count();
    assert_eq!(folders, 1, "a refused start left a run folder");
    assert_eq!(stack.json(&["runs", "list"])["count"], 1);

    stack.json(&["runs", "stop", &id]);
    let ended = caller.wait_with_output().unwrap();
    assert_eq!(ended.status.code(), Some(3), "{ended:?}");
    let answer: Value = serde_json::from_slice(&ended.stdout).unwrap();
    assert_eq!(answer["status"], "stopped", "{answer}");
    // `stack.wait` checks the code of a wait on a run that has already ended.
    assert_eq!(stack.wait(&id, "finished", 10)["state"], "stopped");
    assert_nothing_left(&stack, &id);
}

/// A run locked to `use_wandb = false` has nothing on WandB's servers: status and results
/// never ask them, even with a key and an endpoint that would never answer.
#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn a_run_that_does_not_log_to_wandb_never_waits_on_wandb() {
    let python = test_python();
    let stack = Stack::new(&python, &[("WANDB_MODE = \"disabled\"", "")]);
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    silent.set_nonblocking(true).unwrap();
    let endpoint = format!("http://{}", silent.local_addr().unwrap());
    let ask = |args: &[&str]| {
        let output = crate::rl_command(stack.home.path())
            .args(args)
            .arg("--json")
            .env("WANDB_API_KEY", "wandb-test-key-0123456789")
            .env("WANDB_BASE_URL", &endpoint)
            .output()
            .unwrap();
        crate::success_json(args, &output)
    };
    let id = stack.start();
    // While it starts, no metrics exist anywhere yet: the case that used to ask WandB.
    let status = ask(&["runs", "status", &id, "--source", "auto"]);
    assert_eq!(status["id"], id.as_str(), "{status}");
    let explicit = refusal(
        &crate::rl_command(stack.home.path())
            .args(["runs", "status", &id, "--source", "wandb-api", "--json"])
            .env("WANDB_API_KEY", "wandb-test-key-0123456789")
            .env("WANDB_BASE_URL", &endpoint)
            .output()
            .unwrap(),
    );
    let error = explicit["error"].as_str().unwrap();
    assert!(error.contains("use_wandb = false"), "{explicit:#}");
    stack.wait(&id, "finished", 180);
    let results = ask(&["runs", "results", &id]);
    assert_eq!(results["source"], "metrics_file", "{results:#}");
    assert!(
        matches!(silent.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "WandB's endpoint was asked"
    );
    assert_nothing_left(&stack, &id);
}

#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn two_runs_at_once_use_their_own_ports_and_both_complete() {
    let python = test_python();
    let stack = Stack::new(&python, &[]);
    let first = stack.start();
    let second = stack.start();
    let a = stack.wait(&first, "finished", 180);
    let b = stack.wait(&second, "finished", 180);
    assert_eq!(a["state"], "completed", "{}", stack.explain(&first));
    assert_eq!(b["state"], "completed", "{}", stack.explain(&second));
    let all: BTreeSet<u16> = ports(&a).into_iter().chain(ports(&b)).collect();
    assert_eq!(all.len(), 4, "ports shared between runs: {all:?}");
    assert_nothing_left(&stack, &first);
    assert_nothing_left(&stack, &second);
}

/// A component leaves a process behind in its group (started and abandoned by a subshell).
/// Whether the run is stopped or the component itself ends (killed), that process goes too.
#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn a_grandchild_left_by_a_component_is_gone_after_stop_or_its_end() {
    let python = test_python();
    let trainer = r#"trainer = ["sh", "-c", "(sleep 600 &); exec \"$0\" \"$@\"", "{python}", "launch_training.py""#;
    for ending in ["stop", "kill -9 of the trainer"] {
        let stack = Stack::new(
            &python,
            &[
                (r#"trainer = ["{python}", "launch_training.py""#, trainer),
                SLOW_STEPS,
            ],
        );
        let (id, running) = stack.start_running();
        let trainer_pid = pid_of(&running, "trainer").unwrap();
        let sleepers: Vec<u32> = members_of_group(i32::try_from(trainer_pid).unwrap())
            .into_iter()
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|c| c.trim() == "sleep")
            })
            .collect();
        assert_eq!(
            sleepers.len(),
            1,
            "the abandoned sleep is in the trainer's group"
        );
        let end = if ending == "stop" {
            stack.json(&["runs", "stop", &id])["run"].clone()
        } else {
            nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(i32::try_from(trainer_pid).unwrap()),
                nix::sys::signal::Signal::SIGKILL,
            )
            .unwrap();
            stack.wait(&id, "finished", 30)
        };
        let expected = if ending == "stop" {
            "stopped"
        } else {
            "failed"
        };
        assert_eq!(end["state"], expected, "{ending}: {}", stack.explain(&id));
        assert_nothing_left(&stack, &id);
        assert!(!is_alive(sleepers[0]), "{ending}: the grandchild survived");
    }
}

#[test]
fn run_ids_from_outside_are_checked() {
    let home = tempfile::tempdir().unwrap();
    for bad in ["../../etc", "0BADC0DE", "12345", "0badc0de0"] {
        let answer = refusal(&crate::rl_in(
            home.path(),
            &["runs", "status", bad, "--json"],
        ));
        assert!(
            answer["error"]
                .as_str()
                .unwrap()
                .contains("8 lowercase hexadecimal"),
            "{answer}"
        );
    }
    for command in ["stop", "results"] {
        let answer = refusal(&crate::rl_in(
            home.path(),
            &["runs", command, "0badc0de", "--json"],
        ));
        assert!(
            answer["error"]
                .as_str()
                .unwrap()
                .contains("no run with id '0badc0de'"),
            "{command}: {answer}"
        );
    }
    let answer = refusal(&crate::rl_in(
        home.path(),
        &["runs", "results", "../x", "--json"],
    ));
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("8 lowercase hexadecimal")
    );
}

/// The supervisor itself is SIGKILLed (as a reboot would end it): every read shows the run as
/// lost, judged by pid and start time, and a stop ends the processes it left.
#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn a_run_whose_supervisor_vanished_is_lost_and_stop_ends_what_it_left() {
    let python = test_python();
    let stack = Stack::new(&python, &[SLOW_STEPS]);
    let (id, running) = stack.start_running();
    let supervisor = i32::try_from(running["supervisor"]["pid"].as_u64().unwrap()).unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(supervisor),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let lost = stack.wait(&id, "finished", 10);
    assert_eq!(lost["state"], "lost");
    assert!(
        lost["error"]
            .as_str()
            .unwrap()
            .contains(&format!("its supervisor (pid {supervisor}) is gone")),
        "{lost}"
    );
    // Their output has nowhere to go now: a component that writes may end by itself.
    assert!(
        !run_processes(&lost).is_empty(),
        "the components outlive their supervisor"
    );
    let listed = stack.json(&["runs", "list"]);
    assert_eq!(listed["runs"][0]["status"], "lost");

    let report = stack.json(&["runs", "stop", &id]);
    assert_eq!(report["stopped"], true);
    let message = report["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!("run {id} is lost; ")) && message.contains("ended on SIGTERM"),
        "{message}"
    );
    assert!(
        message.contains("cannot be found without the supervisor"),
        "{message}"
    );
    assert_eq!(report["run"]["state"], "lost", "a lost run stays lost");
    // Once stopped, the run no longer tells anyone to stop it.
    let error = report["run"]["error"].as_str().unwrap_or_default();
    assert!(!error.contains("stop the run"), "{error}");
    assert!(error.contains("has ended what it found"), "{error}");
    assert_nothing_left(&stack, &id);
}

/// A trainer that cannot be told its port (the published Tinker trainer binds 8001) is declared
/// with `trainer_port`; when that port is busy the start is refused before anything runs.
#[test]
fn a_busy_fixed_trainer_port_is_refused_before_anything_starts() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "tinker_atropos_root = \"{}\"\ntrainer_needs_tinker_key = false\ntrainer_port = {port}\n",
            workspace_root().join("fixtures/tinker-atropos").display()
        ),
    )
    .unwrap();
    assert!(
        crate::rl_in(home.path(), &["select", "arithmetic"])
            .status
            .success()
    );
    let answer = refusal(&crate::rl_in(home.path(), &["runs", "start", "--json"]));
    let error = answer["error"].as_str().unwrap();
    assert!(
        error.starts_with(&format!(
            "the trainer's port {port} (trainer_port in config.toml) is in use"
        )),
        "{error}"
    );
    assert!(!home.path().join("runs").exists());
}

/// A trainer logging to WandB offline, as the Tinker trainer names its run: the run's own
/// `WANDB_DIR` holds the run file, and its results read from it with no network and no key.
#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn a_run_logged_to_wandb_offline_has_its_results_from_the_wandb_files() {
    let python = test_python();
    let stack = Stack::new(
        &python,
        &[(
            "WANDB_MODE = \"disabled\"",
            "WANDB_MODE = \"offline\"\nRL_FIXTURE_TRAINER_WANDB = \"1\"",
        )],
    );
    let id = stack.start();
    let finished = stack.wait(&id, "finished", 180);
    assert_eq!(finished["state"], "completed", "{}", stack.explain(&id));
    let results = stack.json(&["runs", "results", &id, "--source", "wandb-files"]);
    assert_eq!(results["source"], "wandb_files", "{results:#}");
    assert_eq!(results["metrics"]["step"], 6, "{results:#}");
    assert!(results["metrics"]["reward_mean"].is_number());
    assert!(results["metrics"]["loss"].is_number());
    assert_eq!(results["history"].as_array().unwrap().len(), 6);
    let trainer = results["trainer_run"]["name"].as_str().unwrap();
    assert!(
        trainer.starts_with(&format!("arithmetic-{id}-trainer-")),
        "{trainer}"
    );
    let file = results["trainer_run"]["path"].as_str().unwrap();
    assert!(file.starts_with(&stack.run_dir(&id).join("wandb").display().to_string()));
    // The same numbers as the trainer's own metrics file.
    let from_file = stack.json(&["runs", "results", &id, "--source", "file"]);
    assert_eq!(from_file["metrics"], results["metrics"]);
}
