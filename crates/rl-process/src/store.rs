//! The embedded store: every run, its components and an append-only event log, in SQLite
//! (`<home>/runs.db`, WAL) so that any process — CLI, MCP server, HTTP server, supervisor —
//! reads and writes the same truth, and a restart loses nothing.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rl_settings::RunId;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::ProcessError;
use crate::identity::ProcessIdentity;
use crate::state::{Component, ComponentStatus, Phase, RunState};

mod read_only;

const DATABASE_FILE: &str = "runs.db";
const OPENING_LOCK_FILE: &str = "runs.db.lock";
const SUPERVISOR_EVENT: &str = "supervisor";
/// The columns `run_from_row` reads, in its order.
const RUN_COLUMNS: &str = "id, environment, state, phase, created_at, updated_at, config_path, \
     api_port, trainer_port, supervisor_pid, supervisor_start_ticks, error, boot_id, slurm_job, \
     parent_id, start_step, lineage, changes, sweep_id";

mod lineage;
mod schema;
mod sweeps;
use lineage::lineage_from;
pub use lineage::{Lineage, LineageKind};
pub use sweeps::{
    NewSweep, PointOutcome, SweepCreated, SweepMember, SweepPoint, SweepPointState, SweepRecord,
    SweepState,
};

/// Whether `home` holds a store already (opening one creates it).
pub fn has_store(home: &Path) -> bool {
    home.join(DATABASE_FILE).is_file()
}

pub struct RunStore {
    connection: Connection,
    path: PathBuf,
    /// Opened without write access (a state directory the caller may only read): runs can be
    /// read, and what a writer would record (a lost run) is only shown.
    read_only: bool,
}

/// What is known of a run when it is created.
#[derive(Debug, Clone)]
pub struct NewRun {
    pub id: RunId,
    pub environment: String,
    pub config_path: PathBuf,
    pub api_port: Option<u16>,
    pub trainer_port: Option<u16>,
    /// Log file of each component, in start order: the run starts in the first one's phase.
    pub logs: Vec<(Component, PathBuf)>,
    /// Submitted to a scheduler: the run starts `starting: queued`, not in its first phase.
    pub queued: bool,
    /// Refused when this many runs are unfinished already (counted in the same transaction as
    /// the insert, so two callers at once cannot both take the last place).
    pub max_active: Option<u32>,
    /// The run this one continues, when it is a resumed run.
    pub resumed_from: Option<Lineage>,
    /// The sweep point it is made of.
    pub sweep: Option<SweepMember>,
}

#[derive(Debug, Clone)]
pub struct RunRecord {
    pub id: String,
    pub environment: String,
    pub state: RunState,
    pub created_at: String,
    pub updated_at: String,
    pub config_path: PathBuf,
    pub api_port: Option<u16>,
    pub trainer_port: Option<u16>,
    pub supervisor: Option<ProcessIdentity>,
    pub error: Option<String>,
    /// The boot the run was created in (`/proc/sys/kernel/random/boot_id`).
    pub boot_id: Option<String>,
    /// The SLURM job holding the run (the SLURM backend only).
    pub slurm_job: Option<String>,
    /// The run it continues, and how: a resumed, forked or extended run.
    pub resumed_from: Option<Lineage>,
    /// The sweep it is a point of.
    pub sweep: Option<String>,
    pub components: Vec<ComponentRecord>,
}

impl RunRecord {
    /// Whether the machine has restarted since the run was created: then none of its processes
    /// can exist, and its recorded pids name other processes.
    pub fn from_another_boot(&self) -> bool {
        crate::identity::is_another_boot(self.boot_id.as_deref())
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ComponentRecord {
    pub component: Component,
    pub process: Option<ProcessIdentity>,
    pub status: ComponentStatus,
    pub log_path: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Increases across all runs; pass the last one seen as `since` to get only newer events.
    pub seq: i64,
    pub at: String,
    pub kind: String,
    pub message: String,
}

/// Milliseconds are plenty for a run's history and keep the column aligned.
fn now() -> String {
    format!("{:.3}", jiff::Timestamp::now())
}

impl RunStore {
    /// Opens the state directory's store, read-only when the caller may not write there (an
    /// operator's folder shared for reading, a read-only mount).
    pub fn open(home: &Path) -> Result<Self, ProcessError> {
        let path = home.join(DATABASE_FILE);
        if !read_only::may_write(home, &path) {
            return Self::open_read_only(&path);
        }
        // Switching a new database to WAL takes an exclusive lock that SQLite does not wait for
        // (busy at once, whatever the timeout): two processes opening a new store together
        // must take turns. Held only while opening.
        let _opening = rl_settings::lock_exclusive(&home.join(OPENING_LOCK_FILE))?;
        // SQLite opens a FIFO and fails with "disk I/O error" (or waits on it): say what it is.
        for file in [DATABASE_FILE, "runs.db-wal", "runs.db-shm"] {
            rl_settings::refuse_special_file(&home.join(file))?;
        }
        let connection = Connection::open(&path)?;
        // Several processes share the file: readers must not block the supervisor's writes,
        // and a writer waits for another instead of failing at once.
        connection.busy_timeout(Duration::from_secs(10))?;
        connection.pragma_update(None, "journal_mode", "WAL")?;
        connection.pragma_update(None, "foreign_keys", true)?;
        let mut store = Self {
            connection,
            path,
            read_only: false,
        };
        store.migrate()?;
        Ok(store)
    }

    /// Whether the store was opened read-only.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn create_run(&mut self, run: &NewRun) -> Result<(), ProcessError> {
        let at = now();
        let transaction = self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let exists: bool = transaction
            .query_row(
                "SELECT 1 FROM runs WHERE id = ?1",
                [run.id.as_str()],
                |_| Ok(true),
            )
            .optional()?
            .unwrap_or(false);
        if exists {
            return Err(ProcessError::DuplicateRun(run.id.to_string()));
        }
        if let Some(lineage) = run.resumed_from.as_ref().filter(|l| l.kind.continues()) {
            // Checked with the insert: two callers resuming one run at once get one child.
            let active_child: Option<String> = transaction
                .query_row(
                    "SELECT id FROM runs WHERE parent_id = ?1 AND IFNULL(lineage, 'resume') != 'fork' AND state NOT IN ('stopped', 'completed', 'capped', 'failed', 'lost')",
                    [lineage.parent.as_str()],
                    |row| row.get(0),
                )
                .optional()?;
            if let Some(child) = active_child {
                return Err(ProcessError::AlreadyResumed {
                    parent: lineage.parent.to_string(),
                    child,
                });
            }
        }
        if let Some(max) = run.max_active {
            let active: u32 = transaction.query_row(
                "SELECT COUNT(*) FROM runs WHERE state NOT IN ('stopped', 'completed', 'capped', 'failed', 'lost')",
                [],
                |row| row.get(0),
            )?;
            if active >= max {
                return Err(ProcessError::TooManyRuns { active, max });
            }
        }
        let state = RunState::Starting(if run.queued {
            Phase::Queued
        } else {
            run.logs
                .first()
                .map_or(Phase::Api, |(component, _)| Phase::from(*component))
        });
        transaction.execute(
            "INSERT INTO runs (id, environment, state, phase, created_at, updated_at, config_path, api_port, trainer_port, boot_id, parent_id, start_step, lineage, changes, sweep_id)
             VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
            params![
                run.id.as_str(),
                run.environment,
                state.name(),
                state.phase().map(Phase::as_str),
                at,
                run.config_path.to_string_lossy(),
                run.api_port,
                run.trainer_port,
                crate::identity::boot_id(),
                run.resumed_from.as_ref().map(|lineage| lineage.parent.as_str()),
                run.resumed_from
                    .as_ref()
                    .map(|lineage| i64::try_from(lineage.step).unwrap_or(i64::MAX)),
                run.resumed_from.as_ref().map(|lineage| lineage.kind.as_str()),
                run.resumed_from
                    .as_ref()
                    .filter(|lineage| !lineage.changes.is_empty())
                    .map(|lineage| serde_json::to_string(&lineage.changes))
                    .transpose()
                    .map_err(|error| ProcessError::Store(error.to_string()))?,
                run.sweep.as_ref().map(|member| member.sweep.as_str()),
            ],
        )?;
        if let Some(member) = &run.sweep {
            sweeps::start_point(&transaction, member, &run.id)?;
        }
        for (component, log) in &run.logs {
            transaction.execute(
                "INSERT INTO components (run_id, component, status, log_path) VALUES (?1, ?2, 'not_started', ?3)",
                params![run.id.as_str(), component.as_str(), log.to_string_lossy()],
            )?;
        }
        insert_event(
            &transaction,
            run.id.as_str(),
            &at,
            "state",
            &format!("created; {}", state.label()),
        )?;
        transaction.commit()?;
        Ok(())
    }

    /// Moves the run to `next` when that is a valid transition from where it is now, in one
    /// transaction with its event. Returns the state before, or `None` when the move was refused
    /// (another writer got there first, or the run has finished).
    pub fn transition(
        &mut self,
        id: &RunId,
        next: RunState,
        message: &str,
    ) -> Result<Option<RunState>, ProcessError> {
        let transaction = self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let current = read_state(&transaction, id)?;
        if !current.can_become(next) {
            return Ok(None);
        }
        let at = now();
        transaction.execute(
            "UPDATE runs SET state = ?2, phase = ?3, updated_at = ?4 WHERE id = ?1",
            params![
                id.as_str(),
                next.name(),
                next.phase().map(Phase::as_str),
                at
            ],
        )?;
        let text = if message.is_empty() {
            next.label()
        } else {
            format!("{}: {message}", next.label())
        };
        insert_event(&transaction, id.as_str(), &at, "state", &text)?;
        transaction.commit()?;
        Ok(Some(current))
    }

    /// The run's state now.
    pub fn state(&self, id: &RunId) -> Result<RunState, ProcessError> {
        read_state(&self.connection, id)
    }

    /// An event that changes nothing but is worth following (readiness, stop details).
    pub fn note(&mut self, id: &RunId, kind: &str, message: &str) -> Result<(), ProcessError> {
        insert_event(&self.connection, id.as_str(), &now(), kind, message)?;
        Ok(())
    }

    /// Records the SLURM job that holds the run.
    pub fn set_slurm_job(&mut self, id: &RunId, job: &str) -> Result<(), ProcessError> {
        self.connection.execute(
            "UPDATE runs SET slurm_job = ?2, updated_at = ?3 WHERE id = ?1",
            params![id.as_str(), job, now()],
        )?;
        Ok(())
    }

    pub fn set_error(&mut self, id: &RunId, error: &str) -> Result<(), ProcessError> {
        let at = now();
        let transaction = self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        transaction.execute(
            "UPDATE runs SET error = ?2, updated_at = ?3 WHERE id = ?1",
            params![id.as_str(), error, at],
        )?;
        insert_event(&transaction, id.as_str(), &at, "error", error)?;
        transaction.commit()?;
        Ok(())
    }

    pub fn set_supervisor(
        &mut self,
        id: &RunId,
        supervisor: ProcessIdentity,
    ) -> Result<(), ProcessError> {
        write_supervisor(&self.connection, id, supervisor)?;
        Ok(())
    }

    /// Makes `supervisor` the run's owner, once its signal handlers are in place: refused when
    /// the run has ended, or another live supervisor owns it (a second `rl supervise`).
    /// Records the `supervisor` event that tells callers it may now be signalled.
    pub fn claim_supervisor(
        &mut self,
        id: &RunId,
        supervisor: ProcessIdentity,
    ) -> Result<(), ProcessError> {
        let transaction = self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let run = transaction
            .query_row(
                &format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1"),
                [id.as_str()],
                run_from_row,
            )
            .optional()?
            .ok_or_else(|| ProcessError::UnknownRun(id.to_string()))??;
        let (state, owner) = (run.state, run.supervisor);
        if state.is_finished() {
            return Err(ProcessError::Store(format!(
                "run {id} has already ended ({}); it needs no supervisor",
                state.label()
            )));
        }
        if let Some(owner) = owner.filter(|o| *o != supervisor && o.is_alive()) {
            return Err(ProcessError::Store(format!(
                "run {id} is already supervised by process {}",
                owner.pid
            )));
        }
        write_supervisor(&transaction, id, supervisor)?;
        insert_event(
            &transaction,
            id.as_str(),
            &now(),
            SUPERVISOR_EVENT,
            &format!("supervisor ready (pid {})", supervisor.pid),
        )?;
        transaction.commit()?;
        Ok(())
    }

    /// Whether the run's supervisor has claimed it (and so handles SIGTERM as a stop).
    pub fn supervisor_ready(&self, id: &RunId) -> Result<bool, ProcessError> {
        Ok(self
            .connection
            .query_row(
                "SELECT 1 FROM events WHERE run_id = ?1 AND kind = ?2 LIMIT 1",
                params![id.as_str(), SUPERVISOR_EVENT],
                |_| Ok(()),
            )
            .optional()?
            .is_some())
    }

    pub fn record_component(
        &mut self,
        id: &RunId,
        component: Component,
        process: Option<ProcessIdentity>,
        status: ComponentStatus,
    ) -> Result<(), ProcessError> {
        let (status_name, code) = match status {
            ComponentStatus::NotStarted => ("not_started", None),
            ComponentStatus::Running => ("running", None),
            ComponentStatus::Exited { code } => ("exited", Some(code)),
            ComponentStatus::Signalled { signal } => ("signalled", Some(signal)),
            ComponentStatus::Lost => ("lost", None),
        };
        let at = now();
        let transaction = self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        transaction.execute(
            "UPDATE components SET pid = COALESCE(?3, pid), start_ticks = COALESCE(?4, start_ticks), status = ?5, code = ?6
             WHERE run_id = ?1 AND component = ?2",
            params![id.as_str(), component.as_str(), process.map(|p| p.pid), process.map(|p| ticks_to_sql(p.start_ticks)), status_name, code],
        )?;
        let message = match status {
            ComponentStatus::Running => {
                format!("{component} started (pid {})", process.map_or(0, |p| p.pid))
            }
            ComponentStatus::Exited { code } => format!("{component} exited with code {code}"),
            ComponentStatus::Signalled { signal } => {
                format!("{component} ended by signal {signal}")
            }
            ComponentStatus::NotStarted => format!("{component} not started"),
            ComponentStatus::Lost => {
                format!("{component} has ended, unseen: its supervisor was gone")
            }
        };
        insert_event(&transaction, id.as_str(), &at, "component", &message)?;
        transaction.commit()?;
        Ok(())
    }

    pub fn run(&self, id: &RunId) -> Result<Option<RunRecord>, ProcessError> {
        let record = self
            .connection
            .query_row(
                &format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1"),
                [id.as_str()],
                run_from_row,
            )
            .optional()?;
        let Some(mut record) = record.transpose()? else {
            return Ok(None);
        };
        record.components = self.components(id.as_str())?;
        Ok(Some(record))
    }

    /// Every run, newest first.
    pub fn runs(&self) -> Result<Vec<RunRecord>, ProcessError> {
        let mut statement = self.connection.prepare(&format!(
            "SELECT {RUN_COLUMNS} FROM runs ORDER BY created_at DESC, id"
        ))?;
        let rows = statement.query_map([], run_from_row)?;
        let mut runs = Vec::new();
        for row in rows {
            let mut record = row??;
            record.components = self.components(&record.id)?;
            runs.push(record);
        }
        Ok(runs)
    }

    /// One run's components; the statement is cached, as `runs()` asks once per run.
    fn components(&self, id: &str) -> Result<Vec<ComponentRecord>, ProcessError> {
        let mut statement = self.connection.prepare_cached(
            "SELECT component, pid, start_ticks, status, code, log_path FROM components WHERE run_id = ?1",
        )?;
        let rows = statement.query_map([id], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, Option<u32>>(1)?,
                row.get::<_, Option<i64>>(2)?.map(ticks_from_sql),
                row.get::<_, String>(3)?,
                row.get::<_, Option<i32>>(4)?,
                row.get::<_, String>(5)?,
            ))
        })?;
        let mut components = Vec::new();
        for row in rows {
            let (component, pid, start_ticks, status, code, log_path) = row?;
            let status = match (status.as_str(), code) {
                ("not_started", _) => ComponentStatus::NotStarted,
                ("running", _) => ComponentStatus::Running,
                ("exited", Some(code)) => ComponentStatus::Exited { code },
                ("signalled", Some(signal)) => ComponentStatus::Signalled { signal },
                ("lost", _) => ComponentStatus::Lost,
                (other, _) => {
                    return Err(ProcessError::Store(format!(
                        "unknown component status '{other}'"
                    )));
                }
            };
            components.push(ComponentRecord {
                component: component.parse().map_err(ProcessError::Store)?,
                process: pid
                    .zip(start_ticks)
                    .map(|(pid, start_ticks)| ProcessIdentity { pid, start_ticks }),
                status,
                log_path: PathBuf::from(log_path),
            });
        }
        components.sort_by_key(|c| c.component);
        Ok(components)
    }

    /// Events of a run after `since` (0 for all), oldest first, at most `limit`.
    pub fn events(&self, id: &RunId, since: i64, limit: usize) -> Result<Vec<Event>, ProcessError> {
        let mut statement = self.connection.prepare(
            "SELECT seq, at, kind, message FROM events WHERE run_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
        )?;
        let rows = statement.query_map(params![id.as_str(), since, limit as i64], |row| {
            Ok(Event {
                seq: row.get(0)?,
                at: row.get(1)?,
                kind: row.get(2)?,
                message: row.get(3)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

fn insert_event(
    connection: &Connection,
    id: &str,
    at: &str,
    kind: &str,
    message: &str,
) -> rusqlite::Result<usize> {
    connection.execute(
        "INSERT INTO events (run_id, at, kind, message) VALUES (?1, ?2, ?3, ?4)",
        params![id, at, kind, message],
    )
}

fn write_supervisor(
    connection: &Connection,
    id: &RunId,
    supervisor: ProcessIdentity,
) -> rusqlite::Result<usize> {
    connection.execute(
        "UPDATE runs SET supervisor_pid = ?2, supervisor_start_ticks = ?3 WHERE id = ?1",
        params![
            id.as_str(),
            supervisor.pid,
            ticks_to_sql(supervisor.start_ticks)
        ],
    )
}

fn read_state(connection: &Connection, id: &RunId) -> Result<RunState, ProcessError> {
    let (name, phase): (String, Option<String>) = connection
        .query_row(
            "SELECT state, phase FROM runs WHERE id = ?1",
            [id.as_str()],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .optional()?
        .ok_or_else(|| ProcessError::UnknownRun(id.to_string()))?;
    RunState::from_parts(&name, phase.as_deref()).map_err(ProcessError::Store)
}

type RowResult = Result<RunRecord, ProcessError>;

fn run_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<RowResult> {
    let name: String = row.get(2)?;
    let phase: Option<String> = row.get(3)?;
    let supervisor_pid: Option<u32> = row.get(9)?;
    let supervisor_ticks: Option<u64> = row.get::<_, Option<i64>>(10)?.map(ticks_from_sql);
    let state = match RunState::from_parts(&name, phase.as_deref()) {
        Ok(state) => state,
        Err(reason) => return Ok(Err(ProcessError::Store(reason))),
    };
    Ok(Ok(RunRecord {
        id: row.get(0)?,
        environment: row.get(1)?,
        state,
        created_at: row.get(4)?,
        updated_at: row.get(5)?,
        config_path: PathBuf::from(row.get::<_, String>(6)?),
        api_port: row.get(7)?,
        trainer_port: row.get(8)?,
        supervisor: supervisor_pid
            .zip(supervisor_ticks)
            .map(|(pid, start_ticks)| ProcessIdentity { pid, start_ticks }),
        error: row.get(11)?,
        boot_id: row.get(12)?,
        slurm_job: row.get(13)?,
        resumed_from: match row.get::<_, Option<String>>(14)? {
            None => None,
            Some(parent) => match lineage_from(row, &parent)? {
                Ok(lineage) => Some(lineage),
                Err(error) => return Ok(Err(error)),
            },
        },
        sweep: row.get(18)?,
        components: Vec::new(),
    }))
}

/// SQLite integers are signed; clock ticks since boot stay far below `i64::MAX`.
fn ticks_to_sql(ticks: u64) -> i64 {
    i64::try_from(ticks).unwrap_or(i64::MAX)
}

fn ticks_from_sql(ticks: i64) -> u64 {
    u64::try_from(ticks).unwrap_or(0)
}
