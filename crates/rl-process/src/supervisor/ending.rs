//! How a run ends: the other component's chance to finish by itself, then every group in stop
//! order, whatever the components left outside their groups, the cluster's allocation and the
//! ports; the end recorded once nothing of the run is left.

use std::time::Duration;

use super::trainer_watch::judge_env;
use super::{
    Ending, Finishing, REAP_WAIT, Supervisor, TICK, describe_end, first_line, report, seconds,
    stop_signal,
};
use crate::ProcessError;
use crate::groups::{describe_stops, stopped_name};
use crate::ports::wait_until_free;
use crate::state::{Component, RunState, outcome_of_exit};

/// Ticks between two looks at a finishing component (its phase file is read each time).
const GRACE_CHECK_EVERY: u32 = 5;

/// How the component still running after the other finished came to its end.
enum Rest {
    /// It finished by itself, or (the environment, or a trainer done training) was stopped once
    /// it had nothing left to do: the run completed.
    Done,
    /// The trainer's last steps did not end well (a failed step or save, a hang): why.
    Failed(String),
    /// A stop came while the trainer was still training.
    Stopped,
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |elapsed| elapsed.as_secs_f64())
}

impl Supervisor<'_> {
    /// Ends the run. Store writes here are best effort: whatever fails to be recorded, every
    /// process of the run is still stopped.
    pub(super) async fn finish(mut self, ending: Ending) -> Result<RunState, ProcessError> {
        let id = self.run_id.clone();
        let grace = Duration::from_secs_f64(self.plan.timing.stop_grace_secs);
        let outcome = match ending {
            Ending::Stop => {
                let stopping = self.store.transition(
                    &id,
                    RunState::Stopping,
                    "stopping env, trainer, api, engine",
                );
                report(stopping.map(drop));
                (RunState::Stopped, String::new())
            }
            Ending::Failed { message } => {
                // Recorded at once, so callers learn of the failure before the clean-up ends.
                let secret_free = self.secrets.redact(&message);
                report(self.store.set_error(&id, &secret_free));
                let failed = self
                    .store
                    .transition(&id, RunState::Failed, first_line(&secret_free));
                report(failed.map(drop));
                (RunState::Failed, String::new())
            }
            Ending::Capped { message } => {
                // Not an error: the run ended as its caps asked; the reason is the message of
                // its last transition, in its events.
                (RunState::Capped, message)
            }
            Ending::Completed { finished } => match self.let_the_rest_finish(finished).await {
                Ok(Rest::Done) => (RunState::Completed, format!("{finished} finished")),
                // The trainer's last steps or its final save failed, or it hung in them: the
                // run did not complete.
                Ok(Rest::Failed(message)) => {
                    let secret_free = self.secrets.redact(&message);
                    report(self.store.set_error(&id, &secret_free));
                    (RunState::Failed, first_line(&secret_free).to_owned())
                }
                // Stopped while the trainer was still training: not completed.
                Ok(Rest::Stopped) => {
                    let stopping = self.store.transition(
                        &id,
                        RunState::Stopping,
                        "stopping trainer, api, engine before the trainer finished",
                    );
                    report(stopping.map(drop));
                    (RunState::Stopped, String::new())
                }
                Err(error) => {
                    report(Err(error));
                    (RunState::Completed, format!("{finished} finished"))
                }
            },
        };
        let mut survivors = self.stop_all(grace).await;
        let strays = self.launcher.end_strays(grace).await;
        if let Some(message) = strays.describe() {
            // A command name is whatever the process called itself.
            report(
                self.store
                    .note(&id, "strays", &self.secrets.redact(&message)),
            );
        }
        survivors.extend(strays.survivors);
        if let Err(error) = self.launcher.release().await {
            // The run's processes are gone, but the cluster still holds its place: say so.
            let message = error.to_string();
            report(self.store.set_error(&id, &message));
        }
        let busy_ports = if self.placement.local {
            wait_until_free(&self.plan.ports()).await
        } else {
            Vec::new()
        };
        let (end, message) = if survivors.is_empty() {
            outcome
        } else {
            let message = format!("processes {survivors:?} of the run survived SIGKILL");
            if outcome.0 == RunState::Failed {
                // A component that crashed failed the run; what outlived the clean-up after
                // it is said beside that cause, never instead of it.
                self.say_beside_failure(&message);
                outcome
            } else {
                report(self.store.set_error(&id, &message));
                (RunState::Failed, message)
            }
        };
        if !busy_ports.is_empty() {
            let message = format!(
                "the run's processes are gone but ports {busy_ports:?} are still in use, by a \
                 process outside the run"
            );
            if end == RunState::Failed {
                self.say_beside_failure(&message);
            } else {
                report(self.store.set_error(&id, &message));
            }
        }
        report(self.store.transition(&id, end, &message).map(drop));
        self.store.state(&id)
    }

    /// What the clean-up of a failed run found (survivors, busy ports): a note of the run's,
    /// while the failure keeps its own cause as the run's error.
    fn say_beside_failure(&mut self, message: &str) {
        let id = self.run_id.clone();
        report(self.store.note(&id, "warning", message));
    }

    /// After the trainer or the environment finished, the other may finish by itself: the
    /// environment within `completion_grace`, the trainer (its last steps, its final save) as
    /// long as it makes progress (`TrainerWatch::judge`).
    async fn let_the_rest_finish(&mut self, finished: Component) -> Result<Rest, ProcessError> {
        let other = match finished {
            Component::Env => Component::Trainer,
            _ => Component::Env,
        };
        if !self.is_running(other) {
            return Ok(Rest::Done);
        }
        let grace = self.plan.timing.completion_grace_secs;
        let id = self.run_id.clone();
        let how_long = if other == Component::Trainer {
            "as long as it makes progress".to_owned()
        } else {
            format!("up to {}", seconds(grace))
        };
        self.store.note(
            &id,
            "completing",
            &format!("{finished} finished; {other} may take {how_long} to finish by itself"),
        )?;
        let began = tokio::time::Instant::now();
        let mut said_going_on = false;
        let mut ticks: u32 = 0;
        while self.is_running(other) {
            tokio::select! {
                Some((component, status)) = self.exits.recv() => {
                    self.record_end(component, status)?;
                    // The trainer's end is the training's: a failed last step or final save
                    // fails the run. An environment that errs once training is done does not.
                    if component == Component::Trainer
                        && outcome_of_exit(component, status) != RunState::Completed
                    {
                        return Ok(Rest::Failed(format!(
                            "{component} {} after {finished} finished{}",
                            describe_end(status, true),
                            self.log_tail(component)
                        )));
                    }
                }
                () = stop_signal(&mut self.stop_requested) => return Ok(Self::stopped_while(other)),
                () = tokio::time::sleep(TICK) => {
                    if self.stop_is_requested()? {
                        return Ok(Self::stopped_while(other));
                    }
                    ticks = ticks.wrapping_add(1);
                    if !ticks.is_multiple_of(GRACE_CHECK_EVERY) {
                        continue;
                    }
                    let since_finished = began.elapsed().as_secs_f64();
                    let verdict = if other == Component::Env {
                        judge_env(&self.plan.timing, since_finished)
                    } else {
                        self.trainer.judge(&self.plan.timing, unix_now(), since_finished)
                    };
                    match verdict {
                        Finishing::GoingOn(None) => {}
                        Finishing::GoingOn(Some(note)) => {
                            if !said_going_on {
                                said_going_on = true;
                                self.store.note(&id, "completing", &note)?;
                            }
                        }
                        Finishing::Done(why) => {
                            self.store.note(&id, "completing", &why)?;
                            return Ok(Rest::Done);
                        }
                        Finishing::Hung(why) => {
                            self.store.note(&id, "completing", &format!("{why}; stopping it"))?;
                            return Ok(Rest::Failed(format!(
                                "the trainer did not finish its steps: {why}; it was stopped before \
                                 reporting its final weights{}",
                                self.log_tail(Component::Trainer)
                            )));
                        }
                    }
                }
            }
        }
        Ok(Rest::Done)
    }

    /// A stop asked while `other` was finishing: the training is cut short when that is the
    /// trainer; the environment finishing after the trainer leaves the run completed.
    fn stopped_while(other: Component) -> Rest {
        if other == Component::Trainer {
            Rest::Stopped
        } else {
            Rest::Done
        }
    }

    pub(super) fn is_running(&self, component: Component) -> bool {
        self.launched.iter().any(|l| l.component == component)
            && !self.ended.contains_key(&component)
    }

    /// Stops every launched component's group in stop order, including the groups of
    /// components whose leader has ended (their children may remain), and records how each
    /// ended. Returns the pids that survived SIGKILL (none, short of a process stuck in the
    /// kernel).
    async fn stop_all(&mut self, grace: Duration) -> Vec<u32> {
        let id = self.run_id.clone();
        let mut survivors = Vec::new();
        for component in Component::STOP_ORDER {
            let Some(launched) = self.launched.iter().find(|l| l.component == component) else {
                continue;
            };
            let leader = launched.identity;
            // By its leader's identity, checked before each signal: a component that ended
            // long ago may have left its group's id to another.
            let outcome = self.launcher.stop_group(leader, grace).await;
            survivors.extend(outcome.survivors.iter().copied());
            if !outcome.was_empty {
                let name = stopped_name(component, leader.pid, self.ended.contains_key(&component));
                if let Some(message) = describe_stops(&[(name, outcome)]) {
                    report(self.store.note(&id, "stop", &message));
                }
            }
            report(self.reap(component).await);
        }
        survivors
    }

    /// Waits for the exit report of a stopped component, recording every exit that arrives.
    async fn reap(&mut self, component: Component) -> Result<(), ProcessError> {
        let deadline = tokio::time::Instant::now() + REAP_WAIT;
        while !self.ended.contains_key(&component) {
            tokio::select! {
                Some((ended, status)) = self.exits.recv() => self.record_end(ended, status)?,
                () = tokio::time::sleep_until(deadline) => break,
            }
        }
        Ok(())
    }
}
