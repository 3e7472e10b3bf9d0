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
    let digest = HealthDigest::assess(&learning_run(30), &finished(), &HealthPolicy::default());
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
    let digest = HealthDigest::assess(&trainer, &running, &HealthPolicy::default());
    assert_eq!(kinds(&digest), vec![FlagKind::Stalled]);
    assert!(
        digest.flags[0].detail.contains("step 10"),
        "{:?}",
        digest.flags
    );
    let digest = HealthDigest::assess(&trainer, &finished(), &HealthPolicy::default());
    assert!(digest.healthy);
    let recent = Activity {
        now: last + 60.0,
        ..running
    };
    assert!(HealthDigest::assess(&trainer, &recent, &HealthPolicy::default()).healthy);
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
    assert!(HealthDigest::assess(&trainer, &activity, &HealthPolicy::default()).healthy);
}

#[test]
fn a_run_that_never_logged_is_stalled_after_the_limit() {
    let activity = Activity {
        running: true,
        running_since: Some(0.0),
        now: 20.0 * 60.0,
        ..Activity::default()
    };
    let digest = HealthDigest::assess(&LoggedRun::default(), &activity, &HealthPolicy::default());
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
    let digest = HealthDigest::assess(&trainer, &finished(), &HealthPolicy::default());
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
    let digest = HealthDigest::assess(&trainer, &finished(), &HealthPolicy::default());
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
    let digest = HealthDigest::assess(&flat(6), &finished(), &HealthPolicy::default());
    assert_eq!(kinds(&digest), vec![FlagKind::RewardFlat]);
    assert!(HealthDigest::assess(&flat(4), &finished(), &HealthPolicy::default()).healthy);
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
    let digest = HealthDigest::assess(&drifting, &finished(), &HealthPolicy::default());
    assert_eq!(kinds(&digest), vec![FlagKind::LogprobDriftRising]);
    assert_eq!(digest.flags[0].window.first_step, 1);
    assert!(HealthDigest::assess(&learning_run(10), &finished(), &HealthPolicy::default()).healthy);
}

/// A learning run's rows with `metric` at `values[i]` in row i + 1.
fn learning_with(metric: &'static str, values: &[f64]) -> LoggedRun {
    let mut logged = learning_run(values.len() as i64);
    for (row, value) in logged.history.iter_mut().zip(values) {
        row.values
            .insert(metric.to_owned(), MetricValue::Number(*value));
    }
    logged
}

#[test]
fn a_clip_fraction_near_one_is_flagged_with_what_to_try() {
    let clipped = learning_with(CLIP_FRACTION, &[0.85, 0.95, 0.97, 0.99]);
    let digest = HealthDigest::assess(&clipped, &finished(), &HealthPolicy::default());
    assert_eq!(kinds(&digest), vec![FlagKind::ClipFractionHigh]);
    let flag = &digest.flags[0];
    assert_eq!((flag.window.first_step, flag.window.last_step), (1, 4));
    assert!(
        flag.detail.contains("0.94")
            && flag.detail.contains("lower the learning rate")
            && flag.detail.contains("clip_low/clip_high"),
        "{}",
        flag.detail
    );
    // A short run is judged on the rows it has; a moderate fraction, or a single row, is not.
    let short = learning_with(CLIP_FRACTION, &[0.92, 0.96]);
    assert_eq!(
        kinds(&HealthDigest::assess(
            &short,
            &finished(),
            &HealthPolicy::default()
        )),
        vec![FlagKind::ClipFractionHigh]
    );
    for fine in [vec![0.2, 0.4, 0.3, 0.5], vec![1.0]] {
        let run = learning_with(CLIP_FRACTION, &fine);
        assert!(HealthDigest::assess(&run, &finished(), &HealthPolicy::default()).healthy);
    }
}

#[test]
fn an_exploding_kl_to_the_base_is_flagged_a_slowly_growing_one_is_not() {
    let policy = HealthPolicy::default();
    let steep = learning_with(KL_BASE, &[0.02, 0.05, 0.08, 0.2, 0.35, 0.6]);
    let digest = HealthDigest::assess(&steep, &finished(), &policy);
    assert_eq!(kinds(&digest), vec![FlagKind::KlBaseExploding]);
    assert!(
        digest.flags[0].detail.contains("0.0500 to 0.3833")
            && digest.flags[0].detail.contains("raise kl_coef"),
        "{}",
        digest.flags[0].detail
    );
    // Above the bound: flagged even over two rows and without a trend.
    let large = learning_with(KL_BASE, &[1.4, 1.3]);
    assert_eq!(
        kinds(&HealthDigest::assess(&large, &finished(), &policy)),
        vec![FlagKind::KlBaseExploding]
    );
    // A KL growing from nothing, or doubling while tiny, is what RL does at first.
    for fine in [
        vec![0.001, 0.002, 0.004, 0.008, 0.016, 0.03],
        vec![0.02, 0.03, 0.03, 0.04, 0.05, 0.05],
        vec![0.01, 0.5],
    ] {
        let run = learning_with(KL_BASE, &fine);
        assert!(
            HealthDigest::assess(&run, &finished(), &policy).healthy,
            "{fine:?}"
        );
    }
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
    activity: &Activity,
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
    assert!(stalled_flag(&trainer, &at(last + 150.0), &policy).is_none());
    assert!(stalled_flag(&trainer, &at(last + 250.0), &policy).is_some());
    // The floor rules when steps are quick: 2 × 1 s, but never before 60 s.
    let quick = timed_run(1.0);
    let floor = HealthPolicy {
        stall_floor_secs: 60.0,
        ..policy.clone()
    };
    let quick_last = 1010.0;
    assert!(stalled_flag(&quick, &at(quick_last + 30.0), &floor).is_none());
    assert!(stalled_flag(&quick, &at(quick_last + 61.0), &floor).is_some());
    // Without `time/total_secs`, the gaps between the rows' times are the step time.
    let mut untimed = timed_run(100.0);
    for row in &mut untimed.history {
        row.values.remove(STEP_SECS);
    }
    assert!(stalled_flag(&untimed, &at(last + 150.0), &policy).is_none());
    assert!(stalled_flag(&untimed, &at(last + 250.0), &policy).is_some());
    // The default: five medians, ten minutes at least.
    let defaults = HealthPolicy::default();
    assert!(stalled_flag(&trainer, &at(last + 450.0), &defaults).is_none());
    assert!(stalled_flag(&trainer, &at(last + 601.0), &defaults).is_some());
    assert!(stalled_flag(&timed_run(300.0), &at(4000.0 + 1400.0), &defaults).is_none());
}

/// A stall 20 minutes after the last step (at 2000) with the trainer in `phase` since
/// 2010, and the environment's last group sent (and ended) at `last_group`.
fn blamed(phase: Option<&str>, last_group: Option<f64>) -> HealthFlag {
    blamed_with(
        phase,
        last_group.map(|last| GroupsSeen {
            last_sent: Some(last),
            last_ended: Some(last),
            so_far: "9 with scores that differ".to_owned(),
        }),
    )
}

fn blamed_with(phase: Option<&str>, groups: Option<GroupsSeen>) -> HealthFlag {
    let activity = Activity {
        running: true,
        running_since: Some(900.0),
        now: 2000.0 + 1200.0,
        phase: phase.map(|word| (Phase::parse(word), 2010.0)),
        groups,
    };
    stalled_flag(&timed_run(100.0), &activity, &HealthPolicy::default()).unwrap()
}

/// Groups that end without one sent (failing, timing out, dropped) while the trainer waits are
/// the environment's, said as what was seen; groups that ended before the wait, or longer than
/// a stall ago, are an environment that is not sending.
#[test]
fn groups_ending_without_one_sent_are_the_environments_not_run_apis() {
    let so_far = "4 of 6 ended without a group to send, 4 errors in its rollouts, the first: \
                  `the group took longer than worker_timeout (300 s)`, 2 with scores that differ";
    for last_sent in [None, Some(1990.0), Some(2050.0)] {
        let flag = blamed_with(
            Some("wait"),
            Some(GroupsSeen {
                last_sent,
                last_ended: Some(3100.0),
                so_far: so_far.to_owned(),
            }),
        );
        assert_eq!(
            flag.component,
            Some(StallComponent::Environment),
            "{}",
            flag.detail
        );
        assert!(
            flag.detail.starts_with(
                "the environment's groups end without one sent to the trainer (none sent for "
            ),
            "{}",
            flag.detail
        );
        assert!(
            flag.detail.contains(&format!(
                "the last ended 100 s ago; so far: {so_far}; the trainer is waiting for a batch)"
            )),
            "{}",
            flag.detail
        );
        assert!(!flag.detail.contains("run-api"), "{}", flag.detail);
    }
    for last_ended in [Some(2005.0), Some(2300.0)] {
        let flag = blamed_with(
            Some("wait"),
            Some(GroupsSeen {
                last_sent: Some(1990.0),
                last_ended,
                so_far: so_far.to_owned(),
            }),
        );
        assert!(
            flag.detail
                .starts_with("the environment is not sending (no group for 20 min;"),
            "{}",
            flag.detail
        );
    }
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

#[test]
fn most_groups_dropped_as_stale_is_flagged_with_what_to_try() {
    let mut dropped = learning_run(4);
    for (row, stale) in dropped.history.iter_mut().zip([3.0, 4.0, 2.0, 4.0]) {
        row.values
            .insert(STALE_GROUPS.to_owned(), MetricValue::Number(stale));
        row.values
            .insert(GROUPS.to_owned(), MetricValue::Number(4.0));
    }
    let digest = HealthDigest::assess(&dropped, &finished(), &HealthPolicy::default());
    assert_eq!(kinds(&digest), vec![FlagKind::StaleGroupsHigh]);
    let flag = &digest.flags[0];
    assert_eq!((flag.window.first_step, flag.window.last_step), (1, 4));
    assert!(
        flag.detail.contains("13 of 16 groups over 4 rows")
            && flag.detail.contains("raise max_steps_off_policy")
            && flag.detail.contains("max_batches_offpolicy"),
        "{}",
        flag.detail
    );
    // A few dropped, or none counted (no bound), is no sign.
    for stale in [1.0, 0.0] {
        let mut some = learning_run(4);
        for row in &mut some.history {
            row.values
                .insert(STALE_GROUPS.to_owned(), MetricValue::Number(stale));
            row.values
                .insert(GROUPS.to_owned(), MetricValue::Number(4.0));
        }
        assert!(HealthDigest::assess(&some, &finished(), &HealthPolicy::default()).healthy);
    }
    assert!(HealthDigest::assess(&learning_run(4), &finished(), &HealthPolicy::default()).healthy);
}

#[test]
fn samples_mostly_from_older_weights_are_flagged_with_the_figure_and_the_setting() {
    // Issue 56's run: every group sampled from the base weights, so step n trains samples
    // n - 1 steps old.
    let mut stale = learning_run(6);
    for (row, age) in stale.history.iter_mut().zip(0..) {
        row.values.insert(
            OFF_POLICY_STEPS.to_owned(),
            MetricValue::Number(f64::from(age)),
        );
        row.values.insert(
            OFF_POLICY_STEPS_MAX.to_owned(),
            MetricValue::Number(f64::from(age)),
        );
    }
    let digest = HealthDigest::assess(&stale, &finished(), &HealthPolicy::default());
    assert_eq!(kinds(&digest), vec![FlagKind::OffPolicyHigh]);
    let flag = &digest.flags[0];
    assert!(
        flag.detail
            .contains("train/off_policy_steps averaged 2.5 over 6 rows (the oldest 5)")
            && flag.detail.contains("max_steps_off_policy")
            && flag.detail.contains("max_batches_offpolicy"),
        "{}",
        flag.detail
    );
    // One batch ahead (ages of 1), as max_batches_offpolicy = 1 makes it, is no sign.
    let mut one_ahead = learning_run(6);
    for row in &mut one_ahead.history {
        row.values
            .insert(OFF_POLICY_STEPS.to_owned(), MetricValue::Number(1.0));
    }
    assert!(HealthDigest::assess(&one_ahead, &finished(), &HealthPolicy::default()).healthy);
}
