//! What the local engine's database says of a saved state, read before a continuation starts
//! anything: the engine (skyrl-tx 0.3.0) loads a state `tinker://<model>/weights/<name>` only
//! when its table `checkpoints` holds the row (`model_id` <model>, `checkpoint_id` <name>,
//! `checkpoint_type` `TRAINING`) with `status` `COMPLETED`; without it, it answers `404
//! Checkpoint not found` once the engine, run-api and trainer have started. skyrl-tx declares
//! both columns as its Python enums (`CheckpointType`, `CheckpointStatus`), which SQLAlchemy
//! stores by member name, upper case (`tx/tinker/db_models.py`, `api.py`'s
//! `validate_checkpoint`).

use std::path::{Path, PathBuf};

/// What the engine's database records of one saved state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineState {
    /// Saved to the end: the engine loads it.
    Completed,
    /// No database at `database`: the engine would start with none and know no state.
    NoDatabase { database: PathBuf },
    /// The database has no row for the state (or no table of states at all).
    NotRecorded { database: PathBuf },
    /// The row says `status` (`PENDING`: its save never ended; `FAILED`: it failed).
    NotCompleted { database: PathBuf, status: String },
    /// The database could not be read (damaged, or not SQLite).
    Unreadable { database: PathBuf, reason: String },
    /// The path is not one the local engine names (`tinker://<model>/weights/<name>`): its
    /// database cannot tell.
    NotAnEngineState,
}

/// skyrl-tx 0.3.0's `checkpoints` table as SQLAlchemy creates it: what tests make an engine
/// database of (the one schema rl reads, restated once).
#[doc(hidden)]
pub const CHECKPOINTS_TABLE: &str = "CREATE TABLE checkpoints (
    model_id VARCHAR NOT NULL, checkpoint_id VARCHAR NOT NULL,
    checkpoint_type VARCHAR(8) NOT NULL, status VARCHAR(9) NOT NULL,
    created_at DATETIME NOT NULL, completed_at DATETIME, error_message VARCHAR,
    PRIMARY KEY (model_id, checkpoint_id, checkpoint_type));";

/// The model and checkpoint ids a state path `tinker://<model>/weights/<name>` names, as
/// skyrl-tx's `TinkerPath.parse` and `load_weights` read it.
fn ids_of(state_path: &str) -> Option<(&str, &str)> {
    let rest = state_path.strip_prefix("tinker://")?;
    match rest.split('/').collect::<Vec<_>>()[..] {
        [model, "weights", name] if !model.is_empty() && !name.is_empty() => Some((model, name)),
        _ => None,
    }
}

/// What `database` (the engine's SQLite file) records of `state_path`. Read-only, as one
/// snapshot: a going parent's engine may be writing it, and a read-only connection never
/// checkpoints the log into the parent's file as it closes.
pub fn engine_state(database: &Path, state_path: &str) -> EngineState {
    let Some((model, name)) = ids_of(state_path) else {
        return EngineState::NotAnEngineState;
    };
    if !database.is_file() {
        return EngineState::NoDatabase {
            database: database.to_owned(),
        };
    }
    let unreadable = |error: rusqlite::Error| EngineState::Unreadable {
        database: database.to_owned(),
        reason: error.to_string(),
    };
    let status = rusqlite::Connection::open_with_flags(
        database,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .and_then(|connection| {
        // The engine holds its write lock for a moment at a time.
        connection.busy_timeout(std::time::Duration::from_secs(10))?;
        let has_table: bool = connection.query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'checkpoints')",
            [],
            |row| row.get(0),
        )?;
        if !has_table {
            return Ok(None);
        }
        let mut statement = connection.prepare(
            "SELECT status FROM checkpoints \
             WHERE model_id = ?1 AND checkpoint_id = ?2 AND checkpoint_type = 'TRAINING'",
        )?;
        let mut rows = statement.query([model, name])?;
        match rows.next()? {
            Some(row) => Ok(Some(row.get::<_, String>(0)?)),
            None => Ok(None),
        }
    });
    match status {
        Err(error) => unreadable(error),
        Ok(None) => EngineState::NotRecorded {
            database: database.to_owned(),
        },
        Ok(Some(status)) if status == "COMPLETED" => EngineState::Completed,
        Ok(Some(status)) => EngineState::NotCompleted {
            database: database.to_owned(),
            status,
        },
    }
}

/// The SQLite file a rendered engine command (its arguments) keeps its database in:
/// `--database-url sqlite:///<path>` (or `--database-url=…`); `None` for another database or
/// a command that names none.
pub fn engine_database_of(args: &[String]) -> Option<PathBuf> {
    let url = args.iter().enumerate().find_map(|(index, arg)| {
        if arg == "--database-url" {
            args.get(index + 1).map(String::as_str)
        } else {
            arg.strip_prefix("--database-url=")
        }
    })?;
    let path = url.strip_prefix("sqlite:///")?;
    // `sqlite:////abs/path` is an absolute path; `sqlite:///rel` one relative to the engine's
    // working directory, which rl does not know here.
    path.starts_with('/').then(|| PathBuf::from(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A database as skyrl-tx 0.3.0 creates it (its `checkpoints` table, as SQLAlchemy
    /// writes it), with `rows` (model, checkpoint, type, status).
    fn database(dir: &Path, rows: &[(&str, &str, &str, &str)]) -> PathBuf {
        let path = dir.join("tinker.db");
        let connection = rusqlite::Connection::open(&path).unwrap();
        connection.execute_batch(CHECKPOINTS_TABLE).unwrap();
        for (model, checkpoint, kind, status) in rows {
            connection
                .execute(
                    "INSERT INTO checkpoints VALUES (?1, ?2, ?3, ?4, '2026-01-01', NULL, NULL)",
                    [model, checkpoint, kind, status],
                )
                .unwrap();
        }
        path
    }

    #[test]
    fn a_state_is_loadable_only_when_its_training_row_is_completed() {
        let dir = tempfile::tempdir().unwrap();
        let path = database(
            dir.path(),
            &[
                ("model_a", "step_0", "TRAINING", "COMPLETED"),
                ("model_a", "step_0", "SAMPLER", "COMPLETED"),
                ("model_a", "step_2", "SAMPLER", "COMPLETED"),
                ("model_a", "step_4", "TRAINING", "PENDING"),
            ],
        );
        assert_eq!(
            engine_state(&path, "tinker://model_a/weights/step_0"),
            EngineState::Completed
        );
        // Sampler weights of step 2 are no state of step 2.
        assert_eq!(
            engine_state(&path, "tinker://model_a/weights/step_2"),
            EngineState::NotRecorded {
                database: path.clone()
            }
        );
        assert_eq!(
            engine_state(&path, "tinker://model_a/weights/step_4"),
            EngineState::NotCompleted {
                database: path.clone(),
                status: "PENDING".to_owned()
            }
        );
        assert_eq!(
            engine_state(&path, "tinker://model_b/weights/step_0"),
            EngineState::NotRecorded {
                database: path.clone()
            }
        );
        assert_eq!(
            engine_state(&path, "tinker://model_a/step_0"),
            EngineState::NotAnEngineState
        );
        let gone = dir.path().join("gone.db");
        assert_eq!(
            engine_state(&gone, "tinker://model_a/weights/step_0"),
            EngineState::NoDatabase { database: gone }
        );
    }

    #[test]
    fn a_database_without_states_or_not_sqlite_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.db");
        rusqlite::Connection::open(&empty)
            .unwrap()
            .execute_batch("CREATE TABLE models (model_id VARCHAR);")
            .unwrap();
        assert_eq!(
            engine_state(&empty, "tinker://m/weights/step_0"),
            EngineState::NotRecorded { database: empty }
        );
        let text = dir.path().join("text.db");
        std::fs::write(
            &text,
            "not a database, only text long enough to be read as a header",
        )
        .unwrap();
        assert!(matches!(
            engine_state(&text, "tinker://m/weights/step_0"),
            EngineState::Unreadable { .. }
        ));
    }

    #[test]
    fn the_database_is_where_the_engine_command_put_it() {
        let args = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            engine_database_of(&args(&[
                "-m",
                "rl_engine",
                "--database-url",
                "sqlite:////runs/ab/engine/tinker.db",
            ])),
            Some(PathBuf::from("/runs/ab/engine/tinker.db"))
        );
        assert_eq!(
            engine_database_of(&args(&["--database-url=sqlite:////x/t.db"])),
            Some(PathBuf::from("/x/t.db"))
        );
        assert_eq!(
            engine_database_of(&args(&["--database-url", "postgresql://h/db"])),
            None
        );
        assert_eq!(
            engine_database_of(&args(&["--database-url", "sqlite:///rel.db"])),
            None
        );
        assert_eq!(engine_database_of(&args(&["-m", "rl_engine"])), None);
    }
}
