//! verifiers environments in a tree: the package folders that depend on verifiers (their
//! `pyproject.toml`), and the modules of legacy (v0) environments, which are functions
//! (`load_environment`), not classes. v1 environments are classes deriving from `vf.Taskset`,
//! found by the resolver like atroposlib's (`known.rs`).

use std::collections::BTreeMap;
use std::path::Path;

use rl_settings::EnvironmentKind;

use crate::SkipReason;
use crate::package::{PackageModule, package_module};
use crate::source::read_source_bytes;
use crate::summary::ModuleSummary;

/// A `pyproject.toml` larger than this is not read: real ones are a few KiB.
const MAX_PYPROJECT_BYTES: u64 = 256 * 1024;
/// How deep a `pyproject.toml`'s arrays and inline tables may nest: real ones, a few levels.
const MAX_TOML_NESTING: usize = 32;

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

/// The project described by `folder/pyproject.toml`, when it depends on verifiers; `Ok(None)`
/// when there is none or it does not. A file rl cannot read as TOML within bounds (too large,
/// nested too deeply for the TOML parser's recursion on a tool server's stack, not TOML) is
/// why it was skipped, said rather than taken for a folder without a project.
pub(crate) fn project_in(root: &Path, folder: &str) -> Result<Option<Project>, SkipReason> {
    let path = root.join(folder).join("pyproject.toml");
    match std::fs::metadata(&path) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        _ => {}
    }
    let bytes = read_source_bytes(&path, MAX_PYPROJECT_BYTES)?;
    let text = String::from_utf8(bytes).map_err(|_| SkipReason::Unreadable {
        message: "not UTF-8 text, as TOML must be".to_owned(),
    })?;
    if let Some(line) = toml_nesting_beyond(&text, MAX_TOML_NESTING) {
        return Err(SkipReason::Unreadable {
            message: format!(
                "TOML nested more than {MAX_TOML_NESTING} deep at line {line}; rl reads no deeper"
            ),
        });
    }
    let document: toml::Table = text.parse().map_err(|error: toml::de::Error| {
        let line = error.span().map_or(0, |span| {
            1 + text[..span.start.min(text.len())].matches('\n').count()
        });
        SkipReason::Unreadable {
            message: format!("not valid TOML at line {line}: {}", error.message().trim()),
        }
    })?;
    let Some(project) = document.get("project").and_then(toml::Value::as_table) else {
        return Ok(None);
    };
    let Some(verifiers) = project
        .get("dependencies")
        .and_then(toml::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(toml::Value::as_str)
        .find(|requirement| requirement_name(requirement) == "verifiers")
    else {
        return Ok(None);
    };
    let text_of = |key: &str| {
        project
            .get(key)
            .and_then(toml::Value::as_str)
            .map(str::to_owned)
    };
    Ok(Some(Project {
        folder: folder.to_owned(),
        name: text_of("name")
            .unwrap_or_else(|| folder.rsplit('/').next().unwrap_or(folder).to_owned()),
        verifiers: verifiers.to_owned(),
        description: text_of("description"),
    }))
}

/// The line where `text`'s arrays and inline tables (`[`, `{` outside strings and comments)
/// first nest deeper than `limit`, if they do. The `toml` parser recurses once a level and, in
/// a debug build, needs more than a MiB of stack well before its own limit (80).
fn toml_nesting_beyond(text: &str, limit: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let (mut depth, mut line, mut i) = (0usize, 1usize, 0usize);
    while i < bytes.len() {
        match bytes[i] {
            b'\n' => line += 1,
            b'#' => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            quote @ (b'"' | b'\'') => {
                let triple = bytes[i..].starts_with(&[quote; 3]);
                i += if triple { 3 } else { 1 };
                while i < bytes.len() {
                    if quote == b'"' && bytes[i] == b'\\' {
                        i += 2;
                        continue;
                    }
                    if bytes[i] == b'\n' {
                        line += 1;
                    }
                    if triple && bytes[i..].starts_with(&[quote; 3]) {
                        // A closing run may be longer: `""""` ends with its last three.
                        i += 3;
                        while bytes.get(i) == Some(&quote) {
                            i += 1;
                        }
                        break;
                    }
                    if !triple && (bytes[i] == quote || bytes[i] == b'\n') {
                        i += 1;
                        break;
                    }
                    i += 1;
                }
                continue;
            }
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return Some(line);
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    None
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
        let project = project_in(dir.path(), "env-a").unwrap().unwrap();
        assert_eq!(project.name, "env-a");
        assert_eq!(project.verifiers, "verifiers>=0.1.9");
        assert_eq!(project_in(dir.path(), "other"), Ok(None));
        assert_eq!(project_in(dir.path(), "missing"), Ok(None));
        let projects = BTreeMap::from([("env-a".to_owned(), project)]);
        assert_eq!(
            project_of(&projects, "env-a/pkg/taskset.py").map(|p| p.name.as_str()),
            Some("env-a")
        );
        assert_eq!(project_of(&projects, "top.py"), None);
    }

    #[test]
    fn toml_nesting_is_counted_outside_strings_and_comments() {
        let nested = |depth: usize| format!("x = {}{}\n", "[".repeat(depth), "]".repeat(depth));
        assert_eq!(toml_nesting_beyond(&nested(3), 3), None);
        assert_eq!(
            toml_nesting_beyond(&format!("a = 1\n{}", nested(4)), 3),
            Some(2)
        );
        assert_eq!(
            toml_nesting_beyond("[[a.b]]\n[c]\nd = {e = [1, {f = 2}]}\n", 3),
            None
        );
        for quiet in [
            "a = \"[[[[\"\n",
            "a = '[[[[' # [[[[\n",
            "a = \"\"\"\n[[[[\n\"\"\"\n",
            "a = '''[[[['''\n",
            "a = \"\\\"[[[[\"\n",
        ] {
            assert_eq!(toml_nesting_beyond(quiet, 3), None, "{quiet}");
        }
        assert_eq!(
            toml_nesting_beyond("a = \"\"\"x\"\"\"\"\nb = [[[[1]]]]\n", 3),
            Some(2)
        );
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
