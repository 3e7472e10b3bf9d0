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

/// What `rl setup --env NAME` installs: an environment rl knows, or a package of the registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetUpTarget {
    Known(EnvironmentToSetUp),
    /// No environment is called so, and it reads as a package name: its verifiers
    /// environments are installed from the registry.
    Registry(String),
}

impl Tools {
    /// What `rl setup --env NAME` means, said before minutes of installing: an environment of
    /// the folder (sub-folders too) or installed before, else a package of the registry, else
    /// the lookup's error (with its suggestions).
    pub fn set_up_target(&self, name: &str) -> Result<SetUpTarget, ToolsError> {
        match self.environment_to_set_up(name) {
            Err(ToolsError::Config(rl_config::ConfigError::Discovery(
                rl_discovery::DiscoveryError::UnknownEnvironment { .. },
            ))) if crate::registry_install::parse_requirement(name).is_some() => {
                Ok(SetUpTarget::Registry(name.to_owned()))
            }
            other => other.map(SetUpTarget::Known),
        }
    }

    /// The environment `name` (sub-folders too, and those installed from the registry).
    pub fn environment_to_set_up(&self, name: &str) -> Result<EnvironmentToSetUp, ToolsError> {
        let found = rl_config::find_environment(self.home(), &*self.settings()?, name, true)?;
        let (scan, env) = (&found.scan, found.environment());
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

/// Holds environment `name`'s own venv for one installer until the guard is dropped: two
/// `rl setup --env NAME` at once would build one venv and write one record together. The
/// second waits, saying so, then finds the first's work done (the callers' checks of what is
/// installed come after this). The lock is a file beside the venv (`NAME.lock`), never in it.
pub(crate) fn hold_environment_venv(
    home: &Path,
    name: &str,
    say: &dyn Fn(&str),
) -> Result<impl Sized, ToolsError> {
    let (records, _) = crate::env_dependencies::records_and_log(home)?;
    let lock = records.join(format!("{}.lock", rl_settings::environment_file_name(name)));
    rl_settings::lock_exclusive_or_wait(&lock, || {
        say(&format!(
            "env {name}: waiting for another install of {name}… (it holds {})",
            lock.display()
        ));
    })
    .map_err(ToolsError::Settings)
}

/// Makes `target`'s own Python hold its kind's pins (created when missing): what installing
/// its package, from its folder or from the registry, starts from.
pub(crate) fn ensure_pins(
    home: &Path,
    target: &EnvironmentToSetUp,
    installer: &Installer<'_>,
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
    let (_, log) = crate::env_dependencies::records_and_log(home)?;
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
    rl_settings::write_atomically(&pinned, requirements.as_bytes())
        .map_err(ToolsError::Settings)?;
    let pins = rl_python::pins(requirements);
    let holds_them = run_probe(&python, &pins).is_ok_and(|facts| unmet(&facts, &pins).is_empty());
    if holds_them {
        say(&format!("env {name}: {} as pinned already", target.kind));
    } else {
        say(&format!(
            "env {name}: installing {} pinned packages for a {} environment (minutes the first \
             time)",
            pins.len(),
            target.kind
        ));
        installer.install(&python, &["-r", &pinned.to_string_lossy()], &log)?;
    }
    Ok(Installed {
        nothing_to_do: holds_them,
        packages: vec![format!("-r {}", pinned.display())],
        record: None,
    })
}

/// Makes `target`'s own Python hold its kind's pins and its package folder, then checks that
/// the environment imports there. Nothing is done when all of that holds already.
pub fn ensure_own_python(
    home: &Path,
    settings: &rl_settings::Settings,
    target: &EnvironmentToSetUp,
    installer: &Installer<'_>,
    say: &dyn Fn(&str),
) -> Result<Installed, ToolsError> {
    let name = &target.name;
    let _held = hold_environment_venv(home, name, say)?;
    let python = rl_settings::own_environment_venv(home, name)
        .join("bin")
        .join("python");
    let log = home.join(rl_settings::VENVS_DIR).join("setup.log");
    let record = home
        .join(rl_settings::VENVS_DIR)
        .join(rl_settings::ENVIRONMENTS_DIR)
        .join(format!("{}.txt", rl_settings::environment_file_name(name)));
    let ready_before = python.is_file()
        && record.is_file()
        && examine(home, settings, &target.file, name, target.kind)
            .as_ref()
            .is_some_and(crate::env_dependencies::Dependencies::ready);
    let mut installed = ensure_pins(home, target, installer, say)?;
    if ready_before && installed.nothing_to_do {
        say(&format!(
            "env {name}: its own Python {} holds what it needs, nothing to do",
            python.display()
        ));
        installed.record = Some(record);
        return Ok(installed);
    }
    let pinned = rl_settings::own_environment_venv(home, name).join("rl-requirements.txt");
    if let Some(folder) = &target.package {
        say(&format!(
            "env {name}: installing its package {}",
            folder.display()
        ));
        installer.install(
            &python,
            &["-c", &pinned.to_string_lossy(), &folder.to_string_lossy()],
            &log,
        )?;
        installed.packages.push(folder.display().to_string());
    }
    let after = examine(home, settings, &target.file, name, target.kind).ok_or_else(|| {
        ToolsError::Internal(format!(
            "{} could not be asked what it holds after installing; see {}",
            python.display(),
            log.display()
        ))
    })?;
    let header = format!(
        "# What `rl setup --env {name}` installed into {} for the {} environment in {}.\n",
        python.display(),
        target.kind,
        target.file.display()
    );
    crate::env_dependencies::record_then_check(&record, header, &installed.packages, &after, &log)?;
    say(&format!("env {name}: ready in {}", python.display()));
    installed.nothing_to_do = false;
    installed.record = Some(record);
    Ok(installed)
}

/// `rl setup --env NAME`, whatever the kind: an Atropos environment's missing imports into the
/// run's Python (`settings.python`), a verifiers environment into its own. The Python it
/// installed into, and what.
pub fn set_up_environment(
    home: &Path,
    settings: &rl_settings::Settings,
    target: &SetUpTarget,
    installer: &Installer<'_>,
    say: &dyn Fn(&str),
) -> Result<(PathBuf, Installed), ToolsError> {
    let target = match target {
        SetUpTarget::Known(target) => target,
        SetUpTarget::Registry(requirement) => {
            let (package, installed) =
                crate::registry_install::install_from_registry(home, requirement, installer, say)?;
            return Ok((package.venv.join("bin").join("python"), installed));
        }
    };
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
