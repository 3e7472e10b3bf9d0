//! Sweeps in the store: each sweep's grid of points, which of them started which run and which
//! wait, and the process driving it. The queue lives here, not in a process, so that a sweep
//! outlives whoever started it: any `rl` command finds a sweep whose driver is gone and starts
//! another (`rl-tools`' sweeps).

use std::collections::BTreeMap;

use rl_settings::{RunId, SweepId, Value};
use rusqlite::{OptionalExtension, TransactionBehavior, params};

use super::{RunStore, now, ticks_from_sql, ticks_to_sql};
use crate::ProcessError;
use crate::identity::ProcessIdentity;

pub(super) const SCHEMA: &str = "
CREATE TABLE sweeps (
    id TEXT PRIMARY KEY,
    environment TEXT NOT NULL,
    state TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    max_parallel INTEGER NOT NULL,
    spec TEXT NOT NULL,
    driver_pid INTEGER,
    driver_start_ticks INTEGER
);
CREATE TABLE sweep_points (
    sweep_id TEXT NOT NULL REFERENCES sweeps(id),
    idx INTEGER NOT NULL,
    settings TEXT NOT NULL,
    state TEXT NOT NULL,
    run_id TEXT,
    error TEXT,
    PRIMARY KEY (sweep_id, idx)
);
";

/// The states of runs that have ended, as the runs table spells them.
const FINISHED_RUNS: &str = "('stopped', 'completed', 'capped', 'failed', 'lost')";

/// The point of a sweep a new run is made of.
#[derive(Debug, Clone)]
pub struct SweepMember {
    pub sweep: SweepId,
    pub point: u32,
}

/// Settles a taken point as its run is created, in the run's insert transaction.
pub(super) fn start_point(
    transaction: &rusqlite::Transaction<'_>,
    member: &SweepMember,
    run: &RunId,
) -> Result<(), ProcessError> {
    let changed = transaction.execute(
        "UPDATE sweep_points SET state = 'started', run_id = ?3 WHERE sweep_id = ?1 AND idx = ?2 AND state = 'starting'",
        params![member.sweep.as_str(), member.point, run.as_str()],
    )?;
    if changed == 0 {
        return Err(ProcessError::Store(format!(
            "point {} of sweep {} is not waiting for a run (the sweep was stopped meanwhile)",
            member.point, member.sweep
        )));
    }
    Ok(())
}

/// A sweep as its starter records it.
#[derive(Debug, Clone)]
pub struct NewSweep {
    pub id: SweepId,
    pub environment: String,
    pub max_parallel: u32,
    /// What its driver needs to start its points, as the caller (rl-tools) writes it.
    pub spec: String,
    /// Each point's settings, in the order they start.
    pub points: Vec<BTreeMap<String, Value>>,
}

/// What [`RunStore::create_sweep`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SweepCreated {
    /// The sweep is recorded.
    New,
    /// A sweep going already is this very request: nothing was recorded.
    Same(SweepId),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SweepState {
    /// Points are queued or their runs go.
    Running,
    /// Stopped by a caller: its queue dropped, its runs stopped.
    Stopped,
    /// Every point started and every run ended.
    Done,
}

impl SweepState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Stopped => "stopped",
            Self::Done => "done",
        }
    }

    fn parse(text: &str) -> Result<Self, ProcessError> {
        match text {
            "running" => Ok(Self::Running),
            "stopped" => Ok(Self::Stopped),
            "done" => Ok(Self::Done),
            other => Err(ProcessError::Store(format!(
                "unknown sweep state '{other}'"
            ))),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SweepPointState {
    /// Waiting for a place.
    Queued,
    /// Taken by a driver, its run being created.
    Starting,
    /// Its run exists (`run_id`).
    Started,
    /// Dropped from the queue by a stop.
    Dropped,
    /// Its run could not start (`error` says why).
    Refused,
}

impl SweepPointState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Starting => "starting",
            Self::Started => "started",
            Self::Dropped => "dropped",
            Self::Refused => "refused",
        }
    }

    fn parse(text: &str) -> Result<Self, ProcessError> {
        Ok(match text {
            "queued" => Self::Queued,
            "starting" => Self::Starting,
            "started" => Self::Started,
            "dropped" => Self::Dropped,
            "refused" => Self::Refused,
            other => {
                return Err(ProcessError::Store(format!(
                    "unknown sweep point state '{other}'"
                )));
            }
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct SweepPoint {
    pub index: u32,
    pub settings: BTreeMap<String, Value>,
    pub state: SweepPointState,
    pub run_id: Option<String>,
    pub error: Option<String>,
}

#[derive(Debug, Clone)]
pub struct SweepRecord {
    pub id: String,
    pub environment: String,
    pub state: SweepState,
    pub created_at: String,
    pub updated_at: String,
    pub max_parallel: u32,
    pub spec: String,
    pub driver: Option<ProcessIdentity>,
    pub points: Vec<SweepPoint>,
}

impl RunStore {
    /// Records `sweep` and its queue, unless a sweep going already has its very spec and
    /// parallelism (the same request again: that one is answered), or `max_going` sweeps are
    /// going already. Checked and written in one transaction: two identical requests at once
    /// make one sweep.
    pub fn create_sweep(
        &mut self,
        sweep: &NewSweep,
        max_going: Option<u32>,
    ) -> Result<SweepCreated, ProcessError> {
        let at = now();
        let transaction = self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let same: Option<String> = transaction
            .query_row(
                "SELECT id FROM sweeps WHERE state = 'running' AND spec = ?1 AND max_parallel = ?2
                 ORDER BY created_at LIMIT 1",
                params![sweep.spec, sweep.max_parallel],
                |row| row.get(0),
            )
            .optional()?;
        if let Some(id) = same {
            return Ok(SweepCreated::Same(SweepId::parse(&id).map_err(
                |error| ProcessError::Store(format!("sweep id {id:?} in the store: {error}")),
            )?));
        }
        if let Some(max) = max_going {
            let going: u32 = transaction.query_row(
                "SELECT COUNT(*) FROM sweeps WHERE state = 'running'",
                [],
                |row| row.get(0),
            )?;
            if going >= max {
                return Err(ProcessError::TooManySweeps { going, max });
            }
        }
        transaction.execute(
            "INSERT INTO sweeps (id, environment, state, created_at, updated_at, max_parallel, spec)
             VALUES (?1, ?2, 'running', ?3, ?3, ?4, ?5)",
            params![
                sweep.id.as_str(),
                sweep.environment,
                at,
                sweep.max_parallel,
                sweep.spec
            ],
        )?;
        for (index, settings) in sweep.points.iter().enumerate() {
            let settings = serde_json::to_string(settings)
                .map_err(|error| ProcessError::Store(error.to_string()))?;
            transaction.execute(
                "INSERT INTO sweep_points (sweep_id, idx, settings, state) VALUES (?1, ?2, ?3, 'queued')",
                params![sweep.id.as_str(), i64::try_from(index).unwrap_or(i64::MAX), settings],
            )?;
        }
        transaction.commit()?;
        Ok(SweepCreated::New)
    }

    pub fn sweep(&self, id: &SweepId) -> Result<Option<SweepRecord>, ProcessError> {
        let found = self
            .connection
            .query_row(
                "SELECT id, environment, state, created_at, updated_at, max_parallel, spec, driver_pid, driver_start_ticks FROM sweeps WHERE id = ?1",
                [id.as_str()],
                sweep_from_row,
            )
            .optional()?;
        let Some(mut sweep) = found.transpose()? else {
            return Ok(None);
        };
        sweep.points = self.points(id.as_str())?;
        Ok(Some(sweep))
    }

    /// Every sweep, newest first.
    pub fn sweeps(&self) -> Result<Vec<SweepRecord>, ProcessError> {
        let mut statement = self.connection.prepare(
            "SELECT id, environment, state, created_at, updated_at, max_parallel, spec, driver_pid, driver_start_ticks FROM sweeps ORDER BY created_at DESC, id",
        )?;
        let rows = statement.query_map([], sweep_from_row)?;
        let mut sweeps = Vec::new();
        for row in rows {
            let mut sweep = row??;
            sweep.points = self.points(&sweep.id)?;
            sweeps.push(sweep);
        }
        Ok(sweeps)
    }

    fn points(&self, id: &str) -> Result<Vec<SweepPoint>, ProcessError> {
        let mut statement = self.connection.prepare_cached(
            "SELECT idx, settings, state, run_id, error FROM sweep_points WHERE sweep_id = ?1 ORDER BY idx",
        )?;
        let rows = statement.query_map([id], |row| {
            Ok((
                row.get::<_, u32>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, String>(2)?,
                row.get::<_, Option<String>>(3)?,
                row.get::<_, Option<String>>(4)?,
            ))
        })?;
        let mut points = Vec::new();
        for row in rows {
            let (index, settings, state, run_id, error) = row?;
            points.push(SweepPoint {
                index,
                settings: serde_json::from_str(&settings)
                    .map_err(|error| ProcessError::Store(format!("a sweep point: {error}")))?,
                state: SweepPointState::parse(&state)?,
                run_id,
                error,
            });
        }
        Ok(points)
    }

    /// The next queued point of a running sweep, marked `starting`, when fewer than its
    /// `max_parallel` points are starting or have a run that has not ended: counted in the
    /// same transaction as the take, so two drivers at once never pass the bound.
    pub fn take_sweep_point(&mut self, id: &SweepId) -> Result<Option<SweepPoint>, ProcessError> {
        let transaction = self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let sweep: Option<(String, u32)> = transaction
            .query_row(
                "SELECT state, max_parallel FROM sweeps WHERE id = ?1",
                [id.as_str()],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()?;
        let Some((state, max_parallel)) = sweep else {
            return Err(ProcessError::Store(format!("no sweep {id}")));
        };
        if SweepState::parse(&state)? != SweepState::Running {
            return Ok(None);
        }
        let going: u32 = transaction.query_row(
            &format!(
                "SELECT COUNT(*) FROM sweep_points p LEFT JOIN runs r ON r.id = p.run_id
                 WHERE p.sweep_id = ?1 AND (p.state = 'starting'
                   OR (p.state = 'started' AND r.state NOT IN {FINISHED_RUNS}))"
            ),
            [id.as_str()],
            |row| row.get(0),
        )?;
        if going >= max_parallel {
            return Ok(None);
        }
        let next: Option<(u32, String)> = transaction
            .query_row(
                "SELECT idx, settings FROM sweep_points WHERE sweep_id = ?1 AND state = 'queued' ORDER BY idx LIMIT 1",
                [id.as_str()],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()?;
        let Some((index, settings)) = next else {
            return Ok(None);
        };
        transaction.execute(
            "UPDATE sweep_points SET state = 'starting' WHERE sweep_id = ?1 AND idx = ?2",
            params![id.as_str(), index],
        )?;
        transaction.commit()?;
        Ok(Some(SweepPoint {
            index,
            settings: serde_json::from_str(&settings)
                .map_err(|error| ProcessError::Store(format!("a sweep point: {error}")))?,
            state: SweepPointState::Starting,
            run_id: None,
            error: None,
        }))
    }

    /// A taken point's outcome when no run was made of it: back to the queue (no place for
    /// it yet), or refused. (A run made of it settles it as it is created: `NewRun::sweep`.)
    pub fn settle_sweep_point(
        &mut self,
        id: &SweepId,
        index: u32,
        outcome: PointOutcome<'_>,
    ) -> Result<(), ProcessError> {
        let (state, error) = match outcome {
            PointOutcome::Requeued => (SweepPointState::Queued, None),
            PointOutcome::Refused(error) => (SweepPointState::Refused, Some(error)),
        };
        let transaction = self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        transaction.execute(
            "UPDATE sweep_points SET state = ?3, error = ?4 WHERE sweep_id = ?1 AND idx = ?2 AND state = 'starting'",
            params![id.as_str(), index, state.as_str(), error],
        )?;
        // A point requeued after a stop is dropped with the rest of the queue.
        transaction.execute(
            "UPDATE sweep_points SET state = 'dropped' WHERE sweep_id = ?1 AND state = 'queued'
             AND (SELECT state FROM sweeps WHERE id = ?1) != 'running'",
            [id.as_str()],
        )?;
        transaction.execute(
            "UPDATE sweeps SET updated_at = ?2 WHERE id = ?1",
            params![id.as_str(), now()],
        )?;
        transaction.commit()?;
        Ok(())
    }

    /// Points `starting` whose driver is gone (killed between the take and its run's
    /// creation, which settles its point in the same transaction) go back to the queue.
    pub fn requeue_orphaned_points(&mut self, id: &SweepId) -> Result<(), ProcessError> {
        self.connection.execute(
            "UPDATE sweep_points SET state = 'queued' WHERE sweep_id = ?1 AND state = 'starting'",
            [id.as_str()],
        )?;
        Ok(())
    }

    /// Stops a sweep: its queue dropped. Returns its runs that have not ended, for the caller
    /// to stop; `None` when it had ended already.
    pub fn stop_sweep(&mut self, id: &SweepId) -> Result<Option<Vec<RunId>>, ProcessError> {
        let transaction = self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let state: Option<String> = transaction
            .query_row(
                "SELECT state FROM sweeps WHERE id = ?1",
                [id.as_str()],
                |row| row.get(0),
            )
            .optional()?;
        let Some(state) = state else {
            return Err(ProcessError::Store(format!("no sweep {id}")));
        };
        let was_running = SweepState::parse(&state)? == SweepState::Running;
        if was_running {
            transaction.execute(
                "UPDATE sweeps SET state = 'stopped', updated_at = ?2 WHERE id = ?1",
                params![id.as_str(), now()],
            )?;
            transaction.execute(
                "UPDATE sweep_points SET state = 'dropped' WHERE sweep_id = ?1 AND state = 'queued'",
                [id.as_str()],
            )?;
        }
        let mut statement = transaction.prepare(&format!(
            "SELECT r.id FROM runs r WHERE r.sweep_id = ?1 AND r.state NOT IN {FINISHED_RUNS}"
        ))?;
        let going = statement
            .query_map([id.as_str()], |row| row.get::<_, String>(0))?
            .collect::<Result<Vec<_>, _>>()?;
        drop(statement);
        transaction.commit()?;
        let going = going
            .iter()
            .map(|run| RunId::parse(run).map_err(|error| ProcessError::Store(error.to_string())))
            .collect::<Result<Vec<_>, _>>()?;
        Ok((was_running || !going.is_empty()).then_some(going))
    }

    /// Marks a running sweep done when nothing of it waits or goes. Returns whether it is done.
    pub fn finish_sweep_if_done(&mut self, id: &SweepId) -> Result<bool, ProcessError> {
        let transaction = self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let left: u32 = transaction.query_row(
            &format!(
                "SELECT COUNT(*) FROM sweep_points p LEFT JOIN runs r ON r.id = p.run_id
                 WHERE p.sweep_id = ?1 AND (p.state IN ('queued', 'starting')
                   OR (p.state = 'started' AND r.state NOT IN {FINISHED_RUNS}))"
            ),
            [id.as_str()],
            |row| row.get(0),
        )?;
        if left > 0 {
            return Ok(false);
        }
        transaction.execute(
            "UPDATE sweeps SET state = 'done', updated_at = ?2 WHERE id = ?1 AND state = 'running'",
            params![id.as_str(), now()],
        )?;
        transaction.commit()?;
        Ok(true)
    }

    /// Records `driver` as the sweep's driver unless another, alive, drives it. Returns
    /// whether `driver` drives it now.
    pub fn claim_sweep_driver(
        &mut self,
        id: &SweepId,
        driver: ProcessIdentity,
    ) -> Result<bool, ProcessError> {
        let transaction = self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let owner: Option<(Option<u32>, Option<i64>)> = transaction
            .query_row(
                "SELECT driver_pid, driver_start_ticks FROM sweeps WHERE id = ?1",
                [id.as_str()],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()?;
        let Some((pid, ticks)) = owner else {
            return Err(ProcessError::Store(format!("no sweep {id}")));
        };
        let owner = pid.zip(ticks).map(|(pid, ticks)| ProcessIdentity {
            pid,
            start_ticks: ticks_from_sql(ticks),
        });
        if owner.is_some_and(|owner| owner != driver && owner.is_alive()) {
            return Ok(false);
        }
        transaction.execute(
            "UPDATE sweeps SET driver_pid = ?2, driver_start_ticks = ?3 WHERE id = ?1",
            params![id.as_str(), driver.pid, ticks_to_sql(driver.start_ticks)],
        )?;
        transaction.commit()?;
        Ok(true)
    }
}

/// What became of a point a driver took.
#[derive(Debug, Clone, Copy)]
pub enum PointOutcome<'a> {
    Requeued,
    Refused(&'a str),
}

type SweepRow = Result<SweepRecord, ProcessError>;

fn sweep_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<SweepRow> {
    let state: String = row.get(2)?;
    let state = match SweepState::parse(&state) {
        Ok(state) => state,
        Err(error) => return Ok(Err(error)),
    };
    let pid: Option<u32> = row.get(7)?;
    let ticks: Option<i64> = row.get(8)?;
    Ok(Ok(SweepRecord {
        id: row.get(0)?,
        environment: row.get(1)?,
        state,
        created_at: row.get(3)?,
        updated_at: row.get(4)?,
        max_parallel: row.get(5)?,
        spec: row.get(6)?,
        driver: pid.zip(ticks).map(|(pid, ticks)| ProcessIdentity {
            pid,
            start_ticks: ticks_from_sql(ticks),
        }),
        points: Vec::new(),
    }))
}
