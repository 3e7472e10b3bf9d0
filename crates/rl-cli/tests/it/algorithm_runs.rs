//! What a run on the local engine logs of the RL algorithm it chose (issue 43), checked in the
//! training test's run (one run, not a run of its own: the suite's time is dear).

use serde_json::Value;

/// The clipped loss at the fixture's high learning rate, with a KL penalty to the base model
/// (issue 43): the engine's fixed clip bounds, and base-model sampling on the local engine.
pub(crate) const PPO_WITH_KL: (&str, &str) = (
    "learning_rate = 0.01\n",
    "learning_rate = 0.01\nloss = \"ppo\"\nkl_coef = 0.05\n",
);

/// ppo on the local engine clips at its fixed 0.8..1.2: every step that trained logs the share
/// of tokens outside, the mean ratio and the KL to the base model; at the fixture's learning
/// rate the policy moves off its sampler's within a batch or two, so some tokens are clipped.
pub(crate) fn assert_clipped_and_measured_against_the_base(steps: &[&Value]) {
    let trained: Vec<&&Value> = steps
        .iter()
        .filter(|row| row["tokens/trained"].as_u64() > Some(0))
        .collect();
    assert!(!trained.is_empty(), "{steps:#?}");
    for row in &trained {
        let fraction = row["train/clip_fraction"].as_f64();
        assert!(fraction.is_some_and(|f| (0.0..=1.0).contains(&f)), "{row}");
        assert!(
            row["train/ratio_mean"].as_f64().is_some_and(|r| r > 0.0),
            "{row}"
        );
        assert!(
            row["train/kl_base"].as_f64().is_some_and(f64::is_finite),
            "{row}"
        );
    }
    let clipped = trained
        .iter()
        .filter_map(|row| row["train/clip_fraction"].as_f64())
        .fold(0.0, f64::max);
    assert!(clipped > 0.0, "no token was ever clipped: {trained:#?}");
}
