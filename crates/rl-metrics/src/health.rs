//! Whether a run is learning, judged over its recent history: the signs an RL engineer looks
//! for first. Every flag names its metric and the steps it looked at.

use std::time::Duration;

use crate::model::{HistoryRow, LoggedRun, MetricValue};
use crate::view::{ADVANTAGES_STD, LOGPROBS_DIFF, LOSS, REWARD_MEAN};

/// The thresholds; the defaults suit a Tinker GRPO run.
#[derive(Debug, Clone, PartialEq)]
pub struct HealthPolicy {
    /// How many of the latest rows are judged.
    pub window_rows: usize,
    /// Below this many rows with a metric, trends are not judged (too little to tell).
    pub min_points: usize,
    /// A running run with no new step for this long is stalled.
    pub stall_after: Duration,
    /// `reward/mean` moving less than this over the window is flat.
    pub flat_tolerance: f64,
    /// The trainer treats advantages with a spread at or below this as zero (it skips them).
    pub zero_spread: f64,
    /// `|logprobs/diff|` below this is noise, whatever its trend.
    pub drift_floor: f64,
}

impl Default for HealthPolicy {
    fn default() -> Self {
        Self {
            window_rows: 20,
            min_points: 5,
            stall_after: Duration::from_secs(15 * 60),
            flat_tolerance: 1e-6,
            zero_spread: 1e-6,
            drift_floor: 0.05,
        }
    }
}

/// What the caller knows about the run's processes (metrics alone cannot tell a finished run
/// from a stalled one).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Activity {
    pub running: bool,
    /// Unix seconds when the run started running, the floor for "no new step since".
    pub running_since: Option<f64>,
    /// Unix seconds now.
    pub now: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagKind {
    /// No new step for a while although the run is running.
    Stalled,
    /// NaN or an infinity in the loss or the reward.
    NonFinite,
    /// The mean reward does not move.
    RewardFlat,
    /// Every group's rewards are equal, so GRPO's advantages are zero and nothing is learned.
    ZeroGroupVariance,
    /// The gap between the sampler's and the trainer's logprobs keeps growing (off-policy drift).
    LogprobDriftRising,
}

impl FlagKind {
    /// The sign's name in answers and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stalled => "stalled",
            Self::NonFinite => "non_finite",
            Self::RewardFlat => "reward_flat",
            Self::ZeroGroupVariance => "zero_group_variance",
            Self::LogprobDriftRising => "logprob_drift_rising",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepWindow {
    pub first_step: i64,
    pub last_step: i64,
    pub rows: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct HealthFlag {
    pub kind: FlagKind,
    pub metric: String,
    pub window: StepWindow,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct HealthDigest {
    pub healthy: bool,
    /// The rows judged; `None` before the first step.
    pub window: Option<StepWindow>,
    pub flags: Vec<HealthFlag>,
}

impl HealthDigest {
    pub fn assess(trainer: &LoggedRun, activity: Activity, policy: &HealthPolicy) -> Self {
        let start = trainer.history.len().saturating_sub(policy.window_rows);
        let rows = &trainer.history[start..];
        let window = window_of(rows);
        let mut flags = Vec::new();
        if let Some(flag) = stalled(rows, activity, policy) {
            flags.push(flag);
        }
        if let Some(window) = window {
            flags.extend(non_finite(rows, window));
            flags.extend(reward_flat(rows, policy));
            flags.extend(zero_group_variance(rows, policy));
            flags.extend(logprob_drift_rising(rows, policy));
        }
        Self {
            healthy: flags.is_empty(),
            window,
            flags,
        }
    }
}

fn window_of(rows: &[HistoryRow]) -> Option<StepWindow> {
    Some(StepWindow {
        first_step: rows.first()?.step,
        last_step: rows.last()?.step,
        rows: rows.len(),
    })
}

fn stalled(rows: &[HistoryRow], activity: Activity, policy: &HealthPolicy) -> Option<HealthFlag> {
    if !activity.running {
        return None;
    }
    let last = rows.last();
    // A row without a time says nothing of when it came: then no verdict, rather than a false
    // alarm 15 minutes after the start.
    if last.is_some_and(|row| row.timestamp.is_none()) {
        return None;
    }
    let last_progress = [last.and_then(|row| row.timestamp), activity.running_since]
        .into_iter()
        .flatten()
        .reduce(f64::max)?;
    let quiet = activity.now - last_progress;
    if quiet < policy.stall_after.as_secs_f64() {
        return None;
    }
    let minutes = quiet / 60.0;
    let (window, detail) = match last {
        Some(row) => (
            StepWindow {
                first_step: row.step,
                last_step: row.step,
                rows: 1,
            },
            format!(
                "no new step for {minutes:.0} min while running; the last was step {}",
                row.step
            ),
        ),
        None => (
            StepWindow {
                first_step: 0,
                last_step: 0,
                rows: 0,
            },
            format!("running for {minutes:.0} min without logging a step"),
        ),
    };
    Some(HealthFlag {
        kind: FlagKind::Stalled,
        metric: "_step".to_owned(),
        window,
        detail,
    })
}

fn non_finite(rows: &[HistoryRow], window: StepWindow) -> Vec<HealthFlag> {
    [LOSS, REWARD_MEAN]
        .into_iter()
        .filter_map(|metric| {
            let bad: Vec<(i64, f64)> = rows
                .iter()
                .filter_map(|row| Some((row.step, row.number(metric)?)))
                .filter(|(_, value)| !value.is_finite())
                .collect();
            let (first_step, first_value) = *bad.first()?;
            Some(HealthFlag {
                kind: FlagKind::NonFinite,
                metric: metric.to_owned(),
                window,
                detail: format!(
                    "{} of {} rows are not finite, first {} at step {first_step}",
                    bad.len(),
                    rows.len(),
                    MetricValue::Number(first_value)
                ),
            })
        })
        .collect()
}

/// The rows that logged `metric`, when there are enough of them to judge a trend.
fn series(rows: &[HistoryRow], metric: &str, policy: &HealthPolicy) -> Option<Vec<(i64, f64)>> {
    let points: Vec<(i64, f64)> = rows
        .iter()
        .filter_map(|row| Some((row.step, row.number(metric)?)))
        .filter(|(_, value)| value.is_finite())
        .collect();
    (points.len() >= policy.min_points).then_some(points)
}

fn window_of_points(points: &[(i64, f64)]) -> StepWindow {
    StepWindow {
        first_step: points.first().map_or(0, |(step, _)| *step),
        last_step: points.last().map_or(0, |(step, _)| *step),
        rows: points.len(),
    }
}

fn reward_flat(rows: &[HistoryRow], policy: &HealthPolicy) -> Option<HealthFlag> {
    let points = series(rows, REWARD_MEAN, policy)?;
    let (low, high) = points
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(low, high), (_, v)| {
            (low.min(*v), high.max(*v))
        });
    (high - low <= policy.flat_tolerance).then(|| HealthFlag {
        kind: FlagKind::RewardFlat,
        metric: REWARD_MEAN.to_owned(),
        window: window_of_points(&points),
        detail: format!("{REWARD_MEAN} stayed at {low} for {} rows", points.len()),
    })
}

/// The Tinker trainer logs `reward/mean` every step but `advantages/*` only when advantages
/// spread: a row with the reward and no spread means every group's rewards were equal.
fn zero_group_variance(rows: &[HistoryRow], policy: &HealthPolicy) -> Option<HealthFlag> {
    let judged: Vec<(i64, Option<f64>)> = rows
        .iter()
        .filter(|row| row.number(REWARD_MEAN).is_some())
        .map(|row| (row.step, row.number(ADVANTAGES_STD)))
        .collect();
    if judged.len() < policy.min_points {
        return None;
    }
    let all_zero = judged
        .iter()
        .all(|(_, spread)| spread.is_none_or(|spread| spread.abs() <= policy.zero_spread));
    all_zero.then(|| HealthFlag {
        kind: FlagKind::ZeroGroupVariance,
        metric: ADVANTAGES_STD.to_owned(),
        window: StepWindow {
            first_step: judged.first().map_or(0, |(step, _)| *step),
            last_step: judged.last().map_or(0, |(step, _)| *step),
            rows: judged.len(),
        },
        detail: format!(
            "{ADVANTAGES_STD} absent or <= {} in all {} rows: every group's rewards are equal, so GRPO has nothing to learn from (make the task harder or easier, or raise group_size)",
            policy.zero_spread,
            judged.len()
        ),
    })
}

/// Rising means the later half of the window's `|logprobs/diff|` is at least 1.5 times the
/// earlier half's and above the noise floor.
fn logprob_drift_rising(rows: &[HistoryRow], policy: &HealthPolicy) -> Option<HealthFlag> {
    let points = series(rows, LOGPROBS_DIFF, policy)?;
    let (earlier, later) = points.split_at(points.len() / 2);
    let mean_abs = |half: &[(i64, f64)]| {
        let count = half.len() as f64;
        half.iter().map(|(_, value)| value.abs()).sum::<f64>() / count
    };
    let (before, after) = (mean_abs(earlier), mean_abs(later));
    (after > policy.drift_floor && after >= 1.5 * before).then(|| HealthFlag {
        kind: FlagKind::LogprobDriftRising,
        metric: LOGPROBS_DIFF.to_owned(),
        window: window_of_points(&points),
        detail: format!(
            "|{LOGPROBS_DIFF}| rose from {before:.4} to {after:.4} (mean of each half of the window): sampler and trainer disagree more and more"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows as (step, timestamp, values).
    type Rows<'a> = Vec<(i64, Option<f64>, Vec<(&'a str, f64)>)>;

    fn run(rows: Rows<'_>) -> LoggedRun {
        LoggedRun {
            history: rows
                .into_iter()
                .map(|(step, timestamp, values)| HistoryRow {
                    step,
                    timestamp,
                    values: values
                        .into_iter()
                        .map(|(k, v)| (k.to_owned(), MetricValue::Number(v)))
                        .collect(),
                })
                .collect(),
            ..LoggedRun::default()
        }
    }

    fn finished() -> Activity {
        Activity {
            running: false,
            running_since: None,
            now: 0.0,
        }
    }

    fn kinds(digest: &HealthDigest) -> Vec<FlagKind> {
        digest.flags.iter().map(|flag| flag.kind).collect()
    }

    fn learning_run(steps: i64) -> LoggedRun {
        run((1..=steps)
            .map(|s| {
                let x = s as f64;
                (
                    s,
                    Some(1000.0 + x * 60.0),
                    vec![
                        (REWARD_MEAN, 0.2 + 0.01 * x),
                        (LOSS, 1.0 / x),
                        (ADVANTAGES_STD, 0.4),
                        (LOGPROBS_DIFF, 0.01),
                    ],
                )
            })
            .collect())
    }

    #[test]
    fn a_learning_run_is_healthy() {
        let digest = HealthDigest::assess(&learning_run(30), finished(), &HealthPolicy::default());
        assert!(digest.healthy, "{:?}", digest.flags);
        assert_eq!(
            digest.window,
            Some(StepWindow {
                first_step: 11,
                last_step: 30,
                rows: 20
            })
        );
    }

    #[test]
    fn no_new_step_while_running_is_stalled_and_a_finished_run_is_not() {
        let trainer = learning_run(10);
        let last = 1000.0 + 600.0;
        let running = Activity {
            running: true,
            running_since: Some(900.0),
            now: last + 16.0 * 60.0,
        };
        let digest = HealthDigest::assess(&trainer, running, &HealthPolicy::default());
        assert_eq!(kinds(&digest), vec![FlagKind::Stalled]);
        assert!(
            digest.flags[0].detail.contains("step 10"),
            "{:?}",
            digest.flags
        );
        let digest = HealthDigest::assess(&trainer, finished(), &HealthPolicy::default());
        assert!(digest.healthy);
        let recent = Activity {
            now: last + 60.0,
            ..running
        };
        assert!(HealthDigest::assess(&trainer, recent, &HealthPolicy::default()).healthy);
    }

    #[test]
    fn rows_without_a_time_are_never_judged_stalled() {
        let mut trainer = learning_run(3);
        for row in &mut trainer.history {
            row.timestamp = None;
        }
        let activity = Activity {
            running: true,
            running_since: Some(0.0),
            now: 3600.0,
        };
        assert!(HealthDigest::assess(&trainer, activity, &HealthPolicy::default()).healthy);
    }

    #[test]
    fn a_run_that_never_logged_is_stalled_after_the_limit() {
        let activity = Activity {
            running: true,
            running_since: Some(0.0),
            now: 20.0 * 60.0,
        };
        let digest =
            HealthDigest::assess(&LoggedRun::default(), activity, &HealthPolicy::default());
        assert_eq!(kinds(&digest), vec![FlagKind::Stalled]);
        assert_eq!(digest.window, None);
    }

    #[test]
    fn nan_loss_and_infinite_reward_are_flagged_by_metric() {
        let mut trainer = learning_run(10);
        trainer.history[7]
            .values
            .insert(LOSS.to_owned(), MetricValue::Number(f64::NAN));
        trainer.history[8]
            .values
            .insert(REWARD_MEAN.to_owned(), MetricValue::Number(f64::INFINITY));
        let digest = HealthDigest::assess(&trainer, finished(), &HealthPolicy::default());
        assert_eq!(
            kinds(&digest),
            vec![FlagKind::NonFinite, FlagKind::NonFinite]
        );
        assert_eq!(digest.flags[0].metric, LOSS);
        assert!(digest.flags[0].detail.contains("step 8"));
        assert_eq!(digest.flags[1].metric, REWARD_MEAN);
    }

    #[test]
    fn equal_rewards_in_every_group_are_flagged_whether_the_spread_is_zero_or_missing() {
        let trainer = run((1..=8)
            .map(|s| {
                let mut values = vec![(REWARD_MEAN, if s % 2 == 0 { 1.0 } else { 0.0 })];
                if s % 3 == 0 {
                    values.push((ADVANTAGES_STD, 0.0));
                }
                (s, None, values)
            })
            .collect());
        let digest = HealthDigest::assess(&trainer, finished(), &HealthPolicy::default());
        assert_eq!(kinds(&digest), vec![FlagKind::ZeroGroupVariance]);
        assert_eq!(digest.flags[0].window.rows, 8);
    }

    #[test]
    fn a_flat_reward_is_flagged_only_with_enough_rows() {
        let flat = |steps| {
            run((1..=steps)
                .map(|s| (s, None, vec![(REWARD_MEAN, 0.5), (ADVANTAGES_STD, 0.3)]))
                .collect())
        };
        let digest = HealthDigest::assess(&flat(6), finished(), &HealthPolicy::default());
        assert_eq!(kinds(&digest), vec![FlagKind::RewardFlat]);
        assert!(HealthDigest::assess(&flat(4), finished(), &HealthPolicy::default()).healthy);
    }

    #[test]
    fn growing_logprob_drift_is_flagged_and_steady_noise_is_not() {
        let drifting = run((1..=10)
            .map(|s| {
                let values = vec![
                    (REWARD_MEAN, 0.1 * s as f64),
                    (ADVANTAGES_STD, 0.3),
                    (LOGPROBS_DIFF, -0.02 * s as f64),
                ];
                (s, None, values)
            })
            .collect());
        let digest = HealthDigest::assess(&drifting, finished(), &HealthPolicy::default());
        assert_eq!(kinds(&digest), vec![FlagKind::LogprobDriftRising]);
        assert_eq!(digest.flags[0].window.first_step, 1);
        assert!(
            HealthDigest::assess(&learning_run(10), finished(), &HealthPolicy::default()).healthy
        );
    }
}
