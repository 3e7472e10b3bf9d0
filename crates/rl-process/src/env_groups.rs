//! The groups an environment made, as `rl_env` counts them (`rl_env/groups.py`): written whole
//! to `env-groups.json` in a run's folder (a pre-flight model's next to its log), read here by
//! the supervisor, the status and the pre-flights. A run none of whose groups has scores that
//! differ cannot learn: GRPO's advantages are zero, and `serve` drops such groups.

use std::collections::BTreeMap;
use std::path::Path;

use rl_settings::RunFolder;
use serde::Deserialize;

/// The variable naming the file `rl_env` writes the counts to.
pub const GROUPS_FILE_VARIABLE: &str = "RL_GROUPS_FILE";
/// Larger than any counts file `rl_env` writes; a bigger one is not read.
const MAX_BYTES: u64 = 64 * 1024;

/// A run's counts with the bounds its launch plan was started with.
#[derive(Debug, Clone, PartialEq)]
pub struct RunGroups {
    pub groups: EnvGroups,
    /// `run.no_signal_warn_groups` when the run started (0: never warns).
    pub warn_groups: u64,
    /// `run.no_signal_fail_groups` when the run started (0: never fails).
    pub fail_groups: u64,
}

impl RunGroups {
    /// The counts of the run whose folder is `run_dir`, `None` before its first group.
    pub fn read(run_dir: &Path) -> Option<Self> {
        let groups = EnvGroups::read(&RunFolder::at(run_dir).env_groups())?;
        let timing = std::fs::read(RunFolder::at(run_dir).launch_plan())
            .ok()
            .and_then(|text| serde_json::from_slice::<crate::LaunchPlan>(&text).ok())
            .map(|plan| plan.timing)
            .unwrap_or_default();
        Some(Self {
            groups,
            warn_groups: timing.no_signal_warn_groups,
            fail_groups: timing.no_signal_fail_groups,
        })
    }

    /// Whether the run's warning bound is passed without a group with signal.
    pub fn no_signal(&self) -> bool {
        self.groups.without_signal_past(self.warn_groups)
    }
}

/// What an environment made so far.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct EnvGroups {
    /// Groups `collect_trajectories` returned.
    pub made: u64,
    /// Of those, groups whose scores differ: the only ones GRPO learns from.
    pub with_signal: u64,
    /// Of those, groups whose scores were all equal.
    pub alike: u64,
    /// The alike groups by the score they shared (`"0.0"`, `"nan"`, `"other"`).
    pub alike_scores: BTreeMap<String, u64>,
    /// Calls that returned no group (the environment's own check of equal scores, or a
    /// failure it swallowed).
    pub none: u64,
    /// Calls that raised.
    pub failed: u64,
    /// Unix seconds of the last count.
    pub updated: Option<f64>,
}

impl EnvGroups {
    /// The counts in `path`; `None` while there are none (no group yet, not through `rl_env`)
    /// or the file is unreadable.
    pub fn read(path: &Path) -> Option<Self> {
        let file = std::fs::File::open(path).ok()?;
        if !file.metadata().ok()?.is_file() {
            return None;
        }
        let mut text = Vec::new();
        std::io::Read::read_to_end(&mut std::io::Read::take(file, MAX_BYTES), &mut text).ok()?;
        serde_json::from_slice(&text).ok()
    }

    /// Every attempt at a group: returned, returned none, or raised.
    pub fn attempts(&self) -> u64 {
        self.made + self.none + self.failed
    }

    /// Whether at least `bound` attempts were made (`bound` > 0) and none gave a group with
    /// signal.
    pub fn without_signal_past(&self, bound: u64) -> bool {
        bound > 0 && self.with_signal == 0 && self.attempts() >= bound
    }

    /// The shared scores, `all 0.0` or `0.0 or 1.0`.
    pub fn shared_scores(&self) -> String {
        let scores: Vec<&str> = self.alike_scores.keys().map(String::as_str).collect();
        match scores.as_slice() {
            [] => "no score seen".to_owned(),
            [one] => format!("all {one}"),
            many => many.join(" or "),
        }
    }

    /// `120 of 120 groups scored alike (all 0.0)`, with the groups that returned none or failed.
    pub fn describe(&self) -> String {
        let attempts = self.attempts();
        let mut parts = Vec::new();
        if self.alike > 0 {
            parts.push(format!(
                "{} of {attempts} groups scored alike ({})",
                self.alike,
                self.shared_scores()
            ));
        }
        if self.none > 0 {
            parts.push(format!(
                "{} of {attempts} returned no group (the environment's own check of equal \
                 scores, or a failure it swallowed)",
                self.none
            ));
        }
        if self.failed > 0 {
            parts.push(format!("{} of {attempts} failed", self.failed));
        }
        if self.with_signal > 0 {
            parts.push(format!("{} with scores that differ", self.with_signal));
        }
        if parts.is_empty() {
            return "no group yet".to_owned();
        }
        parts.join(", ")
    }

    /// The cause of a run that cannot learn, and what to try.
    pub fn no_signal_cause(&self) -> String {
        format!(
            "no training signal: {}; nothing reaches the trainer. Try a stronger base model, a \
             smaller or easier task, a shaped reward (partial credit), or a pre-flight \
             (rl_test_inference) to see how the model scores",
            self.describe()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_of_alike_groups_is_said_with_its_score() {
        let groups: EnvGroups = serde_json::from_str(
            r#"{"made": 120, "with_signal": 0, "alike": 120, "alike_scores": {"0.0": 120},
                "none": 0, "failed": 0, "updated": 1.0}"#,
        )
        .unwrap();
        assert!(groups.without_signal_past(120));
        assert!(!groups.without_signal_past(121));
        assert!(!groups.without_signal_past(0));
        assert!(
            groups
                .no_signal_cause()
                .starts_with("no training signal: 120 of 120 groups scored alike (all 0.0)")
        );
    }

    #[test]
    fn one_group_with_signal_is_enough() {
        let groups = EnvGroups {
            made: 20,
            with_signal: 1,
            alike: 19,
            ..EnvGroups::default()
        };
        assert!(!groups.without_signal_past(4));
    }
}
