//! What the supervisor sees of rl's trainer through its phase file: when each step began (the
//! step times a stall is judged against), and, once the environment has finished first, whether
//! the trainer still finishing its last steps is working, waiting for what will never come, or
//! hung. A trainer making progress is never stopped by a grace meant for a hung one.

use std::collections::VecDeque;
use std::path::PathBuf;

use rl_settings::RunTiming;
use rl_settings::trainer::{TrainerPhase, stall_limit_secs};

use super::wording::seconds;

/// Step starts kept: enough for a median that follows the run's recent pace.
const STEPS_KEPT: usize = 32;

#[derive(Default)]
pub(super) struct TrainerWatch {
    /// `trainer-phase.json` of the run; `None` for a supervisor that knows no run folder.
    path: Option<PathBuf>,
    /// (step, Unix seconds it began), oldest first.
    step_starts: VecDeque<(u64, f64)>,
}

/// Where the component still running after the other finished is, judged now and then.
#[derive(Debug, PartialEq)]
pub(super) enum Finishing {
    /// Working, or within the grace: let it go on. `Some` says what it is doing once the grace
    /// has passed (noted once in the run's events).
    GoingOn(Option<String>),
    /// Nothing left for it to do (a trainer done training, lingering; an environment past its
    /// grace): stop it, the run completed. Why, for the run's events.
    Done(String),
    /// Hung, or waiting for a batch nobody will send: why, for the run's error.
    Hung(String),
}

/// An environment still running `since_finished` seconds after the trainer finished: it may
/// take `completion_grace_secs`.
pub(super) fn judge_env(timing: &RunTiming, since_finished: f64) -> Finishing {
    let grace = timing.completion_grace_secs;
    if since_finished < grace {
        Finishing::GoingOn(None)
    } else {
        Finishing::Done(format!(
            "env still running after {}; stopping it",
            seconds(grace)
        ))
    }
}

impl TrainerWatch {
    pub(super) fn new(path: Option<PathBuf>) -> Self {
        Self {
            path,
            step_starts: VecDeque::new(),
        }
    }

    /// Reads the phase file, recording the start of a step not seen before.
    pub(super) fn observe(&mut self) -> Option<TrainerPhase> {
        let phase = TrainerPhase::read(self.path.as_ref()?)?;
        let new_step = self
            .step_starts
            .back()
            .is_none_or(|(step, _)| *step != phase.step);
        if new_step && phase.step > 0 {
            self.step_starts.push_back((phase.step, phase.since));
            if self.step_starts.len() > STEPS_KEPT {
                self.step_starts.pop_front();
            }
        }
        Some(phase)
    }

    /// The median time from one step's start to the next's, over consecutive steps seen.
    pub(super) fn median_step_secs(&self) -> Option<f64> {
        let mut times: Vec<f64> = self
            .step_starts
            .iter()
            .zip(self.step_starts.iter().skip(1))
            .filter(|(earlier, later)| later.0 == earlier.0 + 1 && later.1 >= earlier.1)
            .map(|(earlier, later)| later.1 - earlier.1)
            .collect();
        if times.is_empty() {
            return None;
        }
        times.sort_by(f64::total_cmp);
        Some(times[times.len() / 2])
    }

    /// Whether the trainer, still running `since_finished` seconds after the environment
    /// finished (at Unix time `now`), may go on.
    pub(super) fn judge(&mut self, timing: &RunTiming, now: f64, since_finished: f64) -> Finishing {
        let grace = timing.completion_grace_secs;
        let Some(phase) = self.observe() else {
            // A trainer that says nothing of itself (not rl's) gets the grace alone.
            return if since_finished < grace {
                Finishing::GoingOn(None)
            } else {
                Finishing::Hung(format!(
                    "the trainer was still running {} after the environment finished and writes \
                     no phase file to tell work from a hang",
                    seconds(grace)
                ))
            };
        };
        if phase.has_finished_training() {
            return Finishing::Done("the trainer has finished training; stopping it".to_owned());
        }
        let finished_at = now - since_finished;
        if phase.is_waiting() {
            // Nothing sends batches once the environment is gone: what run-api queued comes at
            // once, so a wait as long as the grace is for nothing.
            let waited = now - phase.since.max(finished_at);
            return if waited < grace {
                Finishing::GoingOn(None)
            } else {
                Finishing::Hung(format!(
                    "the trainer waited {} for the batch of step {} after the environment \
                     finished; nothing was left to send it one",
                    seconds(waited),
                    phase.step
                ))
            };
        }
        let limit = stall_limit_secs(
            timing.stall_factor,
            timing.stall_floor_secs,
            self.median_step_secs(),
        );
        let busy = (now - phase.since).max(0.0);
        if busy >= limit {
            return Finishing::Hung(format!(
                "the trainer made no progress for {} in `{}` of step {} (its stall limit: {}, \
                 run.stall_factor × its median step, at least run.stall_floor_secs)",
                seconds(busy),
                phase.phase,
                phase.step,
                seconds(limit)
            ));
        }
        Finishing::GoingOn((since_finished >= grace).then(|| {
            format!(
                "the trainer is still working (`{}` of step {} for {}): waiting for it, up to its \
                 stall limit of {} in one part of a step",
                phase.phase,
                phase.step,
                seconds(busy),
                seconds(limit)
            )
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watch_writing(phases: &[(&str, u64, f64)]) -> (tempfile::TempDir, TrainerWatch) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trainer-phase.json");
        let mut watch = TrainerWatch::new(Some(path.clone()));
        for (phase, step, since) in phases {
            write(&path, phase, *step, *since);
            watch.observe();
        }
        (dir, watch)
    }

    fn write(path: &std::path::Path, phase: &str, step: u64, since: f64) {
        std::fs::write(
            path,
            format!(r#"{{"phase": "{phase}", "step": {step}, "since": {since}}}"#),
        )
        .unwrap();
    }

    fn timing() -> RunTiming {
        RunTiming {
            completion_grace_secs: 60.0,
            stall_factor: 5.0,
            stall_floor_secs: 600.0,
            ..RunTiming::default()
        }
    }

    #[test]
    fn step_times_are_read_off_the_steps_starts() {
        let (_dir, watch) = watch_writing(&[
            ("wait", 1, 100.0),
            ("forward_backward", 1, 110.0),
            ("wait", 2, 200.0),
            ("wait", 3, 320.0),
            ("wait", 4, 420.0),
        ]);
        assert_eq!(watch.median_step_secs(), Some(100.0));
        assert_eq!(TrainerWatch::new(None).median_step_secs(), None);
    }

    /// Issue 40's run: a CPU step of 104 s, the environment done 60 s into it.
    #[test]
    fn a_trainer_in_a_long_step_goes_on_past_the_grace() {
        let (_dir, mut watch) = watch_writing(&[
            ("wait", 1, 0.0),
            ("wait", 2, 100.0),
            ("wait", 3, 204.0),
            ("forward_backward", 4, 300.0),
        ]);
        assert_eq!(
            watch.judge(&timing(), 330.0, 20.0),
            Finishing::GoingOn(None)
        );
        let Finishing::GoingOn(Some(note)) = watch.judge(&timing(), 404.0, 94.0) else {
            panic!("still working");
        };
        assert!(note.contains("`forward_backward` of step 4"), "{note}");
        // Its stall limit is the floor, 600 s (5 × ~100 s is less).
        let Finishing::Hung(why) = watch.judge(&timing(), 901.0, 591.0) else {
            panic!("hung at last");
        };
        assert!(
            why.contains("no progress for 601 s in `forward_backward` of step 4"),
            "{why}"
        );
    }

    #[test]
    fn a_trainer_waiting_for_a_batch_once_the_environment_is_gone_is_not_waited_for_long() {
        let (dir, mut watch) = watch_writing(&[("wait", 5, 50.0)]);
        assert_eq!(
            watch.judge(&timing(), 130.0, 30.0),
            Finishing::GoingOn(None)
        );
        let Finishing::Hung(why) = watch.judge(&timing(), 161.0, 61.0) else {
            panic!("nothing will come");
        };
        assert!(why.contains("batch of step 5"), "{why}");
        write(&dir.path().join("trainer-phase.json"), "linger", 5, 150.0);
        assert!(matches!(
            watch.judge(&timing(), 161.0, 61.0),
            Finishing::Done(_)
        ));
    }

    #[test]
    fn a_trainer_without_a_phase_file_gets_the_grace_alone() {
        let mut watch = TrainerWatch::new(None);
        assert_eq!(
            watch.judge(&timing(), 100.0, 59.0),
            Finishing::GoingOn(None)
        );
        assert!(matches!(
            watch.judge(&timing(), 100.0, 60.0),
            Finishing::Hung(_)
        ));
    }
}
