//! Components that do what a hostile or careless program does: start a process in a session of
//! its own (outside the group a stop ends), print the key they were given; and a supervisor
//! killed under its run. Nothing of the run outlives it, and no key reaches a file.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::runs::{
    FAKE_TINKER_KEY, SLOW_STEPS, Stack, assert_nothing_left, component, pid_of, run_processes,
};
use crate::test_python;

/// The fixture trainer, after it has started a process with `marker` in its arguments in a
/// session of its own (`setsid`): a daemon, as far as process groups go.
fn trainer_leaving(marker: &str) -> (&'static str, String) {
    (
        r#"trainer = ["{python}", "launch_training.py""#,
        format!(
            r#"trainer = ["sh", "-c", "setsid {{python}} -c 'import time; time.sleep(600)' {marker} & exec \"$0\" \"$@\"", "{{python}}", "launch_training.py""#
        ),
    )
}

/// A marker no other test's processes carry.
fn marker(case: &str) -> String {
    format!("rl-stray-{}-{case}", std::process::id())
}

/// The pid of the process carrying `marker`, once it has started. Not the trainer's shell,
/// whose script names the marker too until it execs the trainer.
fn stray_pid(stack: &Stack, id: &str, marker: &str) -> u32 {
    let started = Instant::now();
    loop {
        let stray = rl_test_support::processes_mentioning(marker)
            .into_iter()
            .find(|(_, line)| !line.contains("launch_training.py"));
        if let Some((pid, _)) = stray {
            return pid;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the trainer never started its daemon: {}",
            stack.explain(id)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn messages_of(status: &Value, kind: &str) -> Vec<String> {
    status["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == kind)
        .map(|e| e["message"].as_str().unwrap().to_owned())
        .collect()
}

fn assert_no_process_with(marker: &str, stack: &Stack, id: &str) {
    let left = rl_test_support::processes_mentioning(marker);
    assert!(left.is_empty(), "{left:?} survived: {}", stack.explain(id));
}

/// Whether the run is stopped, completes, or fails as its trainer is killed, the process the
/// trainer started in a session of its own ends with it, and the run's events name it.
#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn a_process_a_component_started_in_its_own_session_ends_with_the_run() {
    let python = test_python();
    for ending in ["stop", "completion", "crash"] {
        let marker = marker(ending);
        let trainer = trainer_leaving(&marker);
        let mut edits = vec![(trainer.0, trainer.1.as_str())];
        if ending != "completion" {
            edits.push(SLOW_STEPS);
        }
        let stack = Stack::new(&python, &edits);
        let id = stack.start();
        let stray = stray_pid(&stack, &id, &marker);
        let (end, expected) = match ending {
            "stop" => {
                stack.wait(&id, "running", 120);
                (stack.json(&["runs", "stop", &id])["run"].clone(), "stopped")
            }
            "completion" => (stack.wait(&id, "finished", 180), "completed"),
            _ => {
                let running = stack.wait(&id, "running", 120);
                let trainer = pid_of(&running, "trainer").unwrap();
                nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(i32::try_from(trainer).unwrap()),
                    nix::sys::signal::Signal::SIGKILL,
                )
                .unwrap();
                (stack.wait(&id, "finished", 60), "failed")
            }
        };
        assert_eq!(end["state"], expected, "{ending}: {}", stack.explain(&id));
        assert_nothing_left(&stack, &id);
        assert_no_process_with(&marker, &stack, &id);
        let status = stack.json(&["runs", "status", &id]);
        let strays = messages_of(&status, "strays");
        assert!(
            strays
                .iter()
                .any(|m| m.contains(&format!("{stray} (python"))),
            "{ending}: the run's events do not name process {stray}: {strays:?}"
        );
    }
}

/// The supervisor is SIGKILLed under a running run: the run reads `lost`, and a stop ends what
/// is left (the components, and what they started in sessions of their own), after which no
/// component is said to be running.
#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn a_lost_run_stopped_leaves_no_process_and_no_component_said_to_run() {
    let python = test_python();
    let marker = marker("lost");
    let trainer = trainer_leaving(&marker);
    let stack = Stack::new(&python, &[(trainer.0, trainer.1.as_str()), SLOW_STEPS]);
    let (id, running) = stack.start_running();
    let stray = stray_pid(&stack, &id, &marker);
    let supervisor = i32::try_from(running["supervisor"]["pid"].as_u64().unwrap()).unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(supervisor),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let lost = stack.wait(&id, "finished", 10);
    assert_eq!(lost["state"], "lost", "{}", stack.explain(&id));

    let report = stack.json(&["runs", "stop", &id]);
    assert_eq!(report["stopped"], true, "{report:#}");
    let message = report["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("{stray} (python")),
        "the stop does not name the process left outside the groups: {message}"
    );
    for status in [&report["run"], &stack.json(&["runs", "status", &id])] {
        assert_eq!(status["state"], "lost");
        for name in ["api", "trainer", "env"] {
            assert_eq!(
                component(status, name)["status"],
                "lost",
                "{name}: {}",
                stack.explain(&id)
            );
        }
    }
    let listed = stack.json(&["runs", "list"]);
    assert_eq!(listed["runs"][0]["status"], "lost");
    assert!(run_processes(&report["run"]).is_empty());
    assert_nothing_left(&stack, &id);
    assert_no_process_with(&marker, &stack, &id);
}

/// A trainer prints the key it was given, whole and split over two writes a second apart: the
/// log on disk holds neither, and a reader without the key in its environment sees it
/// redacted.
#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn a_key_a_component_prints_is_redacted_before_it_reaches_its_log() {
    let python = test_python();
    let printing = r#"trainer = ["sh", "-c", "printf 'key=%s\\n' \"$TINKER_API_KEY\"; printf 'split=%s' \"$(printf %s \"$TINKER_API_KEY\" | cut -c1-12)\"; sleep 1; printf '%s\\n' \"$(printf %s \"$TINKER_API_KEY\" | cut -c13-)\"; exec \"$0\" \"$@\"", "{python}", "launch_training.py""#;
    let mut stack = Stack::new(
        &python,
        &[
            (
                "trainer_needs_tinker_key = false",
                "trainer_needs_tinker_key = true",
            ),
            (r#"trainer = ["{python}", "launch_training.py""#, printing),
        ],
    );
    stack.tinker_key = Some(FAKE_TINKER_KEY);
    let id = stack.start();
    let finished = stack.wait(&id, "finished", 180);
    assert_eq!(finished["state"], "completed", "{}", stack.explain(&id));

    let log = std::fs::read_to_string(stack.run_dir(&id).join("trainer.log")).unwrap();
    assert!(!log.contains(FAKE_TINKER_KEY), "the key is in trainer.log");
    for printed in ["key=", "split="] {
        assert!(
            log.contains(&format!("{printed}[REDACTED TINKER_API_KEY]\n")),
            "{printed}: {log}"
        );
    }
    for entry in std::fs::read_dir(stack.run_dir(&id)).unwrap() {
        let path = entry.unwrap().path();
        let content = std::fs::read(&path).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&content).contains(FAKE_TINKER_KEY),
            "key written to {}",
            path.display()
        );
    }
    let database = std::fs::read(stack.home.path().join("runs.db")).unwrap();
    assert!(!String::from_utf8_lossy(&database).contains(FAKE_TINKER_KEY));

    // Read by a process that does not know the key.
    let read = crate::rl_in(
        stack.home.path(),
        &["runs", "logs", &id, "--component", "trainer", "--json"],
    );
    let shown = String::from_utf8_lossy(&read.stdout);
    assert!(read.status.success(), "{read:?}");
    assert!(!shown.contains(FAKE_TINKER_KEY), "{shown}");
    assert!(shown.contains("split=[REDACTED TINKER_API_KEY]"), "{shown}");
}
