//! Two `rl setup --env NAME` at once (the CLI twice, say): one builds the environment's own
//! venv and writes its record, the other waits for it, saying so, then finds it installed.
//! The installer is uv (verifiers' pin brings it) behind a watch that logs each of its runs
//! and catches two at once.

use std::fs::File;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{rl_command, workspace_root};

const NAME: &str = "digit-sum";

/// rl's installer, watched: every `uv venv` and `uv pip` is logged (`calls`), and one that
/// starts while another runs is logged again (`overlaps`) — two installers in one venv.
const WATCHED_UV: &str = r#"#!/bin/sh
case "$1" in
venv|pip)
    echo "$*" >> "$RL_TEST_WATCH/calls"
    if ! mkdir "$RL_TEST_WATCH/busy" 2>/dev/null; then
        echo "$*" >> "$RL_TEST_WATCH/overlaps"
        exec "$RL_TEST_REAL_UV" "$@"
    fi
    status=0
    "$RL_TEST_REAL_UV" "$@" || status=$?
    rmdir "$RL_TEST_WATCH/busy"
    exit "$status"
    ;;
esac
exec "$RL_TEST_REAL_UV" "$@"
"#;

const WAITING: &str = "waiting for another install of digit-sum";

#[test]
#[ignore = "needs the test venvs (verifiers v1's uv) and the package registry or uv's cache: `cargo xtask test` runs it"]
fn two_installs_of_one_environment_at_once_make_one_venv_and_one_record() {
    let python = crate::test_python();
    let real_uv = rl_test_support::verifiers_pythons()
        .v1
        .parent()
        .unwrap()
        .join("uv");
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "python = \"{}\"\nenvironments_dir = \"{}\"\n",
            python.display(),
            workspace_root().join("fixtures/verifiers").display()
        ),
    )
    .unwrap();
    let watch = tempfile::tempdir().unwrap();
    let bin = watch.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::fs::write(bin.join("uv"), WATCHED_UV).unwrap();
    std::fs::set_permissions(
        bin.join("uv"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let path = std::env::join_paths(std::iter::once(bin).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap();

    // Held here first, so that both calls meet it and say they wait; which of them gets it
    // when it is let go is theirs to settle.
    let records = home.path().join("venvs/environments");
    std::fs::create_dir_all(&records).unwrap();
    let held = rl_settings::lock_exclusive(&records.join(format!("{NAME}.lock"))).unwrap();
    let mut calls: Vec<Call> = (0..2)
        .map(|n| {
            let out = watch.path().join(format!("out-{n}"));
            let err = watch.path().join(format!("err-{n}"));
            let child = rl_command(home.path())
                .args(["setup", "--env", NAME, "--json"])
                .env("PATH", &path)
                .env("RL_TEST_WATCH", watch.path())
                .env("RL_TEST_REAL_UV", &real_uv)
                .env("UV_PYTHON_DOWNLOADS", "never")
                .stdin(Stdio::null())
                .stdout(File::create(&out).unwrap())
                .stderr(File::create(&err).unwrap())
                .spawn()
                .unwrap();
            Call { child, out, err }
        })
        .collect();
    let started = Instant::now();
    while !calls.iter().all(|call| call.stderr().contains(WAITING))
        && calls
            .iter_mut()
            .all(|call| call.child.try_wait().unwrap().is_none())
        && started.elapsed() < Duration::from_secs(120)
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    for call in &calls {
        assert!(
            call.stderr().contains(WAITING),
            "a call did not wait for the install under way: {}",
            call.stderr()
        );
    }
    drop(held);

    let answers: Vec<serde_json::Value> = calls
        .iter_mut()
        .map(|call| call.finish(Duration::from_secs(900)))
        .collect();
    let venv = records.join(NAME);
    let own_python = venv.join("bin/python");
    for answer in &answers {
        assert_eq!(
            answer["environment"]["python"],
            own_python.display().to_string(),
            "{answer:#}"
        );
    }
    let found_done = calls
        .iter()
        .filter(|call| call.stderr().contains("holds what it needs, nothing to do"))
        .count();
    assert_eq!(
        found_done,
        1,
        "{}\n---\n{}",
        calls[0].stderr(),
        calls[1].stderr()
    );

    let watched = |name: &str| std::fs::read_to_string(watch.path().join(name)).ok();
    assert_eq!(watched("overlaps"), None, "two installers ran at once");
    let installs = watched("calls").unwrap_or_default();
    assert_eq!(
        installs
            .lines()
            .filter(|line| line.starts_with("venv "))
            .count(),
        1,
        "{installs}"
    );
    let record = std::fs::read_to_string(records.join(format!("{NAME}.txt"))).unwrap();
    assert!(
        record.starts_with(&format!("# What `rl setup --env {NAME}` installed"))
            && record.contains("fixtures/verifiers/digit-sum\n"),
        "{record}"
    );
    // Written whole, through files renamed over it: none left behind.
    let mut left: Vec<String> = std::fs::read_dir(&records)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, [NAME, "digit-sum.lock", "digit-sum.txt"]);
    let imports = Command::new(&own_python)
        .args(["-c", "import digit_sum, verifiers"])
        .output()
        .unwrap();
    assert!(imports.status.success(), "{imports:?}");
}

/// One `rl setup` under way, its output in files (read while it runs).
struct Call {
    child: Child,
    out: std::path::PathBuf,
    err: std::path::PathBuf,
}

impl Call {
    fn stderr(&self) -> String {
        read(&self.err)
    }

    /// Its JSON answer once it succeeded; killed and failed if it runs past `limit`.
    fn finish(&mut self, limit: Duration) -> serde_json::Value {
        let started = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > limit {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("rl setup ran past {limit:?}: {}", self.stderr());
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        assert!(status.success(), "{status}: {}", self.stderr());
        serde_json::from_str(&read(&self.out))
            .unwrap_or_else(|error| panic!("{error}: {}", read(&self.out)))
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}
