//! How an environment's file must be started for its imports of its own tree to resolve, read
//! from source as discovery reads it (nothing is run). A file runs as a script (`python FILE`,
//! its folder first on the import path) unless it, or a module of its tree it imports, imports
//! relatively (`from .curriculum import …`) or through its top package's name
//! (`from environments.x.y import …`): then it runs as a module of its package
//! (`python -m environments.x.env`), from the folder that holds the top package.
//!
//! Relative imports are resolved as the scan's resolver does (`.` is the importing file's
//! package, each further dot one package up), and a top package's name is the folder the
//! import's first part names among the importer's folders — checked on disk, where Python
//! will look.

use std::collections::{HashSet, VecDeque};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use crate::source::{MAX_SOURCE_BYTES, decode, read_source_bytes};
use crate::summary::{Import, summarize};

/// An environment file that runs as a module of its package.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageModule {
    /// The folder that holds the top package: first on the import path.
    pub root: PathBuf,
    /// The file's dotted module name under `root`, e.g. `environments.letters.letters_env`.
    pub name: String,
}

/// Modules of the tree followed from the environment's file; real packages import a handful.
const MAX_MODULES: usize = 64;

/// `Some` when `file` must run as a module of its package (see the module's documentation),
/// `None` when it runs as a script: a single-file environment, one importing its siblings by
/// their bare names, or one whose package cannot be named (a folder such as `my-env` on the
/// way, a file that cannot be read).
pub fn package_module(file: &Path) -> Option<PackageModule> {
    let file = std::fs::canonicalize(file).ok()?;
    let folder = file.parent()?.to_path_buf();
    if file.file_name() == Some(OsStr::new("__init__.py")) {
        return None;
    }
    // Folders the root must be (or lie above): each relative import's top package's parent.
    let mut needs: Vec<PathBuf> = Vec::new();
    // The root an import through the top package's name fixes, the environment's own first.
    let mut fixed: Option<PathBuf> = None;
    let mut seen = HashSet::from([file.clone()]);
    let mut queue = VecDeque::from([file.clone()]);
    while let Some(module) = queue.pop_front() {
        let Some(here) = module.parent() else {
            continue;
        };
        for import in imports_of(&module) {
            let reached = if import.level > 0 {
                relative(here, &import, &mut needs)
            } else if let Some(reached) = beside(&folder, &import) {
                reached
            } else if let Some((root, reached)) = through_top_package(here, &import) {
                if fixed.is_none() && folder.starts_with(&root) {
                    fixed = Some(root);
                }
                reached
            } else {
                Vec::new()
            };
            for next in reached {
                if seen.len() < MAX_MODULES && seen.insert(next.clone()) {
                    queue.push_back(next);
                }
            }
        }
    }
    let root = match fixed {
        Some(root) => root,
        None if needs.is_empty() => return None,
        None => {
            let mut root = needs
                .iter()
                .fold(folder.clone(), |root, need| common_ancestor(&root, need));
            // A folder with `__init__.py` is a package itself: its parent holds the top one.
            while root.join("__init__.py").is_file() {
                match root.parent() {
                    Some(parent) => root = parent.to_path_buf(),
                    None => break,
                }
            }
            root
        }
    };
    if root == folder {
        // The file's own folder first on the path: what running it as a script does.
        return None;
    }
    let name = module_name(&root, &file)?;
    Some(PackageModule { root, name })
}

/// The imports of a Python file; none when it cannot be read or parsed (Python will say why).
pub(crate) fn imports_of(file: &Path) -> Vec<Import> {
    let Ok(bytes) = read_source_bytes(file, MAX_SOURCE_BYTES) else {
        return Vec::new();
    };
    decode(&bytes)
        .ok()
        .and_then(|text| summarize(&text).ok())
        .map(|summary| summary.imports)
        .unwrap_or_default()
}

/// `from ..{module} import {names}` in a file of `here`: the root must hold the package the
/// dots reach; the modules it names are followed.
pub(crate) fn relative(here: &Path, import: &Import, needs: &mut Vec<PathBuf>) -> Vec<PathBuf> {
    // `.` is `here` (the importing file's package), each further dot one folder up.
    let Some(package) = here.ancestors().nth(import.level as usize - 1) else {
        return Vec::new();
    };
    let Some(holder) = package.parent() else {
        return Vec::new();
    };
    needs.push(holder.to_path_buf());
    modules(package, &import.module, &import.names)
}

/// An absolute import of a module beside the environment's file, as a script finds it (its
/// folder is first on the import path): followed, but it fixes no root.
pub(crate) fn beside(folder: &Path, import: &Import) -> Option<Vec<PathBuf>> {
    let first = import.module.first()?;
    exists(&folder.join(first)).then(|| modules(folder, &import.module, &import.names))
}

/// `from top.x.y import …` in a file of `here`, where `top` is one of the folders `here` lies
/// in and `x.y` (or one of the names) is in it: the folder holding `top` is the root. A bare
/// `import top` says nothing (any folder may share an installed package's name).
pub(crate) fn through_top_package(here: &Path, import: &Import) -> Option<(PathBuf, Vec<PathBuf>)> {
    let (top, rest) = import.module.split_first()?;
    for folder in here.ancestors() {
        if folder.file_name() != Some(OsStr::new(top)) {
            continue;
        }
        let holder = folder.parent()?;
        let names_a_module = if rest.is_empty() {
            import.names.iter().any(|name| exists(&folder.join(name)))
        } else {
            exists(&join(holder, &import.module))
        };
        if names_a_module {
            return Some((
                holder.to_path_buf(),
                modules(holder, &import.module, &import.names),
            ));
        }
    }
    None
}

/// The files of `module` under `base`, and of each name that is a module of it.
fn modules(base: &Path, module: &[String], names: &[String]) -> Vec<PathBuf> {
    let path = join(base, module);
    std::iter::once(file_of(&path))
        .chain(names.iter().map(|name| file_of(&path.join(name))))
        .flatten()
        .filter_map(|file| std::fs::canonicalize(file).ok())
        .collect()
}

fn join(base: &Path, parts: &[String]) -> PathBuf {
    parts
        .iter()
        .fold(base.to_path_buf(), |path, part| path.join(part))
}

/// The source of the module at `path` (without its extension): `path.py`, or the package's
/// `path/__init__.py`.
fn file_of(path: &Path) -> Option<PathBuf> {
    let mut script = path.as_os_str().to_owned();
    script.push(".py");
    let script = PathBuf::from(script);
    if script.is_file() {
        return Some(script);
    }
    let init = path.join("__init__.py");
    init.is_file().then_some(init)
}

/// A module or a package (a folder, with or without `__init__.py`) at `path`.
fn exists(path: &Path) -> bool {
    file_of(path).is_some() || path.is_dir()
}

fn common_ancestor(a: &Path, b: &Path) -> PathBuf {
    a.ancestors()
        .find(|ancestor| b.starts_with(ancestor))
        .unwrap_or(Path::new("/"))
        .to_path_buf()
}

/// `root/a/b/c.py` → `a.b.c`, when every part is a name Python can import.
fn module_name(root: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(root).ok()?.with_extension("");
    let parts = relative
        .components()
        .map(|part| part.as_os_str().to_str().filter(|part| is_identifier(part)))
        .collect::<Option<Vec<_>>>()?;
    (!parts.is_empty()).then(|| parts.join("."))
}

/// Python's keywords: never a module's name.
const KEYWORDS: [&str; 35] = [
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|first| first == '_' || first.is_alphabetic())
        && chars.all(|c| c == '_' || c.is_alphanumeric())
        && !KEYWORDS.contains(&name)
}

#[cfg(test)]
mod tests;
