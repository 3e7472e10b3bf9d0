//! What an environment imports from outside its own tree, read from source as discovery reads
//! it (nothing is run): the top-level names of its imports and of the imports of the modules of
//! its tree it reaches, less the standard library and the imports only a type checker reads;
//! those in a `try` whose handler goes on without them (a fallback, a warning) are kept apart
//! as optional. Whether the run's Python can import them is asked of that Python (rl-tools);
//! here only the names, and the `requirements.txt` beside the environment (or beside its
//! package), are found.

use std::collections::{BTreeSet, HashSet, VecDeque};
use std::path::{Path, PathBuf};

use crate::module_names::STANDARD_LIBRARY_MODULES;
use crate::package::{beside, imports_of, relative, through_top_package};
use crate::summary::Need;

/// Modules of the tree followed from the environment's file, as `package_module` follows them.
const MAX_MODULES: usize = 64;

/// An environment's imports from outside its tree, and its requirements file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExternalImports {
    /// Top-level module names the environment stops without, sorted, each once (`gymnasium`
    /// for `from gymnasium.spaces import Box`).
    pub modules: Vec<String>,
    /// Top-level module names imported only in a `try` whose handler goes on without them
    /// (or in such a handler), sorted, none of them in `modules`.
    pub optional: Vec<String>,
    /// `requirements.txt` in the environment's folder, else in the nearest folder above that
    /// is still its package (holds `__init__.py`) or the package's parent.
    pub requirements: Option<PathBuf>,
}

/// The imports of `file` (an environment's source) that its own tree does not provide.
pub fn external_imports(file: &Path) -> ExternalImports {
    let Ok(file) = std::fs::canonicalize(file) else {
        return ExternalImports::default();
    };
    let Some(folder) = file.parent().map(Path::to_path_buf) else {
        return ExternalImports::default();
    };
    let mut modules = BTreeSet::new();
    let mut optional = BTreeSet::new();
    let mut seen = HashSet::from([file.clone()]);
    let mut queue = VecDeque::from([file.clone()]);
    while let Some(module) = queue.pop_front() {
        let Some(here) = module.parent() else {
            continue;
        };
        for import in imports_of(&module) {
            let reached = if import.level > 0 {
                relative(here, &import, &mut Vec::new())
            } else if let Some(reached) = beside(&folder, &import).or_else(|| beside(here, &import))
            {
                reached
            } else if let Some((_, reached)) = through_top_package(here, &import) {
                reached
            } else {
                if let Some(top) = import.module.first()
                    && !is_standard(top)
                {
                    match import.need {
                        Need::Required => modules.insert(top.clone()),
                        Need::Optional => optional.insert(top.clone()),
                        Need::TypeChecking => false,
                    };
                }
                Vec::new()
            };
            for next in reached {
                if seen.len() < MAX_MODULES && seen.insert(next.clone()) {
                    queue.push_back(next);
                }
            }
        }
    }
    ExternalImports {
        optional: optional.difference(&modules).cloned().collect(),
        modules: modules.into_iter().collect(),
        requirements: requirements_of(&folder),
    }
}

fn is_standard(name: &str) -> bool {
    name == "__future__"
        || name == "__main__"
        || STANDARD_LIBRARY_MODULES.binary_search(&name).is_ok()
}

/// `requirements.txt` in `folder`, or in the folders of its package above it (and the folder
/// holding the package).
fn requirements_of(folder: &Path) -> Option<PathBuf> {
    for dir in folder.ancestors() {
        let file = dir.join("requirements.txt");
        if file.is_file() {
            return Some(file);
        }
        if !dir.join("__init__.py").is_file() {
            return None;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, files: &[(&str, &str)]) {
        for (path, text) in files {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
    }

    #[test]
    fn only_what_the_tree_and_the_standard_library_do_not_provide() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            &[
                (
                    "pkg/env.py",
                    "import os, json\nfrom __future__ import annotations\nfrom atroposlib.envs.base import BaseEnv\nfrom .rules import score\nimport helper\ntry:\n    import ujson\nexcept ImportError:\n    ujson = None\ndef f():\n    from gymnasium.spaces import Box\n",
                ),
                ("pkg/__init__.py", ""),
                (
                    "pkg/rules.py",
                    "import reasoning_gym\nfrom . import helper\n",
                ),
                ("pkg/helper.py", "import numpy as np\n"),
                ("pkg/requirements.txt", "reasoning-gym==0.1.0\n"),
            ],
        );
        let found = external_imports(&dir.path().join("pkg/env.py"));
        assert_eq!(
            found.modules,
            ["atroposlib", "gymnasium", "numpy", "reasoning_gym"]
        );
        assert_eq!(found.optional, ["ujson"]);
        assert_eq!(
            found.requirements,
            Some(
                std::fs::canonicalize(dir.path())
                    .unwrap()
                    .join("pkg/requirements.txt")
            )
        );
    }

    #[test]
    fn a_requirements_file_outside_the_package_is_not_the_environments() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            &[("requirements.txt", "x\n"), ("envs/env.py", "import y\n")],
        );
        let found = external_imports(&dir.path().join("envs/env.py"));
        assert_eq!(found.modules, ["y"]);
        assert_eq!(found.requirements, None);
    }
}
