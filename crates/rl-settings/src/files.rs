//! How rl reads and writes the files it keeps: whole-file replacement, exclusive locks for a
//! read-modify-write by several processes, and refusing special files that would hang a reader.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

use nix::fcntl::{Flock, FlockArg};

use crate::SettingsError;

/// Refuses a file rl reads or writes that is there but is no regular file: opening a FIFO
/// waits for a writer (or a reader) forever, and every face would hang.
pub fn refuse_special_file(path: &Path) -> Result<(), SettingsError> {
    match std::fs::metadata(path) {
        Ok(metadata) if !metadata.is_file() => Err(SettingsError::NotAFile {
            path: path.to_owned(),
            kind: file_kind(metadata.file_type()).to_owned(),
        }),
        // Absent, or unreadable: what opening it says is the better message.
        _ => Ok(()),
    }
}

/// What a file that is not a regular one is, in words a person reads.
pub fn file_kind(file_type: std::fs::FileType) -> &'static str {
    if file_type.is_dir() {
        "folder"
    } else if file_type.is_fifo() {
        "FIFO (named pipe)"
    } else if file_type.is_socket() {
        "socket"
    } else if file_type.is_char_device() {
        "character device"
    } else if file_type.is_block_device() {
        "block device"
    } else if file_type.is_symlink() {
        "symbolic link"
    } else {
        "special file"
    }
}

/// Holds an exclusive `flock` on `path` (created if missing) until the guard is dropped: the
/// read-modify-write of a state file by several processes at once.
pub fn lock_exclusive(path: &Path) -> Result<Flock<std::fs::File>, SettingsError> {
    lock_exclusive_or_wait(path, || {})
}

/// [`lock_exclusive`], calling `waiting` first when another process holds the lock: a caller
/// about to wait (for minutes, behind an install) says so rather than seeming hung.
pub fn lock_exclusive_or_wait(
    path: &Path,
    waiting: impl FnOnce(),
) -> Result<Flock<std::fs::File>, SettingsError> {
    refuse_special_file(path)?;
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(io("cannot open", path))?;
    let cannot_lock = |errno: nix::errno::Errno| SettingsError::Io {
        action: "cannot lock",
        path: path.to_owned(),
        source: std::io::Error::from(errno),
    };
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(held) => Ok(held),
        Err((file, nix::errno::Errno::EWOULDBLOCK)) => {
            waiting();
            Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, errno)| cannot_lock(errno))
        }
        Err((_, errno)) => Err(cannot_lock(errno)),
    }
}

/// Replaces `path` with `bytes` through a file written beside it and renamed: a reader sees the
/// old file or the new one, never half of one.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), SettingsError> {
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

/// Creates `dir` and its parents, owner-only: the state directory holds runs' logs and configs.
pub fn create_private_dir(dir: &Path) -> Result<(), SettingsError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io("cannot create", dir))
}

/// Reads a whole text file, the error naming it.
pub fn read_text(path: &Path) -> Result<String, SettingsError> {
    refuse_special_file(path)?;
    std::fs::read_to_string(path).map_err(io("cannot read", path))
}

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> SettingsError {
    let path = path.to_owned();
    move |source| SettingsError::Io {
        action,
        path,
        source,
    }
}
