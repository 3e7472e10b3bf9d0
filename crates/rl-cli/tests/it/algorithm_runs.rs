//! What a run on the local engine logs of the RL algorithm it chose (issue 43), checked in the
//! training test's run (one run, not a run of its own: the suite's time is dear).

use serde_json::Value;

/// The clipped loss at the fixture's high learning rate, with a KL penalty to the base model
/// (issue 43): the engine's fixed clip bounds, and base-model sampling on the local engine;
/// advantages divided by their group's std (GRPO's).
pub(crate) const PPO_WITH_KL: (&str, &str) = (
    "learning_rate = 0.01\n",
    "learning_rate = 0.01\nloss = \"ppo\"\nkl_coef = 0.05\nadvantage_norm = \"std\"\n",
);

/// ppo on the local engine clips at its fixed 0.8..1.2: every step that trained logs the share
/// of tokens outside, the mean ratio and the KL to the base model; at the fixture's learning
/// rate the policy moves off its sampler's within a batch or two, so some tokens are clipped.
/// Divided by its group's (population) std, each trained group's advantages have mean 0 and
/// std 1, and so have the step's, its groups being of one size.
pub(crate) fn assert_clipped_and_measured_against_the_base(steps: &[&Value]) {
    let trained: Vec<&&Value> = steps
        .iter()
        .filter(|row| row["tokens/trained"].as_u64() > Some(0))
        .collect();
    assert!(!trained.is_empty(), "{steps:#?}");
    let spread = trained
        .iter()
        .filter(|row| row["advantages/std"].is_number())
        .count();
    assert!(
        spread > 0,
        "no trained step logged its advantages: {trained:#?}"
    );
    for row in &trained {
        if let Some(std) = row["advantages/std"].as_f64() {
            assert!((std - 1.0).abs() < 1e-6, "{row}");
            let mean = row["advantages/mean"].as_f64().unwrap_or(f64::NAN);
            assert!(mean.abs() < 1e-6, "{row}");
        }
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

/// The KL penalty measured (issue 43): a run trains two steps at a learning rate of 0.002
/// (the tiny model still close to its base), then two forks of its step 2 train the same eight
/// steps, one with `kl_coef` 0 (its KL to the base logged by `log_kl_base`), one with
/// `kl_coef` 10. At this rate the free fork's reward climbs and drags its KL up; the penalised
/// one's is pulled back towards it. Measured (decisions.md "Issue 43, measured"): from ~0.38
/// nats at the fork, the free fork ended at 0.62 and the penalised at 0.16; at 0.005 and 0.01
/// both drift alike (Adam's steps, the same size whatever the gradient, then swamp the penalty with
/// sampling noise), so the test keeps the rate where the penalty is what a user would see.
#[test]
#[ignore = "needs the test venv and the local engine: `cargo xtask test` runs it"]
fn a_large_kl_coef_keeps_a_fork_closer_to_the_base_than_none() {
    let (stack, _engine) = crate::training::stack(&[
        ("total_steps = 12", "total_steps = 10"),
        crate::training::SAVE_EVERY_TWO,
        // Not the operator's: the forks choose their own. Advantages centred only (Dr. GRPO's;
        // with this environment's scores in [0, 1] the same as rl's default).
        (
            "learning_rate = 0.01\n",
            "log_kl_base = true\nadvantage_norm = \"mean_only\"\n",
        ),
    ]);
    stack.json(&["config", "set", "learning_rate", "0.002"]);
    // The parent is stopped once its step 2 is saved (when step 3 is written): the forks are
    // what is measured.
    let parent = stack.start();
    crate::forks::wait_for_steps(&stack, &parent, 3);
    stack.json(&["runs", "stop", &parent]);
    stack.wait(&parent, "finished", 300);

    let fork = |changes: &[&str]| -> String {
        let mut args = vec!["runs", "fork", parent.as_str(), "--step", "2"];
        for change in changes {
            args.extend(["--set", change]);
        }
        let forked = stack.json(&args);
        forked["run_id"]
            .as_str()
            .unwrap_or_else(|| panic!("{forked:#}"))
            .to_owned()
    };
    let free = fork(&[]);
    let penalised = fork(&[LARGE_KL_COEF]);
    let mut kl = Vec::new();
    for id in [&free, &penalised] {
        let end = stack.wait(id, "finished", 900);
        assert_eq!(end["state"], "completed", "{}", stack.explain(id));
        let algorithm = &stack.json(&["runs", "status", id])["algorithm"];
        assert_eq!(algorithm["advantage_norm"], "mean_only", "{algorithm:#}");
        let steps = crate::forks::steps_of(&stack, id);
        let own: Vec<f64> = (3..=10)
            .map(|step| {
                steps[&step]["train/kl_base"]
                    .as_f64()
                    .unwrap_or_else(|| panic!("{id} step {step}: {:#}", steps[&step]))
            })
            .collect();
        kl.push(own);
    }
    let (free_kl, penalised_kl) = (&kl[0], &kl[1]);
    eprintln!("kl_base by step 3..10: kl_coef 0 {free_kl:?}, {LARGE_KL_COEF} {penalised_kl:?}");
    // The free fork's end (its last two steps, so that one noisy batch decides nothing) shows
    // it moved; the comparison is over all eight steps: one fork's end alone is sampling noise
    // as often as not (a CI run saw the penalised fork at 0.12 at step 5 and 0.90-1.0 at steps
    // 9-10, its mean still 0.47 against the free fork's 0.80).
    let end = |values: &[f64]| values[values.len() - 2..].iter().sum::<f64>() / 2.0;
    let mean = |values: &[f64]| values.iter().sum::<f64>() / values.len() as f64;
    assert!(
        end(free_kl) > 0.15,
        "the free fork never moved off its base: {free_kl:?}"
    );
    assert!(
        mean(penalised_kl) < 0.75 * mean(free_kl),
        "KL to the base over the forks' steps: {penalised_kl:?} with {LARGE_KL_COEF}, \
         {free_kl:?} without"
    );
}

const LARGE_KL_COEF: &str = "kl_coef=10";
