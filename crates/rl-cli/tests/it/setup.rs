//! A user's first hour, as the README tells it, in a fresh HOME with no `RL_*` variable: `rl`
//! in a root of its own (the README's `cargo install` is run by `.ci/run`), `rl setup --engine local` from the
//! package registry with the uv it installs for itself (pip's and uv's caches are the runner's,
//! so only the first run downloads), a new
//! environment written, selected and trained to `completed` on the local engine, its results
//! read; then an older tinker SDK installed behind rl's back, named by `rl setup --check` and
//! `rl doctor`, and put back by `rl setup`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use rl_test_support::workspace_root;
use serde_json::Value;

struct User {
    home: PathBuf,
    bin: PathBuf,
    path: String,
    /// The runner's own `~/.cache`, whose `pip` and `uv` folders the user's installs share.
    caches: Option<PathBuf>,
}

impl User {
    /// A command as this user runs it: their HOME, their PATH (the installed `rl` first),
    /// none of the test runner's `RL_*` or XDG variables.
    fn command(&self, program: &Path) -> Command {
        let mut command = Command::new(program);
        for (name, _) in std::env::vars_os() {
            let name = name.to_string_lossy().into_owned();
            if name.starts_with("RL_") || name.starts_with("XDG_") {
                command.env_remove(name);
            }
        }
        command
            .env("HOME", &self.home)
            .env("PATH", &self.path)
            .env("NO_COLOR", "1")
            .current_dir(&self.home)
            .stdin(Stdio::null());
        if let Some(caches) = &self.caches {
            command
                .env("PIP_CACHE_DIR", caches.join("pip"))
                .env("UV_CACHE_DIR", caches.join("uv"));
        }
        command
    }

    fn rl(&self, args: &[&str], limit: Duration) -> Output {
        let mut command = self.command(&self.bin.join("rl"));
        command.args(args);
        bounded(command, limit)
    }

    fn state(&self) -> PathBuf {
        self.home.join(".local/state/rl")
    }
}

/// Runs `command` to its end, killed (with its process group) past `limit`.
fn bounded(mut command: Command, limit: Duration) -> Output {
    use std::os::unix::process::CommandExt as _;
    let description = format!("{command:?}");
    let child = command
        .process_group(0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("{description}: {error}"));
    let group = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    let deadline = Instant::now() + limit;
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(child.wait_with_output());
    });
    loop {
        match receiver.recv_timeout(Duration::from_secs(1)) {
            Ok(output) => return output.unwrap(),
            Err(_) if Instant::now() < deadline => {}
            Err(_) => {
                let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
                panic!("{description} took more than {limit:?}");
            }
        }
    }
}

fn text(output: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn json(output: &Output) -> serde_json::Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|_| panic!("no JSON: {}", text(output)))
}

#[test]
#[ignore = "needs cargo, python3, the package registry and the tiny model: `cargo xtask test` runs it"]
fn a_new_user_installs_sets_up_trains_and_repairs() {
    let tiny_model = rl_test_support::local_engine().base_model;
    let user_dir = tempfile::tempdir().unwrap();
    let home = user_dir.path().join("home");
    let prefix = user_dir.path().join("prefix");
    std::fs::create_dir_all(&home).unwrap();
    let runner_home = std::env::var_os("HOME").map(PathBuf::from);
    let user = User {
        bin: prefix.join("bin"),
        path: format!(
            "{}:{}",
            prefix.join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        ),
        caches: runner_home.map(|runner| runner.join(".cache")),
        home,
    };

    // 1. Installed: the binary this test suite built, copied into the user's own root, since a
    //    second build of the workspace inside a test takes longer than the rest of the suite
    //    on a busy 2-core machine. `.ci/run` runs the README's `cargo install` itself.
    std::fs::create_dir_all(&user.bin).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_rl"), user.bin.join("rl")).unwrap();
    let version = user.rl(&["--version"], Duration::from_secs(30));
    assert!(
        String::from_utf8_lossy(&version.stdout)
            .starts_with(&format!("rl {}", env!("CARGO_PKG_VERSION"))),
        "{}",
        text(&version)
    );

    // 2. Set up: the operator's own line is kept.
    std::fs::create_dir_all(user.state()).unwrap();
    std::fs::write(
        user.state().join("config.toml"),
        "# mine\nmax_active_runs = 2\n",
    )
    .unwrap();
    let envs = user.home.join("envs");
    std::fs::create_dir_all(&envs).unwrap();
    let made = user.rl(
        &[
            "--envs-dir",
            envs.to_str().unwrap(),
            "setup",
            "--engine",
            "local",
            "--base-model",
            tiny_model.to_str().unwrap(),
        ],
        Duration::from_secs(1500),
    );
    assert!(made.status.success(), "{}", text(&made));
    // uv is not on this user's PATH (unless the runner's has one): rl installs its own.
    assert!(
        String::from_utf8_lossy(&made.stdout).contains("(with uv)"),
        "{}",
        text(&made)
    );
    let config = std::fs::read_to_string(user.state().join("config.toml")).unwrap();
    assert!(
        config.starts_with("# mine\nmax_active_runs = 2\n"),
        "{config}"
    );
    for managed in ["venvs/trainer/bin/python", "venvs/engine/bin/python"] {
        let python = user.state().join(managed);
        assert!(
            config.contains(&format!("\"{}\"", python.display())),
            "{config}"
        );
    }
    assert!(config.contains("kind = \"local\""), "{config}");
    let checked = user.rl(&["setup", "--check"], Duration::from_secs(120));
    assert_eq!(checked.status.code(), Some(0), "{}", text(&checked));
    // The one thing missing now is an environment, and doctor says how to write one.
    let doctor = user.rl(&["doctor", "--json"], Duration::from_secs(120));
    assert_eq!(doctor.status.code(), Some(1), "{}", text(&doctor));
    let failed: Vec<Value> = json(&doctor)["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|check| check["ok"] == false && check["required"] == true)
        .cloned()
        .collect();
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert_eq!(failed[0]["name"], "environments");
    assert!(failed[0]["fix"].as_str().unwrap().contains("rl envs new"));

    // What a user edits next for a first run on a CPU: a few short steps of a small model.
    let mut config = config;
    config.push_str(
        "\n# A first run: short, on this CPU, with no hub.\n\
         [locked.env]\ntotal_steps = 3\nmax_token_length = 128\n\n\
         [locked.tinker]\nlora_rank = 8\nsave_every = 2\n\n\
         [child_environment]\nJAX_PLATFORMS = \"cpu\"\nHF_HUB_OFFLINE = \"1\"\n\
         TRANSFORMERS_OFFLINE = \"1\"\n\n\
         [run]\nengine_ready_timeout_secs = 180\ntrainer_ready_timeout_secs = 300\n\
         env_settle_secs = 120\n",
    );
    std::fs::write(user.state().join("config.toml"), config).unwrap();

    // 3. An environment of one's own, selected and trained.
    let created = user.rl(
        &["envs", "new", "my_env", "--json"],
        Duration::from_secs(60),
    );
    assert!(created.status.success(), "{}", text(&created));
    assert!(envs.join("my_env.py").is_file());
    let doctor = user.rl(&["doctor", "--json"], Duration::from_secs(120));
    assert_eq!(doctor.status.code(), Some(0), "{}", text(&doctor));
    let selected = user.rl(&["select", "my_env"], Duration::from_secs(60));
    assert!(selected.status.success(), "{}", text(&selected));
    let started = user.rl(
        &[
            "runs",
            "start",
            "--wait",
            "finished",
            "--timeout",
            "1200",
            "--json",
        ],
        Duration::from_secs(1300),
    );
    let logs = || {
        let runs = user.state().join("runs");
        std::fs::read_dir(&runs)
            .into_iter()
            .flatten()
            .flatten()
            .flat_map(|run| {
                std::fs::read_dir(run.path())
                    .into_iter()
                    .flatten()
                    .flatten()
            })
            .filter(|file| file.path().extension().is_some_and(|e| e == "log"))
            .map(|file| {
                let body = std::fs::read_to_string(file.path()).unwrap_or_default();
                let tail: String = body
                    .lines()
                    .rev()
                    .take(30)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect::<Vec<_>>()
                    .join("\n");
                format!("== {}\n{tail}", file.path().display())
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(
        started.status.code(),
        Some(0),
        "{}\n{}",
        text(&started),
        logs()
    );
    let run_id = json(&started)["run_id"].as_str().unwrap().to_owned();
    let status = user.rl(
        &["runs", "status", &run_id, "--json"],
        Duration::from_secs(60),
    );
    let status = json(&status);
    assert_eq!(status["status"], "completed", "{status:#}");
    let results = user.rl(
        &["runs", "results", &run_id, "--json"],
        Duration::from_secs(60),
    );
    assert!(results.status.success(), "{}", text(&results));
    let results = json(&results);
    assert!(
        results["checkpoints"]
            .as_array()
            .is_some_and(|saved| !saved.is_empty()),
        "{results:#}"
    );
    assert!(
        results["final_weights"]
            .as_str()
            .is_some_and(|weights| weights.starts_with("tinker://")),
        "{results:#}"
    );

    // 4. Broken behind rl's back: an older tinker SDK (one the hosted service refuses), named
    //    by --check (text and JSON) and by doctor (which points at `rl setup`), put back by
    //    `rl setup`.
    let python = user.state().join("venvs/trainer/bin/python");
    let mut downgrade = user.command(&python);
    downgrade.args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--no-deps",
        "tinker==0.16.1",
    ]);
    let downgraded = bounded(downgrade, Duration::from_secs(300));
    assert!(downgraded.status.success(), "{}", text(&downgraded));
    let built_for = rl_python::SDK.version;
    let checked = user.rl(&["setup", "--check"], Duration::from_secs(120));
    assert_eq!(checked.status.code(), Some(1), "{}", text(&checked));
    let said = String::from_utf8_lossy(&checked.stdout);
    assert!(
        said.contains(&format!("tinker=={built_for} (found 0.16.1)")),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "trainer: tinker SDK 0.16.1 installed, rl was built for {built_for}"
        )),
        "{said}"
    );
    assert!(said.contains("fix: rl setup --engine local"), "{said}");
    let checked = user.rl(&["setup", "--check", "--json"], Duration::from_secs(120));
    assert_eq!(checked.status.code(), Some(1), "{}", text(&checked));
    let answer = json(&checked);
    assert_eq!(answer["ready"], false, "{answer:#}");
    assert_eq!(answer["fix"], "rl setup --engine local", "{answer:#}");
    assert_eq!(answer["parts"][0]["part"], "trainer", "{answer:#}");
    assert_eq!(
        answer["parts"][0]["tinker_sdk"]["installed"], "0.16.1",
        "{answer:#}"
    );
    assert_eq!(
        answer["parts"][0]["tinker_sdk"]["built_for"], built_for,
        "{answer:#}"
    );
    let doctor = user.rl(&["doctor", "--json"], Duration::from_secs(120));
    assert_eq!(doctor.status.code(), Some(1), "{}", text(&doctor));
    let report = json(&doctor);
    let sdk = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|check| check["name"] == "tinker SDK")
        .unwrap();
    assert_eq!(sdk["ok"], false, "{sdk}");
    assert!(
        sdk["detail"].as_str().unwrap().contains("0.16.1 installed"),
        "{sdk}"
    );
    assert!(
        sdk["fix"].as_str().unwrap().starts_with("rl setup"),
        "{sdk}"
    );
    let again = user.rl(&["setup"], Duration::from_secs(1500));
    assert!(again.status.success(), "{}", text(&again));
    let checked = user.rl(&["setup", "--check"], Duration::from_secs(120));
    assert_eq!(checked.status.code(), Some(0), "{}", text(&checked));
    assert!(
        String::from_utf8_lossy(&checked.stdout).contains(&format!(
            "trainer: tinker SDK {built_for} (what rl was built for)"
        )),
        "{}",
        text(&checked)
    );
}

/// uv from the package registry, pinned: what `rl setup` uses when it is on the PATH.
const UV: &str = "uv==0.13.9";

#[test]
#[ignore = "needs python3 and the package registry: `cargo xtask test` runs it"]
fn setup_uses_uv_when_it_is_on_the_path() {
    let user_dir = tempfile::tempdir().unwrap();
    let tools = user_dir.path().join("tools");
    let venv = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&tools)
        .output()
        .unwrap();
    assert!(venv.status.success(), "{}", text(&venv));
    let mut install = Command::new(tools.join("bin/python"));
    install.args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        UV,
    ]);
    let installed = bounded(install, Duration::from_secs(300));
    assert!(installed.status.success(), "{}", text(&installed));
    let home = user_dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let runner_home = std::env::var_os("HOME").map(PathBuf::from);
    let user = User {
        // uv's folder first, then rl's build (not installed: `rl setup` is what is tested).
        bin: Path::new(env!("CARGO_BIN_EXE_rl"))
            .parent()
            .map_or_else(|| workspace_root().join("target/debug"), Path::to_owned),
        path: format!(
            "{}:{}",
            tools.join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        ),
        // uv's cache is the runner's, as in the journey: only the first run downloads.
        caches: runner_home.map(|runner| runner.join(".cache")),
        home,
    };
    let mut command = user.command(&user.bin.join("rl"));
    command.arg("setup");
    let made = bounded(command, Duration::from_secs(1200));
    assert!(made.status.success(), "{}", text(&made));
    assert!(
        String::from_utf8_lossy(&made.stdout).contains("(with uv)"),
        "{}",
        text(&made)
    );
    let log = std::fs::read_to_string(user.state().join("venvs/setup.log")).unwrap();
    assert!(log.contains("uv"), "{log}");
    assert!(
        !user.state().join("venvs/uv").exists(),
        "rl installed a uv of its own beside the one on the PATH"
    );
    let checked = user.rl(&["setup", "--check"], Duration::from_secs(120));
    assert_eq!(checked.status.code(), Some(0), "{}", text(&checked));
}

/// Issue 30 #7: run again with nothing to do, `rl setup` said "wrote config.toml" and rewrote
/// it, losing its own header, the operator's comment above `python =` and the last newline.
/// With its Python ready (the test venv, as `rl setup` would have made it), a second run writes
/// nothing and says so; `--json` answers in JSON either way.
#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn setup_with_nothing_to_do_writes_nothing_and_keeps_every_comment() {
    use std::os::unix::fs::MetadataExt as _;
    let python = crate::test_python();
    let venv = python.parent().and_then(Path::parent).unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("venvs")).unwrap();
    std::os::unix::fs::symlink(venv, home.path().join("venvs/trainer")).unwrap();
    let setup = |args: &[&str]| {
        let output = crate::rl_in(home.path(), args);
        assert!(output.status.success(), "{}", text(&output));
        output
    };

    let first = json(&setup(&["setup", "--json"]));
    assert_eq!(first["changed"], serde_json::json!(["python"]), "{first:#}");
    assert_eq!(first["parts"][0]["part"], "trainer", "{first:#}");
    let config = PathBuf::from(first["config"].as_str().unwrap());
    let written = std::fs::read_to_string(&config).unwrap();
    assert!(written.starts_with("# rl's operator settings"), "{written}");
    let mine = written.replace("\npython = ", "\n# mine: this Python, please\npython = ")
        + "# the last line\n";
    std::fs::write(&config, &mine).unwrap();
    let before = std::fs::metadata(&config).unwrap();

    let again = setup(&["setup"]);
    let said = String::from_utf8_lossy(&again.stdout);
    assert!(said.contains("already says so"), "{}", text(&again));
    assert!(!said.contains("wrote"), "{}", text(&again));
    let again = json(&setup(&["setup", "--json"]));
    assert_eq!(again["changed"], serde_json::json!([]), "{again:#}");
    let after = std::fs::metadata(&config).unwrap();
    assert_eq!(
        (after.ino(), after.mtime_nsec()),
        (before.ino(), before.mtime_nsec()),
        "config.toml was written"
    );
    assert_eq!(std::fs::read_to_string(&config).unwrap(), mine);
}
