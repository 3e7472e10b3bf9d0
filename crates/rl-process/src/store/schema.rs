//! The store's schema and its migrations: older databases are brought up to date on open.

use rusqlite::TransactionBehavior;

use super::{RunStore, sweeps};
use crate::ProcessError;

/// Bumped with every change to the schema below; older databases are migrated on open.
pub(super) const SCHEMA_VERSION: i64 = 5;

const SCHEMA: &str = "
CREATE TABLE runs (
    id TEXT PRIMARY KEY,
    environment TEXT NOT NULL,
    state TEXT NOT NULL,
    phase TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    config_path TEXT NOT NULL,
    api_port INTEGER,
    trainer_port INTEGER,
    supervisor_pid INTEGER,
    supervisor_start_ticks INTEGER,
    error TEXT,
    boot_id TEXT,
    slurm_job TEXT,
    parent_id TEXT,
    start_step INTEGER,
    lineage TEXT,
    changes TEXT,
    sweep_id TEXT
);
CREATE TABLE components (
    run_id TEXT NOT NULL REFERENCES runs(id),
    component TEXT NOT NULL,
    pid INTEGER,
    start_ticks INTEGER,
    status TEXT NOT NULL,
    code INTEGER,
    log_path TEXT NOT NULL,
    PRIMARY KEY (run_id, component)
);
CREATE TABLE events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL REFERENCES runs(id),
    at TEXT NOT NULL,
    kind TEXT NOT NULL,
    message TEXT NOT NULL
);
CREATE INDEX events_by_run ON events(run_id, seq);
";

impl RunStore {
    pub(super) fn migrate(&mut self) -> Result<(), ProcessError> {
        let transaction = self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let version: i64 =
            transaction.pragma_query_value(None, "user_version", |row| row.get(0))?;
        match version {
            0 => {
                transaction.execute_batch(SCHEMA)?;
                transaction.execute_batch(sweeps::SCHEMA)?;
                transaction.pragma_update(None, "user_version", SCHEMA_VERSION)?;
            }
            1..=4 => {
                // Version 2: the boot a run started in, so pids are never trusted across one.
                if version < 2 {
                    transaction.execute_batch("ALTER TABLE runs ADD COLUMN boot_id TEXT;")?;
                }
                // Version 3: the SLURM job holding a run, so any later `rl` can cancel it.
                if version < 3 {
                    transaction.execute_batch("ALTER TABLE runs ADD COLUMN slurm_job TEXT;")?;
                }
                // Version 4: the run a resumed run continues, and the step it continues after.
                if version < 4 {
                    transaction.execute_batch(
                        "ALTER TABLE runs ADD COLUMN parent_id TEXT; \
                         ALTER TABLE runs ADD COLUMN start_step INTEGER;",
                    )?;
                }
                // Version 5: how a run continues its parent (resume, fork, extension) and what
                // it changed; the sweep a run belongs to, and the sweeps with their queues.
                transaction.execute_batch(
                    "ALTER TABLE runs ADD COLUMN lineage TEXT; \
                     ALTER TABLE runs ADD COLUMN changes TEXT; \
                     ALTER TABLE runs ADD COLUMN sweep_id TEXT;",
                )?;
                transaction.execute_batch(sweeps::SCHEMA)?;
                transaction.pragma_update(None, "user_version", SCHEMA_VERSION)?;
            }
            SCHEMA_VERSION => {}
            newer => {
                return Err(ProcessError::Store(format!(
                    "{} has schema version {newer}, newer than this rl knows ({SCHEMA_VERSION}); upgrade rl",
                    self.path.display()
                )));
            }
        }
        transaction.commit()?;
        Ok(())
    }
}
