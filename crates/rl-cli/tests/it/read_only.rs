//! A state directory the caller may only read: an operator's, shared with others on the machine.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rl_process::{ProcessIdentity, RunStore};
use rl_settings::RunId;
use serde_json::Value;

use crate::pages::{RUN, run_home};
use crate::rl_command;

/// An unprivileged user: `nobody`.
const NOBODY: &str = "65534";

/// Every file under `dir` with its bytes and mode: what a reader must leave as it was.
fn tree(dir: &Path) -> BTreeMap<PathBuf, (Vec<u8>, u32)> {
    let mut files = BTreeMap::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(next) = pending.pop() {
        for entry in std::fs::read_dir(&next).unwrap() {
            let path = entry.unwrap().path();
            let metadata = std::fs::symlink_metadata(&path).unwrap();
            if metadata.is_dir() {
                pending.push(path.clone());
            }
            let bytes = if metadata.is_file() {
                std::fs::read(&path).unwrap()
            } else {
                Vec::new()
            };
            files.insert(path, (bytes, metadata.permissions().mode()));
        }
    }
    files
}

/// Makes `dir` and everything under it readable and not writable by anyone.
fn read_only(dir: &Path) {
    let mut pending = vec![dir.to_owned()];
    while let Some(next) = pending.pop() {
        let metadata = std::fs::symlink_metadata(&next).unwrap();
        let mode = if metadata.is_dir() {
            for entry in std::fs::read_dir(&next).unwrap() {
                pending.push(entry.unwrap().path());
            }
            0o555
        } else {
            0o444
        };
        std::fs::set_permissions(&next, std::fs::Permissions::from_mode(mode)).unwrap();
    }
}

/// `rl ARGS` on `home` without write access to it: as `nobody` when this test runs as root
/// (whom permissions do not stop), else as this user.
fn rl_reading(home: &Path, args: &[&str]) -> Output {
    let command = rl_command(home);
    let mut reader = if nix::unistd::geteuid().is_root() {
        let mut wrapped = Command::new("setpriv");
        wrapped
            .args([
                &format!("--reuid={NOBODY}"),
                &format!("--regid={NOBODY}"),
                "--clear-groups",
            ])
            .arg(command.get_program())
            .args(args);
        for (name, value) in command.get_envs() {
            match value {
                Some(value) => wrapped.env(name, value),
                None => wrapped.env_remove(name),
            };
        }
        if let Some(dir) = command.get_current_dir() {
            wrapped.current_dir(dir);
        }
        wrapped
    } else {
        let mut command = command;
        command.args(args);
        command
    };
    reader.output().unwrap()
}

/// Issue 30 #10: with a read-only `RL_HOME` not even `rl runs list` answered. Now the runs
/// are listed and shown, a run whose supervisor is gone shown lost (as a writer would record
/// it), a change refused saying why, and nothing under the folder written.
#[test]
fn a_read_only_state_directory_lists_and_shows_runs_and_writes_nothing() {
    let home = run_home(true);
    // The run's supervisor: a process now gone.
    let mut gone = Command::new("sleep").arg("60").spawn().unwrap();
    let identity = ProcessIdentity::of(gone.id()).unwrap();
    gone.kill().unwrap();
    gone.wait().unwrap();
    RunStore::open(home.path())
        .unwrap()
        .set_supervisor(&RunId::parse(RUN).unwrap(), identity)
        .unwrap();
    // The temporary folder's parent is the owner's alone; the home itself is shared.
    let shared = tempfile::tempdir().unwrap();
    std::fs::set_permissions(shared.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let home_path = shared.path().join("home");
    std::fs::rename(home.path(), &home_path).unwrap();
    read_only(&home_path);
    let before = tree(&home_path);

    let listed = rl_reading(&home_path, &["runs", "list", "--json"]);
    assert!(listed.status.success(), "{listed:?}");
    let runs: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let run = &runs["runs"][0];
    assert_eq!(run["run_id"], RUN, "{runs:#}");
    assert_eq!(run["status"], "lost", "{runs:#}");

    let shown = rl_reading(&home_path, &["runs", "status", RUN, "--json"]);
    assert!(shown.status.success(), "{shown:?}");
    let status: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(status["status"], "lost", "{status:#}");
    assert!(
        status["error"]
            .as_str()
            .is_some_and(|error| error.contains("supervisor")),
        "{status:#}"
    );

    for args in [
        ["runs", "results", RUN, "--json"],
        ["checkpoints", "list", RUN, "--json"],
        ["runs", "logs", RUN, "--json"],
    ] {
        let read = rl_reading(&home_path, &args);
        assert!(read.status.success(), "rl {args:?}: {read:?}");
    }

    let stopped = rl_reading(&home_path, &["runs", "stop", RUN]);
    assert!(!stopped.status.success(), "{stopped:?}");
    let said = String::from_utf8_lossy(&stopped.stderr);
    assert!(said.contains("read-only for this user"), "{said}");

    assert_eq!(
        tree(&home_path),
        before,
        "a reader wrote in the state directory"
    );
    // Given back to its owner (root or not) so the folder can be removed.
    std::fs::set_permissions(&home_path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let _ = std::process::Command::new("chmod")
        .args(["-R", "u+w"])
        .arg(&home_path)
        .status();
}
