//! Issue 34's part of the training benchmark: both sides' steps as tokens and seconds, counted
//! alike, and what rl's trainer's per-step accounting costs on its own
//! (`xtask/python/accounting_cost.py` on a batch of the run's shape).

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, bail};
use serde_json::Value;

use super::super::{median, verdict};
use super::WARM_UP_STEPS;
use crate::run_command;

/// Times rl's trainer's per-step accounting on its own (issue 34).
const ACCOUNTING_SCRIPT: &str = "xtask/python/accounting_cost.py";
/// Issue 34: the accounting's cost per step at most this share of the run-to-run spread.
const ACCOUNTING_SHARE_OF_SPREAD: f64 = 0.1;

/// The section's paragraph on how tokens are counted and tokens per second measured.
pub(super) const TOKENS_NOTE: &str = "Tokens (issue 34), counted alike on both sides: \
    *sampled*, the completion tokens of every completion of the step's batch (skipped groups \
    included); *trained*, the \
    model-input tokens of the datums sent to forward_backward. rl's are its metrics rows' \
    `tokens/sampled` and `tokens/trained`; the bare script counts its own the same way. \
    Tokens per second are each step's tokens over that step's whole time, the median of \
    the steps after the warm-up; rl ÷ bare is the ratio of the two medians of this one \
    run, and in brackets the ratio of the two sides' steps after the warm-up taken \
    together (their tokens over their time): rl's steps vary widely (a step finds its batch \
    ready or waits for it; the spread of its steps is below), which moves a median of rates \
    more than it moves the whole. The bare script's step time is its own. rl's is given two ways: the time between \
    its metrics rows (as its seconds per step above; it also holds writing and fsyncing the \
    row and the step's log line), and its own clock, the logged \
    `throughput/*_tokens_per_sec` (its tokens over `time/total_secs`, from asking for the \
    batch to the row's figures; checked here against the row's counts); the ratios use the \
    time between rows. The environments \
    differ (rl's digits environment, the bare script's own prompts), so the tokens a step \
    holds differ a little too, and tokens per second weigh that in.";

/// One step of either side: its whole time and the tokens it sampled and trained on
/// (rl's `tokens/sampled` and `tokens/trained`; the bare script counts its own alike).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Step {
    pub(super) seconds: f64,
    pub(super) sampled: f64,
    pub(super) trained: f64,
}

/// Medians over the steps after the warm-up: tokens per step and per second of a side; and
/// those steps taken together (their tokens over their time), which a side whose steps vary
/// widely (rl's: a step finds its batch ready or waits for it) needs beside the median.
pub(super) struct Rates {
    pub(super) sampled: f64,
    pub(super) trained: f64,
    pub(super) sampled_per_sec: f64,
    pub(super) trained_per_sec: f64,
    pub(super) sampled_together: f64,
    pub(super) trained_together: f64,
}

impl Rates {
    pub(super) fn of(steps: &[Step]) -> Self {
        let after = &steps[WARM_UP_STEPS.min(steps.len())..];
        let of = |f: fn(&Step) -> f64| median(&after.iter().map(f).collect::<Vec<_>>());
        let seconds: f64 = after.iter().map(|s| s.seconds).sum();
        let together = |f: fn(&Step) -> f64| after.iter().map(f).sum::<f64>() / seconds;
        Self {
            sampled: of(|s| s.sampled),
            trained: of(|s| s.trained),
            sampled_per_sec: of(|s| s.sampled / s.seconds),
            trained_per_sec: of(|s| s.trained / s.seconds),
            sampled_together: together(|s| s.sampled),
            trained_together: together(|s| s.trained),
        }
    }
}

/// How far `values` spread: their interquartile range over their median (NaN for none).
pub(super) fn spread(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let at = |share: usize| sorted.get(sorted.len() * share / 4).copied();
    match (at(1), at(3)) {
        (Some(low), Some(high)) => (high - low) / median(values),
        _ => f64::NAN,
    }
}

/// A step of the bare script's JSON: its whole time (`step_seconds`) and its own token counts.
pub(super) fn bare_step(step: &Value) -> anyhow::Result<Step> {
    let number = |value: &Value, what: &str| {
        value
            .as_f64()
            .with_context(|| format!("the bare script's step has no {what}: {step}"))
    };
    Ok(Step {
        seconds: number(&step["step_seconds"], "step_seconds")?,
        sampled: number(&step["tokens"]["sampled"], "tokens.sampled")?,
        trained: number(&step["tokens"]["trained"], "tokens.trained")?,
    })
}

/// A metrics row of rl's trainer as a [`Step`] (its own clock, `time/total_secs`), after
/// checking that its logged throughput is the same tokens over the same time.
pub(super) fn rl_step(row: &Value) -> anyhow::Result<Step> {
    let number = |key: &str| {
        row[key]
            .as_f64()
            .with_context(|| format!("the metrics row has no {key}: {row}"))
    };
    let step = Step {
        seconds: number("time/total_secs")?,
        sampled: number("tokens/sampled")?,
        trained: number("tokens/trained")?,
    };
    for (kind, tokens) in [("sampled", step.sampled), ("trained", step.trained)] {
        let logged = number(&format!("throughput/{kind}_tokens_per_sec"))?;
        let counted = tokens / step.seconds;
        if (logged - counted).abs() > 1e-6 * counted.abs().max(1.0) {
            bail!("the row logs {logged} {kind} tokens per second, its counts say {counted}");
        }
    }
    Ok(step)
}

/// What `xtask/python/accounting_cost.py` measured.
pub(super) struct Accounting {
    pub(super) seconds: f64,
    pub(super) anatomy: f64,
    pub(super) counting: f64,
    pub(super) writing: f64,
    pub(super) groups: u64,
    pub(super) group_size: u64,
    pub(super) prompt_tokens: f64,
    pub(super) completion_tokens: f64,
    pub(super) iterations: u64,
    pub(super) repeats: u64,
}

/// rl's trainer's per-step accounting timed on its own, on a batch of 8 × 8 completions of
/// `shape` (prompt and completion tokens of one completion, rl's run's medians).
pub(super) fn accounting_cost(
    root: &Path,
    python: &Path,
    shape: (f64, f64),
) -> anyhow::Result<Accounting> {
    let scratch = tempfile::tempdir()?;
    let out = scratch.path().join("accounting.json");
    let tokens = |value: f64| format!("{:.0}", value.round().max(1.0));
    run_command(
        Command::new(python)
            .arg(root.join(ACCOUNTING_SCRIPT))
            .args(["--groups", "8", "--group-size", "8"])
            .args(["--prompt-tokens", &tokens(shape.0)])
            .args(["--completion-tokens", &tokens(shape.1)])
            .arg("--json-out")
            .arg(&out)
            .env("PYTHONPATH", root.join("crates/rl-python/python"))
            .stdout(Stdio::null()),
    )?;
    let report: Value = serde_json::from_slice(&std::fs::read(&out)?)?;
    let number = |value: &Value| {
        value
            .as_f64()
            .with_context(|| format!("{ACCOUNTING_SCRIPT} wrote {report}"))
    };
    let whole = |value: &Value| {
        value
            .as_u64()
            .with_context(|| format!("{ACCOUNTING_SCRIPT} wrote {report}"))
    };
    let shape = &report["shape"];
    Ok(Accounting {
        seconds: number(&report["seconds_per_step"])?,
        anatomy: number(&report["parts"]["anatomy"]["median"])?,
        counting: number(&report["parts"]["counting"]["median"])?,
        writing: number(&report["parts"]["writing"]["median"])?,
        groups: whole(&shape["groups"])?,
        group_size: whole(&shape["group_size"])?,
        prompt_tokens: number(&shape["prompt_tokens"])?,
        completion_tokens: number(&shape["completion_tokens"])?,
        iterations: whole(&report["iterations"])?,
        repeats: whole(&report["repeats"])?,
    })
}

/// The section's paragraph on the accounting's cost: against rl's median step on the engine
/// (`rl_step`) and two measures of noise (fractions): how far one run's medians move by
/// chance (`columns`, the bare script's two columns apart) and how far rl's steps spread
/// (`steps`, interquartile range over the median); the goal is met against the smaller.
pub(super) fn accounting_note(a: &Accounting, rl_step: f64, columns: f64, steps: f64) -> String {
    let share = a.seconds / rl_step;
    let noise = columns.min(steps);
    format!(
        "\n**The accounting's own cost** (goal: within noise, at most {:.0} % of the smaller of two \
         spreads): {:.3} ms a step, {:.3} % of rl's {:.2} s median step on the engine, against \
         {:.1} % between the bare script's two columns (how far one run's medians move) and \
         {:.1} % spread of rl's own steps on the engine (interquartile range over the median) — \
         {}. Measured apart from the \
         run, which cannot run without it: `{ACCOUNTING_SCRIPT}` imports the trainer's own \
         functions from `crates/rl-python/python` and calls them as `train_step` does once \
         a step (restating only the three clock readings `Tinker.train` takes around the \
         engine's calls, which cannot be made without an engine), on a batch of this run's shape ({} groups × {} \
         completions of {:.0} prompt and {:.0} completion tokens, every group trained), \
         {} steps {} times in the test venv's Python, the median repeat: the step's anatomy \
         (`StepClock`, its parts' timing, the readings `Tinker.train` takes around \
         forward_backward and optim_step, `StepClock.metrics`) {:.3} ms; the counting \
         (`datum_tokens` per rollout row, `token_counts`, the running totals) {:.3} ms; the \
         writing (`json.dumps` of the accounting's keys on their own, more than they add to \
         the metrics and rollout rows they share) {:.3} ms.\n",
        ACCOUNTING_SHARE_OF_SPREAD * 100.0,
        a.seconds * 1e3,
        share * 100.0,
        rl_step,
        columns * 100.0,
        steps * 100.0,
        verdict(share <= ACCOUNTING_SHARE_OF_SPREAD * noise),
        a.groups,
        a.group_size,
        a.prompt_tokens,
        a.completion_tokens,
        a.iterations,
        a.repeats,
        a.anatomy * 1e3,
        a.counting * 1e3,
        a.writing * 1e3,
    )
}

#[cfg(test)]
mod tests {
    use super::{Rates, Step, WARM_UP_STEPS, bare_step, rl_step, spread};
    use serde_json::json;

    #[test]
    fn rates_are_medians_and_the_steps_together() {
        let mut steps = vec![
            Step {
                seconds: 9.0,
                sampled: 1.0,
                trained: 1.0
            };
            WARM_UP_STEPS
        ];
        steps.extend(
            [(1.0, 100.0), (3.0, 100.0), (1.0, 100.0)].map(|(seconds, tokens)| Step {
                seconds,
                sampled: tokens,
                trained: 2.0 * tokens,
            }),
        );
        let rates = Rates::of(&steps);
        assert_eq!(rates.sampled, 100.0);
        assert_eq!(rates.sampled_per_sec, 100.0);
        assert_eq!(rates.trained_per_sec, 200.0);
        assert_eq!(rates.sampled_together, 60.0);
        assert_eq!(rates.trained_together, 120.0);
    }

    #[test]
    fn spread_is_the_interquartile_range_over_the_median() {
        let values = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
        // Quartiles at the 2nd and 6th of 8 (0-based), the median the upper middle one.
        assert_eq!(spread(&values), (7.0 - 3.0) / 5.0);
        assert!(spread(&[]).is_nan());
    }

    #[test]
    fn both_sides_steps_are_read_alike() {
        let bare = json!({"step_seconds": 0.5, "tokens": {"prompt": 640, "sampled": 512, "trained": 1088}});
        assert_eq!(
            bare_step(&bare).unwrap(),
            Step {
                seconds: 0.5,
                sampled: 512.0,
                trained: 1088.0
            }
        );
        assert!(bare_step(&json!({"seconds": {"sample": 0.2}})).is_err());
        let row = json!({
            "time/total_secs": 0.5, "tokens/sampled": 512, "tokens/trained": 1088,
            "throughput/sampled_tokens_per_sec": 1024.0, "throughput/trained_tokens_per_sec": 2176.0,
        });
        assert_eq!(
            rl_step(&row).unwrap(),
            Step {
                seconds: 0.5,
                sampled: 512.0,
                trained: 1088.0
            }
        );
        let mut wrong = row.clone();
        wrong["throughput/trained_tokens_per_sec"] = json!(1000.0);
        assert!(rl_step(&wrong).is_err());
    }
}
