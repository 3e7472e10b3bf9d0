//! Which Python runs an environment: the run's (`python`) for an Atropos environment; for a
//! verifiers environment the venv it was installed into from the package registry (`rl setup
//! --env PACKAGE`: its file lies in that venv), else its own venv (`rl setup --env NAME` makes
//! it in `<home>/venvs/environments/NAME/`), else the operator's shared one for its kind
//! (`[verifiers] python_v1|python_v0`). verifiers' two APIs cannot share one Python, and
//! neither has atroposlib, so the run's never does. One rule every face and layer asks.

use std::path::{Path, PathBuf};

use crate::{EnvironmentKind, Settings};

/// The folder, under the state directory, of the Pythons rl manages.
pub const VENVS_DIR: &str = "venvs";
/// Under [`VENVS_DIR`]: what `rl setup --env` installed for each environment, and the
/// verifiers environments' own venvs.
pub const ENVIRONMENTS_DIR: &str = "environments";

/// An environment's name or key as a file name.
pub fn environment_file_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The venv `rl setup --env NAME` makes for a verifiers environment.
pub fn own_environment_venv(home: &Path, name: &str) -> PathBuf {
    home.join(VENVS_DIR)
        .join(ENVIRONMENTS_DIR)
        .join(environment_file_name(name))
}

/// The Python that runs environment `name` of `kind` in `file`, or `None` when a verifiers
/// environment has none yet (its fix: `rl setup --env NAME`).
pub fn environment_python(
    home: &Path,
    settings: &Settings,
    kind: EnvironmentKind,
    name: &str,
    file: &Path,
) -> Option<PathBuf> {
    if !kind.has_own_python() {
        return Some(settings.python.clone());
    }
    if let Some(package) = installed_packages(home)
        .into_iter()
        .find(|package| file.starts_with(&package.venv))
    {
        return Some(package.venv.join("bin").join("python"));
    }
    let own = own_environment_venv(home, name).join("bin").join("python");
    if own.exists() {
        return Some(own);
    }
    settings.verifiers.python_for(kind).map(Path::to_path_buf)
}

/// A package installed from the registry by `rl setup --env PACKAGE` into a venv of its own:
/// where its environments are found (`roots`, its top-level packages in the venv's
/// site-packages) and run (the venv's Python).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct InstalledPackage {
    /// The requirement as given (`staros-stardata==0.1.1`).
    pub requirement: String,
    /// Its distribution name, normalised: the venv's name.
    pub name: String,
    pub kind: EnvironmentKind,
    pub venv: PathBuf,
    pub roots: Vec<PathBuf>,
}

/// What records an installed package, beside its venv.
pub const INSTALLED_SUFFIX: &str = ".installed.json";

impl InstalledPackage {
    pub fn record_path(home: &Path, name: &str) -> PathBuf {
        home.join(VENVS_DIR)
            .join(ENVIRONMENTS_DIR)
            .join(format!("{}{INSTALLED_SUFFIX}", environment_file_name(name)))
    }
}

/// Every package `rl setup --env PACKAGE` installed, by name; a record that cannot be read is
/// left out (its venv is still there for `rl setup` to repair).
pub fn installed_packages(home: &Path) -> Vec<InstalledPackage> {
    let folder = home.join(VENVS_DIR).join(ENVIRONMENTS_DIR);
    let Ok(entries) = std::fs::read_dir(&folder) else {
        return Vec::new();
    };
    let mut packages: Vec<InstalledPackage> = entries
        .filter_map(Result::ok)
        .filter(|entry| {
            entry
                .file_name()
                .to_str()
                .is_some_and(|name| name.ends_with(INSTALLED_SUFFIX))
        })
        .filter_map(|entry| {
            let text = crate::read_text(&entry.path()).ok()?;
            serde_json::from_str(&text).ok()
        })
        .collect();
    packages.sort_by(|a, b| a.name.cmp(&b.name));
    packages
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atropos_runs_in_the_runs_python_and_verifiers_in_its_own_or_the_kinds() {
        let home = tempfile::tempdir().unwrap();
        let mut settings = Settings::default();
        let python_of = |settings: &Settings, kind, name| {
            environment_python(home.path(), settings, kind, name, Path::new("/e.py"))
        };
        assert_eq!(
            python_of(&settings, EnvironmentKind::Atropos, "x"),
            Some(settings.python.clone())
        );
        assert_eq!(
            python_of(&settings, EnvironmentKind::VerifiersV1, "x"),
            None
        );
        settings.verifiers.python_v1 = Some("/shared/v1/bin/python".into());
        assert_eq!(
            python_of(&settings, EnvironmentKind::VerifiersV1, "x"),
            Some("/shared/v1/bin/python".into())
        );
        assert_eq!(
            python_of(&settings, EnvironmentKind::VerifiersV0, "x"),
            None
        );
        let own = own_environment_venv(home.path(), "x/y").join("bin");
        std::fs::create_dir_all(&own).unwrap();
        std::fs::write(own.join("python"), "").unwrap();
        assert_eq!(
            python_of(&settings, EnvironmentKind::VerifiersV1, "x/y"),
            Some(own.join("python"))
        );
    }

    #[test]
    fn an_environment_installed_from_the_registry_runs_in_the_venv_holding_it() {
        let home = tempfile::tempdir().unwrap();
        let venv = own_environment_venv(home.path(), "staros-stardata");
        let package = InstalledPackage {
            requirement: "staros-stardata==0.1.1".to_owned(),
            name: "staros-stardata".to_owned(),
            kind: EnvironmentKind::VerifiersV0,
            venv: venv.clone(),
            roots: vec![venv.join("lib/python3.11/site-packages/stardata")],
        };
        let record = InstalledPackage::record_path(home.path(), &package.name);
        std::fs::create_dir_all(record.parent().unwrap()).unwrap();
        std::fs::write(&record, serde_json::to_vec(&package).unwrap()).unwrap();
        std::fs::write(record.with_file_name("broken.installed.json"), "{").unwrap();
        assert_eq!(
            installed_packages(home.path()),
            std::slice::from_ref(&package)
        );
        let file = package.roots[0].join("envs/constraint_gym.py");
        assert_eq!(
            environment_python(
                home.path(),
                &Settings::default(),
                EnvironmentKind::VerifiersV0,
                "constraint_gym",
                &file
            ),
            Some(venv.join("bin/python"))
        );
    }
}
