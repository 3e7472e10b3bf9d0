//! The Python virtual environment the test suite runs its Python parts against.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, bail};

use crate::{display, run_command};

/// Tells the tests which interpreter to use; when already set, nothing is provisioned.
pub(crate) const PYTHON_ENV: &str = "RL_TEST_PYTHON";

const REQUIREMENTS: &str = "xtask/python/test-requirements.txt";
/// Inside the venv, so deleting the venv (or `cargo clean`) also forgets what it holds.
const STAMP: &str = ".rl-requirements";
const MIN_PYTHON: (u32, u32) = (3, 11);

/// Returns the python executable of a venv holding the test requirements, creating or
/// refreshing `target/python-venv` when it is missing or was built from other requirements.
/// `fixtures/local-stack.toml` filled in for this checkout and `python`: the operator settings
/// of the local stack, as the demo and the bench write them into their state directory.
pub(crate) fn local_stack_settings(root: &Path, python: &Path) -> anyhow::Result<String> {
    let path = root.join("fixtures/local-stack.toml");
    let template = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    Ok(template
        .replace("@REPO@", &root.display().to_string())
        .replace("@PYTHON@", &python.display().to_string()))
}

pub(crate) fn ensure_test_venv(root: &Path) -> anyhow::Result<PathBuf> {
    if let Some(python) = std::env::var_os(PYTHON_ENV).map(PathBuf::from) {
        if python.is_file() {
            check_version(&python)?;
            return Ok(python);
        }
        eprintln!(
            "xtask: {PYTHON_ENV}={} is not a file; provisioning the test venv instead",
            python.display()
        );
    }

    let requirements_path = root.join(REQUIREMENTS);
    let requirements = std::fs::read_to_string(&requirements_path)
        .with_context(|| format!("cannot read {}", requirements_path.display()))?;
    let venv = root.join("target").join("python-venv");
    let python = venv_python(&venv);
    let stamp = venv.join(STAMP);
    let up_to_date = python.is_file()
        && std::fs::read_to_string(&stamp).is_ok_and(|installed| installed == requirements);
    if up_to_date {
        return Ok(python);
    }

    eprintln!("xtask: provisioning Python test venv (atroposlib 0.4.0), about a minute…");
    let started = Instant::now();
    check_version(Path::new("python3"))?;
    // A half-built or outdated venv can hold packages the new requirements no longer want.
    if venv.exists() {
        std::fs::remove_dir_all(&venv)
            .with_context(|| format!("cannot remove the stale venv {}", venv.display()))?;
    }
    run_command(Command::new("python3").arg("-m").arg("venv").arg(&venv))
        .context("creating the Python test venv failed")?;
    run_command(
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "-r",
            ])
            .arg(&requirements_path),
    )
    .with_context(|| format!("pip install of {REQUIREMENTS} into the test venv failed"))?;
    // Written last: an interrupted install leaves no stamp and is redone next time.
    std::fs::write(&stamp, &requirements)
        .with_context(|| format!("cannot write {}", stamp.display()))?;
    eprintln!(
        "xtask: Python test venv ready in {:.0?} at {}",
        started.elapsed(),
        venv.display()
    );
    Ok(python)
}

fn venv_python(venv: &Path) -> PathBuf {
    if cfg!(windows) {
        venv.join("Scripts").join("python.exe")
    } else {
        venv.join("bin").join("python")
    }
}

/// atroposlib 0.4.0 needs Python 3.11; an older one would fail deep inside pip or the tests.
fn check_version(python: &Path) -> anyhow::Result<()> {
    let mut command = Command::new(python);
    command.args(["-c", "import sys; print('%d.%d' % sys.version_info[:2])"]);
    let output = command
        .output()
        .with_context(|| format!("cannot start {} to check its version", python.display()))?;
    if !output.status.success() {
        bail!(
            "`{}` failed ({}): {}",
            display(&command),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let version = text
        .trim()
        .split_once('.')
        .and_then(|(major, minor)| Some((major.parse::<u32>().ok()?, minor.parse::<u32>().ok()?)))
        .with_context(|| format!("cannot read the version of {}: {text:?}", python.display()))?;
    if version < MIN_PYTHON {
        bail!(
            "{} is Python {}.{}; the test venv needs Python >= {}.{}",
            python.display(),
            version.0,
            version.1,
            MIN_PYTHON.0,
            MIN_PYTHON.1
        );
    }
    Ok(())
}
