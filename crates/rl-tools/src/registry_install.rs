//! `rl setup --env PACKAGE` for a verifiers environment published on the package registry
//! (issue 41): the package's wheel is fetched without running any of its code (`pip download
//! --no-deps --only-binary :all:`), its source read for verifiers environments as discovery
//! reads a folder, and only then is a venv of its own made (`<home>/venvs/environments/NAME/`)
//! with that kind's pins and the package (those pins as constraints). The record
//! (`rl_settings::InstalledPackage`) is where its environments are found from then on
//! (`rl_config::installed_scans`) and what runs them (`rl_settings::environment_python`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use rl_settings::{EnvironmentKind, InstalledPackage};

use crate::ToolsError;
use crate::env_dependencies::Installed;
use crate::python_probe::last_line_of;
use crate::setup::Installer;

/// A requirement rl passes to pip: a distribution name, optional extras and an exact version
/// (`staros-stardata==0.1.1`) — never a URL, a path or an option. The version is required: a
/// mistyped environment name never reaches the registry, and what is installed is what was
/// asked.
pub fn parse_requirement(text: &str) -> Option<(String, &str)> {
    let (name_part, version) = match text.split_once("==") {
        Some((name, version)) => (name, Some(version)),
        None => return None,
    };
    let name = name_part.split('[').next().unwrap_or(name_part);
    let extras = &name_part[name.len()..];
    let name_ok = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    let extras_ok = extras.is_empty()
        || (extras.starts_with('[')
            && extras.ends_with(']')
            && extras[1..extras.len() - 1]
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, ',' | '-' | '_' | '.')));
    let version_ok = version.is_none_or(|v| {
        !v.is_empty()
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '+' | '!' | '-' | '_'))
    });
    (name_ok && extras_ok && version_ok && text.len() <= 200)
        .then(|| (name.to_ascii_lowercase().replace(['_', '.'], "-"), text))
}

/// Installs `requirement` from the registry into a venv of its own; refused when its wheel
/// holds no verifiers environment, or environments of both APIs.
pub fn install_from_registry(
    home: &Path,
    requirement: &str,
    installer: &Installer<'_>,
    say: &dyn Fn(&str),
) -> Result<(InstalledPackage, Installed), ToolsError> {
    let (name, requirement) = parse_requirement(requirement).ok_or_else(|| {
        ToolsError::Internal(format!(
            "{requirement:?} is neither an environment rl knows nor a package of the \
             registry with its version (`name==version`)"
        ))
    })?;
    let _held = crate::own_python::hold_environment_venv(home, &name, say)?;
    if let Some(package) = already_installed(home, &name, requirement) {
        say(&format!(
            "env {name}: {requirement} is installed in {} as recorded, nothing to do",
            package.venv.display()
        ));
        return Ok((
            package,
            Installed {
                nothing_to_do: true,
                packages: Vec::new(),
                record: Some(InstalledPackage::record_path(home, &name)),
            },
        ));
    }
    let venvs = home
        .join(rl_settings::VENVS_DIR)
        .join(rl_settings::ENVIRONMENTS_DIR);
    std::fs::create_dir_all(&venvs).map_err(|source| ToolsError::Io {
        action: "create",
        path: venvs.clone(),
        source,
    })?;
    let log = home.join(rl_settings::VENVS_DIR).join("setup.log");
    let download = tempfile::Builder::new()
        .prefix(".download-")
        .tempdir_in(&venvs)
        .map_err(|source| ToolsError::Io {
            action: "create",
            path: venvs.clone(),
            source,
        })?;
    say(&format!(
        "env {name}: fetching {requirement}'s wheel from the package registry"
    ));
    run(
        Command::new("python3")
            .args([
                "-m",
                "pip",
                "--disable-pip-version-check",
                "download",
                "--no-deps",
            ])
            .args(["--only-binary", ":all:", "--dest"])
            .arg(download.path())
            .arg(requirement),
        &log,
    )?;
    let wheel = std::fs::read_dir(download.path())
        .ok()
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| path.extension().is_some_and(|ext| ext == "whl"))
        .ok_or_else(|| {
            ToolsError::Internal(format!(
                "pip fetched no wheel of {requirement}; see {}",
                log.display()
            ))
        })?;
    let unpacked = download.path().join("unpacked");
    run(
        Command::new("python3")
            .args(["-m", "zipfile", "-e"])
            .arg(&wheel)
            .arg(&unpacked),
        &log,
    )?;
    let scan = rl_discovery::scan(
        &unpacked,
        &rl_discovery::ScanOptions {
            recursive: true,
            ..Default::default()
        },
    )?;
    let found: Vec<&rl_discovery::Environment> = scan
        .environments
        .iter()
        .filter(|env| env.kind.has_own_python())
        .collect();
    let kinds: BTreeSet<EnvironmentKind> = found.iter().map(|env| env.kind).collect();
    let kind = match kinds.iter().collect::<Vec<_>>().as_slice() {
        [kind] => **kind,
        [] => {
            return Err(ToolsError::Internal(format!(
                "{requirement} holds no verifiers environment (no `load_environment` module \
                 importing verifiers, no `vf.Taskset`): nothing installed"
            )));
        }
        _ => {
            return Err(ToolsError::Internal(format!(
                "{requirement} holds environments of both verifiers APIs, which cannot share \
                 one Python: nothing installed"
            )));
        }
    };
    // The top-level packages its environments live in, as the venv will hold them.
    let tops: BTreeSet<String> = found
        .iter()
        .filter_map(|env| env.file.split('/').next().map(str::to_owned))
        .filter(|top| Path::new(top).extension().is_none())
        .collect();
    say(&format!(
        "env {name}: {} {kind} environment(s) in {requirement}: {}",
        found.len(),
        found
            .iter()
            .map(|env| env.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let target = crate::own_python::EnvironmentToSetUp {
        name: name.clone(),
        file: wheel.clone(),
        kind,
        package: None,
    };
    let venv = rl_settings::own_environment_venv(home, &name);
    let mut installed = crate::own_python::ensure_pins(home, &target, installer, say)?;
    let python = venv.join("bin").join("python");
    let pinned = venv.join("rl-requirements.txt");
    say(&format!("env {name}: installing {requirement}"));
    installer.install(
        &python,
        &["-c", &pinned.to_string_lossy(), &wheel.to_string_lossy()],
        &log,
    )?;
    installed.packages.push(requirement.to_owned());
    let purelib = last_line_of(
        &python,
        &[
            "-c".to_owned(),
            "import sysconfig; print(sysconfig.get_paths()['purelib'])".to_owned(),
        ],
        None,
    )
    .map_err(ToolsError::Internal)?;
    let package = InstalledPackage {
        requirement: requirement.to_owned(),
        name: name.clone(),
        kind,
        venv,
        roots: tops
            .iter()
            .map(|top| PathBuf::from(&purelib).join(top))
            .collect(),
    };
    let record = InstalledPackage::record_path(home, &name);
    let text = serde_json::to_vec_pretty(&package)
        .map_err(|error| ToolsError::Internal(error.to_string()))?;
    rl_settings::write_atomically(&record, &text).map_err(ToolsError::Settings)?;
    say(&format!(
        "env {name}: ready; its environments are listed by rl_list_environments and run in {}",
        python.display()
    ));
    Ok((package, installed))
}

/// The record of `requirement` when its venv still holds its kind's pins, the package (at the
/// version asked, if one was) and every package folder the record names.
fn already_installed(home: &Path, name: &str, requirement: &str) -> Option<InstalledPackage> {
    let package = rl_settings::installed_packages(home)
        .into_iter()
        .find(|package| package.name == name && package.requirement == requirement)?;
    let python = package.venv.join("bin").join("python");
    let pins = rl_python::pins(rl_python::own_requirements(package.kind)?);
    let facts = crate::python_probe::run_probe(&python, &pins).ok()?;
    let holds_pins = crate::python_probe::unmet(&facts, &pins).is_empty();
    let distribution = requirement.split(['[', '=']).next().unwrap_or(requirement);
    let found = last_line_of(
        &python,
        &[
            "-c".to_owned(),
            "import sys; from importlib.metadata import version; print(version(sys.argv[1]))"
                .to_owned(),
            distribution.to_owned(),
        ],
        None,
    )
    .ok()?;
    let holds_package = requirement
        .split_once("==")
        .is_none_or(|(_, version)| found == version);
    let roots_there = package.roots.iter().all(|root| root.is_dir());
    (holds_pins && holds_package && roots_there).then_some(package)
}

fn run(command: &mut Command, log: &Path) -> Result<(), ToolsError> {
    crate::setup::run_logged(command, log)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_names_extras_and_exact_versions_reach_pip() {
        assert_eq!(
            parse_requirement("staros-stardata==0.1.1"),
            Some(("staros-stardata".to_owned(), "staros-stardata==0.1.1"))
        );
        assert_eq!(
            parse_requirement("Staros_Stardata[env]==0.1.1").map(|(name, _)| name),
            Some("staros-stardata".to_owned())
        );
        for refused in [
            "",
            "nope",
            "staros-stardata",
            "-r x.txt",
            "--index-url=http://x",
            "https://evil/x.whl",
            "./local",
            "a==",
            "a>=1",
            "a b",
            "a[x;y]",
        ] {
            assert_eq!(parse_requirement(refused), None, "{refused}");
        }
    }
}
