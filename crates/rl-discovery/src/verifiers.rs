//! verifiers environments in a tree: the package folders that depend on verifiers (their
//! `pyproject.toml`), and the modules of legacy (v0) environments, which are functions
//! (`load_environment`), not classes. v1 environments are classes deriving from `vf.Taskset`,
//! found by the resolver like atroposlib's (`known.rs`).

use std::collections::BTreeMap;
use std::path::Path;

use rl_settings::EnvironmentKind;

use crate::package::{PackageModule, package_module};
use crate::summary::ModuleSummary;

/// A `pyproject.toml` larger than this is not read: real ones are a few KiB.
const MAX_PYPROJECT_BYTES: u64 = 256 * 1024;

/// A folder whose `pyproject.toml` names verifiers among its dependencies: one environment
/// package, as published environments are laid out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Project {
    /// The folder holding `pyproject.toml`, relative to the scan root (`""` for the root).
    pub folder: String,
    /// `[project] name`, else the folder's name.
    pub name: String,
    /// The verifiers requirement as written (`verifiers>=0.1.9`).
    pub verifiers: String,
    /// `[project] description`: what a verifiers environment says of itself where its source
    /// has no docstring.
    pub description: Option<String>,
}

/// The project described by `folder/pyproject.toml`, when it depends on verifiers.
pub(crate) fn project_in(root: &Path, folder: &str) -> Option<Project> {
    let path = root.join(folder).join("pyproject.toml");
    let metadata = std::fs::metadata(&path).ok()?;
    if !metadata.is_file() || metadata.len() > MAX_PYPROJECT_BYTES {
        return None;
    }
    let text = std::fs::read_to_string(&path).ok()?;
    let document: toml::Table = text.parse().ok()?;
    let project = document.get("project")?.as_table()?;
    let verifiers = project
        .get("dependencies")?
        .as_array()?
        .iter()
        .filter_map(toml::Value::as_str)
        .find(|requirement| requirement_name(requirement) == "verifiers")?
        .to_owned();
    let text_of = |key: &str| {
        project
            .get(key)
            .and_then(toml::Value::as_str)
            .map(str::to_owned)
    };
    Some(Project {
        folder: folder.to_owned(),
        name: text_of("name")
            .unwrap_or_else(|| folder.rsplit('/').next().unwrap_or(folder).to_owned()),
        verifiers,
        description: text_of("description"),
    })
}

/// A PEP 508 requirement's distribution name, normalised (`Verifiers[x]>=1` → `verifiers`).
fn requirement_name(requirement: &str) -> String {
    requirement
        .trim()
        .split(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
        .next()
        .unwrap_or("")
        .to_ascii_lowercase()
        .replace(['_', '.'], "-")
}

/// The nearest project holding `file` (relative to the root).
pub(crate) fn project_of<'a>(
    projects: &'a BTreeMap<String, Project>,
    file: &str,
) -> Option<&'a Project> {
    let mut folder = file;
    while let Some((parent, _)) = folder.rsplit_once('/') {
        if let Some(project) = projects.get(parent) {
            return Some(project);
        }
        folder = parent;
    }
    projects.get("")
}

/// A module that defines `load_environment` at its top and imports verifiers' legacy API
/// (`import verifiers`, `from verifiers import …`; never `verifiers.v1`).
pub(crate) fn is_legacy_environment(summary: &ModuleSummary) -> bool {
    summary.load_environment.is_some()
        && summary.imports.iter().any(|import| {
            import.level == 0
                && import
                    .module
                    .first()
                    .is_some_and(|first| first == "verifiers")
                && import.module.get(1).is_none_or(|second| second != "v1")
                && !import.names.iter().any(|name| name == "v1")
        })
}

/// The module rl's verifiers runner imports for the environment in `file`, and the folder to
/// put first on the import path: for a v1 taskset its top package (verifiers finds a taskset by
/// its package, whose `__all__` exports it), for a v0 environment the file's own module —
/// each under the nearest folder above that is no package (no `__init__.py`).
pub fn entry_module(kind: EnvironmentKind, file: &Path) -> Option<PackageModule> {
    let file = std::fs::canonicalize(file).ok()?;
    let stem = file.file_stem()?.to_str()?.to_owned();
    let mut parts = if stem == "__init__" {
        Vec::new()
    } else {
        vec![stem]
    };
    let mut folder = file.parent()?.to_path_buf();
    while folder.join("__init__.py").is_file() {
        parts.push(folder.file_name()?.to_str()?.to_owned());
        folder = folder.parent()?.to_path_buf();
    }
    parts.reverse();
    let name = match kind {
        EnvironmentKind::VerifiersV1 => parts.first()?.clone(),
        _ => parts.join("."),
    };
    (!name.is_empty()).then_some(PackageModule { root: folder, name })
}

/// How the environment in `file` runs: the one question a run and a pre-flight ask, whatever
/// the kind. An Atropos file runs as a script unless it is a module of its package
/// ([`package_module`]); a verifiers environment always runs as its module.
pub fn run_module(kind: EnvironmentKind, file: &Path) -> Option<PackageModule> {
    match kind {
        EnvironmentKind::Atropos => package_module(file),
        EnvironmentKind::VerifiersV1 | EnvironmentKind::VerifiersV0 => entry_module(kind, file),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requirement_names_are_normalised() {
        assert_eq!(requirement_name("verifiers>=0.1.9"), "verifiers");
        assert_eq!(requirement_name("Verifiers[all] ==0.4.0"), "verifiers");
        assert_eq!(requirement_name("verifiers-extras"), "verifiers-extras");
        assert_eq!(
            requirement_name(" verifiers ; python_version>'3.10'"),
            "verifiers"
        );
    }

    #[test]
    fn projects_are_read_from_pyproject() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("env-a")).unwrap();
        std::fs::write(
            dir.path().join("env-a/pyproject.toml"),
            "[project]\nname = \"env-a\"\ndependencies = [\"datasets\", \"verifiers>=0.1.9\"]\n",
        )
        .unwrap();
        std::fs::create_dir_all(dir.path().join("other")).unwrap();
        std::fs::write(
            dir.path().join("other/pyproject.toml"),
            "[project]\nname = \"other\"\ndependencies = [\"numpy\"]\n",
        )
        .unwrap();
        let project = project_in(dir.path(), "env-a").unwrap();
        assert_eq!(project.name, "env-a");
        assert_eq!(project.verifiers, "verifiers>=0.1.9");
        assert_eq!(project_in(dir.path(), "other"), None);
        assert_eq!(project_in(dir.path(), "missing"), None);
        let projects = BTreeMap::from([("env-a".to_owned(), project)]);
        assert_eq!(
            project_of(&projects, "env-a/pkg/taskset.py").map(|p| p.name.as_str()),
            Some("env-a")
        );
        assert_eq!(project_of(&projects, "top.py"), None);
    }

    #[test]
    fn a_taskset_runs_as_its_top_package_and_a_v0_file_as_its_module() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for (path, text) in [
            ("count-up/count_up/__init__.py", ""),
            ("count-up/count_up/taskset.py", ""),
            ("echo-back/echo_back.py", ""),
        ] {
            std::fs::create_dir_all(root.join(path).parent().unwrap()).unwrap();
            std::fs::write(root.join(path), text).unwrap();
        }
        let v1 = run_module(
            EnvironmentKind::VerifiersV1,
            &root.join("count-up/count_up/taskset.py"),
        )
        .unwrap();
        assert_eq!(
            (v1.name.as_str(), v1.root),
            ("count_up", root.join("count-up"))
        );
        let v0 = run_module(
            EnvironmentKind::VerifiersV0,
            &root.join("echo-back/echo_back.py"),
        )
        .unwrap();
        assert_eq!(
            (v0.name.as_str(), v0.root),
            ("echo_back", root.join("echo-back"))
        );
        let in_package = entry_module(
            EnvironmentKind::VerifiersV0,
            &root.join("count-up/count_up/taskset.py"),
        )
        .unwrap();
        assert_eq!(in_package.name, "count_up.taskset");
        assert_eq!(
            run_module(
                EnvironmentKind::Atropos,
                &root.join("echo-back/echo_back.py")
            ),
            None
        );
    }
}
