//! `rl setup`: the Python a run needs, made and kept by rl in the state directory — a venv
//! with atroposlib and rl's trainer's pins, and with `--engine local` a second one with the
//! local engine's — then `config.toml` pointed at them. Idempotent (what is installed as
//! pinned is left alone), repairing (a missing package or another version is installed
//! again), and `uv` is used when it is on the PATH (much faster), else `venv` + `pip`. A
//! Python of the operator's own that the settings name is only looked at (`inspect_python`).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use rl_python::{ATROPOSLIB, ENGINE_PACKAGE, ENGINE_REQUIREMENTS, Pin, TRAINER_REQUIREMENTS, pins};

use crate::ToolsError;
use crate::python_probe::{SdkVersions, run_probe, unmet};

/// The folder, in the state directory, of the Pythons rl manages.
const VENVS: &str = "venvs";
/// What the installers printed, kept for when one fails.
const LOG: &str = "setup.log";

/// One Python rl manages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// atroposlib and rl's trainer: what `python` runs.
    Trainer,
    /// skyrl-tx on CPU JAX: what `[engine] python` runs.
    Engine,
}

impl Part {
    pub fn name(self) -> &'static str {
        match self {
            Self::Trainer => "trainer",
            Self::Engine => "engine",
        }
    }

    /// The venv's folder in the state directory.
    pub fn dir(self, home: &Path) -> PathBuf {
        home.join(VENVS).join(self.name())
    }

    pub fn python(self, home: &Path) -> PathBuf {
        self.dir(home).join("bin").join("python")
    }

    fn pins(self) -> Vec<Pin> {
        match self {
            Self::Trainer => std::iter::once(ATROPOSLIB)
                .chain(pins(TRAINER_REQUIREMENTS))
                .collect(),
            Self::Engine => std::iter::once(ENGINE_PACKAGE)
                .chain(pins(ENGINE_REQUIREMENTS))
                .collect(),
        }
    }
}

/// What one part lacks: nothing when its Python holds every pin at its version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartState {
    pub part: Part,
    pub python: PathBuf,
    /// `name==version (found …)` of each pin missing or at another version; or why the Python
    /// itself is not usable.
    pub problems: Vec<String>,
    /// The Tinker SDK it holds against the one rl was built for; `None` when the Python
    /// could not be asked.
    pub sdk: Option<SdkVersions>,
}

/// What the part's managed Python holds against its pins.
pub fn inspect(home: &Path, part: Part) -> PartState {
    let python = part.python(home);
    if python.is_file() {
        inspect_python(part, &python)
    } else {
        PartState {
            part,
            problems: vec![format!("no Python at {}", python.display())],
            python,
            sdk: None,
        }
    }
}

/// What `python` — the part's managed one, or one of the operator's own that `rl setup`
/// keeps — holds against the part's pins. A name without a folder is looked up on the PATH.
pub fn inspect_python(part: Part, python: &Path) -> PartState {
    let (problems, sdk) = match run_probe(python, &part.pins()) {
        Ok(facts) => (unmet(&facts, &part.pins()), Some(SdkVersions::of(&facts))),
        Err(problem) => (vec![problem], None),
    };
    PartState {
        part,
        python: python.to_owned(),
        problems,
        sdk,
    }
}

/// How packages are installed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Installer {
    Uv(PathBuf),
    Pip,
}

impl Installer {
    /// `uv` when it is on the PATH, else Python's own `venv` and `pip`.
    pub fn find() -> Self {
        let uv = Command::new("uv")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        if uv {
            Self::Uv(PathBuf::from("uv"))
        } else {
            Self::Pip
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Self::Uv(_) => "uv",
            Self::Pip => "venv + pip",
        }
    }

    pub(crate) fn create(&self, venv: &Path, log: &Path) -> Result<(), ToolsError> {
        let mut command = match self {
            Self::Uv(uv) => {
                let mut command = Command::new(uv);
                command.args(["venv", "--python", "python3"]).arg(venv);
                command
            }
            Self::Pip => {
                let mut command = Command::new("python3");
                command.args(["-m", "venv"]).arg(venv);
                command
            }
        };
        run_logged(&mut command, log)
    }

    /// `pip install` with `args` into the venv's `python`.
    pub(crate) fn install(
        &self,
        python: &Path,
        args: &[&str],
        log: &Path,
    ) -> Result<(), ToolsError> {
        let mut command = match self {
            Self::Uv(uv) => {
                let mut command = Command::new(uv);
                command.args(["pip", "install", "--python"]).arg(python);
                command
            }
            Self::Pip => {
                let mut command = Command::new(python);
                command.args(["-m", "pip", "--disable-pip-version-check", "install"]);
                command
            }
        };
        run_logged(command.args(args), log)
    }
}

/// Runs `command`, its output appended to `log`; a failure names the log's end.
pub(crate) fn run_logged(command: &mut Command, log: &Path) -> Result<(), ToolsError> {
    let io = |source| ToolsError::Io {
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
    let output = command
        .stdin(Stdio::null())
        .output()
        .map_err(|error| ToolsError::Internal(format!("cannot run {command:?}: {error}")))?;
    file.write_all(&output.stdout).map_err(io)?;
    file.write_all(&output.stderr).map_err(io)?;
    if output.status.success() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&output.stderr);
    let tail: Vec<&str> = text.lines().rev().take(5).collect();
    Err(ToolsError::Internal(format!(
        "{} failed ({}): {}; the whole output is in {}",
        command.get_program().to_string_lossy(),
        output.status,
        tail.into_iter().rev().collect::<Vec<_>>().join(" / "),
        log.display()
    )))
}

/// Makes `part`'s venv hold its pins: created when missing, the pins installed when any is
/// missing or at another version, nothing done when all are there. `say` hears each step.
pub fn ensure(
    home: &Path,
    part: Part,
    installer: &Installer,
    say: &dyn Fn(&str),
) -> Result<PartState, ToolsError> {
    let before = inspect(home, part);
    if before.problems.is_empty() {
        say(&format!("{}: as pinned, nothing to do", part.name()));
        return Ok(before);
    }
    let dir = part.dir(home);
    let log = home.join(VENVS).join(LOG);
    std::fs::create_dir_all(home.join(VENVS)).map_err(|source| ToolsError::Io {
        action: "create",
        path: home.join(VENVS),
        source,
    })?;
    if !before.python.is_file() {
        say(&format!(
            "{}: creating {} ({})",
            part.name(),
            dir.display(),
            installer.name()
        ));
        installer.create(&dir, &log)?;
    }
    let (text, first) = match part {
        Part::Trainer => (TRAINER_REQUIREMENTS, ATROPOSLIB),
        Part::Engine => (ENGINE_REQUIREMENTS, ENGINE_PACKAGE),
    };
    // Kept beside the venv: what it was made from, for anyone who looks.
    let requirements = home
        .join(VENVS)
        .join(format!("{}-requirements.txt", part.name()));
    std::fs::write(&requirements, text).map_err(|source| ToolsError::Io {
        action: "write",
        path: requirements.clone(),
        source,
    })?;
    let first = format!("{}=={}", first.name, first.version);
    let listed = requirements.to_string_lossy().into_owned();
    say(&format!(
        "{}: installing {} and {} pinned packages (minutes the first time)",
        part.name(),
        first,
        pins(text).len()
    ));
    match part {
        Part::Trainer => installer.install(&before.python, &[&first, "-r", &listed], &log)?,
        // skyrl-tx's own dependencies pin CUDA wheels: it goes in alone, its pins after.
        Part::Engine => {
            installer.install(&before.python, &["--no-deps", &first], &log)?;
            installer.install(&before.python, &["-r", &listed], &log)?;
        }
    }
    let after = inspect(home, part);
    if after.problems.is_empty() {
        say(&format!("{}: ready", part.name()));
        Ok(after)
    } else {
        Err(ToolsError::Internal(format!(
            "{} still lacks {} after installing; see {}",
            part.name(),
            after.problems.join(", "),
            log.display()
        )))
    }
}

/// Whether `python` is one rl manages in `home` (its fix is then `rl setup`).
pub fn is_managed(home: &Path, python: &Path) -> bool {
    [Part::Trainer, Part::Engine]
        .into_iter()
        .any(|part| python == part.python(home))
}
