//! What a resumed run takes over from its parent before it starts: the rows of the trainer's
//! record files up to the step it continues after, so its steps and checkpoints continue the
//! parent's, and the local engine's database and saved states, so the engine it starts can
//! load the parent's state. The parent may still be training (a fork of a going run): its
//! saved states are never rewritten once saved, and its database is read as one consistent
//! snapshot, never copied byte by byte while its engine writes it.

use std::io::ErrorKind;
use std::path::Path;

use rl_settings::{RunFolder, write_atomically};

use crate::ProcessError;

/// The trainer's files whose rows are numbered by step.
const STEP_FILES: [&str; 2] = [RunFolder::METRICS, RunFolder::CHECKPOINTS];

/// Copies into `child_dir` what it continues of `parent_dir`: the record rows of steps up to
/// `step`, and the parent's engine folder (its saved states linked, not copied: they can be
/// large and are never rewritten; its database copied, as the new engine writes to it).
pub fn carry_over(parent_dir: &Path, child_dir: &Path, step: u64) -> Result<(), ProcessError> {
    for name in STEP_FILES {
        let text = match std::fs::read(parent_dir.join(name)) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(error) if error.kind() == ErrorKind::NotFound => continue,
            Err(source) => return Err(io("read", &parent_dir.join(name), source)),
        };
        let kept = rows_up_to(&text, step);
        write_atomically(&child_dir.join(name), kept.as_bytes())?;
    }
    copy_engine(parent_dir, child_dir)
}

/// The local engine's folder of `run_dir` (when it has one) recreated in `to_dir`, for another
/// engine to start on: saved states linked, the database copied.
pub fn copy_engine(run_dir: &Path, to_dir: &Path) -> Result<(), ProcessError> {
    let engine = RunFolder::at(run_dir).engine();
    if engine.is_dir() {
        copy_tree(&engine, &RunFolder::at(to_dir).engine(), false)?;
    }
    Ok(())
}

/// The lines of a JSON-lines record whose `step` is at most `step`; rows without a step (the
/// final weights' event), the trainer's `capped` event (the parent's end, not the child's) and
/// unreadable lines belong to the parent's end and are left out.
fn rows_up_to(text: &str, step: u64) -> String {
    text.lines()
        .filter(|line| {
            serde_json::from_str::<serde_json::Value>(line)
                .ok()
                .filter(|row| {
                    row.get("event").and_then(serde_json::Value::as_str) != Some("capped")
                })
                .and_then(|row| row.get("step").and_then(serde_json::Value::as_u64))
                .is_some_and(|row_step| row_step <= step)
        })
        .fold(String::new(), |mut kept, line| {
            kept.push_str(line);
            kept.push('\n');
            kept
        })
}

/// The first bytes of every SQLite database file.
const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";
/// What SQLite keeps beside a database while it is open: its write-ahead log, the log's index,
/// a rollback journal. A snapshot of the database holds what they hold.
const SQLITE_SIDE_FILES: [&str; 3] = ["-wal", "-shm", "-journal"];

/// `from` recreated at `to`: folders made, files under `checkpoints/` hard-linked (copied when
/// the two are on different file systems), SQLite databases snapshotted (`snapshot_database`)
/// without their side files, other files copied. Symbolic links are not followed.
fn copy_tree(from: &Path, to: &Path, in_checkpoints: bool) -> Result<(), ProcessError> {
    std::fs::create_dir_all(to).map_err(|source| io("create", to, source))?;
    let entries = std::fs::read_dir(from).map_err(|source| io("read", from, source))?;
    for entry in entries {
        let entry = entry.map_err(|source| io("read", from, source))?;
        let kind = entry
            .file_type()
            .map_err(|source| io("read", &entry.path(), source))?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            // Saved weights and states: archives never rewritten once saved.
            let checkpoints = in_checkpoints || entry.file_name() == RunFolder::ENGINE_CHECKPOINTS;
            copy_tree(&entry.path(), &target, checkpoints)?;
        } else if kind.is_file() {
            if !in_checkpoints && is_database(&entry.path()) {
                snapshot_database(&entry.path(), &target)?;
                continue;
            }
            if !in_checkpoints && is_side_file_of_database(&entry.path()) {
                continue;
            }
            let linked = in_checkpoints && std::fs::hard_link(entry.path(), &target).is_ok();
            if !linked {
                match std::fs::copy(entry.path(), &target) {
                    Ok(_) => {}
                    // Pruned since the folder was listed: nobody loads it any more.
                    Err(error) if in_checkpoints && error.kind() == ErrorKind::NotFound => {}
                    Err(source) => return Err(io("copy", &entry.path(), source)),
                }
            }
        }
    }
    Ok(())
}

/// Whether `path` is an SQLite database (its header says so).
fn is_database(path: &Path) -> bool {
    use std::io::Read as _;
    let mut header = [0_u8; 16];
    std::fs::File::open(path)
        .and_then(|mut file| file.read_exact(&mut header))
        .is_ok_and(|()| &header == SQLITE_HEADER)
}

/// Whether `path` is the write-ahead log, its index or the journal of a database beside it.
fn is_side_file_of_database(path: &Path) -> bool {
    let Some(name) = path.file_name().and_then(|name| name.to_str()) else {
        return false;
    };
    SQLITE_SIDE_FILES.iter().any(|suffix| {
        name.strip_suffix(suffix)
            .is_some_and(|database| is_database(&path.with_file_name(database)))
    })
}

/// A consistent copy of the database at `from` written to `to`: SQLite's `VACUUM INTO` reads
/// one snapshot (the write-ahead log's committed pages included) while the parent's engine may
/// go on writing, where a byte copy of a database and its log taken at two moments can be a
/// damaged database. Read-only: a writable connection that is the database's last would
/// checkpoint its log into it as it closes, changing the parent's files.
fn snapshot_database(from: &Path, to: &Path) -> Result<(), ProcessError> {
    let connection = rusqlite::Connection::open_with_flags(
        from,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    // The engine holds its write lock for a moment at a time.
    connection.busy_timeout(std::time::Duration::from_secs(30))?;
    let target = to.to_str().ok_or_else(|| {
        io(
            "snapshot",
            to,
            std::io::Error::new(ErrorKind::InvalidInput, "the path is not UTF-8"),
        )
    })?;
    connection.execute("VACUUM INTO ?1", [target])?;
    Ok(())
}

fn io(action: &'static str, path: &Path, source: std::io::Error) -> ProcessError {
    ProcessError::Io {
        action,
        path: path.to_owned(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_after_the_step_and_without_one_are_left_out() {
        let text = "{\"step\": 1}\n{\"step\": 2, \"x\": 1}\n{\"step\": 3}\nnot json\n{\"event\": \"final_weights\"}\n\
                    {\"event\": \"capped\", \"step\": 2, \"cap\": \"max_cost\"}\n";
        assert_eq!(
            rows_up_to(text, 2),
            "{\"step\": 1}\n{\"step\": 2, \"x\": 1}\n"
        );
        assert_eq!(rows_up_to(text, 0), "");
    }

    #[test]
    fn the_engine_folder_is_taken_over_its_states_linked_its_database_copied() {
        use std::os::unix::fs::MetadataExt as _;
        let parent = tempfile::tempdir().unwrap();
        let child = tempfile::tempdir().unwrap();
        let state = parent.path().join("engine/checkpoints/model/step_2.tar.gz");
        std::fs::create_dir_all(state.parent().unwrap()).unwrap();
        std::fs::write(&state, b"state").unwrap();
        std::fs::write(parent.path().join("engine/tinker.db"), b"db").unwrap();
        std::fs::write(
            parent.path().join("metrics.jsonl"),
            "{\"step\": 1}\n{\"step\": 2}\n{\"step\": 3}\n",
        )
        .unwrap();

        carry_over(parent.path(), child.path(), 2).unwrap();

        let linked = child.path().join("engine/checkpoints/model/step_2.tar.gz");
        assert_eq!(
            std::fs::metadata(&linked).unwrap().ino(),
            std::fs::metadata(&state).unwrap().ino()
        );
        let db = child.path().join("engine/tinker.db");
        assert_eq!(std::fs::read(&db).unwrap(), b"db");
        assert_ne!(
            std::fs::metadata(&db).unwrap().ino(),
            std::fs::metadata(parent.path().join("engine/tinker.db"))
                .unwrap()
                .ino(),
            "the new engine writes its database: the parent's must stay as it was"
        );
        assert_eq!(
            std::fs::read_to_string(child.path().join("metrics.jsonl")).unwrap(),
            "{\"step\": 1}\n{\"step\": 2}\n"
        );
        assert!(!child.path().join("checkpoints.jsonl").exists());
    }

    /// An engine's database in `engine`, in WAL mode, with two rows still in its log; with
    /// `keep_log`, its writer leaves the log as it closes.
    fn engine_database(engine: &Path, keep_log: bool) -> rusqlite::Connection {
        std::fs::create_dir_all(engine).unwrap();
        let writer = rusqlite::Connection::open(engine.join("tinker.db")).unwrap();
        writer
            .set_db_config(
                rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
                keep_log,
            )
            .unwrap();
        writer.pragma_update(None, "journal_mode", "WAL").unwrap();
        writer
            .execute_batch(
                "CREATE TABLE futures (id INTEGER PRIMARY KEY, status TEXT);
                 INSERT INTO futures (status) VALUES ('done'), ('pending');",
            )
            .unwrap();
        writer
    }

    /// A database its engine is writing (a fork of a going run) is taken as one snapshot: what
    /// was committed, its write-ahead log included, and no side file beside it.
    #[test]
    fn a_database_in_use_is_taken_as_a_snapshot_without_its_log() {
        let (parent, child) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let engine = parent.path().join("engine");
        let writer = engine_database(&engine, false);
        assert!(engine.join("tinker.db-wal").exists(), "still in the log");

        copy_engine(parent.path(), child.path()).unwrap();

        let copied = child.path().join("engine");
        assert!(!copied.join("tinker.db-wal").exists());
        assert!(!copied.join("tinker.db-shm").exists());
        let reader = rusqlite::Connection::open(copied.join("tinker.db")).unwrap();
        let rows: i64 = reader
            .query_row("SELECT count(*) FROM futures", [], |row| row.get(0))
            .unwrap();
        assert_eq!(rows, 2);
        drop(writer);
    }

    /// A stopped engine's database whose log was never checkpointed (the parent of a resume,
    /// an evaluation's source) is copied without a byte of it changing.
    #[test]
    fn a_stopped_engines_database_is_only_read() {
        let (parent, child) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let engine = parent.path().join("engine");
        let database = engine.join("tinker.db");
        drop(engine_database(&engine, true));
        let log = engine.join("tinker.db-wal");
        assert!(log.exists(), "the log outlives its writer");
        let (before, log_before) = (
            std::fs::read(&database).unwrap(),
            std::fs::read(&log).unwrap(),
        );

        copy_engine(parent.path(), child.path()).unwrap();

        assert_eq!(std::fs::read(&database).unwrap(), before);
        assert_eq!(std::fs::read(&log).unwrap(), log_before);
        let reader = rusqlite::Connection::open(child.path().join("engine/tinker.db")).unwrap();
        let rows: i64 = reader
            .query_row("SELECT count(*) FROM futures", [], |row| row.get(0))
            .unwrap();
        assert_eq!(rows, 2);
    }
}
