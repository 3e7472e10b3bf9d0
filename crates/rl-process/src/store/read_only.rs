//! The store opened by a caller who may only read the state directory.

use std::path::Path;
use std::time::Duration;

use rusqlite::Connection;

use super::RunStore;
use super::schema::SCHEMA_VERSION;
use crate::ProcessError;

/// Whether this process may write the store at `path` in `home` (a missing store counts as the
/// folder's).
pub(super) fn may_write(home: &Path, path: &Path) -> bool {
    use nix::unistd::{AccessFlags, access};
    let writable = |place: &Path| access(place, AccessFlags::W_OK).is_ok();
    writable(home) && (!path.exists() || writable(path))
}

impl RunStore {
    /// A store that only reads `path`: none there is an empty one (no runs yet). SQLite reads a
    /// WAL database only beside its `-shm` file, which a folder without write access cannot
    /// get: then the file is read as it is on disk (`immutable`), what a writer has checkpointed.
    pub(super) fn open_read_only(path: &Path) -> Result<Self, ProcessError> {
        use rusqlite::OpenFlags;
        let opened = |connection: Connection| -> Result<Self, ProcessError> {
            let version: i64 =
                connection.pragma_query_value(None, "user_version", |row| row.get(0))?;
            if version != SCHEMA_VERSION {
                return Err(ProcessError::Store(format!(
                    "{} has schema version {version} and this rl reads {SCHEMA_VERSION}; it is \
                     upgraded by any rl command run with write access to its folder",
                    path.display()
                )));
            }
            connection.busy_timeout(Duration::from_secs(10))?;
            Ok(Self {
                connection,
                path: path.to_owned(),
                read_only: true,
            })
        };
        rl_settings::refuse_special_file(path)?;
        if !path.exists() {
            let mut store = Self {
                connection: Connection::open_in_memory()?,
                path: path.to_owned(),
                read_only: false,
            };
            store.migrate()?;
            store.read_only = true;
            return Ok(store);
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI;
        // A URI's own characters in the path are escaped, so the path stays one path.
        let escaped = path
            .display()
            .to_string()
            .replace('%', "%25")
            .replace('?', "%3f")
            .replace('#', "%23");
        let uri = |query: &str| format!("file:{escaped}{query}");
        match Connection::open_with_flags(uri("?mode=ro"), flags)
            .map_err(ProcessError::from)
            .and_then(opened)
        {
            Ok(store) => Ok(store),
            Err(_) => opened(Connection::open_with_flags(uri("?immutable=1"), flags)?),
        }
    }
}
