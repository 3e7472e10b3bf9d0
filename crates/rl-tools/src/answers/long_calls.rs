//! The answers of a long call started without waiting, and of its progress.

use rl_preflight::{PreflightPlan, PreflightProgress};
use serde::{Deserialize, Serialize};

use super::ModelProgressView;

/// A group's time when no earlier test of the same environment and endpoint tells.
const DEFAULT_GROUP_SECS: f64 = 20.0;
/// The start of rl's own server of a test's models (a local engine loading the base model and
/// compiling) when no earlier test it served tells.
const DEFAULT_SERVER_SECS: f64 = 60.0;
/// Bounds of the wait a caller is told before asking again.
const POLL_BOUNDS_SECS: (f64, f64) = (5.0, 60.0);

/// How long a test may take, what that rests on, and when to ask again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    pub seconds: f64,
    pub poll_after: f64,
    pub basis: String,
}

impl Estimate {
    /// `groups` groups at `per_group` (seconds a group, and how many earlier tests say so),
    /// else at a default; and when rl serves the models, its server's start first.
    pub(crate) fn of(groups: u32, per_group: Option<(f64, usize)>, server: ServerStart) -> Self {
        let (per_group, mut basis) = match per_group {
            Some((seconds, tests)) => (
                seconds,
                format!("{tests} earlier test(s) of this environment and endpoint"),
            ),
            None => (
                DEFAULT_GROUP_SECS,
                format!(
                    "a default of {DEFAULT_GROUP_SECS:.0} s a group: no earlier test of this \
                     environment and endpoint"
                ),
            ),
        };
        let start = match server {
            ServerStart::NotServed => 0.0,
            ServerStart::Measured { seconds, tests } => {
                basis.push_str(&format!(
                    "; rl's server of the models starts in {seconds:.0} s, as {tests} earlier \
                     test(s) it served took"
                ));
                seconds
            }
            ServerStart::Unknown => {
                basis.push_str(&format!(
                    "; rl's server of the models starts in a default of \
                     {DEFAULT_SERVER_SECS:.0} s: no earlier test it served"
                ));
                DEFAULT_SERVER_SECS
            }
        };
        let seconds = (start + per_group * f64::from(groups)).ceil();
        Self {
            seconds,
            poll_after: (seconds / 10.0)
                .clamp(POLL_BOUNDS_SECS.0, POLL_BOUNDS_SECS.1)
                .ceil(),
            basis,
        }
    }
}

/// Whether rl serves a test's models, and what its server's earlier starts say.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum ServerStart {
    /// An endpoint serves them: nothing starts.
    NotServed,
    /// rl starts its server, and no earlier start tells how long that takes.
    Unknown,
    /// rl starts its server: the mean of its latest starts, and how many there were.
    Measured { seconds: f64, tests: usize },
}

/// `rl_test_inference` / `rl_compare_training` started (or found running) in a worker.
#[derive(Debug, Clone, Serialize)]
pub struct LongCallStarted {
    pub test_id: String,
    /// Always `running`: the same key as the progress answer's.
    pub status: &'static str,
    /// `false` when an identical call was already running: this is its test.
    pub started: bool,
    pub environment: String,
    pub models: Vec<String>,
    /// Groups per model, and completions per group.
    pub num_steps: u32,
    pub group_size: u32,
    pub estimated_seconds: f64,
    /// What the estimate rests on.
    pub estimate_basis: String,
    /// When to ask again.
    pub poll_after_seconds: f64,
    pub message: String,
    pub hint: String,
}

impl LongCallStarted {
    pub(crate) fn new(
        tool: &str,
        plan: &PreflightPlan,
        test_id: String,
        started: bool,
        estimate: Estimate,
    ) -> Self {
        let what = if tool == "rl_compare_training" {
            "Comparison"
        } else {
            "Pre-flight"
        };
        let begun = if started {
            "started"
        } else {
            "was already running (an identical request): this is it"
        };
        let message = format!(
            "{what} {test_id} {begun}: {} model(s), {} group(s) of {} completion(s) each, on \
             {}; about {} to go. It runs on its own, whatever happens to this session. Call \
             {tool} with {{\"test_id\": \"{test_id}\"}} in about {} s for its progress and, \
             once it has ended, its full answer.",
            plan.models.len(),
            plan.steps,
            plan.group_size,
            plan.environment,
            duration(estimate.seconds),
            estimate.poll_after,
        );
        Self {
            hint: format!(
                "Call {tool} with {{\"test_id\": \"{test_id}\"}} every poll_after_seconds until \
                 its status is no longer running; rl_stop_test {{\"test_id\": \"{test_id}\"}} \
                 ends it"
            ),
            test_id,
            status: "running",
            started,
            environment: plan.environment.clone(),
            models: plan.models.clone(),
            num_steps: plan.steps,
            group_size: plan.group_size,
            estimated_seconds: estimate.seconds,
            estimate_basis: estimate.basis,
            poll_after_seconds: estimate.poll_after,
            message,
        }
    }
}

/// A long call's test while it runs.
#[derive(Debug, Clone, Serialize)]
pub struct LongCallProgress {
    pub test_id: String,
    /// Always `running`; an ended test answers in full instead.
    pub status: &'static str,
    pub environment: String,
    pub started_at: String,
    /// Models that ended with their groups written, of all.
    pub models_done: usize,
    pub models_total: usize,
    /// Groups written so far, of all (a model writes its groups as it ends).
    pub groups_done: u32,
    pub groups_total: u32,
    pub models: Vec<ModelProgressView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_requested_at: Option<String>,
    pub estimated_seconds: f64,
    pub poll_after_seconds: f64,
    pub message: String,
}

impl LongCallProgress {
    pub(crate) fn new(tool: &str, progress: &PreflightProgress, estimate: &Estimate) -> Self {
        let models_done = progress
            .models
            .iter()
            .filter(|model| !model.running && model.groups_done > 0)
            .count();
        let groups_done = progress.models.iter().map(|model| model.groups_done).sum();
        let groups_total = progress
            .models
            .iter()
            .map(|model| model.total_groups.unwrap_or(0))
            .sum();
        let test_id = progress.test_id.clone();
        Self {
            message: format!(
                "Test {test_id} is running: {models_done} of {} model(s) done, {groups_done} of \
                 {groups_total} group(s). Call {tool} with {{\"test_id\": \"{test_id}\"}} again in \
                 about {} s.",
                progress.models.len(),
                estimate.poll_after
            ),
            test_id,
            status: "running",
            environment: progress.environment.clone(),
            started_at: progress.started_at.clone(),
            models_done,
            models_total: progress.models.len(),
            groups_done,
            groups_total,
            models: progress
                .models
                .iter()
                .map(ModelProgressView::from)
                .collect(),
            stop_requested_at: progress.stop_requested_at.clone(),
            estimated_seconds: estimate.seconds,
            poll_after_seconds: estimate.poll_after,
        }
    }
}

/// Seconds as a person says them: `40 s`, `3 min`, `2 h`.
fn duration(seconds: f64) -> String {
    if seconds < 90.0 {
        format!("{seconds:.0} s")
    } else if seconds < 5400.0 {
        format!("{:.0} min", seconds / 60.0)
    } else {
        format!("{:.1} h", seconds / 3600.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_served_test_adds_its_servers_start_to_its_groups() {
        // Endpoint tests: groups only.
        let plain = Estimate::of(4, Some((10.0, 2)), ServerStart::NotServed);
        assert_eq!(plain.seconds, 40.0);
        assert!(!plain.basis.contains("server"), "{}", plain.basis);
        // Served by rl: its earlier starts, then the groups at their own rate.
        let served = Estimate::of(
            4,
            Some((10.0, 2)),
            ServerStart::Measured {
                seconds: 35.0,
                tests: 3,
            },
        );
        assert_eq!(served.seconds, 75.0);
        assert!(
            served
                .basis
                .contains("starts in 35 s, as 3 earlier test(s) it served took"),
            "{}",
            served.basis
        );
        // Nothing earlier: both defaults, each said.
        let first = Estimate::of(2, None, ServerStart::Unknown);
        assert_eq!(
            first.seconds,
            DEFAULT_SERVER_SECS + 2.0 * DEFAULT_GROUP_SECS
        );
        assert!(
            first.basis.contains("a default of 20 s a group")
                && first
                    .basis
                    .contains("a default of 60 s: no earlier test it served"),
            "{}",
            first.basis
        );
    }
}
