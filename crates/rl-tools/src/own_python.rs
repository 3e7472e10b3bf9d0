//! `rl setup --env NAME` for a verifiers environment (issue 41): a Python of its own in
//! `<home>/venvs/environments/NAME/` (`rl_settings::own_environment_venv`), holding its kind's
//! pinned verifiers (`rl_python::own_requirements`) and then its package with those pins as
//! constraints, so a v0 and a v1 environment are trained on one machine. Idempotent: a venv
//! that holds every pin and the package is left alone. Only the package registry is asked.

use std::path::{Path, PathBuf};

use rl_settings::EnvironmentKind;

use crate::env_dependencies::{Installed, examine};
use crate::python_probe::{run_probe, unmet};
use crate::setup::Installer;
use crate::{Tools, ToolsError};

/// The environment `rl setup --env NAME` names, found as selection finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvironmentToSetUp {
    pub name: String,
    pub file: PathBuf,
    pub kind: EnvironmentKind,
    /// A verifiers environment's package folder (its `pyproject.toml`), installed with it.
    pub package: Option<PathBuf>,
}

impl Tools {
    /// The environment `name` (sub-folders too): an unknown name is said before minutes of
    /// installing.
    pub fn environment_to_set_up(&self, name: &str) -> Result<EnvironmentToSetUp, ToolsError> {
        let scan = self.scan(true)?;
        let env = scan.find(name)?;
        Ok(EnvironmentToSetUp {
            name: name.to_owned(),
            file: env.path_in(&scan.root),
            kind: env.kind,
            package: env
                .project
                .as_ref()
                .map(|project| scan.root.join(&project.folder)),
        })
    }
}

/// Makes `target`'s own Python hold its kind's pins and its package, then checks that the
/// environment imports there.
pub fn ensure_own_python(
    home: &Path,
    settings: &rl_settings::Settings,
    target: &EnvironmentToSetUp,
    installer: &Installer,
    say: &dyn Fn(&str),
) -> Result<Installed, ToolsError> {
    let name = &target.name;
    let Some(requirements) = rl_python::own_requirements(target.kind) else {
        return Err(ToolsError::Internal(format!(
            "{name} is an {} environment: it runs in the run's Python",
            target.kind
        )));
    };
    let venv = rl_settings::own_environment_venv(home, name);
    let python = venv.join("bin").join("python");
    let venvs = home.join(rl_settings::VENVS_DIR);
    let records = venvs.join(rl_settings::ENVIRONMENTS_DIR);
    std::fs::create_dir_all(&records).map_err(|source| ToolsError::Io {
        action: "create",
        path: records.clone(),
        source,
    })?;
    let log = venvs.join("setup.log");
    let pins = rl_python::pins(requirements);
    let missing = match run_probe(&python, &pins) {
        Ok(facts) => unmet(&facts, &pins),
        Err(_) => vec!["the Python itself".to_owned()],
    };
    let before = examine(home, settings, &target.file, name, target.kind);
    let record = records.join(format!("{}.txt", rl_settings::environment_file_name(name)));
    if missing.is_empty()
        && before
            .as_ref()
            .is_some_and(crate::env_dependencies::Dependencies::ready)
        && record.is_file()
    {
        say(&format!(
            "env {name}: its own Python {} holds {} as pinned, nothing to do",
            python.display(),
            target.kind
        ));
        return Ok(Installed {
            nothing_to_do: true,
            packages: Vec::new(),
            record: Some(record),
        });
    }
    if !python.is_file() {
        say(&format!(
            "env {name}: creating its own Python {} ({})",
            venv.display(),
            installer.name()
        ));
        installer.create(&venv, &log)?;
    }
    // Kept beside the venv: what it was made from, for anyone who looks.
    let pinned = venv.join("rl-requirements.txt");
    std::fs::write(&pinned, requirements).map_err(|source| ToolsError::Io {
        action: "write",
        path: pinned.clone(),
        source,
    })?;
    let pinned_arg = pinned.to_string_lossy().into_owned();
    say(&format!(
        "env {name}: installing {} pinned packages for a {} environment (minutes the first time)",
        pins.len(),
        target.kind
    ));
    installer.install(&python, &["-r", &pinned_arg], &log)?;
    let mut packages: Vec<String> = Vec::new();
    if let Some(folder) = &target.package {
        say(&format!(
            "env {name}: installing its package {}",
            folder.display()
        ));
        let folder_arg = folder.to_string_lossy().into_owned();
        installer.install(&python, &["-c", &pinned_arg, &folder_arg], &log)?;
        packages.push(folder_arg);
    }
    let after = examine(home, settings, &target.file, name, target.kind).ok_or_else(|| {
        ToolsError::Internal(format!(
            "{} could not be asked what it holds after installing; see {}",
            python.display(),
            log.display()
        ))
    })?;
    let mut text = format!(
        "# What `rl setup --env {name}` installed into {} for the {} environment in {}.\n",
        python.display(),
        target.kind,
        target.file.display()
    );
    text.push_str(&format!("-r {pinned_arg}\n"));
    for package in &packages {
        text.push_str(package);
        text.push('\n');
    }
    rl_settings::write_atomically(&record, text.as_bytes()).map_err(ToolsError::Settings)?;
    if !after.ready() {
        return Err(ToolsError::Internal(format!(
            "after installing, {}; see {}",
            after.describe(),
            log.display()
        )));
    }
    say(&format!("env {name}: ready in {}", python.display()));
    Ok(Installed {
        nothing_to_do: false,
        packages: std::iter::once(format!("-r {pinned_arg}"))
            .chain(packages)
            .collect(),
        record: Some(record),
    })
}

/// `rl setup --env NAME`, whatever the kind: an Atropos environment's missing imports into the
/// run's Python (`settings.python`), a verifiers environment into its own. The Python it
/// installed into, and what.
pub fn set_up_environment(
    home: &Path,
    settings: &rl_settings::Settings,
    target: &EnvironmentToSetUp,
    installer: &Installer,
    say: &dyn Fn(&str),
) -> Result<(PathBuf, Installed), ToolsError> {
    if target.kind.has_own_python() {
        let installed = ensure_own_python(home, settings, target, installer, say)?;
        let python = rl_settings::own_environment_venv(home, &target.name)
            .join("bin")
            .join("python");
        return Ok((python, installed));
    }
    let deps =
        examine(home, settings, &target.file, &target.name, target.kind).ok_or_else(|| {
            ToolsError::Internal(format!(
                "cannot check what {} imports: the run's Python {} cannot be asked or lacks \
             atroposlib; `rl doctor` says why",
                target.name,
                settings.python.display()
            ))
        })?;
    let installed = crate::env_dependencies::install(home, &deps, installer, say)?;
    Ok((settings.python.clone(), installed))
}
