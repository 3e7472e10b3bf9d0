use std::process::{Child, Command};
use std::time::Duration;

use rl_process::{RUN_DIR_VARIABLE, carrying_dir, carrying_run_dir, descendants_of, end_strays};

/// `script` in a session of its own, with `run_dir` as its run's folder in its environment.
fn in_own_session(script: &str, run_dir: &std::path::Path) -> Child {
    Command::new("setsid")
        .args(["sh", "-c", script])
        .env(RUN_DIR_VARIABLE, run_dir)
        .spawn()
        .unwrap()
}

fn wait_for(what: &str, mut found: impl FnMut() -> bool) {
    for _ in 0..400 {
        if found() {
            return;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("never: {what}");
}

/// A run's processes outside its groups are found by its folder in their environment, and end
/// even when they ignore SIGTERM; another run's are left alone.
#[test]
fn processes_carrying_a_run_folder_are_ended_and_no_other() {
    let ours = tempfile::tempdir().unwrap();
    let theirs = tempfile::tempdir().unwrap();
    let mut deaf = in_own_session("trap '' TERM; sleep 300; :", ours.path());
    let mut other = in_own_session("sleep 300; :", theirs.path());
    wait_for("the shell and its sleep", || {
        carrying_run_dir(ours.path()).len() == 2
    });
    let outcome = end_strays(|| carrying_run_dir(ours.path()), Duration::from_millis(300));
    assert!(!outcome.graceful, "{outcome:?}");
    assert!(outcome.survivors.is_empty(), "{outcome:?}");
    let mut names: Vec<&str> = outcome.ended.iter().map(|s| s.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["sh", "sleep"]);
    assert!(carrying_run_dir(ours.path()).is_empty());
    deaf.wait().unwrap();
    assert_eq!(carrying_run_dir(theirs.path()).len(), 2, "another run's");
    let outcome = end_strays(|| carrying_run_dir(theirs.path()), Duration::from_secs(5));
    assert!(outcome.graceful, "{outcome:?}");
    other.wait().unwrap();
}

/// What a process started is below it, sessions of their own included.
#[test]
fn descendants_include_processes_in_sessions_of_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let mut parent = Command::new("sh")
        .args(["-c", "setsid sleep 300 & sleep 300; :"])
        .env(RUN_DIR_VARIABLE, dir.path())
        .spawn()
        .unwrap();
    let below = || {
        descendants_of(parent.id())
            .into_iter()
            .map(|stray| stray.identity.pid)
            .collect::<Vec<_>>()
    };
    wait_for("two sleeps", || below().len() == 2);
    let mine = descendants_of(std::process::id());
    assert!(
        mine.iter().any(|stray| stray.identity.pid == parent.id()),
        "{mine:?}"
    );
    assert!(
        below()
            .iter()
            .all(|pid| mine.iter().any(|s| s.identity.pid == *pid))
    );
    let outcome = end_strays(|| carrying_run_dir(dir.path()), Duration::from_secs(5));
    assert_eq!(outcome.ended.len(), 3, "{outcome:?}");
    parent.wait().unwrap();
}

/// A folder's processes narrowed by another mark: one model of a test, not the others.
#[test]
fn processes_carrying_a_folder_and_a_mark_are_found_and_no_other() {
    let dir = tempfile::tempdir().unwrap();
    let mut started = Vec::new();
    for model in ["01-a", "02-b"] {
        started.push(
            Command::new("setsid")
                .args(["sleep", "300"])
                .env("RL_MARKED_DIR", dir.path())
                .env("RL_MARKED_MODEL", model)
                .spawn()
                .unwrap(),
        );
    }
    let of = |model: &'static str| {
        let dir = dir.path().to_owned();
        move || carrying_dir("RL_MARKED_DIR", &dir, &[("RL_MARKED_MODEL", model)])
    };
    wait_for("both sleeps", || {
        of("01-a")().len() == 1 && of("02-b")().len() == 1
    });
    assert!(of("01")().is_empty(), "a value is matched whole");
    let outcome = end_strays(of("01-a"), Duration::from_secs(5));
    assert_eq!(outcome.ended.len(), 1, "{outcome:?}");
    assert_eq!(of("02-b")().len(), 1, "another model's");
    assert_eq!(carrying_dir("RL_MARKED_DIR", dir.path(), &[]).len(), 1);
    end_strays(of("02-b"), Duration::from_secs(5));
    for mut child in started {
        child.wait().unwrap();
    }
}
