//! Runs on a REAL single-node SLURM (`ci/slurm/up.sh` starts it; `.ci/run` does so before
//! the tests): the local stack's run submitted as a job, its components as job steps. Skipped
//! loudly where no SLURM answers, except under CI, where they must run.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::runs::SLOW_STEPS;
use crate::test_python;

/// A made-up key: it must reach the trainer's step and never SLURM's files.
const FAKE_TINKER_KEY: &str = "tml-fake-slurm-0123456789";

/// A SLURM controller must answer: these tests are ignored unless asked for, and `cargo xtask
/// test` asks for them only when one does (and always under CI).
fn require_slurm() {
    let answer = Command::new("sinfo").args(["-h", "-o", "%t"]).output();
    let up = answer.is_ok_and(|output| {
        output.status.success() && !String::from_utf8_lossy(&output.stdout).trim().is_empty()
    });
    assert!(
        up,
        "no SLURM answers (`sinfo`): start one with `sudo ci/slurm/up.sh` (`.ci/run` does)"
    );
}

struct SlurmStack {
    home: tempfile::TempDir,
}

impl SlurmStack {
    /// The local stack with `backend = "slurm"`, `slurm_lines` added to its `[slurm]` table and
    /// `edits` applied to the local stack's settings as (old, new) text.
    fn new(python: &Path, slurm_lines: &str, edits: &[(&str, &str)]) -> Self {
        let mut settings = rl_test_support::local_stack_settings(python);
        for (old, new) in edits {
            assert!(settings.contains(old), "local-stack.toml has no '{old}'");
            settings = settings.replace(old, new);
        }
        // Top-level keys must precede the first table.
        let settings = format!(
            "backend = \"slurm\"\n{settings}\n[slurm]\npartition = \"debug\"\n{slurm_lines}\n"
        );
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("config.toml"), settings).unwrap();
        let stack = Self { home };
        stack.json(&["select", "arithmetic"]);
        stack
    }

    fn rl(&self, args: &[&str]) -> Output {
        crate::rl_command(self.home.path())
            .args(args)
            .env("TINKER_API_KEY", FAKE_TINKER_KEY)
            .output()
            .unwrap()
    }

    fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.push("--json");
        crate::success_json(args, &self.rl(&all))
    }

    fn start(&self) -> (String, String) {
        let started = self.json(&["runs", "start"]);
        assert_eq!(started["phase"], "queued", "{started}");
        let id = started["run_id"].as_str().unwrap().to_owned();
        let job = self.job_of(&id);
        (id, job)
    }

    /// The SLURM job id the run records, once it is submitted.
    fn job_of(&self, id: &str) -> String {
        let started = Instant::now();
        loop {
            let status = self.json(&["runs", "status", id]);
            if let Some(job) = status["slurm_job"].as_str() {
                return job.to_owned();
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "run {id} was never submitted: {status}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn until(&self, id: &str, what: &str, done: impl Fn(&Value) -> bool, limit: u64) -> Value {
        let started = Instant::now();
        loop {
            let status = self.json(&["runs", "status", id]);
            if done(&status) {
                return status;
            }
            assert!(
                started.elapsed() < Duration::from_secs(limit),
                "run {id} never {what}: {status}\n{}",
                self.logs(id)
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    fn finished(&self, id: &str, limit: u64) -> Value {
        self.until(
            id,
            "finished",
            |s| {
                ["stopped", "completed", "failed", "lost"]
                    .contains(&s["status"].as_str().unwrap_or(""))
            },
            limit,
        )
    }

    fn logs(&self, id: &str) -> String {
        let dir = self.home.path().join("runs").join(id);
        let mut text = String::new();
        for log in ["supervisor.log", "api.log", "trainer.log", "env.log"] {
            let content = std::fs::read_to_string(dir.join(log)).unwrap_or_default();
            let lines: Vec<&str> = content.lines().collect();
            let tail = lines[lines.len().saturating_sub(15)..].join("\n");
            text.push_str(&format!("\n--- {log}\n{tail}"));
        }
        text
    }
}

/// SLURM's view of a job: its state, or `None` once it has forgotten it.
fn slurm_state(job: &str) -> Option<String> {
    let output = Command::new("scontrol")
        .args(["show", "job", "-o", job])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    text.split_whitespace()
        .find_map(|pair| pair.strip_prefix("JobState="))
        .map(str::to_owned)
}

/// The job has ended (within a bound: SLURM takes a moment) and has no step left.
fn assert_slurm_holds_nothing_of(job: &str) {
    let held = |state: Option<String>| {
        matches!(state.as_deref(), Some("RUNNING" | "PENDING" | "COMPLETING"))
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while held(slurm_state(job)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(300));
    }
    assert!(
        !held(slurm_state(job)),
        "job {job} is {:?}",
        slurm_state(job)
    );
    let steps = Command::new("squeue")
        .args(["-h", "-s", "-j", job])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&steps.stdout).trim().is_empty(),
        "steps of job {job} are left"
    );
}

fn events(status: &Value) -> String {
    status["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            format!(
                "{}: {}",
                e["kind"].as_str().unwrap(),
                e["message"].as_str().unwrap()
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Held in the queue, then released: `starting: queued` with SLURM's reason, then the
/// components as steps, a completed run, a completed job, and no key in SLURM's files.
#[test]
#[ignore = "needs the test venv and a SLURM cluster: `cargo xtask test` runs it when `sinfo` answers"]
fn a_run_waits_in_the_queue_then_runs_as_job_steps_and_completes() {
    let python = test_python();
    require_slurm();
    let stack = SlurmStack::new(&python, "extra_sbatch = [\"--hold\"]", &[]);
    let (id, job) = stack.start();
    let queued = stack.until(
        &id,
        "waited in the queue",
        |s| events(s).contains("is pending: JobHeldUser"),
        60,
    );
    assert_eq!(
        (queued["status"].clone(), queued["phase"].clone()),
        ("starting".into(), "queued".into())
    );
    assert!(events(&queued).contains(&format!("submitted to SLURM as job {job}")));
    let released = Command::new("scontrol")
        .args(["release", &job])
        .status()
        .unwrap();
    assert!(released.success());

    let finished = stack.finished(&id, 180);
    assert_eq!(
        finished["status"],
        "completed",
        "{}\n{}",
        events(&finished),
        stack.logs(&id)
    );
    let events = events(&finished);
    assert!(
        events.contains(&format!("placed: SLURM job {job} on ")),
        "{events}"
    );
    // The holding script ended cleanly once the steps were done.
    let deadline = Instant::now() + Duration::from_secs(30);
    while slurm_state(&job).as_deref() != Some("COMPLETED") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(300));
    }
    assert_eq!(slurm_state(&job).as_deref(), Some("COMPLETED"));

    let dir = stack.home.path().join("runs").join(&id);
    // All on one node: the components reach each other on loopback.
    let config = rl_settings::RunConfig::read(&dir.join("config.yaml")).unwrap();
    assert_eq!(
        config.env["rollout_server_url"],
        rl_settings::Value::from(format!("http://127.0.0.1:{}", finished["api_port"]))
    );
    let results = stack.json(&["runs", "results", &id]);
    assert!(
        results["final_weights"]
            .as_str()
            .unwrap()
            .starts_with("tinker://"),
        "{results}"
    );
    let script = std::fs::read_to_string(dir.join("slurm.sbatch")).unwrap();
    assert!(script.contains("#SBATCH --hold") && script.contains("#SBATCH --partition=debug"));
    // Keys: not in the script, not in what SLURM keeps of the job (its environment file,
    // kept under the state folder for a while), not in SLURM's description of it.
    let state_dir = std::env::var("RL_SLURM_DIR").unwrap_or_else(|_| "/tmp/rl-slurm".to_owned());
    let kept = walk(Path::new(&state_dir).join("state").as_path());
    let described = Command::new("scontrol")
        .args(["show", "job", "-dd", &job])
        .output()
        .unwrap();
    for (what, text) in [
        ("the batch script", script),
        ("SLURM's state folder", kept),
        (
            "scontrol show job",
            String::from_utf8_lossy(&described.stdout).into_owned(),
        ),
    ] {
        assert!(!text.contains(FAKE_TINKER_KEY), "the key is in {what}");
    }
}

/// `--slurm true` reached the environment; the config names the node; the key is in the
/// trainer's step and not in the environment's.
fn the_allocation_is_used_and_the_key_reaches_only_the_trainer(dir: &Path, running: &Value) {
    let config = rl_settings::RunConfig::read(&dir.join("config.yaml")).unwrap();
    let rl_settings::Value::Str(url) = &config.env["rollout_server_url"] else {
        panic!("{:?}", config.env["rollout_server_url"]);
    };
    assert!(
        !url.contains("127.0.0.1") && url.ends_with(&format!(":{}", running["api_port"])),
        "{url}"
    );
    // The step's own process (not its local `srun`): its command line and environment.
    let step = |script: &str| {
        let run_dir = dir.to_string_lossy();
        let (pid, command) = rl_test_support::processes_mentioning(&run_dir)
            .into_iter()
            .find(|(_, command)| command.contains(script) && !command.starts_with("srun"))
            .unwrap_or_else(|| panic!("no step process of {script}"));
        let environment =
            String::from_utf8_lossy(&std::fs::read(format!("/proc/{pid}/environ")).unwrap())
                .into_owned();
        (command, environment)
    };
    let (trainer_command, trainer_environment) = step("launch_training.py");
    let (env_command, env_environment) = step("arithmetic_env.py");
    assert!(
        env_command.trim_end().ends_with("--slurm true"),
        "{env_command}"
    );
    assert!(!trainer_command.contains("--slurm"), "{trainer_command}");
    assert!(trainer_environment.contains(&format!("TINKER_API_KEY={FAKE_TINKER_KEY}")));
    assert!(!env_environment.contains("TINKER_API_KEY"));
}

/// Every file under `dir`, concatenated (lossy), for a search.
fn walk(dir: &Path) -> String {
    let mut text = String::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return text;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            text.push_str(&walk(&path));
        } else if let Ok(bytes) = std::fs::read(&path) {
            text.push_str(&String::from_utf8_lossy(&bytes));
        }
    }
    text
}

/// Stopped by `rl runs stop` while it runs, and cancelled by someone else with `scancel`:
/// both end `stopped`, and SLURM holds nothing of the run afterwards.
#[test]
#[ignore = "needs the test venv and a SLURM cluster: `cargo xtask test` runs it when `sinfo` answers"]
fn a_run_is_stopped_by_rl_or_cancelled_in_slurm() {
    let python = test_python();
    require_slurm();
    for by_rl in [true, false] {
        // The environment is told to use the allocation (`--slurm true`); the run's config then
        // names the node, for workers elsewhere in it.
        // A SIGTERM through SLURM passes slurmctld, slurmd and slurmstepd: a loaded machine
        // gets time enough that the test checks the path taken, not its speed.
        let stack = SlurmStack::new(
            &python,
            "env_uses_allocation = true",
            &[SLOW_STEPS, ("stop_grace_secs = 5", "stop_grace_secs = 20")],
        );
        let (id, job) = stack.start();
        let running = stack.until(&id, "ran", |s| s["status"] == "running", 120);
        let dir = stack.home.path().join("runs").join(&id);
        if by_rl {
            the_allocation_is_used_and_the_key_reaches_only_the_trainer(&dir, &running);
            let report = stack.json(&["runs", "stop", &id]);
            assert_eq!(report["status"], "stopped", "{report}");
            // Each step got SIGTERM through SLURM, not a kill.
            let events = events(&stack.json(&["runs", "status", &id]));
            for component in ["env", "trainer", "api"] {
                assert!(
                    events.contains(&format!("stop: {component} (group "))
                        && events.contains("ended on SIGTERM"),
                    "{component}: {events}"
                );
            }
            assert!(
                !events.contains("killed after the grace period"),
                "{events}"
            );
            // atroposlib read `--slurm true` (it says so on a single node); printed at its
            // start, flushed by the end.
            let env_log = std::fs::read_to_string(dir.join("env.log")).unwrap_or_default();
            assert!(
                env_log.contains("Not enough nodes to distribute to"),
                "{env_log}"
            );
        } else {
            assert!(
                Command::new("scancel")
                    .arg(&job)
                    .status()
                    .unwrap()
                    .success()
            );
        }
        let finished = stack.finished(&id, 300);
        assert_eq!(
            finished["status"],
            "stopped",
            "by rl: {by_rl}: {}",
            events(&finished)
        );
        if !by_rl {
            assert!(
                events(&finished).contains(&format!("SLURM job {job} was cancelled")),
                "{}",
                events(&finished)
            );
        }
        assert_slurm_holds_nothing_of(&job);
    }
}

/// A component that exits non-zero fails the run, naming it; a time limit fails it with
/// SLURM's TIMEOUT.
#[test]
#[ignore = "needs the test venv and a SLURM cluster: `cargo xtask test` runs it when `sinfo` answers"]
fn a_failing_component_or_a_time_limit_fails_the_run() {
    let python = test_python();
    require_slurm();
    let failing = SlurmStack::new(
        &python,
        "",
        &[(
            "[commands]\n",
            "[commands]\nenv = [\"sh\", \"-c\", \"echo no environment today; exit 3\"]\n",
        )],
    );
    let (id, _) = failing.start();
    let failed = failing.finished(&id, 120);
    assert_eq!(failed["status"], "failed");
    let error = failed["error"].as_str().unwrap();
    assert!(error.contains("env exited with code 3"), "{error}");
    assert!(
        error.contains("no environment today"),
        "the log comes from the step: {error}"
    );

    // SLURM enforces limits to the minute, checked every ~30 s: about 90 s in all, on SLURM's
    // clock and after the job started; the wait ends as soon as the run does.
    let slow = (
        "RL_FIXTURE_TRAINER_STEP_SECONDS = \"0.2\"",
        "RL_FIXTURE_TRAINER_STEP_SECONDS = \"30\"",
    );
    let limited = SlurmStack::new(&python, "time_limit = \"00:01:00\"", &[slow]);
    let (id, job) = limited.start();
    let timed_out = limited.finished(&id, 600);
    assert_eq!(timed_out["status"], "failed", "{}", events(&timed_out));
    let error = timed_out["error"].as_str().unwrap();
    assert!(
        error.contains(&format!("SLURM job {job} reached its time limit (TIMEOUT")),
        "{error}"
    );
}

/// The supervisor killed: the run is `lost`, its job still held by SLURM with its steps
/// running; `rl runs stop` (any later `rl`, from the job id in the store) ends the job through
/// SLURM and leaves nothing.
#[test]
#[ignore = "needs the test venv and a SLURM cluster: `cargo xtask test` runs it when `sinfo` answers"]
fn a_lost_runs_job_is_ended_by_a_later_stop() {
    let python = test_python();
    require_slurm();
    let stack = SlurmStack::new(&python, "", &[SLOW_STEPS]);
    let (id, job) = stack.start();
    let running = stack.until(&id, "ran", |s| s["status"] == "running", 120);
    let supervisor = i32::try_from(running["supervisor"]["pid"].as_u64().unwrap()).unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(supervisor),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let lost = stack.until(&id, "was lost", |s| s["status"] == "lost", 30);
    assert_eq!(lost["slurm_job"], job.as_str());
    assert_eq!(
        slurm_state(&job).as_deref(),
        Some("RUNNING"),
        "the job outlives the supervisor"
    );

    let report = stack.json(&["runs", "stop", &id]);
    assert_eq!(report["stopped"], true, "{report}");
    let message = report["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("SLURM job {job} cancelled")),
        "{message}"
    );
    assert_slurm_holds_nothing_of(&job);
    let run_dir = stack.home.path().join("runs").join(&id);
    assert!(
        rl_test_support::processes_mentioning(&run_dir.to_string_lossy()).is_empty(),
        "a process of the run is left"
    );
}

/// A sweep on the SLURM backend: each of its runs is a job of its own, both at once.
#[test]
#[ignore = "needs the test venv and a SLURM cluster: `cargo xtask test` runs it when `sinfo` answers"]
fn a_sweeps_runs_are_jobs_of_their_own() {
    let python = test_python();
    require_slurm();
    let stack = SlurmStack::new(&python, "", &[]);
    let started = stack.json(&[
        "sweep",
        "start",
        "--set",
        "group_size=2,4",
        "--max-parallel",
        "2",
    ]);
    let sweep = started["sweep_id"].as_str().unwrap().to_owned();
    let runs: Vec<String> = started["sweep"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["run_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(runs.len(), 2, "{started:#}");
    let jobs: Vec<String> = runs.iter().map(|id| stack.job_of(id)).collect();
    assert_ne!(jobs[0], jobs[1], "one job for two runs");
    for id in &runs {
        let finished = stack.finished(id, 240);
        assert_eq!(finished["status"], "completed", "{}", stack.logs(id));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let view = stack.json(&["sweep", "status", &sweep]);
        if view["state"] == "done" {
            break;
        }
        assert!(Instant::now() < deadline, "the sweep never ended: {view:#}");
        std::thread::sleep(Duration::from_millis(300));
    }
    for job in &jobs {
        assert_slurm_holds_nothing_of(job);
    }
}
