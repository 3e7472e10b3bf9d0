//! Listing the `.py` files of a scan root.

use std::path::{Path, PathBuf};

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;

use walkdir::WalkDir;

use crate::verifiers::{Project, project_in};
use crate::{DiscoveryError, SkipReason, SkippedFile};

pub(crate) struct Listing {
    /// Relative paths with `/` separators, sorted.
    pub files: Vec<String>,
    pub skipped: Vec<SkippedFile>,
    /// The verifiers packages among the folders walked (by folder).
    pub projects: BTreeMap<String, Project>,
}

/// How deep a top-level scan goes into a verifiers package folder (`env/pkg/sub/x.py`).
const PACKAGE_DEPTH: usize = 6;

pub(crate) fn check_root(root: &Path) -> Result<PathBuf, DiscoveryError> {
    let canonical = root.canonicalize().map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound => DiscoveryError::RootNotFound {
            path: root.to_owned(),
        },
        _ => DiscoveryError::RootUnreadable {
            path: root.to_owned(),
            source,
        },
    })?;
    if !canonical.is_dir() {
        return Err(DiscoveryError::RootNotADirectory {
            path: root.to_owned(),
        });
    }
    std::fs::read_dir(&canonical).map_err(|source| DiscoveryError::RootUnreadable {
        path: root.to_owned(),
        source,
    })?;
    Ok(canonical)
}

/// Links are followed (environment trees are often assembled from links), with walkdir's loop
/// detection turning a loop into a skip reason instead of an endless walk. A top-level scan
/// also walks the folders beside the files that are verifiers packages (a folder of
/// environment packages is how verifiers environments are kept), and only those.
pub(crate) fn python_files(root: &Path, recursive: bool) -> Listing {
    let mut listing = Listing {
        files: Vec::new(),
        skipped: Vec::new(),
        projects: BTreeMap::new(),
    };
    walk(
        &mut listing,
        root,
        root,
        if recursive { usize::MAX } else { 1 },
    );
    if !recursive {
        let folders: Vec<String> = listing
            .projects
            .keys()
            .filter(|f| !f.is_empty())
            .cloned()
            .collect();
        for folder in folders {
            walk(&mut listing, root, &root.join(&folder), PACKAGE_DEPTH);
        }
        listing.files.sort();
        listing.skipped.sort_by(|a, b| a.file.cmp(&b.file));
    }
    listing
}

fn walk(listing: &mut Listing, root: &Path, start: &Path, max_depth: usize) {
    let walker = WalkDir::new(start)
        .follow_links(true)
        .max_depth(max_depth)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|entry| entry.depth() == 0 || !is_ignored_dir(entry));
    for entry in walker {
        match entry {
            Ok(entry) if entry.file_type().is_dir() && !has_py_extension(entry.path()) => {
                // A top-level walk sees the folders beside the files (depth 1), where packages are.
                let folder = relative(root, entry.path());
                let folder = if folder == "." { String::new() } else { folder };
                if let Entry::Vacant(vacant) = listing.projects.entry(folder) {
                    match project_in(root, vacant.key()) {
                        Ok(Some(project)) => {
                            vacant.insert(project);
                        }
                        Ok(None) => {}
                        Err(reason) => {
                            let file = if vacant.key().is_empty() {
                                "pyproject.toml".to_owned()
                            } else {
                                format!("{}/pyproject.toml", vacant.key())
                            };
                            // A folder seen again (a package walked once more) is said once.
                            if !listing.skipped.iter().any(|skipped| skipped.file == file) {
                                listing.skipped.push(SkippedFile { file, reason });
                            }
                        }
                    }
                }
            }
            Ok(entry) if entry.file_type().is_file() && has_py_extension(entry.path()) => {
                let file = relative(root, entry.path());
                let within_root = entry.path().strip_prefix(root).unwrap_or(entry.path());
                if within_root.to_str().is_some() {
                    listing.files.push(file);
                } else {
                    // The lossy name would point at no file, and a run could not be given it.
                    listing.skipped.push(SkippedFile {
                        file,
                        reason: SkipReason::NameNotUtf8,
                    });
                }
            }
            // Named like Python but not a file (a FIFO, a socket, a device, a folder): said so,
            // never opened. A folder's contents are still scanned when recursive.
            Ok(entry) if entry.depth() > 0 && has_py_extension(entry.path()) => {
                listing.skipped.push(SkippedFile {
                    file: relative(root, entry.path()),
                    reason: SkipReason::NotAFile {
                        file_type: rl_settings::file_kind(entry.file_type()).to_owned(),
                    },
                });
            }
            Ok(_) => {}
            Err(error) => {
                let Some(path) = error.path() else { continue };
                if error.depth() > 0 && !has_py_extension(path) && error.loop_ancestor().is_none() {
                    // An unreadable non-Python entry is none of discovery's business.
                    continue;
                }
                let reason = match error.loop_ancestor() {
                    Some(ancestor) => SkipReason::SymlinkLoop {
                        ancestor: relative(root, ancestor),
                    },
                    None => SkipReason::Unreadable {
                        message: error
                            .io_error()
                            .map_or_else(|| error.to_string(), std::string::ToString::to_string),
                    },
                };
                listing.skipped.push(SkippedFile {
                    file: relative(root, path),
                    reason,
                });
            }
        }
    }
}

fn is_ignored_dir(entry: &walkdir::DirEntry) -> bool {
    entry.file_type().is_dir() && {
        let name = entry.file_name().to_string_lossy();
        name.starts_with('.') || name == "__pycache__" || name == "node_modules"
    }
}

fn has_py_extension(path: &Path) -> bool {
    path.extension().is_some_and(|ext| ext == "py")
}

fn relative(root: &Path, path: &Path) -> String {
    let relative = path.strip_prefix(root).unwrap_or(path);
    let parts: Vec<_> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect();
    if parts.is_empty() {
        ".".to_owned()
    } else {
        parts.join("/")
    }
}
