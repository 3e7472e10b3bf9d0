//! What `rl setup` tells `config.toml` (issue 40, parts 7 and 9): `--engine hosted` switches a
//! local-engine home to the hosted Tinker, and a plain `rl setup` keeps the engine the file
//! names; a home naming its own `python` keeps it, `--env NAME` installing into that one
//! Python, until `--managed-python` asks for rl's.
//!
//! The package an environment needs here is a tiny wheel the test writes itself, installed
//! with pip's (and uv's) index turned off: no network.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use crate::{rl_command, test_python};

fn said(output: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn answer(output: &Output) -> Value {
    assert!(output.status.success(), "{}", said(output));
    serde_json::from_slice(&output.stdout).unwrap_or_else(|_| panic!("no JSON: {}", said(output)))
}

const LOCAL_HOME: &str = "# mine: the engine I train on\nmax_active_runs = 2\n\
python = \"@PYTHON@\"\n\n[engine]\n# the local one, for now\n\
kind = \"local\" # until the account comes\npython = \"/opt/engine/bin/python\"\n\
base_model = \"/models/q\"\n# the end\n";

/// Issue 40 #7: `rl setup --engine hosted` on a local-engine home said "config.toml already
/// says so" and changed nothing. It sets `[engine] kind = "tinker"`, every other line kept,
/// and says what it changed; then a plain `rl setup` leaves the engine as the file says, even
/// with rl's engine venv there (which once made it go back to local).
#[test]
fn engine_hosted_switches_a_local_home_and_keeps_every_other_line() {
    let home = tempfile::tempdir().unwrap();
    // The operator's own Python, kept by setup (here one that is not there: setup only looks).
    let own = home.path().join("elsewhere/bin/python");
    let config = home.path().join("config.toml");
    let before = LOCAL_HOME.replace("@PYTHON@", &own.display().to_string());
    std::fs::write(&config, &before).unwrap();
    // rl's engine venv, as an earlier `rl setup --engine local` left it.
    std::fs::create_dir_all(home.path().join("venvs/engine/bin")).unwrap();
    std::fs::write(home.path().join("venvs/engine/bin/python"), "").unwrap();
    let rl = |args: &[&str]| rl_command(home.path()).args(args).output().unwrap();

    // Refused before anything: the local engine's model, and an RL_* variable that would
    // win over what the file is told.
    let refused = rl(&["setup", "--engine", "hosted", "--base-model", "/models/q"]);
    assert_eq!(refused.status.code(), Some(1), "{}", said(&refused));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("add --engine local"),
        "{}",
        said(&refused)
    );
    let overridden = rl_command(home.path())
        .env("RL_ENGINE__KIND", "local")
        .args(["setup", "--engine", "hosted"])
        .output()
        .unwrap();
    assert_eq!(overridden.status.code(), Some(1), "{}", said(&overridden));
    assert!(
        String::from_utf8_lossy(&overridden.stderr).contains("RL_ENGINE__KIND=local"),
        "{}",
        said(&overridden)
    );
    assert_eq!(std::fs::read_to_string(&config).unwrap(), before);

    let switched = answer(&rl(&["setup", "--engine", "hosted", "--json"]));
    assert_eq!(
        switched["changed"],
        serde_json::json!(["engine.kind"]),
        "{switched:#}"
    );
    let message = switched["message"].as_str().unwrap();
    assert!(
        message.contains("engine.kind = \"tinker\" (was \"local\")"),
        "{switched:#}"
    );
    // One part, the trainer, on the operator's Python, kept.
    assert_eq!(
        switched["parts"].as_array().unwrap().len(),
        1,
        "{switched:#}"
    );
    assert_eq!(switched["parts"][0]["own"], true, "{switched:#}");
    assert_eq!(
        switched["parts"][0]["python"],
        own.to_str().unwrap(),
        "{switched:#}"
    );
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        before.replace("kind = \"local\" # until", "kind = \"tinker\" # until")
    );

    // Said in words too, and a plain `rl setup` now keeps the hosted engine.
    let again = rl(&["setup", "--engine", "hosted"]);
    assert!(again.status.success(), "{}", said(&again));
    let text = String::from_utf8_lossy(&again.stdout);
    assert!(text.contains("already says so"), "{}", said(&again));
    assert!(
        text.contains(&format!("trainer: your own Python {}, kept", own.display())),
        "{}",
        said(&again)
    );
    let plain = answer(&rl(&["setup", "--json"]));
    assert_eq!(plain["changed"], serde_json::json!([]), "{plain:#}");
    assert_eq!(plain["parts"].as_array().unwrap().len(), 1, "{plain:#}");
    let after = std::fs::read_to_string(&config).unwrap();
    assert!(after.contains("kind = \"tinker\""), "{after}");
    assert!(
        after.contains(&format!("python = \"{}\"", own.display())),
        "{after}"
    );

    // Asking for rl's managed Python while RL_PYTHON names another is refused: the variable
    // would win over the file.
    let refused = rl_command(home.path())
        .env("RL_PYTHON", "/usr/bin/python3")
        .args(["setup", "--managed-python"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(1), "{}", said(&refused));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("RL_PYTHON=/usr/bin/python3"),
        "{}",
        said(&refused)
    );
    assert_eq!(std::fs::read_to_string(&config).unwrap(), after);
    assert!(!home.path().join("venvs/trainer").exists());
}

/// The package the environment below imports: one module, no dependencies.
const PACKAGE: &str = "rl_tiny_dep";

/// Writes `rl_tiny_dep-0.1.0-py3-none-any.whl` (a wheel is a zip of the package and its
/// metadata) into `dir`.
fn write_wheel(dir: &Path) {
    const SCRIPT: &str = r"import sys, zipfile
d = 'rl_tiny_dep-0.1.0.dist-info/'
files = {
    'rl_tiny_dep/__init__.py': 'VALUE = 1\n',
    d + 'METADATA': 'Metadata-Version: 2.1\nName: rl-tiny-dep\nVersion: 0.1.0\n',
    d + 'WHEEL': 'Wheel-Version: 1.0\nGenerator: rl-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n',
}
files[d + 'RECORD'] = ''.join(name + ',,\n' for name in [*files, d + 'RECORD'])
with zipfile.ZipFile(sys.argv[1], 'w') as wheel:
    for name, text in files.items():
        wheel.writestr(name, text)
";
    std::fs::create_dir_all(dir).unwrap();
    let made = Command::new(test_python())
        .args(["-c", SCRIPT])
        .arg(dir.join("rl_tiny_dep-0.1.0-py3-none-any.whl"))
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
}

/// `rl setup` with pip and uv told to install from `wheels` only.
fn offline_setup(home: &Path, wheels: &Path, args: &[&str]) -> Value {
    let output = rl_command(home)
        .env("PIP_FIND_LINKS", wheels)
        .env("PIP_NO_INDEX", "1")
        .env("UV_FIND_LINKS", wheels)
        .env("UV_NO_INDEX", "1")
        .args(args)
        .output()
        .unwrap();
    answer(&output)
}

/// Issue 40 #9: on a home naming its own `python`, `rl setup --env NAME` made a managed venv,
/// installed the environment's package into the operator's Python, then pointed `python` at
/// the managed venv, which lacked it: the run was refused with a fix that changed nothing. The
/// package now goes into the Python the run has, which stays the operator's; with
/// `--managed-python` the run's Python becomes rl's, and the package goes there.
#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn env_setup_installs_into_the_operators_own_python_and_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let wheels = dir.path().join("wheels");
    write_wheel(&wheels);
    let own = rl_test_support::venv_over_the_test_venv(&dir.path().join("mine"));
    let envs = dir.path().join("envs");
    std::fs::create_dir_all(&envs).unwrap();
    std::fs::write(
        envs.join("tiny_dep_env.py"),
        format!(
            "import {PACKAGE}\nfrom atroposlib.envs.base import BaseEnv\n\n\n\
             class TinyDepEnv(BaseEnv):\n    name = \"tiny_dep\"\n"
        ),
    )
    .unwrap();
    let config = home.join("config.toml");
    let before = format!(
        "# mine: my own Python\npython = \"{}\"\nenvironments_dir = \"{}\"\n",
        own.display(),
        envs.display()
    );
    std::fs::write(&config, &before).unwrap();
    let absent = |python: &Path| !rl_test_support::purelib(python).join(PACKAGE).exists();
    assert!(
        absent(&own) && absent(&test_python()),
        "{PACKAGE} is there already"
    );

    // The run's Python is named as lacking it, with the fix.
    let selected = answer(
        &rl_command(&home)
            .args(["select", "tiny_dep", "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(
        selected["dependencies"]["missing_imports"],
        serde_json::json!([PACKAGE]),
        "{selected:#}"
    );
    assert_eq!(
        selected["dependencies"]["fix"], r#"rl_install_environment {"name": "tiny_dep"}"#,
        "{selected:#}"
    );

    // The fix installs it into the operator's Python, which stays the run's; no venv made.
    let set_up = offline_setup(&home, &wheels, &["setup", "--env", "tiny_dep", "--json"]);
    assert_eq!(set_up["changed"], serde_json::json!([]), "{set_up:#}");
    assert_eq!(set_up["parts"][0]["own"], true, "{set_up:#}");
    assert_eq!(
        set_up["parts"][0]["python"],
        own.to_str().unwrap(),
        "{set_up:#}"
    );
    assert_eq!(
        set_up["environment"]["python"],
        own.to_str().unwrap(),
        "{set_up:#}"
    );
    assert_eq!(
        set_up["environment"]["installed"],
        serde_json::json!([format!("{PACKAGE}==0.1.0")]),
        "{set_up:#}"
    );
    assert!(!absent(&own), "{PACKAGE} is not in the operator's Python");
    assert!(absent(&test_python()));
    assert!(
        !home.join("venvs/trainer").exists(),
        "a managed venv was made"
    );
    assert_eq!(std::fs::read_to_string(&config).unwrap(), before);
    // Nothing is missing now, for setup and for the selection (what a run's start checks).
    let checked = answer(
        &rl_command(&home)
            .args(["setup", "--check", "--env", "tiny_dep", "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(checked["ready"], true, "{checked:#}");
    assert_eq!(checked["parts"][0]["own"], true, "{checked:#}");
    let selected = answer(
        &rl_command(&home)
            .args(["select", "tiny_dep", "--json"])
            .output()
            .unwrap(),
    );
    assert!(
        selected.get("dependencies").is_none_or(Value::is_null),
        "{selected:#}"
    );

    // `--managed-python`: rl's venv (made here as `rl setup` would leave it, in seconds)
    // becomes the run's Python, said with what it replaced, and the package goes there.
    let managed = rl_test_support::venv_over_the_test_venv(&home.join("venvs/trainer"));
    let replaced = offline_setup(
        &home,
        &wheels,
        &["setup", "--managed-python", "--env", "tiny_dep", "--json"],
    );
    assert_eq!(
        replaced["changed"],
        serde_json::json!(["python"]),
        "{replaced:#}"
    );
    assert_eq!(replaced["parts"][0]["own"], false, "{replaced:#}");
    let message = replaced["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "python = \"{}\" (was \"{}\")",
            managed.display(),
            own.display()
        )),
        "{replaced:#}"
    );
    assert_eq!(
        replaced["environment"]["python"],
        managed.to_str().unwrap(),
        "{replaced:#}"
    );
    assert_eq!(
        replaced["environment"]["installed"],
        serde_json::json!([format!("{PACKAGE}==0.1.0")]),
        "{replaced:#}"
    );
    assert!(!absent(&managed), "{PACKAGE} is not in rl's managed Python");
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        before.replace(&own.display().to_string(), &managed.display().to_string())
    );
}
