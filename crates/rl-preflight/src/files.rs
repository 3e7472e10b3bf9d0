//! A test folder's JSON files, written whole and read with the file named in any error.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::PreflightError;

/// Temporary file + rename: a reader sees the old file or the new one, never half. Each writer
/// has a temporary file of its own: two processes may record the same finding at once.
pub(crate) fn write_json(path: &Path, value: &impl Serialize) -> Result<(), PreflightError> {
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let io = |action| {
        move |source| PreflightError::Io {
            action,
            path: path.to_owned(),
            source,
        }
    };
    let text = serde_json::to_vec_pretty(value)
        .map_err(|error| io("serialise")(std::io::Error::other(error)))?;
    let write = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let temporary = path.with_extension(format!("json.{}-{write}.tmp", std::process::id()));
    std::fs::write(&temporary, text).map_err(io("write"))?;
    std::fs::rename(&temporary, path).map_err(io("replace"))
}

pub(crate) fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, PreflightError> {
    let text = std::fs::read(path).map_err(|source| PreflightError::Io {
        action: "read",
        path: path.to_owned(),
        source,
    })?;
    serde_json::from_slice(&text).map_err(|error| PreflightError::CorruptReport {
        path: path.to_owned(),
        reason: error.to_string(),
    })
}
