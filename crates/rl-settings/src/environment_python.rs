//! Which Python runs an environment: the run's (`python`) for an Atropos environment; for a
//! verifiers environment its own venv (`rl setup --env NAME` makes it in
//! `<home>/venvs/environments/NAME/`), else the operator's shared one for its kind
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

/// The Python that runs environment `name` of `kind`, or `None` when a verifiers environment
/// has none yet (its fix: `rl setup --env NAME`).
pub fn environment_python(
    home: &Path,
    settings: &Settings,
    kind: EnvironmentKind,
    name: &str,
) -> Option<PathBuf> {
    if !kind.has_own_python() {
        return Some(settings.python.clone());
    }
    let own = own_environment_venv(home, name).join("bin").join("python");
    if own.exists() {
        return Some(own);
    }
    settings.verifiers.python_for(kind).map(Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atropos_runs_in_the_runs_python_and_verifiers_in_its_own_or_the_kinds() {
        let home = tempfile::tempdir().unwrap();
        let mut settings = Settings::default();
        assert_eq!(
            environment_python(home.path(), &settings, EnvironmentKind::Atropos, "x"),
            Some(settings.python.clone())
        );
        assert_eq!(
            environment_python(home.path(), &settings, EnvironmentKind::VerifiersV1, "x"),
            None
        );
        settings.verifiers.python_v1 = Some("/shared/v1/bin/python".into());
        assert_eq!(
            environment_python(home.path(), &settings, EnvironmentKind::VerifiersV1, "x"),
            Some("/shared/v1/bin/python".into())
        );
        assert_eq!(
            environment_python(home.path(), &settings, EnvironmentKind::VerifiersV0, "x"),
            None
        );
        let own = own_environment_venv(home.path(), "x/y").join("bin");
        std::fs::create_dir_all(&own).unwrap();
        std::fs::write(own.join("python"), "").unwrap();
        assert_eq!(
            environment_python(home.path(), &settings, EnvironmentKind::VerifiersV1, "x/y"),
            Some(own.join("python"))
        );
    }
}
