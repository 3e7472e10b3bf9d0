//! What a Python says of itself, asked by running it: its version, whether atroposlib imports,
//! the versions of the packages asked about (`PythonFacts`, `run_probe`), briefly kept and
//! asked once at a time per interpreter (`Probes`); the pins it does not meet (`unmet`), the
//! Tinker SDK it holds (`SdkVersions`), and `last_line_of`, the one way rl runs a Python for an
//! answer. `rl doctor` (health_check), `rl setup` and an environment's dependencies ask here.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::Deserialize;
use wait_timeout::ChildExt;

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
    pub(crate) fn facts(
        &self,
        python: &Path,
        pins: &[rl_python::Pin],
    ) -> Result<PythonFacts, String> {
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

/// Python's version, atroposlib's, and the installed versions of the packages asked about
/// (`None`: not installed), from one run of an interpreter.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct PythonFacts {
    pub(crate) version: [u32; 3],
    pub(crate) atroposlib: Option<String>,
    pub(crate) import_error: Option<String>,
    #[serde(default)]
    pub(crate) packages: std::collections::BTreeMap<String, Option<String>>,
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
    rl_settings::withhold(&mut command, &[]);
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

/// The Tinker SDK a Python holds, beside the one rl's programs are written for
/// ([`rl_python::SDK`]): the hosted service refuses SDKs it no longer supports, and the local
/// engine speaks the protocol of the pinned one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SdkVersions {
    /// `None`: not installed in that Python.
    pub installed: Option<String>,
    pub built_for: &'static str,
}

impl SdkVersions {
    pub(crate) fn of(facts: &PythonFacts) -> Self {
        Self {
            installed: facts.packages.get(rl_python::SDK.name).cloned().flatten(),
            built_for: rl_python::SDK.version,
        }
    }

    pub fn matches(&self) -> bool {
        self.installed.as_deref() == Some(self.built_for)
    }

    /// `0.38.0 (what rl was built for)`, `0.16.1 installed, rl was built for 0.38.0`, ...
    pub fn describe(&self) -> String {
        match &self.installed {
            Some(installed) if self.matches() => format!("{installed} (what rl was built for)"),
            Some(installed) => {
                format!("{installed} installed, rl was built for {}", self.built_for)
            }
            None => format!("not installed, rl was built for {}", self.built_for),
        }
    }
}
