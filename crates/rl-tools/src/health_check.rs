//! What `rl` needs from the machine, checked one by one, each with the fix when it is missing:
//! the operator's settings, the Python that runs atroposlib, atroposlib itself, the packages of
//! rl's trainer at their pinned versions, the local engine (when runs use one) and its model,
//! the trainer's known defects (tinker-atropos' script), the tinker-atropos tree and its
//! environments, the keys (present or not, never their values), and a writable state directory.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rl_settings::{SETTINGS_FILE, Secrets, Settings};
use serde::Deserialize;
use wait_timeout::ChildExt;

use crate::answers::{Check, HealthReport};

mod environments;
mod sdk;

use environments::{dependencies_check, tree_checks};
pub use sdk::SdkVersions;
use sdk::sdk_check;

/// The oldest Python atroposlib 0.4.0 runs on.
pub const MIN_PYTHON: (u32, u32) = (3, 11);
/// Importing atroposlib takes seconds; a Python that hangs longer is a finding, not a wait.
const PYTHON_TIMEOUT: Duration = Duration::from_secs(60);

/// How long what a Python said of itself is believed: a server asked for its health by many
/// callers at once starts one Python, not one each, and an operator who has just installed a
/// package sees it within seconds.
const PROBE_TTL: Duration = Duration::from_secs(10);

/// What each Python said of itself, briefly kept; one probe of a Python at a time, the callers
/// that ask meanwhile waiting for its answer. Clones share the answers.
#[derive(Debug, Clone, Default)]
pub struct Probes {
    slots: Arc<Mutex<HashMap<ProbeKey, Slot>>>,
}

/// A Python's latest answer; locked while it is asked again.
type Slot = Arc<Mutex<Option<Probed>>>;

/// A Python and the packages it is asked about.
type ProbeKey = (PathBuf, Vec<String>);

#[derive(Debug, Clone)]
struct Probed {
    at: Instant,
    facts: Result<PythonFacts, String>,
}

impl Probes {
    fn facts(&self, python: &Path, pins: &[rl_python::Pin]) -> Result<PythonFacts, String> {
        let key = (
            python.to_owned(),
            pins.iter().map(|pin| pin.name.to_owned()).collect(),
        );
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
            Arc::clone(slots.entry(key).or_default())
        };
        // Held while probing: whoever asks meanwhile waits for this answer.
        let mut slot = slot.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(probed) = slot.as_ref().filter(|p| p.at.elapsed() < PROBE_TTL) {
            return probed.facts.clone();
        }
        let facts = run_probe(python, pins);
        *slot = Some(Probed {
            at: Instant::now(),
            facts: facts.clone(),
        });
        facts
    }
}

/// Runs every check. Never fails: a check that cannot be made is a failed check. `settings` is
/// the operator's settings or why they could not be read; without them the interpreter and the
/// tree are unknown, so only the keys (as the defaults require them) and the state directory
/// are checked beside the settings' own finding.
pub fn check(
    home: &Path,
    settings: Result<&Settings, &str>,
    secrets: &Secrets,
    probes: &Probes,
) -> HealthReport {
    let file = home.join(SETTINGS_FILE);
    let mut checks = Vec::new();
    match settings {
        Ok(settings) => {
            let read = if file.is_file() {
                format!("{} and RL_* variables", file.display())
            } else {
                format!("defaults and RL_* variables (no {})", file.display())
            };
            checks.push(finding("settings", true, Ok(read)));
            let trainer_pins = rl_python::pins(rl_python::TRAINER_REQUIREMENTS);
            let probed = probes.facts(&settings.python, &trainer_pins);
            checks.extend(python_checks(home, &settings.python, &probed));
            checks.push(trainer_check(home, settings, &probed, &trainer_pins));
            if uses_rls_trainer(settings) {
                checks.push(sdk_check(home, settings, &probed));
            }
            if settings.engine.is_local() {
                checks.extend(engine_checks(home, settings, probes));
            }
            checks.extend(tree_checks(settings));
            checks.extend(dependencies_check(home, settings));
            checks.extend(key_checks(settings, secrets));
        }
        Err(reason) => {
            let fix = format!(
                "correct {} (or the RL_* variable) as the detail says, then restart any running \
                 `rl serve` / `rl mcp` (they read settings as they start); the other checks need it",
                file.display()
            );
            checks.push(finding("settings", true, Err((reason.to_owned(), fix))));
            checks.extend(key_checks(&Settings::default(), secrets));
        }
    }
    checks.push(state_dir_check(home));
    HealthReport {
        healthy: checks.iter().all(|check| check.ok || !check.required),
        checks,
    }
}

fn finding(name: &str, required: bool, outcome: Result<String, (String, String)>) -> Check {
    match outcome {
        Ok(detail) => Check {
            name: name.to_owned(),
            ok: true,
            detail,
            fix: None,
            required,
        },
        Err((detail, fix)) => Check {
            name: name.to_owned(),
            ok: false,
            detail,
            fix: Some(fix),
            required,
        },
    }
}

/// Python's version, atroposlib's, and the installed versions of the packages asked about
/// (`None`: not installed), from one run of an interpreter.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct PythonFacts {
    version: [u32; 3],
    atroposlib: Option<String>,
    import_error: Option<String>,
    #[serde(default)]
    packages: std::collections::BTreeMap<String, Option<String>>,
}

/// Imports atroposlib (a package that installs but cannot import is not there), and reads the
/// other packages' versions from their metadata only (importing them all would take long).
const PROBE: &str = "import json, sys\n\
from importlib.metadata import version, PackageNotFoundError\n\
facts = {'version': list(sys.version_info[:3]), 'atroposlib': None, 'import_error': None, \
'packages': {}}\n\
try:\n    import atroposlib  # noqa: F401\n    facts['atroposlib'] = version('atroposlib')\n\
except Exception as error:\n    facts['import_error'] = f'{type(error).__name__}: {error}'[:300]\n\
for name in sys.argv[1:]:\n    try:\n        facts['packages'][name] = version(name)\n    \
except PackageNotFoundError:\n        facts['packages'][name] = None\n\
print(json.dumps(facts))\n";

fn python_checks(home: &Path, python: &Path, probed: &Result<PythonFacts, String>) -> Vec<Check> {
    let managed = crate::setup::is_managed(home, python);
    let configure = if managed {
        "rl setup (it makes the Python it manages again)".to_owned()
    } else {
        format!(
            "run `rl setup` (rl makes a Python with what a run needs and points config.toml at \
             it), or install Python {}.{}+ and set `python = \"/path/to/python\"` in config.toml \
             (now {})",
            MIN_PYTHON.0,
            MIN_PYTHON.1,
            python.display()
        )
    };
    let facts = match probed {
        Ok(facts) => facts,
        Err(problem) => {
            return vec![
                finding("python", true, Err((problem.clone(), configure))),
                finding(
                    "atroposlib",
                    true,
                    Err((
                        "not checked: no working Python".to_owned(),
                        "fix Python first".to_owned(),
                    )),
                ),
            ];
        }
    };
    let [major, minor, patch] = facts.version;
    let version = format!("{major}.{minor}.{patch} ({})", python.display());
    let python_check = if (major, minor) >= MIN_PYTHON {
        finding("python", true, Ok(version))
    } else {
        finding(
            "python",
            true,
            Err((format!("{version} is older than 3.11"), configure)),
        )
    };
    let install = if managed {
        "rl setup (it repairs the Python it made)".to_owned()
    } else {
        format!(
            "{} -m pip install {}=={}",
            python.display(),
            rl_python::ATROPOSLIB.name,
            rl_python::ATROPOSLIB.version
        )
    };
    let atroposlib = match (&facts.atroposlib, &facts.import_error) {
        (Some(version), _) => finding("atroposlib", true, Ok(version.clone())),
        (None, error) => finding(
            "atroposlib",
            true,
            Err((
                error.clone().unwrap_or_else(|| "not importable".to_owned()),
                install,
            )),
        ),
    };
    vec![python_check, atroposlib]
}

/// The pins `facts` shows missing or at another version, as `name==version` to install.
pub(crate) fn unmet(facts: &PythonFacts, pins: &[rl_python::Pin]) -> Vec<String> {
    pins.iter()
        .filter(|pin| facts.packages.get(pin.name).and_then(Option::as_deref) != Some(pin.version))
        .map(|pin| {
            let found = facts
                .packages
                .get(pin.name)
                .and_then(Option::as_deref)
                .unwrap_or("missing");
            format!("{}=={} (found {found})", pin.name, pin.version)
        })
        .collect()
}

/// The trainer runs start: rl's own needs its pinned packages in `python`; tinker-atropos'
/// script works, with defects a user must know before trusting a run's outcome.
fn trainer_check(
    home: &Path,
    settings: &Settings,
    probed: &Result<PythonFacts, String>,
    pins: &[rl_python::Pin],
) -> Check {
    let template = &settings.commands.trainer;
    if template
        .iter()
        .any(|arg| arg.contains("launch_training.py"))
    {
        return finding(
            "trainer",
            false,
            Err((
                "tinker-atropos launch_training.py, with known defects: it serves inference on \
                 port 8001 only (set trainer_port = 8001: one run at a time), exits 0 after a \
                 failed step (a failed run can show completed), prints a final path it never \
                 saved (rl reports its last step_N instead), and never saves optimizer state (no \
                 resume)"
                    .to_owned(),
                "use rl's own trainer: remove [commands] trainer from config.toml".to_owned(),
            )),
        );
    }
    if !uses_rls_trainer(settings) {
        return finding(
            "trainer",
            true,
            Ok(format!("the operator's command: {}", template.join(" "))),
        );
    }
    let Ok(facts) = probed else {
        return finding(
            "trainer",
            true,
            Err((
                "not checked: no working Python".to_owned(),
                "fix Python first".to_owned(),
            )),
        );
    };
    let missing = unmet(facts, pins);
    if missing.is_empty() {
        let sdk = pins
            .iter()
            .find(|pin| pin.name == "tinker")
            .map_or(String::new(), |pin| format!(" (tinker {})", pin.version));
        finding(
            "trainer",
            true,
            Ok(format!("rl's trainer, its packages as pinned{sdk}")),
        )
    } else {
        finding(
            "trainer",
            true,
            Err((
                format!("rl's trainer needs {}", missing.join(", ")),
                if crate::setup::is_managed(home, &settings.python) {
                    "rl setup (it repairs the Python it made)".to_owned()
                } else {
                    format!(
                        "{} -m pip install {}",
                        settings.python.display(),
                        missing_pins(&missing)
                    )
                },
            )),
        )
    }
}

/// Whether runs start rl's own trainer (not the operator's command).
fn uses_rls_trainer(settings: &Settings) -> bool {
    settings
        .commands
        .trainer
        .iter()
        .any(|arg| arg == "rl_trainer")
}

/// `name==version` of each unmet pin, for a pip command line.
fn missing_pins(unmet: &[String]) -> String {
    unmet
        .iter()
        .map(|line| line.split(' ').next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The local engine's Python (skyrl-tx and its pins) and the model it is to train.
fn engine_checks(home: &Path, settings: &Settings, probes: &Probes) -> Vec<Check> {
    let python = settings.engine_python();
    let mut pins = vec![rl_python::ENGINE_PACKAGE];
    pins.extend(rl_python::pins(rl_python::ENGINE_REQUIREMENTS));
    let engine = match probes.facts(python, &pins) {
        Err(problem) => finding(
            "engine",
            true,
            Err((
                problem,
                "set [engine] python to the Python holding skyrl-tx".to_owned(),
            )),
        ),
        Ok(facts) => {
            let missing = unmet(&facts, &pins);
            if missing.is_empty() {
                finding(
                    "engine",
                    true,
                    Ok(format!(
                        "skyrl-tx {} in {}",
                        rl_python::ENGINE_PACKAGE.version,
                        python.display()
                    )),
                )
            } else {
                let skyrl = format!(
                    "{}=={}",
                    rl_python::ENGINE_PACKAGE.name,
                    rl_python::ENGINE_PACKAGE.version
                );
                let rest: Vec<String> = missing
                    .iter()
                    .filter(|line| {
                        !line.starts_with(&format!("{}==", rl_python::ENGINE_PACKAGE.name))
                    })
                    .cloned()
                    .collect();
                finding(
                    "engine",
                    true,
                    Err((
                        format!("the local engine needs {}", missing.join(", ")),
                        if crate::setup::is_managed(home, python) {
                            "rl setup --engine local (it repairs the Python it made)".to_owned()
                        } else if rest.is_empty() {
                            format!("{} -m pip install --no-deps {skyrl}", python.display())
                        } else {
                            format!(
                                "{py} -m pip install --no-deps {skyrl} && {py} -m pip install {}",
                                missing_pins(&rest),
                                py = python.display()
                            )
                        },
                    )),
                )
            }
        }
    };
    let model = match settings.engine.base_model_problem() {
        None => finding(
            "base model",
            true,
            Ok(settings
                .engine
                .base_model
                .as_deref()
                .map(|model| model.display().to_string())
                .unwrap_or_default()),
        ),
        Some(problem) => finding(
            "base model",
            true,
            Err((
                problem,
                "set [engine] base_model to a Hugging Face model folder on disk".to_owned(),
            )),
        ),
    };
    vec![engine, model]
}

pub(crate) fn run_probe(python: &Path, pins: &[rl_python::Pin]) -> Result<PythonFacts, String> {
    let mut args = vec!["-c".to_owned(), PROBE.to_owned()];
    args.extend(pins.iter().map(|pin| pin.name.to_owned()));
    let line = last_line_of(python, &args, None)?;
    serde_json::from_str(&line).map_err(|_| {
        format!(
            "{} is not a Python that runs this check (it printed {:?})",
            python.display(),
            line.chars().take(80).collect::<String>()
        )
    })
}

/// Runs `python` with `args` (in `dir` when given), stderr dropped, within
/// [`PYTHON_TIMEOUT`]: the last line it printed.
pub(crate) fn last_line_of(
    python: &Path,
    args: &[String],
    dir: Option<&Path>,
) -> Result<String, String> {
    let mut command = Command::new(python);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Some(dir) = dir {
        command.current_dir(dir);
    }
    let mut child = command
        .spawn()
        .map_err(|error| format!("cannot run {}: {error}", python.display()))?;
    let finished = child
        .wait_timeout(PYTHON_TIMEOUT)
        .map_err(|error| format!("waiting for {}: {error}", python.display()))?;
    if finished.is_none() {
        let _ = child.kill();
        let _ = child.wait();
        return Err(format!(
            "{} did not answer within {} s",
            python.display(),
            PYTHON_TIMEOUT.as_secs()
        ));
    }
    let mut output = String::new();
    if let Some(mut stdout) = child.stdout.take() {
        let _ = stdout.read_to_string(&mut output);
    }
    Ok(output.lines().last().unwrap_or_default().to_owned())
}

fn key_checks(settings: &Settings, secrets: &Secrets) -> Vec<Check> {
    let keys = [
        (
            "TINKER_API_KEY",
            settings.needs_tinker_key(),
            "training runs on the hosted Tinker (a local engine needs none)",
        ),
        (
            "WANDB_API_KEY",
            false,
            "WandB logging and metrics from WandB's API (local files need none)",
        ),
        (
            "OPENROUTER_API_KEY",
            false,
            "the pre-flight against OpenRouter's models (rl preflight)",
        ),
    ];
    keys.into_iter()
        .map(|(name, required, used_for)| {
            let present = secrets.get(name).is_some_and(|value| !value.is_empty());
            finding(
                name,
                required,
                if present {
                    Ok(format!("present; used for {used_for}"))
                } else {
                    Err((
                        format!("not set; needed for {used_for}"),
                        format!("export {name}=… or add it to RL_HOME/.env (mode 600)"),
                    ))
                },
            )
        })
        .collect()
}

fn state_dir_check(home: &Path) -> Check {
    let fix = format!(
        "make {} writable, or choose another with --home / RL_HOME",
        home.display()
    );
    let outcome = std::fs::create_dir_all(home)
        .and_then(|()| tempfile_in(home))
        .map(|()| home.display().to_string())
        .map_err(|error| (format!("{}: {error}", home.display()), fix));
    finding("state directory", true, outcome)
}

/// Writes and removes a file, the way rl writes its state.
fn tempfile_in(dir: &Path) -> std::io::Result<()> {
    let probe = dir.join(format!(".rl-write-check-{}", std::process::id()));
    std::fs::write(&probe, b"ok")?;
    std::fs::remove_file(&probe)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(packages: &[(&str, Option<&str>)]) -> PythonFacts {
        PythonFacts {
            version: [3, 11, 7],
            atroposlib: Some("0.4.0".to_owned()),
            import_error: None,
            packages: packages
                .iter()
                .map(|(name, version)| ((*name).to_owned(), version.map(str::to_owned)))
                .collect(),
        }
    }

    const PINS: [rl_python::Pin; 2] = [
        rl_python::Pin {
            name: "tinker",
            version: "0.16.1",
        },
        rl_python::Pin {
            name: "numpy",
            version: "2.4.6",
        },
    ];

    #[test]
    fn tinker_atropos_script_is_a_warning_naming_its_defects() {
        let mut settings = Settings::default();
        settings.commands.trainer = ["{python}", "launch_training.py", "--config", "{config}"]
            .map(str::to_owned)
            .to_vec();
        let check = trainer_check(Path::new("/home"), &settings, &Ok(facts(&[])), &PINS);
        assert!(!check.ok && !check.required, "{check:?}");
        for defect in ["8001", "exits 0", "never", "resume"] {
            assert!(check.detail.contains(defect), "{defect}: {}", check.detail);
        }
    }

    #[test]
    fn rls_trainer_needs_its_pins_and_says_how_to_install_them() {
        let settings = Settings::default();
        let ok = trainer_check(
            Path::new("/home"),
            &settings,
            &Ok(facts(&[
                ("tinker", Some("0.16.1")),
                ("numpy", Some("2.4.6")),
            ])),
            &PINS,
        );
        assert!(ok.ok, "{ok:?}");
        let missing = trainer_check(
            Path::new("/home"),
            &settings,
            &Ok(facts(&[("tinker", None), ("numpy", Some("1.0"))])),
            &PINS,
        );
        assert!(!missing.ok && missing.required, "{missing:?}");
        assert!(
            missing
                .fix
                .as_deref()
                .is_some_and(|fix| fix.ends_with("-m pip install tinker==0.16.1 numpy==2.4.6")),
            "{missing:?}"
        );
    }
}
