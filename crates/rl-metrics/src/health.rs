//! Whether a run is learning, judged over its recent history: the signs an RL engineer looks
//! for first. Every flag names its metric and the steps it looked at.

use crate::model::{HistoryRow, LoggedRun, MetricValue};
use crate::view::{ADVANTAGES_STD, LOGPROBS_DIFF, LOSS, REWARD_MEAN};

/// The metric a step's time is logged under by rl's trainer.
const STEP_SECS: &str = "time/total_secs";

/// The thresholds; the defaults suit a Tinker GRPO run.
#[derive(Debug, Clone, PartialEq)]
pub struct HealthPolicy {
    /// How many of the latest rows are judged.
    pub window_rows: usize,
    /// Below this many rows with a metric, trends are not judged (too little to tell).
    pub min_points: usize,
    /// A running run with no new step for this many times its recent median step time is
    /// stalled (`run.stall_factor`).
    pub stall_factor: f64,
    /// ... but never before this many seconds: the first steps compile and load models, and a
    /// run without a step time yet is judged against this alone (`run.stall_floor_secs`).
    pub stall_floor_secs: f64,
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
            stall_factor: 5.0,
            stall_floor_secs: 600.0,
            flat_tolerance: 1e-6,
            zero_spread: 1e-6,
            drift_floor: 0.05,
        }
    }
}

/// What the caller knows about the run's processes (metrics alone cannot tell a finished run
/// from a stalled one).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Activity {
    pub running: bool,
    /// Unix seconds when the run started running, the floor for "no new step since".
    pub running_since: Option<f64>,
    /// Unix seconds now.
    pub now: f64,
    /// Where rl's trainer says it is in its step, and since when (Unix seconds); `None` when
    /// it says nothing (another trainer, or before its first step).
    pub phase: Option<(Phase, f64)>,
    /// Unix seconds when the environment last returned from making a group (`rl_env`'s
    /// counts); `None` when it has not yet, or is not counted.
    pub last_group: Option<f64>,
}

/// The part of a step rl's trainer is in (`trainer-phase.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for run-api to hand it a batch.
    Wait,
    Logprobs,
    Rollouts,
    ForwardBackward,
    Optim,
    Save,
    SamplerUpdate,
    Eval,
    Other,
}

impl Phase {
    /// The trainer's word for it; an unknown word is `Other`.
    pub fn parse(word: &str) -> Self {
        match word {
            "wait" => Self::Wait,
            "logprobs" => Self::Logprobs,
            "rollouts" => Self::Rollouts,
            "forward_backward" => Self::ForwardBackward,
            "optim" => Self::Optim,
            "save" => Self::Save,
            "sampler_update" => Self::SamplerUpdate,
            "eval" => Self::Eval,
            _ => Self::Other,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Wait => "wait",
            Self::Logprobs => "logprobs",
            Self::Rollouts => "rollouts",
            Self::ForwardBackward => "forward_backward",
            Self::Optim => "optim",
            Self::Save => "save",
            Self::SamplerUpdate => "sampler_update",
            Self::Eval => "eval",
            Self::Other => "other",
        }
    }
}

/// The part of a run a stall is blamed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StallComponent {
    /// The environment sends no groups.
    Environment,
    /// Groups arrive but run-api hands the trainer no batch.
    Api,
    /// The engine does not answer the trainer's calls.
    Engine,
    /// The trainer's evaluation of a checkpoint.
    Evaluation,
    /// The trainer itself (or nothing said where it is).
    Trainer,
}

impl StallComponent {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Environment => "environment",
            Self::Api => "api",
            Self::Engine => "engine",
            Self::Evaluation => "evaluation",
            Self::Trainer => "trainer",
        }
    }
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
    /// For a stall, the part of the run that is busy or waiting.
    pub component: Option<StallComponent>,
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

/// The median of the finite, positive values; `None` without any.
fn median(mut values: Vec<f64>) -> Option<f64> {
    values.retain(|value| value.is_finite() && *value > 0.0);
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    match values.len() {
        0 => None,
        n if n % 2 == 1 => Some(values[middle]),
        _ => Some(f64::midpoint(values[middle - 1], values[middle])),
    }
}

/// The latest rows' median step time: their `time/total_secs`, else the gaps between their
/// times.
fn median_step_secs(rows: &[HistoryRow]) -> Option<f64> {
    median(
        rows.iter()
            .filter_map(|row| row.number(STEP_SECS))
            .collect(),
    )
    .or_else(|| {
        let times: Vec<f64> = rows.iter().filter_map(|row| row.timestamp).collect();
        median(times.windows(2).map(|pair| pair[1] - pair[0]).collect())
    })
}

/// How long without a new step is a stall: the policy's factor times the recent median step,
/// never less than its floor.
fn stall_limit(rows: &[HistoryRow], policy: &HealthPolicy) -> f64 {
    median_step_secs(rows).map_or(policy.stall_floor_secs, |median| {
        (policy.stall_factor * median).max(policy.stall_floor_secs)
    })
}

fn minutes(secs: f64) -> String {
    if secs < 120.0 {
        format!("{secs:.0} s")
    } else {
        format!("{:.0} min", secs / 60.0)
    }
}

/// Who the stall is blamed on, and in which words, from where the trainer says it is. A trainer
/// waiting for its batch waits on the environment when it made no group since the wait began,
/// or none for as long as a stall (`limit`: a few groups that trickled in, then silence).
fn blame(activity: Activity, limit: f64) -> (StallComponent, String) {
    let now = activity.now;
    let Some((phase, since)) = activity.phase else {
        return (
            StallComponent::Trainer,
            "the trainer is busy (it says nothing of where it is)".to_owned(),
        );
    };
    let held = minutes(now - since);
    let word = phase.as_str();
    match phase {
        Phase::Wait => match activity.last_group {
            Some(last) if last >= since && now - last < limit => (
                StallComponent::Api,
                format!(
                    "the trainer is waiting for a batch from run-api (the environment is making \
                     groups, the last {} ago; waiting for {held})",
                    minutes(now - last)
                ),
            ),
            last => (
                StallComponent::Environment,
                format!(
                    "the environment is not sending (no group for {}; the trainer is waiting for a \
                     batch)",
                    minutes(now - last.unwrap_or(since))
                ),
            ),
        },
        Phase::ForwardBackward
        | Phase::Optim
        | Phase::Save
        | Phase::SamplerUpdate
        | Phase::Logprobs => (
            StallComponent::Engine,
            format!("the engine is not answering ({word} for {held})"),
        ),
        Phase::Eval => (
            StallComponent::Evaluation,
            format!("the evaluation of a checkpoint is still running (eval for {held})"),
        ),
        Phase::Rollouts | Phase::Other => (
            StallComponent::Trainer,
            format!("the trainer is busy ({word} for {held})"),
        ),
    }
}

fn stalled(rows: &[HistoryRow], activity: Activity, policy: &HealthPolicy) -> Option<HealthFlag> {
    if !activity.running {
        return None;
    }
    let last = rows.last();
    // A row without a time says nothing of when it came: then no verdict, rather than a false
    // alarm a floor after the start.
    if last.is_some_and(|row| row.timestamp.is_none()) {
        return None;
    }
    let last_progress = [last.and_then(|row| row.timestamp), activity.running_since]
        .into_iter()
        .flatten()
        .reduce(f64::max)?;
    let quiet = activity.now - last_progress;
    let limit = stall_limit(rows, policy);
    if quiet < limit {
        return None;
    }
    let (component, blamed) = blame(activity, limit);
    let (window, detail) = match last {
        Some(row) => (
            StepWindow {
                first_step: row.step,
                last_step: row.step,
                rows: 1,
            },
            format!(
                "{blamed}: no new step for {} while running (stalled past {}); the last was step \
                 {}",
                minutes(quiet),
                minutes(limit),
                row.step
            ),
        ),
        None => (
            StepWindow {
                first_step: 0,
                last_step: 0,
                rows: 0,
            },
            format!(
                "{blamed}: running for {} without logging a step (stalled past {})",
                minutes(quiet),
                minutes(limit)
            ),
        ),
    };
    Some(HealthFlag {
        kind: FlagKind::Stalled,
        metric: "_step".to_owned(),
        window,
        detail,
        component: Some(component),
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
                component: None,
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
        component: None,
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
        component: None,
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
        component: None,
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
            ..Activity::default()
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
            ..Activity::default()
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
            ..Activity::default()
        };
        assert!(HealthDigest::assess(&trainer, activity, &HealthPolicy::default()).healthy);
    }

    #[test]
    fn a_run_that_never_logged_is_stalled_after_the_limit() {
        let activity = Activity {
            running: true,
            running_since: Some(0.0),
            now: 20.0 * 60.0,
            ..Activity::default()
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

    /// Ten steps of `secs` each, the last at 1000 + 10 × secs, logged with their time.
    fn timed_run(secs: f64) -> LoggedRun {
        run((1..=10)
            .map(|s| {
                let x = s as f64;
                (
                    s,
                    Some(1000.0 + x * secs),
                    vec![
                        (REWARD_MEAN, 0.2 + 0.01 * x),
                        (ADVANTAGES_STD, 0.4),
                        (STEP_SECS, secs),
                    ],
                )
            })
            .collect())
    }

    fn stalled_flag(
        trainer: &LoggedRun,
        activity: Activity,
        policy: &HealthPolicy,
    ) -> Option<HealthFlag> {
        HealthDigest::assess(trainer, activity, policy)
            .flags
            .into_iter()
            .find(|flag| flag.kind == FlagKind::Stalled)
    }

    #[test]
    fn the_limit_is_the_factor_times_the_median_step_never_below_the_floor() {
        let policy = HealthPolicy {
            stall_factor: 2.0,
            stall_floor_secs: 5.0,
            ..HealthPolicy::default()
        };
        let trainer = timed_run(100.0);
        let last = 2000.0;
        let at = |now: f64| Activity {
            running: true,
            running_since: Some(900.0),
            now,
            ..Activity::default()
        };
        // 2 × 100 s: 150 s without a step is fine, 250 s is a stall.
        assert!(stalled_flag(&trainer, at(last + 150.0), &policy).is_none());
        assert!(stalled_flag(&trainer, at(last + 250.0), &policy).is_some());
        // The floor rules when steps are quick: 2 × 1 s, but never before 60 s.
        let quick = timed_run(1.0);
        let floor = HealthPolicy {
            stall_floor_secs: 60.0,
            ..policy.clone()
        };
        let quick_last = 1010.0;
        assert!(stalled_flag(&quick, at(quick_last + 30.0), &floor).is_none());
        assert!(stalled_flag(&quick, at(quick_last + 61.0), &floor).is_some());
        // Without `time/total_secs`, the gaps between the rows' times are the step time.
        let mut untimed = timed_run(100.0);
        for row in &mut untimed.history {
            row.values.remove(STEP_SECS);
        }
        assert!(stalled_flag(&untimed, at(last + 150.0), &policy).is_none());
        assert!(stalled_flag(&untimed, at(last + 250.0), &policy).is_some());
        // The default: five medians, ten minutes at least.
        let defaults = HealthPolicy::default();
        assert!(stalled_flag(&trainer, at(last + 450.0), &defaults).is_none());
        assert!(stalled_flag(&trainer, at(last + 601.0), &defaults).is_some());
        assert!(stalled_flag(&timed_run(300.0), at(4000.0 + 1400.0), &defaults).is_none());
    }

    /// A stall 20 minutes after the last step (at 2000) with the trainer in `phase` since
    /// 2010, and the environment's last group at `last_group`.
    fn blamed(phase: Option<&str>, last_group: Option<f64>) -> HealthFlag {
        let activity = Activity {
            running: true,
            running_since: Some(900.0),
            now: 2000.0 + 1200.0,
            phase: phase.map(|word| (Phase::parse(word), 2010.0)),
            last_group,
        };
        stalled_flag(&timed_run(100.0), activity, &HealthPolicy::default()).unwrap()
    }

    #[test]
    fn an_environment_that_stops_sending_is_named() {
        for last_group in [None, Some(1990.0)] {
            let flag = blamed(Some("wait"), last_group);
            assert_eq!(flag.component, Some(StallComponent::Environment));
            assert!(
                flag.detail
                    .starts_with("the environment is not sending (no group for"),
                "{}",
                flag.detail
            );
            assert!(flag.detail.contains("step 10"), "{}", flag.detail);
        }
        assert!(
            blamed(Some("wait"), Some(1990.0))
                .detail
                .contains("no group for 20 min")
        );
        // A few groups after the wait began, then none for longer than a stall (10 min).
        let trickled = blamed(Some("wait"), Some(2020.0));
        assert_eq!(trickled.component, Some(StallComponent::Environment));
        assert!(
            trickled.detail.contains("no group for 20 min"),
            "{}",
            trickled.detail
        );
    }

    #[test]
    fn a_trainer_waiting_while_groups_arrive_names_run_api() {
        let flag = blamed(Some("wait"), Some(3100.0));
        assert_eq!(flag.component, Some(StallComponent::Api));
        assert!(
            flag.detail
                .starts_with("the trainer is waiting for a batch from run-api"),
            "{}",
            flag.detail
        );
    }

    #[test]
    fn a_call_to_the_engine_that_does_not_return_names_the_engine() {
        for word in [
            "forward_backward",
            "optim",
            "save",
            "sampler_update",
            "logprobs",
        ] {
            let flag = blamed(Some(word), Some(3100.0));
            assert_eq!(flag.component, Some(StallComponent::Engine), "{word}");
            assert!(
                flag.detail
                    .starts_with(&format!("the engine is not answering ({word} for 20 min)")),
                "{}",
                flag.detail
            );
        }
    }

    #[test]
    fn an_evaluation_a_busy_trainer_and_a_silent_one_are_named() {
        let eval = blamed(Some("eval"), None);
        assert_eq!(eval.component, Some(StallComponent::Evaluation));
        assert!(eval.detail.starts_with("the evaluation"), "{}", eval.detail);
        for word in ["rollouts", "other", "something new"] {
            let busy = blamed(Some(word), None);
            assert_eq!(busy.component, Some(StallComponent::Trainer));
            assert!(
                busy.detail.starts_with("the trainer is busy ("),
                "{}",
                busy.detail
            );
        }
        let silent = blamed(None, None);
        assert_eq!(silent.component, Some(StallComponent::Trainer));
        assert!(
            silent.detail.starts_with("the trainer is busy"),
            "{}",
            silent.detail
        );
    }
}
