//! The selection and its edits, persisted in the state directory so that separate processes
//! (two CLI calls, an MCP server and a CLI) see the same state.
//!
//! `selection.json` is replaced atomically (write a temporary file, then rename), and every
//! read-modify-write holds an exclusive `flock` on `selection.lock`, so concurrent writers
//! never lose each other's updates and readers never see half a file.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};

use crate::{ConfigError, Value};

const SELECTION_FILE: &str = "selection.json";
const LOCK_FILE: &str = "selection.lock";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Selection {
    pub environment: SelectedEnvironment,
    /// `{env}-{YYYYmmdd-HHMMSS}`, set at selection as the original tool did.
    pub wandb_name: String,
    pub selected_at: String,
    /// The latest edit of each field, in the order fields were first edited.
    pub edits: Vec<Edit>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SelectedEnvironment {
    pub key: String,
    pub name: String,
    pub class_name: String,
    /// Relative to `environments_dir`.
    pub file: String,
    pub environments_dir: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Edit {
    pub field: String,
    pub section: Section,
    pub value: Value,
    pub edited_at: String,
}

/// Which section of the run config an edit goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Section {
    Env,
    Tinker,
}

pub struct Store {
    home: PathBuf,
}

impl Store {
    /// Opens (creating, owner-only) the state directory.
    pub fn open(home: &Path) -> Result<Self, ConfigError> {
        create_private_dir(home)?;
        Ok(Self {
            home: home.to_owned(),
        })
    }

    pub fn home(&self) -> &Path {
        &self.home
    }

    pub fn selection(&self) -> Result<Option<Selection>, ConfigError> {
        read_selection(&self.home.join(SELECTION_FILE))
    }

    /// Runs `change` on the current selection under the lock; what it returns as `Some` is
    /// written. An error leaves the stored state exactly as it was.
    pub fn update<T>(
        &self,
        change: impl FnOnce(Option<Selection>) -> Result<(Option<Selection>, T), ConfigError>,
    ) -> Result<T, ConfigError> {
        let _lock = lock_exclusive(&self.home.join(LOCK_FILE))?;
        let path = self.home.join(SELECTION_FILE);
        let (next, result) = change(read_selection(&path)?)?;
        if let Some(next) = next {
            let text =
                serde_json::to_vec_pretty(&next).map_err(|error| ConfigError::CorruptState {
                    path: path.clone(),
                    reason: error.to_string(),
                })?;
            write_atomically(&path, &text)?;
        }
        Ok(result)
    }
}

/// Refuses a file rl reads or writes that is there but is no regular file: opening a FIFO
/// waits for a writer (or a reader) forever, and every face would hang.
pub fn refuse_special_file(path: &Path) -> Result<(), ConfigError> {
    match std::fs::metadata(path) {
        Ok(metadata) if !metadata.is_file() => Err(ConfigError::NotAFile {
            path: path.to_owned(),
            kind: rl_discovery::file_kind(metadata.file_type()).to_owned(),
        }),
        // Absent, or unreadable: what opening it says is the better message.
        _ => Ok(()),
    }
}

fn read_selection(path: &Path) -> Result<Option<Selection>, ConfigError> {
    refuse_special_file(path)?;
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(io("cannot read", path)(error)),
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|error| ConfigError::CorruptState {
            path: path.to_owned(),
            reason: error.to_string(),
        })
}

/// Writes `bytes` to `path` so that readers see either the old file or the new one, whole.
/// Holds an exclusive `flock` on `path` (created if missing) until the guard is dropped: the
/// read-modify-write of a state file by several processes at once.
pub fn lock_exclusive(path: &Path) -> Result<Flock<std::fs::File>, ConfigError> {
    refuse_special_file(path)?;
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(io("cannot open", path))?;
    Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, errno)| ConfigError::Io {
        action: "cannot lock",
        path: path.to_owned(),
        source: std::io::Error::from(errno),
    })
}

/// Replaces `path` with `bytes` through a file written beside it and renamed: a reader sees the
/// old file or the new one, never half of one.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), ConfigError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut temporary = tempfile::NamedTempFile::new_in(dir).map_err(io("cannot write in", dir))?;
    temporary
        .write_all(bytes)
        .map_err(io("cannot write", path))?;
    temporary
        .as_file()
        .sync_all()
        .map_err(io("cannot write", path))?;
    temporary
        .persist(path)
        .map_err(|error| io("cannot replace", path)(error.error))?;
    Ok(())
}

pub(crate) fn create_private_dir(dir: &Path) -> Result<(), ConfigError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io("cannot create", dir))
}

pub(crate) fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> ConfigError {
    let path = path.to_owned();
    move |source| ConfigError::Io {
        action,
        path,
        source,
    }
}
