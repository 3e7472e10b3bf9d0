//! What moves a sweep on: `advance_sweep` starts its queued points while it has places (one
//! caller at a time, under the sweep's lock file), `drive_sweep` is the detached `rl sweep
//! drive` that advances it until nothing waits or goes, and `resume_sweep_drivers` — which
//! every face calls as it starts — gives a sweep whose driver is gone (killed, the machine
//! restarted) a new one. The queue is the store's, so nothing is lost in between.

use std::collections::BTreeSet;
use std::io::Write as _;
use std::os::unix::process::CommandExt as _;
use std::process::{Command, Stdio};
use std::time::Duration;

use rl_process::{PointOutcome, ProcessError, ProcessIdentity, RunStore, SweepMember, SweepState};
use rl_settings::{SweepId, lock_exclusive};

use super::SweepSpec;
use crate::answers::SweepStopped;
use crate::runs::RunPlan;
use crate::{Tools, ToolsError};

/// How often a driver looks at its sweep's runs.
const DRIVER_PERIOD: Duration = Duration::from_secs(2);
/// Failed passes in a row a driver tries again before it ends.
const DRIVER_PATIENCE: u32 = 30;
/// The folder of the sweeps' lock files and drivers' logs, in the state directory.
const SWEEPS_DIR: &str = "sweeps";

impl Tools {
    /// Starts the sweep's queued points while it has places; marks it done once nothing of it
    /// waits or goes. Returns its state after.
    pub fn advance_sweep(&self, id: &SweepId) -> Result<SweepState, ToolsError> {
        self.advance_cleaning(id, &mut BTreeSet::new())
    }

    /// [`Self::advance_sweep`]; a run of the sweep found `lost` (its supervisor killed) has
    /// what it left ended, once (`cleaned` names those done), so its place is truly free.
    fn advance_cleaning(
        &self,
        id: &SweepId,
        cleaned: &mut BTreeSet<String>,
    ) -> Result<SweepState, ToolsError> {
        let dir = self.home().join(SWEEPS_DIR);
        rl_settings::create_private_dir(&dir)?;
        // One advancer at a time: a point marked `starting` is then one being started now,
        // or one a killed advancer left, which goes back to the queue.
        let _lock = lock_exclusive(&dir.join(format!("{id}.lock")))?;
        let sweep = self.sweep_record(id)?;
        if sweep.state != SweepState::Running {
            return Ok(sweep.state);
        }
        let spec = SweepSpec::of(&sweep)?;
        // Runs whose supervisor vanished are `lost`, and their places free, before counting.
        for run in self.runs()?.list()? {
            if run.sweep.as_deref() == Some(id.as_str())
                && run.state == rl_process::RunState::Lost
                && cleaned.insert(run.id.clone())
                && let Ok(run_id) = rl_settings::RunId::parse(&run.id)
            {
                // What it left would compete with the runs that take its place.
                let _ = self.stop_training(&run_id);
            }
        }
        let mut store = RunStore::open(self.home())?;
        store.requeue_orphaned_points(id)?;
        while let Some(point) = store.take_sweep_point(id)? {
            let settings = usize::try_from(point.index)
                .ok()
                .and_then(|index| spec.points.get(index))
                .cloned()
                .unwrap_or_default();
            let plan = RunPlan {
                selection: Some(spec.selection.clone()),
                settings,
                sweep: Some(SweepMember {
                    sweep: id.clone(),
                    point: point.index,
                }),
            };
            match self.start_run(&spec.caps, &plan) {
                Ok(_) => {}
                // No place among the operator's runs yet: it waits for one.
                Err(ToolsError::Process(ProcessError::TooManyRuns { .. })) => {
                    store.settle_sweep_point(id, point.index, PointOutcome::Requeued)?;
                    break;
                }
                Err(error) => {
                    let reason = error.to_string();
                    store.settle_sweep_point(id, point.index, PointOutcome::Refused(&reason))?;
                }
            }
        }
        store.finish_sweep_if_done(id)?;
        Ok(self.sweep_record(id)?.state)
    }

    /// The body of `rl sweep drive ID`: advances the sweep until it is done or stopped, or
    /// another driver has it.
    pub fn drive_sweep(&self, id: &SweepId) -> Result<SweepState, ToolsError> {
        let me = ProcessIdentity::of(std::process::id()).ok_or_else(|| {
            ToolsError::Internal("this process cannot read its own identity".to_owned())
        })?;
        let mut cleaned = BTreeSet::new();
        let mut failures = 0;
        loop {
            if !RunStore::open(self.home())?.claim_sweep_driver(id, me)? {
                return Ok(self.sweep_record(id)?.state);
            }
            match self.advance_cleaning(id, &mut cleaned) {
                Ok(state) if state != SweepState::Running => return Ok(state),
                Ok(_) => failures = 0,
                // A busy store or a full disk may pass: said in the driver's log, tried again;
                // a sweep that is gone, or one failure after another, ends the driver (the next
                // rl command starts another).
                Err(error @ ToolsError::UnknownSweep { .. }) => return Err(error),
                Err(error) if failures >= DRIVER_PATIENCE => return Err(error),
                Err(error) => {
                    failures += 1;
                    // The driver's stderr is its log (`sweeps/ID.log`).
                    let _ = writeln!(
                        std::io::stderr(),
                        "rl sweep drive: {id}: {error}; trying again"
                    );
                }
            }
            std::thread::sleep(DRIVER_PERIOD);
        }
    }

    /// Gives each running sweep whose driver is gone a new one. Every face calls it as it
    /// starts; a failure here never keeps a command from running (it is reported).
    pub fn resume_sweep_drivers(&self) -> Result<Vec<String>, ToolsError> {
        let store = RunStore::open(self.home())?;
        if store.is_read_only() {
            // A caller who may only read the state directory drives nothing.
            return Ok(Vec::new());
        }
        let mut started = Vec::new();
        for sweep in store.sweeps()? {
            if sweep.state != SweepState::Running
                || sweep.driver.is_some_and(|driver| driver.is_alive())
            {
                continue;
            }
            let id = SweepId::parse(&sweep.id)?;
            self.spawn_sweep_driver(&id)?;
            started.push(sweep.id);
        }
        Ok(started)
    }

    /// Starts `rl sweep drive ID` detached, in its own process group, logging to
    /// `sweeps/ID.log`, with the tree the sweep was started with.
    pub(crate) fn spawn_sweep_driver(&self, id: &SweepId) -> Result<(), ToolsError> {
        let spec = SweepSpec::of(&self.sweep_record(id)?)?;
        let dir = self.home().join(SWEEPS_DIR);
        rl_settings::create_private_dir(&dir)?;
        let log_path = dir.join(format!("{id}.log"));
        let (log, log_err) = (
            crate::tools::append_log(&log_path)?,
            crate::tools::append_log(&log_path)?,
        );
        let supervisor = &self.context().supervisor;
        let mut command = Command::new(&supervisor.program);
        // rl itself, reading the keys its runs need on its own; rl's own secrets stay here.
        rl_settings::withhold(&mut command, &rl_settings::SECRET_NAMES);
        if let Some(root) = &spec.tinker_atropos_root {
            command.arg("--root").arg(root);
        }
        if let Some(dir) = &spec.environments_dir {
            command.arg("--envs-dir").arg(dir);
        }
        let mut child = command
            .args(["sweep", "drive", id.as_str()])
            .envs(supervisor.env.iter().map(|(name, value)| (name, value)))
            .env("RL_HOME", self.home())
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            // Its own process group: a Ctrl-C aimed at the caller's group misses it.
            .process_group(0)
            .spawn()
            .map_err(|source| ToolsError::Io {
                action: "cannot start the sweep's driver",
                path: supervisor.program.clone(),
                source,
            })?;
        // The driver is claimed for the child here, before this call returns: until the child
        // claimed it itself, the next command would find no driver and start a second one.
        // A store that fails here is no loss: the child claims it itself as it starts.
        let claimed = ProcessIdentity::of(child.id()).map(|identity| {
            RunStore::open(self.home()).and_then(|mut store| store.claim_sweep_driver(id, identity))
        });
        if matches!(claimed, Some(Ok(false))) {
            // Another caller's driver has the sweep: this one would only find that out and end.
            let _ = child.kill();
        }
        // A long-lived caller (the MCP server) must not collect zombies.
        std::thread::spawn(move || child.wait());
        Ok(())
    }

    /// Stops a sweep: its queue dropped, its going runs stopped.
    pub fn stop_sweep(&self, id: &SweepId) -> Result<SweepStopped, ToolsError> {
        self.sweep_record(id)?;
        let going = RunStore::open(self.home())?.stop_sweep(id)?;
        let ended_before = going.is_none();
        let mut stopped = Vec::new();
        let mut failures = Vec::new();
        for run in going.unwrap_or_default() {
            match self.stop_training(&run) {
                Ok(_) => stopped.push(run.to_string()),
                Err(error) => failures.push(format!("{run}: {error}")),
            }
        }
        let view = self.sweep_view(id)?;
        Ok(SweepStopped::new(view, stopped, failures, ended_before))
    }
}
