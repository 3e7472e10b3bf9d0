//! `rl setup`: the Python a run needs, made and kept by rl in the state directory — a venv
//! with atroposlib and rl's trainer's pins, and with `--engine local` a second one with the
//! local engine's — then `config.toml` pointed at them. Idempotent (what is installed as
//! pinned is left alone), repairing (a missing package or another version is installed
//! again), and with uv (the one on the PATH, or rl's own), else `venv` + `pip`. A
//! Python of the operator's own that the settings name is only looked at (`inspect_python`).

use std::cell::OnceCell;
use std::path::{Path, PathBuf};
use std::process::Command;

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

/// How packages are installed: chosen at the first install (a setup with nothing to install
/// installs no uv either) and kept.
pub struct Installer<'a> {
    home: PathBuf,
    /// The uv looked for on the PATH first.
    path_uv: &'static str,
    say: &'a dyn Fn(&str),
    chosen: OnceCell<Kind>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Uv(PathBuf),
    Pip,
}

impl<'a> Installer<'a> {
    /// The installer of the venvs in `home`; `say` hears when it installs uv, or cannot.
    pub fn new(home: &Path, say: &'a dyn Fn(&str)) -> Self {
        Self {
            home: home.to_owned(),
            path_uv: "uv",
            say,
            chosen: OnceCell::new(),
        }
    }

    /// `uv` when it is on the PATH; else rl's own (`venvs/uv` in the state directory,
    /// installed with pip the first time); else, when that cannot be installed, Python's own
    /// `venv` and `pip`, said with the reason.
    fn kind(&self) -> &Kind {
        self.chosen.get_or_init(|| {
            if rl_python::version_of(Path::new(self.path_uv)).is_some() {
                return Kind::Uv(PathBuf::from(self.path_uv));
            }
            let dir = self.home.join(VENVS).join("uv");
            let log = self.home.join(VENVS).join(LOG);
            let installing = || {
                (self.say)(&format!(
                    "uv: installing {}=={} into {} (it installs in seconds what pip takes \
                     minutes for)",
                    rl_python::UV.name,
                    rl_python::UV.version,
                    dir.display()
                ));
            };
            let made = std::fs::create_dir_all(self.home.join(VENVS))
                .map_err(|error| error.to_string())
                .and_then(|()| {
                    rl_python::own_uv(&dir, &log, &installing).map_err(|error| error.to_string())
                });
            match made {
                Ok(uv) => Kind::Uv(uv),
                Err(reason) => {
                    (self.say)(&format!(
                        "uv could not be installed ({reason}): using venv + pip"
                    ));
                    Kind::Pip
                }
            }
        })
    }

    /// What installed packages: `None` when nothing has been installed yet.
    pub fn used(&self) -> Option<&'static str> {
        self.chosen.get().map(|kind| match kind {
            Kind::Uv(_) => "uv",
            Kind::Pip => "venv + pip",
        })
    }

    /// What installs, choosing it now if it is not chosen yet: for saying what a step uses.
    pub fn name(&self) -> &'static str {
        match self.kind() {
            Kind::Uv(_) => "uv",
            Kind::Pip => "venv + pip",
        }
    }

    pub(crate) fn create(&self, venv: &Path, log: &Path) -> Result<(), ToolsError> {
        let mut command = match self.kind() {
            Kind::Uv(uv) => {
                let mut command = Command::new(uv);
                // Seeded with pip, as a venv of Python's own is: operators and repairs use it.
                command
                    .args(["venv", "--seed", "--python", "python3"])
                    .arg(venv);
                command
            }
            Kind::Pip => {
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
        let mut command = match self.kind() {
            Kind::Uv(uv) => {
                let mut command = Command::new(uv);
                // Compiled as pip compiles them (else a run's first start of each component
                // compiles its imports), unless the operator's `UV_COMPILE_BYTECODE` says no:
                // the test suite does, its homes being used once.
                command.env(
                    rl_python::UV_COMPILE_BYTECODE,
                    rl_python::compile_bytecode_value(
                        std::env::var(rl_python::UV_COMPILE_BYTECODE)
                            .ok()
                            .as_deref(),
                    ),
                );
                command.args(["pip", "install", "--python"]).arg(python);
                command
            }
            Kind::Pip => {
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
    rl_python::run_logged(command, log).map_err(|error| match error {
        rl_python::PythonError::Io {
            action,
            path,
            source,
        } => ToolsError::Io {
            action,
            path,
            source,
        },
        command @ rl_python::PythonError::Command { .. } => {
            ToolsError::Internal(command.to_string())
        }
    })
}

/// Makes `part`'s venv hold its pins: created when missing, the pins installed when any is
/// missing or at another version, nothing done when all are there. `say` hears each step.
pub fn ensure(
    home: &Path,
    part: Part,
    installer: &Installer<'_>,
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
        "{}: installing {} and {} pinned packages (downloaded the first time, kept in its cache)",
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

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;

    /// Where rl's own uv cannot be installed (its folder is a file here), pip installs, and
    /// the operator is told why; nothing is chosen before the first install.
    #[test]
    fn without_a_uv_of_its_own_pip_installs_and_says_why() {
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join(VENVS)).unwrap();
        std::fs::write(home.path().join(VENVS).join("uv"), "not a folder").unwrap();
        let heard = RefCell::new(Vec::new());
        let say = |line: &str| heard.borrow_mut().push(line.to_owned());
        let mut installer = Installer::new(home.path(), &say);
        installer.path_uv = "rl-test-no-such-uv";
        assert_eq!(installer.used(), None);
        assert!(heard.borrow().is_empty());
        assert_eq!(installer.name(), "venv + pip");
        assert_eq!(installer.used(), Some("venv + pip"));
        let heard = heard.borrow();
        assert_eq!(heard.len(), 2, "{heard:?}");
        assert!(
            heard[0].starts_with("uv: installing uv==0.13.9 into "),
            "{heard:?}"
        );
        assert!(
            heard[1].starts_with("uv could not be installed (python3 failed")
                && heard[1].ends_with("): using venv + pip"),
            "{heard:?}"
        );
    }
}
