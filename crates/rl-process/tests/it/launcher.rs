use std::time::Duration;

use std::os::unix::process::CommandExt;

use rl_process::{
    Component, ComponentStatus, LaunchSpec, Launcher, LocalLauncher, ProcessIdentity,
    members_of_group, stop_group,
};

fn spec(dir: &std::path::Path, script: &str) -> LaunchSpec {
    LaunchSpec {
        component: Component::Trainer,
        program: "sh".into(),
        args: vec!["-c".into(), script.into()],
        cwd: dir.to_owned(),
        env: vec![("RL_TEST_SECRET".into(), "s3cr3t-value".into())],
        env_remove: vec!["HOME_SHOULD_GO".into()],
        log_path: dir.join("trainer.log"),
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn output_goes_to_the_log_and_the_exit_code_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    runtime().block_on(async {
        let mut running = LocalLauncher::default()
            .launch(&spec(
                dir.path(),
                "echo out; echo err >&2; echo \"$RL_TEST_SECRET\" > secret.txt; exit 3",
            ))
            .await
            .unwrap();
        assert_eq!(running.wait().await, ComponentStatus::Exited { code: 3 });
    });
    let log = std::fs::read_to_string(dir.path().join("trainer.log")).unwrap();
    assert_eq!(log, "out\nerr\n");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("secret.txt")).unwrap(),
        "s3cr3t-value\n"
    );
}

#[test]
fn secrets_are_in_the_environment_not_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    runtime().block_on(async {
        let running = LocalLauncher::default()
            .launch(&spec(dir.path(), "exec sleep 30"))
            .await
            .unwrap();
        let pid = running.identity().pid;
        // Read once the shell has become `sleep`, not in the middle of its exec.
        let mut cmdline = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while std::time::Instant::now() < deadline {
            cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            if cmdline.starts_with(b"sleep") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(cmdline.starts_with(b"sleep"), "{cmdline:?}");
        assert!(!String::from_utf8_lossy(&cmdline).contains("s3cr3t"));
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
        assert!(String::from_utf8_lossy(&environ).contains("RL_TEST_SECRET=s3cr3t-value"));
        stop_group(running.identity().pid, Duration::from_secs(2));
    });
}

#[test]
fn a_stopped_component_reports_its_signal_and_leaves_no_process() {
    let dir = tempfile::tempdir().unwrap();
    runtime().block_on(async {
        let mut running = LocalLauncher::default()
            .launch(&spec(dir.path(), "sleep 60 & sleep 60"))
            .await
            .unwrap();
        let group = running.identity().pid;
        for _ in 0..200 {
            if members_of_group(group as i32).len() >= 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let stopper =
            tokio::task::spawn_blocking(move || stop_group(group, Duration::from_secs(5)));
        assert_eq!(
            running.wait().await,
            ComponentStatus::Signalled { signal: 15 }
        );
        let outcome = stopper.await.unwrap();
        assert!(outcome.survivors.is_empty(), "{outcome:?}");
        assert!(members_of_group(group as i32).is_empty());
    });
}

#[test]
fn a_missing_program_is_a_clear_launch_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut missing = spec(dir.path(), "");
    missing.program = dir.path().join("no-such-trainer");
    let error = runtime()
        .block_on(LocalLauncher::default().launch(&missing))
        .err()
        .unwrap();
    assert!(
        error.to_string().starts_with("cannot start trainer:"),
        "{error}"
    );
}

#[test]
fn keys_are_redacted_on_their_way_to_the_log_even_split_over_two_writes() {
    let dir = tempfile::tempdir().unwrap();
    let key = "sk-launcher-0123456789";
    let environment = [("OPENAI_API_KEY".to_owned(), key.to_owned())].into();
    let secrets = rl_settings::Secrets::load(dir.path(), &environment);
    let mut printing = spec(
        dir.path(),
        "printf 'whole=%s\\n' \"$OPENAI_API_KEY\"; printf 'split=sk-laun'; sleep 0.3; \
         printf 'cher-0123456789\\n' >&2; printf '\\377 binary\\n'",
    );
    printing.env.push(("OPENAI_API_KEY".into(), key.into()));
    runtime().block_on(async {
        let mut running = LocalLauncher::new(secrets).launch(&printing).await.unwrap();
        assert_eq!(running.wait().await, ComponentStatus::Exited { code: 0 });
    });
    let log = std::fs::read(dir.path().join("trainer.log")).unwrap();
    assert_eq!(
        log,
        b"whole=[REDACTED OPENAI_API_KEY]\nsplit=[REDACTED OPENAI_API_KEY]\n\xff binary\n"
    );
}

/// A component whose leader was reaped long ago may have left its group's id to another group,
/// led by a new process with the same pid. The launcher stops a group by its leader's identity:
/// that other group gets no signal.
#[test]
fn a_group_whose_id_is_anothers_now_gets_no_signal() {
    let mut other = std::process::Command::new("sleep")
        .arg("60")
        .process_group(0)
        .spawn()
        .unwrap();
    let now = ProcessIdentity::of(other.id()).unwrap();
    let ended_long_ago = ProcessIdentity {
        start_ticks: now.start_ticks.wrapping_sub(1),
        ..now
    };
    let outcome = runtime()
        .block_on(LocalLauncher::default().stop_group(ended_long_ago, Duration::from_millis(300)));
    let untouched = other.try_wait().unwrap().is_none();
    let _ = other.kill();
    let _ = other.wait();
    assert!(untouched, "another's group was signalled: {outcome:?}");
    assert!(outcome.was_empty, "{outcome:?}");
}
