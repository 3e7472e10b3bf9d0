//! What `rl` needs from the machine, checked one by one, each with the fix when it is missing:
//! the operator's settings, the Python that runs atroposlib, atroposlib itself, the
//! tinker-atropos tree and its environments, the keys (present or not, never their values), and
//! a writable state directory.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use rl_config::{SETTINGS_FILE, Secrets, Settings};
use serde::{Deserialize, Serialize};
use wait_timeout::ChildExt;

/// The oldest Python atroposlib 0.4.0 runs on.
pub const MIN_PYTHON: (u32, u32) = (3, 11);
/// Importing atroposlib takes seconds; a Python that hangs longer is a finding, not a wait.
const PYTHON_TIMEOUT: Duration = Duration::from_secs(60);

/// One thing checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Check {
    pub name: String,
    pub ok: bool,
    /// What was found (a version, a path, a count).
    pub detail: String,
    /// What to do when it is not ok.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
    /// A missing optional thing (a key only some tools use) does not make the machine unfit.
    pub required: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthReport {
    /// Every required check is ok.
    pub healthy: bool,
    pub checks: Vec<Check>,
}

/// Runs every check. Never fails: a check that cannot be made is a failed check. `settings` is
/// the operator's settings or why they could not be read; without them the interpreter and the
/// tree are unknown, so only the keys (as the defaults require them) and the state directory
/// are checked beside the settings' own finding.
pub fn check(home: &Path, settings: Result<&Settings, &str>, secrets: &Secrets) -> HealthReport {
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
            checks.extend(python_checks(&settings.python));
            checks.extend(tree_checks(settings));
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

/// Python's version and atroposlib's, from one run of the configured interpreter.
#[derive(Debug, Deserialize)]
struct PythonFacts {
    version: [u32; 3],
    atroposlib: Option<String>,
    import_error: Option<String>,
}

const PROBE: &str = "import json, sys\n\
facts = {'version': list(sys.version_info[:3]), 'atroposlib': None, 'import_error': None}\n\
try:\n    import atroposlib  # noqa: F401\n    from importlib.metadata import version\n    \
facts['atroposlib'] = version('atroposlib')\n\
except Exception as error:\n    facts['import_error'] = f'{type(error).__name__}: {error}'[:300]\n\
print(json.dumps(facts))\n";

fn python_checks(python: &Path) -> Vec<Check> {
    let configure = format!(
        "install Python {}.{}+ and set `python = \"/path/to/python\"` in config.toml (now {})",
        MIN_PYTHON.0,
        MIN_PYTHON.1,
        python.display()
    );
    let facts = match run_probe(python) {
        Ok(facts) => facts,
        Err(problem) => {
            return vec![
                finding("python", true, Err((problem, configure))),
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
    let install = format!("{} -m pip install atroposlib==0.4.0", python.display());
    let atroposlib = match (facts.atroposlib, facts.import_error) {
        (Some(version), _) => finding("atroposlib", true, Ok(version)),
        (None, error) => finding(
            "atroposlib",
            true,
            Err((
                error.unwrap_or_else(|| "not importable".to_owned()),
                install,
            )),
        ),
    };
    vec![python_check, atroposlib]
}

fn run_probe(python: &Path) -> Result<PythonFacts, String> {
    let mut child = Command::new(python)
        .args(["-c", PROBE])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
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
    let line = output.lines().last().unwrap_or_default();
    serde_json::from_str(line).map_err(|_| {
        format!(
            "{} is not a Python that runs this check (it printed {:?})",
            python.display(),
            line.chars().take(80).collect::<String>()
        )
    })
}

fn tree_checks(settings: &Settings) -> Vec<Check> {
    let set_root = "set RL_TINKER_ATROPOS_ROOT (or tinker_atropos_root in config.toml, or --root) \
                    to your tinker-atropos checkout"
        .to_owned();
    let dir = match settings.environments_dir() {
        Ok(dir) => dir,
        Err(error) => {
            return vec![finding(
                "environments",
                true,
                Err((error.to_string(), set_root)),
            )];
        }
    };
    if !dir.is_dir() {
        return vec![finding(
            "environments",
            true,
            Err((format!("{} is not a folder", dir.display()), set_root)),
        )];
    }
    match settings
        .scan_environments(false)
        .map(|scan| scan.environments.len())
    {
        Ok(count) if count > 0 => vec![finding(
            "environments",
            true,
            Ok(format!("{count} in {}", dir.display())),
        )],
        Ok(_) => vec![finding(
            "environments",
            true,
            Err((
                format!("no environment in {}", dir.display()),
                "add one (a BaseEnv subclass), or point --envs-dir at the folder that has them"
                    .to_owned(),
            )),
        )],
        Err(error) => vec![finding(
            "environments",
            true,
            Err((error.to_string(), set_root)),
        )],
    }
}

fn key_checks(settings: &Settings, secrets: &Secrets) -> Vec<Check> {
    let keys = [
        (
            "TINKER_API_KEY",
            settings.trainer_needs_tinker_key,
            "training runs (the Tinker trainer)",
        ),
        (
            "WANDB_API_KEY",
            false,
            "WandB logging and metrics from WandB's API (local files need none)",
        ),
        (
            "OPENROUTER_API_KEY",
            false,
            "the pre-flight against OpenRouter's models (rl test)",
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
