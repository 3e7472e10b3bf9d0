//! `trainer-phase.json`, where rl's trainer says it is: the part of its step, the step, and
//! since when (Unix seconds). Read by the health digest (whom a stall is blamed on) and by the
//! supervisor (whether a trainer still finishing its steps is working or hung).

use std::io::Read;
use std::path::Path;

/// The most a phase file is read of (it holds three short fields).
const PHASE_MAX_BYTES: u64 = 4096;

/// What the trainer last wrote of its phase.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainerPhase {
    /// The trainer's word: `wait`, `logprobs`, `rollouts`, `forward_backward`, `save`,
    /// `sampler_update`, `eval`, `other`, `final`, `linger`.
    pub phase: String,
    /// The step it is in; 0 before the first.
    pub step: u64,
    /// Unix seconds when it entered this phase.
    pub since: f64,
}

impl TrainerPhase {
    /// The phase the file at `path` says; `None` when it says nothing readable (no file yet,
    /// a file cut short, no regular file, a time that is no number).
    pub fn read(path: &Path) -> Option<Self> {
        #[derive(serde::Deserialize)]
        struct Written {
            phase: String,
            #[serde(default)]
            step: u64,
            since: f64,
        }
        let file = std::fs::File::open(path).ok()?;
        if !file.metadata().ok()?.is_file() {
            return None;
        }
        let mut text = Vec::new();
        file.take(PHASE_MAX_BYTES).read_to_end(&mut text).ok()?;
        let written: Written = serde_json::from_slice(&text).ok()?;
        written.since.is_finite().then_some(Self {
            phase: written.phase,
            step: written.step,
            since: written.since,
        })
    }

    /// Waiting for run-api to hand it a batch: no work of its own under way.
    pub fn is_waiting(&self) -> bool {
        self.phase == "wait"
    }

    /// Done training, its final weights reported (`linger`: serving the environment's last
    /// requests until it goes).
    pub fn has_finished_training(&self) -> bool {
        self.phase == "linger"
    }
}

/// How long a trainer may go without a new step (or, in one part of a step, without moving on)
/// before it counts as stalled: `factor` times its recent median step, never less than `floor`
/// (the operator's `run.stall_factor` and `run.stall_floor_secs`). The one rule for the health
/// digest's stall flag and the supervisor's judgement of a trainer finishing its last steps.
pub fn stall_limit_secs(factor: f64, floor_secs: f64, median_step_secs: Option<f64>) -> f64 {
    median_step_secs.map_or(floor_secs, |median| (factor * median).max(floor_secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phase_file_is_read_or_said_to_say_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trainer-phase.json");
        assert_eq!(TrainerPhase::read(&path), None);
        std::fs::write(
            &path,
            r#"{"phase": "forward_backward", "step": 4, "since": 17.5}"#,
        )
        .unwrap();
        let phase = TrainerPhase::read(&path).unwrap();
        assert_eq!(
            (phase.phase.as_str(), phase.step, phase.since),
            ("forward_backward", 4, 17.5)
        );
        assert!(!phase.is_waiting());
        std::fs::write(&path, r#"{"phase": "wait", "since": 5}"#).unwrap();
        assert!(TrainerPhase::read(&path).unwrap().is_waiting());
        std::fs::write(&path, r#"{"phase": "wait", "st"#).unwrap();
        assert_eq!(TrainerPhase::read(&path), None);
        std::fs::write(&path, r#"{"phase": "wait", "since": "soon"}"#).unwrap();
        assert_eq!(TrainerPhase::read(&path), None);
    }

    #[test]
    fn the_stall_limit_is_the_factor_times_the_median_never_below_the_floor() {
        assert_eq!(stall_limit_secs(5.0, 600.0, None), 600.0);
        assert_eq!(stall_limit_secs(5.0, 600.0, Some(10.0)), 600.0);
        assert_eq!(stall_limit_secs(5.0, 600.0, Some(200.0)), 1000.0);
    }
}
