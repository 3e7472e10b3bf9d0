//! How rl installs Python packages: with uv where it can, as it makes a venv of a thousand
//! files in seconds where `venv` + `pip` take minutes (both measured in `docs/decisions.md`).
//! When no uv is on the PATH, rl installs its own, pinned, from the package registry with the
//! machine's `pip` — the one command run with pip — and keeps it for every later install.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::{Pin, PythonError};

/// The uv rl installs for itself.
pub const UV: Pin = Pin {
    name: "uv",
    version: "0.13.9",
};

/// uv's variable for compiling what it installs to bytecode (`--compile-bytecode`).
pub const UV_COMPILE_BYTECODE: &str = "UV_COMPILE_BYTECODE";

/// The `UV_COMPILE_BYTECODE` rl installs with, given the operator's: `0` when theirs says no
/// (`0`, `false`, `no`, `off`, any case), else `1`, so a value uv could not read never fails an
/// install and compiling stays the default.
pub fn compile_bytecode_value(operators: Option<&str>) -> &'static str {
    let says_no = operators.is_some_and(|value| {
        ["0", "false", "no", "off"]
            .iter()
            .any(|no| value.trim().eq_ignore_ascii_case(no))
    });
    if says_no { "0" } else { "1" }
}

/// The uv in `dir` (a venv of its own), installed there unless it answers at [`UV`]'s version
/// (`installing` hears it first); each command and what it printed appended to `log`.
pub fn own_uv(dir: &Path, log: &Path, installing: &dyn Fn()) -> Result<PathBuf, PythonError> {
    let uv = dir.join("bin").join("uv");
    if version_of(&uv).is_some_and(|version| version == UV.version) {
        return Ok(uv);
    }
    installing();
    run_logged(Command::new("python3").args(["-m", "venv"]).arg(dir), log)?;
    run_logged(
        Command::new(dir.join("bin").join("python"))
            .args(["-m", "pip", "--disable-pip-version-check", "install"])
            .arg(format!("{}=={}", UV.name, UV.version)),
        log,
    )?;
    match version_of(&uv) {
        Some(version) if version == UV.version => Ok(uv),
        found => Err(PythonError::Command {
            command: uv.display().to_string(),
            detail: format!(
                "installed, it answers {} instead of {}; see {}",
                found.as_deref().unwrap_or("nothing"),
                UV.version,
                log.display()
            ),
        }),
    }
}

/// The version `uv --version` says (`uv 0.13.9 (…)` → `0.13.9`); `None` when it cannot run.
pub fn version_of(uv: &Path) -> Option<String> {
    let mut command = Command::new(uv);
    rl_settings::withhold(&mut command, &[]);
    let output = command
        .arg("--version")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|output| output.status.success())?;
    String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .nth(1)
        .map(str::to_owned)
}

/// Runs `command`, its line and output appended to `log`; a failure names the output's last
/// lines and the log.
pub fn run_logged(command: &mut Command, log: &Path) -> Result<(), PythonError> {
    let io = |source| PythonError::Io {
        action: "write",
        path: log.to_owned(),
        source,
    };
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(io)?;
    writeln!(file, "$ {command:?}").map_err(io)?;
    // An installer needs no key (and the log line above stays the command as given).
    rl_settings::withhold(command, &[]);
    let program = command.get_program().to_string_lossy().into_owned();
    let output = command
        .stdin(Stdio::null())
        .output()
        .map_err(|error| PythonError::Command {
            command: program.clone(),
            detail: format!("cannot start: {error}"),
        })?;
    file.write_all(&output.stdout).map_err(io)?;
    file.write_all(&output.stderr).map_err(io)?;
    if output.status.success() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&output.stderr);
    let tail: Vec<&str> = text.lines().rev().take(5).collect();
    Err(PythonError::Command {
        command: program,
        detail: format!(
            "failed ({}): {}; the whole output is in {}",
            output.status,
            tail.into_iter().rev().collect::<Vec<_>>().join(" / "),
            log.display()
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn installs_compile_unless_the_operator_says_no() {
        for (operators, sent) in [
            (None, "1"),
            (Some("1"), "1"),
            (Some("true"), "1"),
            (Some("maybe"), "1"),
            (Some(""), "1"),
            (Some("0"), "0"),
            (Some("False"), "0"),
            (Some(" off "), "0"),
            (Some("no"), "0"),
        ] {
            assert_eq!(compile_bytecode_value(operators), sent, "{operators:?}");
        }
    }

    #[test]
    fn verifiers_v1_environments_get_the_uv_rl_installs() {
        let pinned = crate::pins(crate::VERIFIERS_V1_REQUIREMENTS);
        assert!(pinned.contains(&UV), "{pinned:?}");
    }

    #[test]
    fn a_failing_command_names_its_last_words_and_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("setup.log");
        let error = run_logged(
            Command::new("sh").args(["-c", "echo out; echo first >&2; echo last >&2; exit 3"]),
            &log,
        )
        .unwrap_err()
        .to_string();
        assert!(
            error.starts_with("sh failed (exit status: 3): first / last;"),
            "{error}"
        );
        assert!(error.ends_with(&format!("the whole output is in {}", log.display())));
        let logged = std::fs::read_to_string(&log).unwrap();
        assert!(logged.starts_with("$ \"sh\" \"-c\""), "{logged}");
        assert!(logged.contains("out\nfirst\nlast\n"), "{logged}");
    }

    #[test]
    fn a_program_that_cannot_start_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let error = run_logged(
            &mut Command::new("/nonexistent/uv"),
            &dir.path().join("log"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            error.starts_with("/nonexistent/uv cannot start:"),
            "{error}"
        );
        assert_eq!(version_of(Path::new("/nonexistent/uv")), None);
    }

    #[test]
    fn the_version_is_read_from_what_uv_says() {
        let dir = tempfile::tempdir().unwrap();
        let uv = dir.path().join("uv");
        std::fs::write(&uv, "#!/bin/sh\necho 'uv 0.13.9 (abc 2026-01-01)'\n").unwrap();
        std::fs::set_permissions(&uv, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        assert_eq!(version_of(&uv).as_deref(), Some("0.13.9"));
    }
}
