//! How a process of rl's Python programs is started: one place decides the Python, the module
//! and `PYTHONPATH`, so every launch (a run's components, a pre-flight's models, the hosted
//! helper, the server of a run's checkpoints) finds rl's programs first and the operator's own
//! packages after them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const PYTHON_PATH: &str = "PYTHONPATH";

/// Whose packages, besides rl's own, a Python that runs one of rl's programs imports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Imports {
    /// rl's programs, then the operator's `PYTHONPATH`: a program run by the Python that runs
    /// atroposlib (the trainer, an environment, the hosted helper), which the operator's path
    /// was set for.
    WithOperators,
    /// rl's programs alone: the local engine runs in a Python of its own, whose pins (skyrl-tx,
    /// JAX) clash with atroposlib's; the operator's `PYTHONPATH` names atroposlib's side, whose
    /// packages would shadow the engine's.
    Alone,
}

/// One of rl's programs, ready to start: `program args…` with `env` set over what the child
/// inherits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// The operator's variables (`[child_environment]`), then `PYTHONPATH` (theirs within it).
    pub env: Vec<(String, String)>,
}

/// rl's installed programs and the operator's variables for the processes rl starts: what
/// every launch of one of rl's programs is made of.
#[derive(Debug, Clone, Copy)]
pub struct PythonLauncher<'a> {
    /// The folder [`crate::install`] wrote.
    programs: &'a Path,
    /// The operator's `[child_environment]`.
    operator: &'a BTreeMap<String, String>,
}

impl<'a> PythonLauncher<'a> {
    pub fn new(programs: &'a Path, operator: &'a BTreeMap<String, String>) -> Self {
        Self { programs, operator }
    }

    /// `python -m MODULE ARGS…` with the operator's variables and `PYTHONPATH` for `imports`.
    pub fn module(
        &self,
        python: &Path,
        module: &str,
        args: impl IntoIterator<Item = String>,
        imports: Imports,
    ) -> ProgramCommand {
        // Their `PYTHONPATH` is in the one pushed below.
        let mut env: Vec<(String, String)> = self
            .operator
            .iter()
            .filter(|(name, _)| *name != PYTHON_PATH)
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect();
        env.push(self.python_path(imports));
        ProgramCommand {
            program: python.to_path_buf(),
            args: ["-m".to_owned(), module.to_owned()]
                .into_iter()
                .chain(args)
                .collect(),
            env,
        }
    }

    /// The `PYTHONPATH` variable for a program whose command line is made elsewhere (a run's
    /// components come from the operator's command templates).
    pub fn python_path(&self, imports: Imports) -> (String, String) {
        match imports {
            Imports::WithOperators => python_path_of([self.programs], self.operator),
            Imports::Alone => (PYTHON_PATH.to_owned(), search_path([self.programs], None)),
        }
    }
}

/// The `PYTHONPATH` variable of `folders` in order, then the operator's own (from their
/// `[child_environment]`): never dropped, as their packages may be what the program or the
/// environment it runs imports. Also for a Python that runs no program of rl's (a
/// package-style environment run from its root).
pub fn python_path_of<'f>(
    folders: impl IntoIterator<Item = &'f Path>,
    operator: &BTreeMap<String, String>,
) -> (String, String) {
    let theirs = operator.get(PYTHON_PATH).map(String::as_str);
    (PYTHON_PATH.to_owned(), search_path(folders, theirs))
}

/// `folders` in order, then `theirs` when they have one, as `PYTHONPATH` separates them.
fn search_path<'f>(folders: impl IntoIterator<Item = &'f Path>, theirs: Option<&str>) -> String {
    folders
        .into_iter()
        .map(|folder| folder.to_string_lossy().into_owned())
        .chain(
            theirs
                .filter(|theirs| !theirs.is_empty())
                .map(str::to_owned),
        )
        .collect::<Vec<_>>()
        .join(":")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn operator(path: Option<&str>) -> BTreeMap<String, String> {
        [("HF_HOME", Some("/cache")), (PYTHON_PATH, path)]
            .into_iter()
            .filter_map(|(name, value)| Some((name.to_owned(), value?.to_owned())))
            .collect()
    }

    #[test]
    fn a_program_finds_rls_packages_first_and_the_operators_after() {
        let operator = operator(Some("/theirs:/more"));
        let launcher = PythonLauncher::new(Path::new("/home/python/abc"), &operator);
        let command = launcher.module(
            Path::new("/venv/bin/python"),
            "rl_trainer.hosted",
            ["list".to_owned()],
            Imports::WithOperators,
        );
        assert_eq!(command.program, Path::new("/venv/bin/python"));
        assert_eq!(command.args, ["-m", "rl_trainer.hosted", "list"]);
        assert_eq!(
            command.env,
            [
                ("HF_HOME".to_owned(), "/cache".to_owned()),
                (
                    PYTHON_PATH.to_owned(),
                    "/home/python/abc:/theirs:/more".to_owned()
                ),
            ]
        );
    }

    #[test]
    fn the_engines_own_python_is_given_rls_programs_alone() {
        let operator = operator(Some("/atroposlib-side"));
        let launcher = PythonLauncher::new(Path::new("/home/python/abc"), &operator);
        assert_eq!(
            launcher.python_path(Imports::Alone),
            (PYTHON_PATH.to_owned(), "/home/python/abc".to_owned())
        );
    }

    #[test]
    fn an_unset_or_empty_operators_path_adds_nothing() {
        for path in [None, Some("")] {
            let operator = operator(path);
            let launcher = PythonLauncher::new(Path::new("/p"), &operator);
            assert_eq!(launcher.python_path(Imports::WithOperators).1, "/p");
        }
        assert_eq!(
            python_path_of(
                [Path::new("/root"), Path::new("/root/pkg")],
                &operator(Some("/t"))
            ),
            (PYTHON_PATH.to_owned(), "/root:/root/pkg:/t".to_owned())
        );
    }
}
