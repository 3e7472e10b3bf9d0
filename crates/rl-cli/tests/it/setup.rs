//! `rl setup` as a user runs it on a fresh state directory: the managed Python made from the
//! package registry (pip's cache makes it quick after the first time), `config.toml` pointed at
//! it with what was there kept, `--check` and `rl doctor` naming a package removed behind rl's
//! back, and `rl setup` putting it back.

use std::process::Command;

use crate::rl_in;

#[test]
#[ignore = "needs python3 and the package registry: `cargo xtask test` runs it"]
fn setup_makes_checks_and_repairs_the_managed_python() {
    let home = tempfile::tempdir().unwrap();
    let envs = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "# mine\nmax_active_runs = 2\n",
    )
    .unwrap();
    let envs_dir = envs.path().to_str().unwrap();
    let made = rl_in(home.path(), &["--envs-dir", envs_dir, "setup"]);
    assert!(made.status.success(), "{made:?}");
    let config = std::fs::read_to_string(home.path().join("config.toml")).unwrap();
    let python = home.path().join("venvs/trainer/bin/python");
    assert!(config.contains("# mine\nmax_active_runs = 2\n"), "{config}");
    assert!(
        config.contains(&format!("python = \"{}\"", python.display())),
        "{config}"
    );
    assert!(
        config.contains(&format!("environments_dir = \"{envs_dir}\"")),
        "{config}"
    );
    let checked = rl_in(home.path(), &["setup", "--check"]);
    assert_eq!(checked.status.code(), Some(0), "{checked:?}");

    // Again: nothing to do.
    let again = rl_in(home.path(), &["setup"]);
    assert!(again.status.success(), "{again:?}");
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("as pinned, nothing to do"),
        "{again:?}"
    );

    // A package removed behind rl's back: named by --check and by doctor, which points at
    // `rl setup`; and `rl setup` puts it back.
    let removed = Command::new(&python)
        .args(["-m", "pip", "uninstall", "--yes", "--quiet", "PyYAML"])
        .output()
        .unwrap();
    assert!(removed.status.success(), "{removed:?}");
    let checked = rl_in(home.path(), &["setup", "--check"]);
    assert_eq!(checked.status.code(), Some(1), "{checked:?}");
    let said = String::from_utf8_lossy(&checked.stdout);
    assert!(said.contains("PyYAML==6.0.3 (found missing)"), "{said}");
    assert!(said.contains("fix: rl setup"), "{said}");
    let doctor = rl_in(home.path(), &["doctor", "--json"]);
    assert_eq!(doctor.status.code(), Some(1), "{doctor:?}");
    let report: serde_json::Value = serde_json::from_slice(&doctor.stdout).unwrap();
    let trainer = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|check| check["name"] == "trainer")
        .unwrap();
    assert_eq!(trainer["ok"], false, "{trainer}");
    assert!(
        trainer["fix"].as_str().unwrap().starts_with("rl setup"),
        "{trainer}"
    );
    let repaired = rl_in(home.path(), &["setup"]);
    assert!(repaired.status.success(), "{repaired:?}");
    let checked = rl_in(home.path(), &["setup", "--check"]);
    assert_eq!(checked.status.code(), Some(0), "{checked:?}");
}
