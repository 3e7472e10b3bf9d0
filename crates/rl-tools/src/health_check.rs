//! What `rl` needs from the machine, checked one by one, each with the fix when it is missing:
//! the operator's settings, the Python that runs atroposlib, atroposlib itself, the packages of
//! rl's trainer at their pinned versions, the local engine (when runs use one) and its model,
//! the trainer's known defects (tinker-atropos' script), the tinker-atropos tree and its
//! environments, the keys (present or not, never their values), and a writable state directory.

use std::path::Path;

use rl_settings::{SETTINGS_FILE, Secrets, Settings};

use crate::Tools;
use crate::answers::{Check, HealthReport};
use crate::python_probe::{Probes, PythonFacts, unmet};

mod environments;
mod sdk;

use environments::{dependencies_check, tree_checks};
use sdk::sdk_check;

/// The oldest Python atroposlib 0.4.0 runs on.
pub const MIN_PYTHON: (u32, u32) = (3, 11);

impl Tools {
    /// What `rl_health_check` / `rl doctor` report.
    pub fn health_check(&self) -> crate::HealthReport {
        let settings = self.current_settings();
        crate::health_check(
            &self.context.home,
            settings.as_deref().map_err(String::as_str),
            &self.context.secrets,
            &self.probes,
        )
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
            if crate::hosted_checks::applies(settings, uses_rls_trainer(settings)) {
                checks.push(finding(
                    "Tinker service",
                    true,
                    crate::hosted_checks::service_check(settings),
                ));
                checks.push(finding(
                    "tokenizer",
                    true,
                    crate::hosted_checks::tokenizer_check(settings),
                ));
            }
            checks.extend(tree_checks(settings));
            checks.extend(dependencies_check(home, settings));
            checks.extend(key_checks(settings, secrets));
            checks.push(environment_keys_check(settings, secrets));
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
        losses: settings.ok().map(crate::answers::LossTable::of),
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

fn python_checks(home: &Path, python: &Path, probed: &Result<PythonFacts, String>) -> Vec<Check> {
    let managed = crate::setup::is_managed(home, python);
    let configure = if managed {
        "rl setup (it makes the Python it manages again)".to_owned()
    } else {
        format!(
            "run `rl setup --managed-python` (rl makes a Python with what a run needs and points \
             config.toml at it), or install Python {}.{}+ and set `python = \"/path/to/python\"` \
             in config.toml (now {})",
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
pub(crate) fn uses_rls_trainer(settings: &Settings) -> bool {
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
            let value = secrets.get(name).filter(|value| !value.is_empty());
            let malformed = value
                .filter(|_| name == "TINKER_API_KEY")
                .and_then(rl_settings::tinker_key_problem);
            finding(
                name,
                required,
                match (value, malformed) {
                    (Some(_), None) => Ok(format!("present; used for {used_for}")),
                    (Some(_), Some(problem)) => Err((
                        problem,
                        format!("correct {name} where it is set (the environment or RL_HOME/.env)"),
                    )),
                    (None, _) => Err((
                        format!("not set; needed for {used_for}"),
                        format!("export {name}=… or add it to RL_HOME/.env (mode 600)"),
                    )),
                },
            )
        })
        .collect()
}

/// Which keys an environment's own code is handed (`environment_keys`), and whether rl has
/// them: an environment that calls a provider itself fails without its key.
fn environment_keys_check(settings: &Settings, secrets: &Secrets) -> Check {
    let allowed = &settings.environment_keys;
    if allowed.is_empty() {
        return finding(
            "environment keys",
            false,
            Ok(
                "none: environments are handed no provider key (`environment_keys` in \
                config.toml names those they may have)"
                    .to_owned(),
            ),
        );
    }
    let missing: Vec<&str> = allowed
        .iter()
        .map(String::as_str)
        .filter(|name| secrets.get(name).is_none())
        .collect();
    let outcome = if missing.is_empty() {
        Ok(format!(
            "{}: handed to each run's environment and a pre-flight's",
            allowed.join(", ")
        ))
    } else {
        Err((
            format!(
                "{} allowed environments (`environment_keys`) but not set",
                missing.join(", ")
            ),
            "export it or add it to RL_HOME/.env (mode 600), or drop it from environment_keys"
                .to_owned(),
        ))
    };
    finding("environment keys", false, outcome)
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
