//! How a run starts: the launcher's place for it, the environment first when its runner can
//! hold its registration, then each component launched and awaited behind its readiness gate.

use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::{Ending, Gate, Launched, Supervisor, TICK, seconds, stop_signal};
use crate::ProcessError;
use crate::launcher::{AllocationNote, Launcher, Placement};
use crate::ports::is_listening;
use crate::probe::Readiness;
use crate::state::{Component, ComponentStatus, Phase, RunState};

impl<'a> Supervisor<'a> {
    /// Waits for the launcher's place for the run (a SLURM allocation; nothing locally),
    /// recording what it waits for, and moves a queued run on to starting its API.
    pub(super) async fn allocate(&mut self) -> Result<Result<Placement, Ending>, ProcessError> {
        if self.stop_is_requested()? {
            return Ok(Err(Ending::Stop));
        }
        let launcher: &'a dyn Launcher = self.launcher;
        let (notes_tx, mut notes) = mpsc::unbounded_channel();
        let allocation = launcher.allocate(notes_tx);
        tokio::pin!(allocation);
        let placement = loop {
            tokio::select! {
                // A stop wins over a place granted at the same moment.
                biased;
                () = stop_signal(&mut self.stop_requested) => break None,
                result = &mut allocation => break Some(result),
                Some(note) = notes.recv() => self.record_allocation(note)?,
                () = tokio::time::sleep(TICK) => {
                    if self.stop_is_requested()? {
                        break None;
                    }
                }
            }
        };
        // What the launcher said before it ended or was given up on (its job id) is kept.
        while let Ok(note) = notes.try_recv() {
            self.record_allocation(note)?;
        }
        let placement = match placement {
            None => return Ok(Err(Ending::Stop)),
            Some(Ok(placement)) => placement,
            Some(Err(ProcessError::SlurmEnded(end))) => {
                // Nothing ran: a job that ends before its place is found failed, whatever
                // SLURM calls it, unless it was cancelled.
                let ending = self.cluster_ending(&end, "")?;
                return Ok(Err(ending.unwrap_or(Ending::Failed {
                    message: end.message,
                })));
            }
            Some(Err(error)) => {
                return Ok(Err(Ending::Failed {
                    message: error.to_string(),
                }));
            }
        };
        let id = self.run_id.clone();
        if self.store.state(&id)? == RunState::Starting(Phase::Queued) {
            let message = format!("placed: {}", placement.description);
            let first = self
                .plan
                .start_order()
                .first()
                .map_or(Phase::Api, |component| Phase::from(*component));
            if self
                .store
                .transition(&id, RunState::Starting(first), &message)?
                .is_none()
            {
                return Ok(Err(Ending::Stop));
            }
        }
        Ok(Ok(placement))
    }

    fn record_allocation(&mut self, note: AllocationNote) -> Result<(), ProcessError> {
        let id = self.run_id.clone();
        match note {
            AllocationNote::Submitted { job } => {
                self.store.set_slurm_job(&id, &job)?;
                self.store
                    .note(&id, "queued", &format!("submitted to SLURM as job {job}"))
            }
            AllocationNote::Waiting { job, reason } => self.store.note(
                &id,
                "queued",
                &format!("SLURM job {job} is pending: {reason}"),
            ),
        }
    }

    /// Launches the environment before the others when its runner can hold its registration
    /// (`RL_ENV_GO_FILE`): an environment that dies at import or in its setup (a missing
    /// library, a dataset from the hub, NLTK data) fails the run in seconds, not after the
    /// engine, run-api and trainer have started.
    pub(super) async fn launch_env_first(&mut self) -> Result<Option<Ending>, ProcessError> {
        let Some(go) = self.env_file_named(rl_python::ENV_GO_VARIABLE) else {
            return Ok(None);
        };
        // A go file left from an earlier attempt would let it register at once.
        let _ = std::fs::remove_file(&go);
        if let Some(ending) = self.launch(Component::Env).await? {
            return Ok(Some(ending));
        }
        self.env_held = Some(go);
        let id = self.run_id.clone();
        self.store.note(
            &id,
            "env_setup",
            "env launched first: its setup runs while the other components start; it registers \
             once they are ready",
        )?;
        Ok(None)
    }

    /// Lets the environment started first register: the others are ready.
    pub(super) fn release_env(&mut self) -> Option<Ending> {
        let go = self.env_held.take()?;
        match std::fs::write(&go, b"") {
            Ok(()) => None,
            Err(error) => Some(Ending::Failed {
                message: format!(
                    "cannot tell the environment to register: writing {} failed: {error}",
                    go.display()
                ),
            }),
        }
    }

    /// Launches `component` unless its port is taken; `Some` when that already ends the run.
    pub(super) async fn launch(
        &mut self,
        component: Component,
    ) -> Result<Option<Ending>, ProcessError> {
        let Some(spec) = self.plan.spec(component).cloned() else {
            return Ok(Some(Ending::Failed {
                message: format!("the launch plan has no {component} command"),
            }));
        };
        let port = self.plan.port(component);
        // Only this machine's ports can be checked here.
        if let Some(port) = port
            && self.placement.local
            && is_listening(port)
        {
            return Ok(Some(Ending::Failed {
                message: format!(
                    "cannot start {component}: port {port} was free when the run was created but \
                     another process listens on it now; start the run again to get new ports"
                ),
            }));
        }
        let running = match self.launcher.launch(&spec).await {
            Ok(running) => running,
            Err(error) => {
                return Ok(Some(Ending::Failed {
                    message: error.to_string(),
                }));
            }
        };
        let identity = running.identity();
        // Known before anything else can fail, so that the end of the run stops it.
        self.launched.push(Launched {
            component,
            identity,
        });
        let exits = self.exits_tx.clone();
        let mut running = running;
        tokio::spawn(async move {
            let status = running.wait().await;
            let _ = exits.send((component, status));
        });
        self.store.record_component(
            &self.run_id,
            component,
            Some(identity),
            ComponentStatus::Running,
        )?;
        Ok(None)
    }

    pub(super) async fn await_ready(&mut self, component: Component) -> Result<Gate, ProcessError> {
        let timing = &self.plan.timing;
        let (readiness, limit) = match component {
            Component::Engine => (
                // A plan with an engine and no port was not written by rl: port 0 never
                // answers, and the gate names what it waited for.
                Readiness::EngineHealthy {
                    port: self.plan.engine_port.unwrap_or(0),
                },
                timing.engine_ready_timeout_secs,
            ),
            Component::Api => (
                Readiness::ApiAnswers {
                    port: self.plan.api_port,
                },
                timing.api_ready_timeout_secs,
            ),
            Component::Trainer => (
                Readiness::TrainerHealthy {
                    port: self.plan.trainer_port,
                },
                timing.trainer_ready_timeout_secs,
            ),
            Component::Env => (
                Readiness::EnvSending {
                    api_port: self.plan.api_port,
                },
                timing.env_settle_secs,
            ),
        };
        let limit = Duration::from_secs_f64(limit);
        let launched = Instant::now();
        loop {
            if self.probe.is_ready(&self.placement.host, readiness).await {
                return Ok(Gate::Ready(format!(
                    "{component} ready after {:.2} s ({})",
                    launched.elapsed().as_secs_f64(),
                    readiness.describe(&self.placement.host)
                )));
            }
            if launched.elapsed() >= limit {
                if component == Component::Env {
                    return Ok(Gate::Ready(format!(
                        "env has sent run-api no scored group after {} but is alive: counted \
                         as running",
                        seconds(limit.as_secs_f64())
                    )));
                }
                let message = format!(
                    "{component} was not ready within {}: {} never answered{}",
                    seconds(limit.as_secs_f64()),
                    readiness.describe(&self.placement.host),
                    self.log_tail(component)
                );
                return Ok(Gate::End(Ending::Failed { message }));
            }
            tokio::select! {
                Some((ended, status)) = self.exits.recv() => {
                    // A component that passed its gate may finish (a short run can end before
                    // the environment's registration is seen); the one still awaited may not.
                    let passed_gate = (ended != component || ended == Component::Env)
                        && !self.env_in_setup(ended);
                    return Ok(Gate::End(self.ended_by_itself(ended, status, passed_gate).await?));
                }
                () = stop_signal(&mut self.stop_requested) => return Ok(Gate::End(Ending::Stop)),
                () = tokio::time::sleep(TICK) => {
                    if self.stop_is_requested()? {
                        return Ok(Gate::End(Ending::Stop));
                    }
                    if component == Component::Env
                        && let Some(ending) = self.signal_ending()?
                    {
                        return Ok(Gate::End(ending));
                    }
                }
            }
        }
    }
}
