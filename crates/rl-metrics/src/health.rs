//! Whether a run is learning, judged over its recent history: the signs an RL engineer looks
//! for first. Every flag names its metric and the steps it looked at.

use crate::model::{HistoryRow, LoggedRun, MetricValue};
use crate::view::{
    ADVANTAGES_STD, LOGPROBS_DIFF, LOSS, OFF_POLICY_STEPS, OFF_POLICY_STEPS_MAX, REWARD_MEAN,
    STALE_GROUPS,
};

/// The metric a step's time is logged under by rl's trainer.
const STEP_SECS: &str = "time/total_secs";
/// The share of a step's trained tokens whose importance ratio the loss clipped (ppo, cispo).
const CLIP_FRACTION: &str = "train/clip_fraction";
/// The step's estimate of the KL from the policy to the base model (per token).
const KL_BASE: &str = "train/kl_base";
/// The groups of a step's batch (of which `STALE_GROUPS` were dropped as stale).
const GROUPS: &str = "batch/groups";

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
    /// A mean `train/clip_fraction` over the window at or above this: nearly every token is
    /// clipped, so hardly any gradient is left.
    pub clip_fraction_high: f64,
    /// `train/kl_base` (nats per token) at or above this in the later half of the window is
    /// exploding, whatever its trend...
    pub kl_high: f64,
    /// ... and so is one whose later half is at least twice its earlier half and above this
    /// floor, over at least `min_points` rows (a KL starting from 0 grows at first).
    pub kl_floor: f64,
    /// The share of the window's groups dropped as stale at or above which the run mostly
    /// samples for nothing.
    pub stale_share_high: f64,
    /// A mean `train/off_policy_steps` over the window at or above this: most of what the run
    /// trains was sampled that many optimizer steps before the weights it trains.
    pub off_policy_steps_high: f64,
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
            clip_fraction_high: 0.9,
            kl_high: 1.0,
            kl_floor: 0.1,
            stale_share_high: 0.5,
            off_policy_steps_high: 2.0,
        }
    }
}

/// What the caller knows about the run's processes (metrics alone cannot tell a finished run
/// from a stalled one).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Activity {
    pub running: bool,
    /// Unix seconds when the run started running, the floor for "no new step since".
    pub running_since: Option<f64>,
    /// Unix seconds now.
    pub now: f64,
    /// Where rl's trainer says it is in its step, and since when (Unix seconds); `None` when
    /// it says nothing (another trainer, or before its first step).
    pub phase: Option<(Phase, f64)>,
    /// What the environment's groups file says; `None` when it has none (no group ended
    /// yet, or not counted).
    pub groups: Option<GroupsSeen>,
}

/// The environment's groups as its counts file (`env-groups.json`) tells them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GroupsSeen {
    /// Unix seconds when it last made a group the trainer is sent; `None` before the first.
    pub last_sent: Option<f64>,
    /// Unix seconds when a group last ended, however it ended (sent, failed, timed out,
    /// dropped).
    pub last_ended: Option<f64>,
    /// How the groups so far ended, in words (`4 of 5 ended without a group to send, …`).
    pub so_far: String,
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
    /// Nearly every trained token's importance ratio is clipped (ppo, cispo).
    ClipFractionHigh,
    /// The KL from the policy to the base model rises steeply or is large.
    KlBaseExploding,
    /// Most groups are dropped as older than the run's `max_steps_off_policy`.
    StaleGroupsHigh,
    /// What the run trains was mostly sampled from weights several steps older.
    OffPolicyHigh,
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
            Self::ClipFractionHigh => "clip_fraction_high",
            Self::KlBaseExploding => "kl_base_exploding",
            Self::StaleGroupsHigh => "stale_groups_high",
            Self::OffPolicyHigh => "off_policy_high",
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
    pub fn assess(trainer: &LoggedRun, activity: &Activity, policy: &HealthPolicy) -> Self {
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
            flags.extend(clip_fraction_high(rows, policy));
            flags.extend(kl_base_exploding(rows, policy));
            flags.extend(stale_groups_high(rows, policy));
            flags.extend(off_policy_high(rows, policy));
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
    rl_settings::trainer::stall_limit_secs(
        policy.stall_factor,
        policy.stall_floor_secs,
        median_step_secs(rows),
    )
}

fn minutes(secs: f64) -> String {
    if secs < 120.0 {
        format!("{secs:.0} s")
    } else {
        format!("{:.0} min", secs / 60.0)
    }
}

/// Who the stall is blamed on, and in which words, from where the trainer says it is.
fn blame(activity: &Activity, limit: f64) -> (StallComponent, String) {
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
        Phase::Wait => blame_waiting(activity.groups.as_ref(), now, since, limit),
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

/// A trainer waiting for its batch (since `since`) waits on run-api only while the environment
/// sends it groups: one sent since the wait began and within a stall (`limit`). Else the
/// environment is blamed, in the words of what its file shows: groups ending without one sent
/// (failing, timing out, dropped) since the wait began, or no group at all (a few that trickled
/// in, then silence). A group that ended is never taken for one sent.
fn blame_waiting(
    groups: Option<&GroupsSeen>,
    now: f64,
    since: f64,
    limit: f64,
) -> (StallComponent, String) {
    let recent = |time: Option<f64>| time.filter(|last| *last >= since && now - last < limit);
    let last_sent = groups.and_then(|groups| groups.last_sent);
    if let Some(last) = recent(last_sent) {
        return (
            StallComponent::Api,
            format!(
                "the trainer is waiting for a batch from run-api (the environment is sending \
                 groups, the last {} ago; waiting for {})",
                minutes(now - last),
                minutes(now - since)
            ),
        );
    }
    let none_for = minutes(now - last_sent.unwrap_or(since));
    let ending_unsent = groups.and_then(|groups| {
        let ended = recent(groups.last_ended).filter(|ended| Some(*ended) > last_sent)?;
        Some((ended, groups))
    });
    match ending_unsent {
        Some((ended, groups)) => (
            StallComponent::Environment,
            format!(
                "the environment's groups end without one sent to the trainer (none sent for \
                 {none_for}, the last ended {} ago; so far: {}; the trainer is waiting for a \
                 batch)",
                minutes(now - ended),
                groups.so_far
            ),
        ),
        None => (
            StallComponent::Environment,
            format!(
                "the environment is not sending (no group for {none_for}; the trainer is waiting \
                 for a batch)"
            ),
        ),
    }
}

fn stalled(rows: &[HistoryRow], activity: &Activity, policy: &HealthPolicy) -> Option<HealthFlag> {
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

/// The rows that logged `metric` (finite), however few: a short run is judged on what it has,
/// at least two rows.
fn recent(rows: &[HistoryRow], metric: &str) -> Option<Vec<(i64, f64)>> {
    let points: Vec<(i64, f64)> = rows
        .iter()
        .filter_map(|row| Some((row.step, row.number(metric)?)))
        .filter(|(_, value)| value.is_finite())
        .collect();
    (points.len() >= 2).then_some(points)
}

fn mean_of(points: &[(i64, f64)]) -> f64 {
    points.iter().map(|(_, value)| value).sum::<f64>() / points.len() as f64
}

/// The window's mean clip fraction near 1: the loss clips nearly every token's ratio, so the
/// update is made of almost nothing but the clip.
fn clip_fraction_high(rows: &[HistoryRow], policy: &HealthPolicy) -> Option<HealthFlag> {
    let points = recent(rows, CLIP_FRACTION)?;
    let mean = mean_of(&points);
    (mean >= policy.clip_fraction_high).then(|| HealthFlag {
        kind: FlagKind::ClipFractionHigh,
        metric: CLIP_FRACTION.to_owned(),
        window: window_of_points(&points),
        detail: format!(
            "{CLIP_FRACTION} averaged {mean:.2} over {} rows (>= {}): the policy moves so far from              the sampler's within a step that nearly every token's ratio is clipped and little              gradient is left (lower the learning rate, or widen clip_low/clip_high)",
            points.len(),
            policy.clip_fraction_high
        ),
        component: None,
    })
}

/// The KL to the base model above its bound in the later half of the window, or (with enough
/// rows for a trend) at least doubling from the earlier half above its floor.
fn kl_base_exploding(rows: &[HistoryRow], policy: &HealthPolicy) -> Option<HealthFlag> {
    let points = recent(rows, KL_BASE)?;
    let (earlier, later) = points.split_at(points.len() / 2);
    let (before, after) = (mean_of(earlier), mean_of(later));
    let steep = points.len() >= policy.min_points
        && after > policy.kl_floor
        && after >= 2.0 * before.max(0.0);
    (after >= policy.kl_high || steep).then(|| HealthFlag {
        kind: FlagKind::KlBaseExploding,
        metric: KL_BASE.to_owned(),
        window: window_of_points(&points),
        detail: format!(
            "{KL_BASE} went from {before:.4} to {after:.4} nats per token (mean of each half of              the window): the policy runs away from the base model (raise kl_coef, or lower the              learning rate)"
        ),
        component: None,
    })
}

/// Half the window's groups or more dropped as stale (over the rows that count them).
fn stale_groups_high(rows: &[HistoryRow], policy: &HealthPolicy) -> Option<HealthFlag> {
    let counted: Vec<(i64, f64, f64)> = rows
        .iter()
        .filter_map(|row| Some((row.step, row.number(STALE_GROUPS)?, row.number(GROUPS)?)))
        .filter(|(_, stale, groups)| stale.is_finite() && groups.is_finite())
        .collect();
    let stale: f64 = counted.iter().map(|(_, stale, _)| stale).sum();
    let groups: f64 = counted.iter().map(|(_, _, groups)| groups).sum();
    if groups <= 0.0 || stale / groups < policy.stale_share_high {
        return None;
    }
    let points: Vec<(i64, f64)> = counted
        .iter()
        .map(|(step, stale, _)| (*step, *stale))
        .collect();
    Some(HealthFlag {
        kind: FlagKind::StaleGroupsHigh,
        metric: STALE_GROUPS.to_owned(),
        window: window_of_points(&points),
        detail: format!(
            "{stale:.0} of {groups:.0} groups over {} rows were dropped as older than \
             max_steps_off_policy: the environment samples further ahead of the trainer than the \
             bound allows (raise max_steps_off_policy, or lower the environment's \
             max_batches_offpolicy)",
            points.len()
        ),
        component: None,
    })
}

/// The samples trained over the window were, on average, `off_policy_steps_high` optimizer
/// steps or more older than the weights they trained (issue 56: a run whose environment sampled
/// every group from the base weights showed only a rising logprob drift).
fn off_policy_high(rows: &[HistoryRow], policy: &HealthPolicy) -> Option<HealthFlag> {
    let points = series(rows, OFF_POLICY_STEPS, policy)?;
    let mean = points.iter().map(|(_, age)| age).sum::<f64>() / points.len() as f64;
    if mean < policy.off_policy_steps_high {
        return None;
    }
    let oldest = rows
        .iter()
        .filter_map(|row| row.number(OFF_POLICY_STEPS_MAX))
        .filter(|age| age.is_finite())
        .fold(0.0_f64, f64::max);
    Some(HealthFlag {
        kind: FlagKind::OffPolicyHigh,
        metric: OFF_POLICY_STEPS.to_owned(),
        window: window_of_points(&points),
        detail: format!(
            "{OFF_POLICY_STEPS} averaged {mean:.1} over {} rows (the oldest {oldest:.0}): what \
             the run trains was mostly sampled from weights that many optimizer steps older \
             than those it trains, so it learns from the past policy's samples (set \
             max_steps_off_policy to drop them, or lower the environment's \
             max_batches_offpolicy)",
            points.len()
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
mod tests;
