//! Stopping a run: through its supervisor while it lives, and without it once it is gone,
//! ending what the run left on this machine (and its SLURM job) from the store's records.

use std::time::{Duration, Instant};

use rl_settings::{RunId, run_dir};

use super::{POLL, Runs, StopReport};
use crate::ProcessError;
use crate::groups::{KILL_WAIT, StopOutcome, stop_recorded_group, stopped_name};
use crate::identity::ProcessIdentity;
use crate::plan::LaunchPlan;
use crate::ports::wait_until_free;
use crate::slurm::SlurmCli;
use crate::state::{Component, RunState};
use crate::store::RunRecord;
use crate::strays::{StrayOutcome, carrying_run_dir, end_strays};

/// What a stop without the supervisor cannot promise.
const UNTRACEABLE: &str = "A process of the run that left its process group and cleared its \
                           environment cannot be found without the supervisor: if the run's \
                           ports, GPU or files stay busy, look for it with `ps`";

/// The grace period of what a lost run left (its plan's may be unreadable).
const LOST_RUN_GRACE: Duration = Duration::from_secs(10);

impl Runs {
    /// Stops a run: asks its supervisor (which stops env, trainer and API in that order), or,
    /// when the supervisor is gone, stops the run's process groups itself.
    pub fn stop(&mut self, id: &RunId) -> Result<StopReport, ProcessError> {
        let run = self.reconciled(id)?;
        if run.state == RunState::Lost {
            return self.clean_up_lost(id, &run);
        }
        let requested = !run.state.is_finished()
            && self
                .store
                .transition(id, RunState::Stopping, "stop requested")?
                .is_some();
        let run = self.read(id)?;
        if run.state.is_finished() {
            // Ended before the request could be recorded (or long before).
            return Ok(StopReport {
                message: format!(
                    "run {id} has already {}; nothing to stop",
                    ended_verb(run.state)
                ),
                stopped: false,
                status: self.status(id, 0)?,
            });
        }
        let plan = LaunchPlan::load(&self.home, id).ok();
        let grace = Duration::from_secs_f64(
            plan.as_ref()
                .map_or(10.0, |plan| plan.timing.stop_grace_secs),
        );
        // The supervisor's longest stop: each group, then what was left outside them, its
        // grace, SIGKILL's wait and the reap, then the output and the ports; and a margin. On
        // SLURM each step is also ended through the cluster, and the job after them.
        let endings = u32::try_from(Component::STOP_ORDER.len() + 1).unwrap_or(u32::MAX);
        let mut limit =
            (grace + KILL_WAIT + Duration::from_secs(2)) * endings + Duration::from_secs(14);
        if plan.is_some_and(|plan| plan.slurm.is_some()) {
            limit += Duration::from_secs(120);
        }
        let started = Instant::now();
        let mut signalled = false;
        loop {
            // Read without reconciling: a supervisor that ends during the stop is not `lost`,
            // it leaves the rest of the stop to this process.
            let run = self.read(id)?;
            if run.state.is_finished() {
                break;
            }
            let supervisor = run.supervisor.filter(ProcessIdentity::is_alive);
            match supervisor {
                Some(supervisor) if started.elapsed() < limit => {
                    // Before it has claimed the run its SIGTERM handler may not be in place;
                    // it then reads `stopping` from the store on its own.
                    if !signalled && self.store.supervisor_ready(id)? {
                        let pid =
                            nix::unistd::Pid::from_raw(i32::try_from(supervisor.pid).unwrap_or(0));
                        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
                        signalled = true;
                    }
                    std::thread::sleep(POLL);
                }
                // The supervisor is gone (or stuck): end the groups here.
                _ => {
                    self.stop_without_supervisor(id, &run, grace)?;
                    break;
                }
            }
        }
        let took = started.elapsed().as_secs_f64();
        let status = self.status(id, 0)?;
        Ok(StopReport {
            message: format!("run {id} is {} after {took:.1} s", status.run.state.label()),
            stopped: requested || signalled,
            status,
        })
    }

    fn stop_without_supervisor(
        &mut self,
        id: &RunId,
        run: &RunRecord,
        grace: Duration,
    ) -> Result<(), ProcessError> {
        self.end_slurm_job_of(id, run)?;
        let (outcomes, strays) = self.end_what_is_left(id, run, grace);
        if outcomes.is_empty() {
            self.store.note(id, "stop", &describe_outcomes(&outcomes))?;
        }
        // One note a group, as the supervisor writes them.
        for stop in &outcomes {
            if let Some(message) = crate::groups::describe_stops(std::slice::from_ref(stop)) {
                self.store.note(id, "stop", &message)?;
            }
        }
        if let Some(message) = strays.describe() {
            self.store.note(id, "strays", &message)?;
        }
        let survivors: Vec<u32> = outcomes
            .iter()
            .flat_map(|(_, outcome)| outcome.survivors.iter().copied())
            .chain(strays.survivors.iter().copied())
            .collect();
        // A run on SLURM listens on its node, not here.
        let busy = if run.slurm_job.is_some() {
            Vec::new()
        } else {
            // The plan knows every port (the engine's too); the record, the API's and trainer's.
            let ports = LaunchPlan::load(&self.home, id).map_or_else(
                |_| {
                    [run.api_port, run.trainer_port]
                        .into_iter()
                        .flatten()
                        .collect()
                },
                |plan| plan.ports(),
            );
            crate::current_thread_runtime()?.block_on(wait_until_free(&ports))
        };
        if !busy.is_empty() {
            let message = format!("ports {busy:?} are still in use, by a process outside the run");
            self.store.set_error(id, &message)?;
        }
        if survivors.is_empty() {
            self.store
                .transition(id, RunState::Stopped, "stopped without its supervisor")?;
        } else {
            let message = format!("processes {survivors:?} survived SIGKILL");
            self.store.set_error(id, &message)?;
            self.store.transition(id, RunState::Failed, &message)?;
        }
        Ok(())
    }

    /// Ends the run's SLURM job, if it has one SLURM still holds: its steps get SIGTERM through
    /// SLURM first (a signal to a local `srun` would kill its step at once, and killing every
    /// `srun` would orphan it). Whether there was a job to end; an end SLURM refuses is
    /// recorded as the run's error rather than failing the stop.
    fn end_slurm_job_of(&mut self, id: &RunId, run: &RunRecord) -> Result<bool, ProcessError> {
        let Some(job) = &run.slurm_job else {
            return Ok(false);
        };
        match end_slurm_job(job) {
            Ok(ended) => Ok(ended),
            Err(error) => {
                self.store.set_error(id, &error.to_string())?;
                Ok(true)
            }
        }
    }

    /// Without its supervisor, rl finds a run's processes by their groups and by the run's
    /// folder in their environment; one that left both behind cannot be found, and a stop
    /// says so rather than promising that nothing is left.
    fn clean_up_lost(&mut self, id: &RunId, run: &RunRecord) -> Result<StopReport, ProcessError> {
        // Its SLURM job outlives the supervisor (and any reboot of this machine): ended first,
        // so that its steps stop gracefully before their local `srun`s are.
        let cancelled = self.end_slurm_job_of(id, run)?;
        let (outcomes, strays) = self.end_what_is_left(id, run, LOST_RUN_GRACE);
        // The advice to stop it is taken: what the stop did replaces it.
        self.store.set_error(
            id,
            "its supervisor is gone without recording an end (killed, or the machine \
             restarted); the stop has ended what it found of the run",
        )?;
        let message = if outcomes.is_empty() && strays.ended.is_empty() && !cancelled {
            format!(
                "run {id} is lost and left no process rl can find; nothing to stop. {UNTRACEABLE}"
            )
        } else {
            let mut parts = Vec::new();
            if !outcomes.is_empty() {
                parts.push(describe_outcomes(&outcomes));
            }
            if let Some(text) = strays.describe() {
                parts.push(text);
            }
            if let Some(job) = run.slurm_job.as_deref().filter(|_| cancelled) {
                parts.push(format!("SLURM job {job} cancelled"));
            }
            let text = parts.join("; ");
            self.store.note(id, "stop", &format!("lost run: {text}"))?;
            format!("run {id} is lost; {text}. {UNTRACEABLE}")
        };
        Ok(StopReport {
            stopped: !outcomes.is_empty() || !strays.ended.is_empty() || cancelled,
            message,
            status: self.status(id, 0)?,
        })
    }

    /// Ends what a run whose supervisor is gone left on this machine: its components' groups,
    /// then every process that still carries the run's folder in its environment (what a
    /// component started outside its group). Nothing when the machine has restarted since.
    fn end_what_is_left(
        &self,
        id: &RunId,
        run: &RunRecord,
        grace: Duration,
    ) -> (Vec<(String, StopOutcome)>, StrayOutcome) {
        if run.from_another_boot() {
            return (Vec::new(), StrayOutcome::default());
        }
        let groups = stop_groups(run, grace);
        let dir = run_dir(&self.home, id);
        let strays = end_strays(|| carrying_run_dir(&dir), grace);
        (groups, strays)
    }
}

/// Ends a job SLURM still holds, its steps first; whether there was one to end.
fn end_slurm_job(job: &str) -> Result<bool, ProcessError> {
    crate::current_thread_runtime()?.block_on(crate::slurm::end_job(
        &SlurmCli,
        job,
        crate::slurm::JobEnding::StepsFirst,
    ))
}

/// Stops, in stop order, each of the run's groups that still has members and is provably the
/// run's (`group_is_ours`). Only within the boot the run started in (the caller checks): after
/// a restart none of its processes can exist, and a pid names someone else's.
fn stop_groups(run: &RunRecord, grace: Duration) -> Vec<(String, StopOutcome)> {
    let mut outcomes = Vec::new();
    for component in Component::STOP_ORDER {
        let Some(record) = run.components.iter().find(|c| c.component == component) else {
            continue;
        };
        let Some(leader) = record.process else {
            continue;
        };
        if let Some(outcome) = stop_recorded_group(leader, grace) {
            let name = stopped_name(component, leader.pid, record.status.has_ended());
            outcomes.push((name, outcome));
        }
    }
    outcomes
}

fn describe_outcomes(outcomes: &[(String, StopOutcome)]) -> String {
    crate::groups::describe_stops(outcomes).unwrap_or_else(|| "no process was left".to_owned())
}

fn ended_verb(state: RunState) -> &'static str {
    match state {
        RunState::Stopped => "been stopped",
        RunState::Completed => "completed",
        RunState::Capped => "been capped",
        RunState::Failed => "failed",
        RunState::Lost => "been lost",
        _ => "ended",
    }
}
