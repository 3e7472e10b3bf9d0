//! An environment's own dependencies (issue 32): the imports its source makes from outside its
//! tree (read by discovery, nothing run) that the run's Python cannot find, and its
//! `requirements.txt` against what that Python holds — asked of the Python once
//! (`importlib.util.find_spec` of the top-level names, `importlib.metadata` of the
//! requirements' names; no module imported). `rl setup --env NAME` installs them (`install`),
//! and a run whose environment cannot import is refused before anything starts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::ToolsError;
use crate::answers::DependenciesView;
use crate::python_probe::last_line_of;
use crate::setup::Installer;
use rl_settings::EnvironmentKind;

/// One line of a requirements file: a package, pinned (`name==version`) or not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    pub name: String,
    /// The version after `==`, when the line pins one exactly.
    pub pinned: Option<String>,
}

/// The packages a requirements file names. Options (`-r`, `--index-url`, …) and comments are
/// left to pip, which installs the file as written.
pub fn read_requirements(text: &str) -> Vec<Requirement> {
    text.lines()
        .filter_map(|line| {
            let line = line.split(" #").next().unwrap_or_default().trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with('-') {
                return None;
            }
            let end = line
                .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
                .unwrap_or(line.len());
            let name = line[..end].to_owned();
            if name.is_empty() {
                return None;
            }
            let rest = line[end..].trim_start();
            let rest = match rest.strip_prefix('[') {
                Some(extras) => extras.split_once(']').map_or("", |(_, r)| r).trim_start(),
                None => rest,
            };
            let pinned = rest
                .strip_prefix("==")
                .map(|version| version.split(';').next().unwrap_or_default().trim())
                .filter(|version| !version.is_empty() && !version.contains([',', '*', ' ', '=']))
                .map(str::to_owned);
            Some(Requirement { name, pinned })
        })
        .collect()
}

/// What the run's Python lacks of one environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dependencies {
    /// The name `rl setup --env` takes.
    pub environment: String,
    pub kind: EnvironmentKind,
    pub python: PathBuf,
    pub env_file: PathBuf,
    /// Top-level modules it imports that the Python cannot find.
    pub missing_imports: Vec<String>,
    /// Top-level modules it imports only where it goes on without them (a `try` that warns,
    /// a fallback) that the Python cannot find: named, never a reason to refuse a run.
    pub missing_optional: Vec<String>,
    pub requirements: Option<PathBuf>,
    /// Its requirements missing or at another version: `name==version (found …)`.
    pub unmet_requirements: Vec<String>,
    /// Why the Python itself cannot run it: a verifiers environment without a Python of its
    /// own, or one without its kind of verifiers.
    pub python_problem: Option<String>,
}

impl Dependencies {
    /// The Python can import everything the environment asks for.
    pub fn ready(&self) -> bool {
        self.python_problem.is_none()
            && self.missing_imports.is_empty()
            && self.unmet_requirements.is_empty()
    }

    /// The call that installs what is missing.
    pub fn fix(&self) -> String {
        install_call(&self.environment)
    }

    /// What is missing, in words.
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = self.python_problem.iter().cloned().collect();
        if !self.missing_imports.is_empty() {
            parts.push(format!(
                "{} cannot import {}",
                self.python.display(),
                self.missing_imports.join(", ")
            ));
        }
        if !self.unmet_requirements.is_empty() {
            parts.push(format!(
                "{} asks for {}",
                self.requirements
                    .as_deref()
                    .map_or_else(String::new, |file| file.display().to_string()),
                self.unmet_requirements.join(", ")
            ));
        }
        parts.join("; ")
    }

    /// The answer's view: `None` when there is nothing to say (every import found, no
    /// requirements file).
    pub fn view(&self) -> Option<DependenciesView> {
        let something_to_say = !self.ready()
            || self.requirements.is_some()
            || !self.missing_optional.is_empty()
            || self.kind.has_own_python();
        something_to_say.then(|| DependenciesView {
            missing_imports: self.missing_imports.clone(),
            missing_optional_imports: self.missing_optional.clone(),
            requirements: self.requirements.clone(),
            unmet_requirements: self.unmet_requirements.clone(),
            python: self.python.clone(),
            python_problem: self.python_problem.clone(),
            fix: (!self.ready()).then(|| self.fix()),
        })
    }
}

/// What one probe of the Python found.
#[derive(Debug, Deserialize)]
struct Found {
    modules: BTreeMap<String, bool>,
    packages: BTreeMap<String, Option<String>>,
}

/// Finds each module (without importing it: `find_spec` of a top-level name loads nothing) and
/// each package's installed version. Arguments: modules, `--`, packages.
const PROBE: &str = "import json, sys, importlib.util\n\
from importlib.metadata import version, PackageNotFoundError\n\
args = sys.argv[1:]\ncut = args.index('--')\nfound = {'modules': {}, 'packages': {}}\n\
for name in args[:cut]:\n    try:\n        found['modules'][name] = importlib.util.find_spec(name) is not None\n    \
except Exception:\n        found['modules'][name] = False\n\
for name in args[cut + 1:]:\n    try:\n        found['packages'][name] = version(name)\n    \
except Exception:\n        found['packages'][name] = None\n\
print(json.dumps(found))\n";

/// The module whose absence makes a Python none of `kind`'s: atroposlib for an Atropos
/// environment; verifiers' v1 API, or its legacy API (`verifiers.envs`, which verifiers 0.4
/// no longer has), for a verifiers one.
pub(crate) fn kind_module(kind: EnvironmentKind) -> &'static str {
    match kind {
        EnvironmentKind::Atropos => "atroposlib",
        EnvironmentKind::VerifiersV1 => "verifiers.v1",
        EnvironmentKind::VerifiersV0 => "verifiers.envs",
    }
}

/// The environment of `kind` in `env_file` against `python`, asked from the folder it runs
/// from (a verifiers environment's package root, so its own package is found as the run will
/// find it). `None` when there is nothing to judge by: the Python cannot be asked, or an
/// Atropos environment's lacks atroposlib itself (not a run's Python: the health check names
/// that).
pub fn check_kind(
    python: &Path,
    env_file: &Path,
    environment: &str,
    kind: EnvironmentKind,
) -> Option<Dependencies> {
    let imports = rl_discovery::external_imports(env_file);
    let requirements = match &imports.requirements {
        Some(file) => read_requirements(&std::fs::read_to_string(file).ok()?),
        None => Vec::new(),
    };
    let required = kind_module(kind);
    let mut modules: Vec<String> = imports
        .modules
        .iter()
        .chain(&imports.optional)
        .cloned()
        .collect();
    if !modules.iter().any(|name| name == required) {
        modules.push(required.to_owned());
    }
    let mut args = vec!["-c".to_owned(), PROBE.to_owned()];
    args.extend(modules.iter().cloned());
    args.push("--".to_owned());
    args.extend(requirements.iter().map(|r| r.name.clone()));
    let folder = rl_discovery::run_module(kind, env_file)
        .filter(|_| kind.has_own_python())
        .map(|module| module.root);
    let line = last_line_of(python, &args, folder.as_deref().or(env_file.parent())).ok()?;
    let found: Found = serde_json::from_str(&line).ok()?;
    let lacks_kind = found.modules.get(required) != Some(&true);
    if lacks_kind && !kind.has_own_python() {
        return None;
    }
    let missing = |names: &[String]| -> Vec<String> {
        names
            .iter()
            .filter(|name| found.modules.get(*name) != Some(&true))
            .cloned()
            .collect()
    };
    let missing_imports = missing(&imports.modules);
    let missing_optional = missing(&imports.optional);
    let unmet_requirements = requirements
        .iter()
        .filter_map(|requirement| {
            let installed = found.packages.get(&requirement.name).cloned().flatten();
            let met = match (&requirement.pinned, &installed) {
                (_, None) => false,
                (Some(pinned), Some(installed)) => pinned == installed,
                (None, Some(_)) => true,
            };
            (!met).then(|| {
                let wanted = match &requirement.pinned {
                    Some(version) => format!("{}=={version}", requirement.name),
                    None => requirement.name.clone(),
                };
                format!(
                    "{wanted} (found {})",
                    installed.as_deref().unwrap_or("missing")
                )
            })
        })
        .collect();
    Some(Dependencies {
        environment: environment.to_owned(),
        kind,
        python: python.to_owned(),
        env_file: env_file.to_owned(),
        missing_imports,
        missing_optional,
        requirements: imports.requirements,
        unmet_requirements,
        // Seen, not guessed: the probe answered and the module was not found.
        python_problem: lacks_kind.then(|| {
            format!(
                "{} cannot import {required} (a {kind} environment needs it)",
                python.display()
            )
        }),
    })
}

/// What environment `name` of `kind` (in `env_file`) lacks, asked of the Python it runs in
/// (`rl_settings::environment_python`): the one question a run's start, a resume, a
/// pre-flight, `rl envs show` and `rl doctor` ask. `None` when there is nothing to judge by
/// (a Python that cannot be asked, or an Atropos environment's that lacks atroposlib: the
/// health check names that); a verifiers environment without a Python, or whose Python
/// answers that it lacks its kind's verifiers, is a problem.
pub fn examine(
    home: &Path,
    settings: &rl_settings::Settings,
    env_file: &Path,
    name: &str,
    kind: EnvironmentKind,
) -> Option<Dependencies> {
    let problem = |python: PathBuf, why: String| Dependencies {
        environment: name.to_owned(),
        kind,
        python,
        env_file: env_file.to_owned(),
        missing_imports: Vec::new(),
        missing_optional: Vec::new(),
        requirements: None,
        unmet_requirements: Vec::new(),
        python_problem: Some(why),
    };
    let Some(python) = rl_settings::environment_python(home, settings, kind, name, env_file) else {
        return Some(problem(
            rl_settings::own_environment_venv(home, name),
            format!("it is a {kind} environment and has no Python of its own yet"),
        ));
    };
    // `None`: the Python could not be asked (a timeout on a loaded machine, output it did not
    // print): nothing is judged, as for an Atropos environment.
    check_kind(&python, env_file, name, kind)
}

/// What `install` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    /// Nothing was missing: nothing installed, nothing written.
    pub nothing_to_do: bool,
    /// `name==version` of each package installed for the environment, as the Python now holds
    /// it (a requirement without a version: the one pip resolved).
    pub packages: Vec<String>,
    /// The file that records them.
    pub record: Option<PathBuf>,
}

/// Installs what `deps` lacks into its Python: the requirements file as written (pinned as it
/// says) when the environment has one, else its missing imports by name. Then the versions the
/// Python holds are recorded in `<home>/venvs/environments/<environment>.txt`. Nothing is done
/// when nothing is missing.
pub fn install(
    home: &Path,
    deps: &Dependencies,
    installer: &Installer<'_>,
    say: &dyn Fn(&str),
) -> Result<Installed, ToolsError> {
    let name = &deps.environment;
    if deps.ready() {
        say(&format!("env {name}: every import found, nothing to do"));
        return Ok(Installed {
            nothing_to_do: true,
            packages: Vec::new(),
            record: None,
        });
    }
    let (records, log) = records_and_log(home)?;
    let (args, names): (Vec<String>, Vec<String>) = match &deps.requirements {
        Some(file) => {
            let text = std::fs::read_to_string(file).map_err(|source| ToolsError::Io {
                action: "read",
                path: file.clone(),
                source,
            })?;
            (
                vec!["-r".to_owned(), file.to_string_lossy().into_owned()],
                read_requirements(&text)
                    .into_iter()
                    .map(|r| r.name)
                    .collect(),
            )
        }
        None => (deps.missing_imports.clone(), deps.missing_imports.clone()),
    };
    say(&format!(
        "env {name}: installing {} into {}",
        names.join(", "),
        deps.python.display()
    ));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    installer.install(&deps.python, &args, &log)?;
    let after = check_kind(&deps.python, &deps.env_file, name, deps.kind).ok_or_else(|| {
        ToolsError::Internal(format!(
            "{} could not be asked what it holds after installing",
            deps.python.display()
        ))
    })?;
    let mut probe = vec!["-c".to_owned(), PROBE.to_owned(), "--".to_owned()];
    probe.extend(names.iter().cloned());
    let versions = last_line_of(&deps.python, &probe, None)
        .ok()
        .and_then(|line| serde_json::from_str::<Found>(&line).ok())
        .map(|found| found.packages)
        .unwrap_or_default();
    let packages: Vec<String> = names
        .iter()
        .map(|package| match versions.get(package).cloned().flatten() {
            Some(version) => format!("{package}=={version}"),
            None => package.clone(),
        })
        .collect();
    let record = records.join(format!("{}.txt", rl_settings::environment_file_name(name)));
    let text = format!(
        "# What `rl setup --env {name}` installed into {} for {}{}; as installed.\n",
        deps.python.display(),
        deps.env_file.display(),
        deps.requirements
            .as_deref()
            .map_or_else(String::new, |file| format!(" (from {})", file.display()))
    );
    record_then_check(&record, text, &packages, &after, &log)?;
    say(&format!("env {name}: ready"));
    Ok(Installed {
        nothing_to_do: false,
        packages,
        record: Some(record),
    })
}

/// The folder of what `rl setup --env` installed for each environment (created), and the
/// installers' log beside it.
pub(crate) fn records_and_log(home: &Path) -> Result<(PathBuf, PathBuf), ToolsError> {
    let venvs = home.join(rl_settings::VENVS_DIR);
    let records = venvs.join(rl_settings::ENVIRONMENTS_DIR);
    std::fs::create_dir_all(&records).map_err(|source| ToolsError::Io {
        action: "create",
        path: records.clone(),
        source,
    })?;
    Ok((records, venvs.join("setup.log")))
}

/// Writes what was installed (`header`, then a line a package) to `record`, then refuses an
/// environment that still cannot import, naming the installers' log.
pub(crate) fn record_then_check(
    record: &Path,
    mut header: String,
    packages: &[String],
    after: &Dependencies,
    log: &Path,
) -> Result<(), ToolsError> {
    for package in packages {
        header.push_str(package);
        header.push('\n');
    }
    rl_settings::write_atomically(record, header.as_bytes()).map_err(ToolsError::Settings)?;
    if after.ready() {
        return Ok(());
    }
    Err(ToolsError::Internal(format!(
        "after installing, {}; see {}",
        after.describe(),
        log.display()
    )))
}

pub(crate) use rl_config::install_call;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requirements_pinned_or_not() {
        let found = read_requirements(
            "# games\nslugify==0.0.1\nhumanize\n  gymnasium[classic] == 1.0.0 ; python_version > '3'\n-r other.txt\nnumpy>=1.0 # any\nrich==13.*\n",
        );
        let pairs: Vec<(&str, Option<&str>)> = found
            .iter()
            .map(|r| (r.name.as_str(), r.pinned.as_deref()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("slugify", Some("0.0.1")),
                ("humanize", None),
                ("gymnasium", Some("1.0.0")),
                ("numpy", None),
                ("rich", None),
            ]
        );
    }
}
