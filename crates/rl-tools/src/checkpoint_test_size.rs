//! How large a test of a run's checkpoint is: a comparison's defaults (`rl compare`, and the
//! evaluations' when the run's config sets none), and an evaluation's sizes as the run's
//! `[locked.tinker]` sets them (`eval_prompts`, `eval_group_size`, `eval_correct_from`,
//! `eval_timeout_secs`), checked as a run starts (`check_locked`).

use std::collections::BTreeMap;
use std::time::Duration;

use rl_settings::Value;

use crate::ToolsError;

/// Prompts per model, and completions per prompt: enough for an interval that can tell a
/// clear gain from noise, few enough for minutes on a small machine.
pub const DEFAULT_COMPARE_PROMPTS: u32 = 16;
pub const DEFAULT_COMPARE_GROUP_SIZE: u32 = 8;

/// atroposlib's environments give a right answer 1.0 (gsm8k, the template, digits' full marks):
/// a fixed bar, so that the series compares steps; the operator may set another.
const DEFAULT_CORRECT_FROM: f64 = 1.0;
const DEFAULT_TIMEOUT_SECS: f64 = 1800.0;
/// A week, as a pre-flight's own limit.
const MAX_TIMEOUT_SECS: f64 = 7.0 * 86_400.0;

/// The evaluation settings of a run, from its config's `tinker` section.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct EvaluationSize {
    pub(crate) prompts: u32,
    pub(crate) group_size: u32,
    pub(crate) correct_from: f64,
    pub(crate) timeout: Duration,
}

impl EvaluationSize {
    pub(crate) fn of(tinker: &BTreeMap<String, Value>) -> Result<Self, ToolsError> {
        let whole = |key: &str, default: u32| -> Result<u32, ToolsError> {
            match tinker.get(key) {
                None | Some(Value::Null) => Ok(default),
                Some(Value::Int(n)) => u32::try_from(*n).map_err(|_| {
                    ToolsError::invalid(format!("tinker.{key}"), format!("{n} is out of range"))
                }),
                Some(other) => Err(ToolsError::invalid(
                    format!("tinker.{key}"),
                    format!("must be a whole number, got {}", other.kind()),
                )),
            }
        };
        let number = |key: &str, default: f64| -> Result<f64, ToolsError> {
            match tinker.get(key) {
                None | Some(Value::Null) => Ok(default),
                Some(Value::Int(n)) => i32::try_from(*n).map(f64::from).map_err(|_| {
                    ToolsError::invalid(format!("tinker.{key}"), format!("{n} is out of range"))
                }),
                Some(Value::Float(x)) if x.is_finite() => Ok(*x),
                Some(other) => Err(ToolsError::invalid(
                    format!("tinker.{key}"),
                    format!("must be a finite number, got {}", other.kind()),
                )),
            }
        };
        let correct_from = number("eval_correct_from", DEFAULT_CORRECT_FROM)?;
        let timeout = number("eval_timeout_secs", DEFAULT_TIMEOUT_SECS)?;
        if !(timeout > 0.0 && timeout <= MAX_TIMEOUT_SECS) {
            return Err(ToolsError::invalid(
                "tinker.eval_timeout_secs",
                format!("must be above 0 and at most {MAX_TIMEOUT_SECS}, got {timeout}"),
            ));
        }
        Ok(Self {
            prompts: whole("eval_prompts", DEFAULT_COMPARE_PROMPTS)?,
            group_size: whole("eval_group_size", DEFAULT_COMPARE_GROUP_SIZE)?,
            correct_from,
            timeout: Duration::from_secs_f64(timeout),
        })
    }
}

/// How much longer than an evaluation's own limit the trainer waits for `rl runs evaluate`
/// (starting the test, reading it); the trainer's copy is `evaluate()`'s bound in `loop.py`.
const EVALUATE_MARGIN: Duration = Duration::from_secs(120);

/// The operator's `[locked.tinker]` evaluation settings, checked as a run starts: `eval_every`
/// a whole number from 0, and with it on, sizes a test takes. Returns how long one evaluation
/// may hold the trainer (zero when there is none).
pub(crate) fn check_locked(tinker: &BTreeMap<String, Value>) -> Result<Duration, ToolsError> {
    let every = match tinker.get("eval_every") {
        None | Some(Value::Null) => 0,
        Some(Value::Int(n)) if *n >= 0 => *n,
        Some(other) => {
            return Err(ToolsError::invalid(
                "[locked.tinker] eval_every",
                format!(
                    "must be a whole number from 0 (0: never), got {}",
                    other.kind()
                ),
            ));
        }
    };
    if every == 0 {
        return Ok(Duration::ZERO);
    }
    let size = EvaluationSize::of(tinker)?;
    for (key, value, max) in [
        ("eval_prompts", size.prompts, rl_preflight::MAX_STEPS),
        (
            "eval_group_size",
            size.group_size,
            rl_preflight::MAX_GROUP_SIZE,
        ),
    ] {
        if !(1..=max).contains(&value) {
            return Err(ToolsError::invalid(
                format!("[locked.tinker] {key}"),
                format!("is {value}; it must be between 1 and {max}, as a pre-flight's"),
            ));
        }
    }
    Ok(size.timeout + EVALUATE_MARGIN)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tinker(pairs: &[(&str, Value)]) -> BTreeMap<String, Value> {
        pairs
            .iter()
            .map(|(key, value)| ((*key).to_owned(), value.clone()))
            .collect()
    }

    #[test]
    fn sizes_default_to_a_comparisons_and_refuse_wrong_types() {
        let size = EvaluationSize::of(&BTreeMap::new()).unwrap();
        assert_eq!(size.prompts, DEFAULT_COMPARE_PROMPTS);
        assert_eq!(size.group_size, DEFAULT_COMPARE_GROUP_SIZE);
        assert!((size.correct_from - 1.0).abs() < f64::EPSILON);
        let size = EvaluationSize::of(&tinker(&[
            ("eval_prompts", Value::Int(4)),
            ("eval_group_size", Value::Int(2)),
            ("eval_correct_from", Value::Float(0.5)),
        ]))
        .unwrap();
        assert_eq!((size.prompts, size.group_size), (4, 2));
        assert!((size.correct_from - 0.5).abs() < f64::EPSILON);
        for bad in [
            ("eval_prompts", Value::Str("many".to_owned())),
            ("eval_prompts", Value::Int(-1)),
            ("eval_correct_from", Value::Float(f64::NAN)),
        ] {
            let error = EvaluationSize::of(&tinker(std::slice::from_ref(&bad))).unwrap_err();
            assert!(error.to_string().contains(bad.0), "{error}");
        }
    }

    #[test]
    fn a_run_with_an_evaluation_that_cannot_run_is_refused_at_its_start() {
        assert!(check_locked(&BTreeMap::new()).is_ok());
        // Off: its sizes are not looked at.
        assert!(check_locked(&tinker(&[("eval_prompts", Value::Int(100_000))])).is_ok());
        for bad in [
            vec![("eval_every", Value::Int(-1))],
            vec![("eval_every", Value::Str("often".to_owned()))],
            vec![
                ("eval_every", Value::Int(5)),
                ("eval_prompts", Value::Int(100_000)),
            ],
            vec![
                ("eval_every", Value::Int(5)),
                ("eval_group_size", Value::Int(0)),
            ],
            vec![
                ("eval_every", Value::Int(5)),
                ("eval_timeout_secs", Value::Int(0)),
            ],
        ] {
            let error = check_locked(&tinker(&bad)).unwrap_err();
            assert!(error.to_string().contains("eval_"), "{error}");
        }
        assert!(
            check_locked(&tinker(&[
                ("eval_every", Value::Int(5)),
                ("eval_prompts", Value::Int(4))
            ]))
            .is_ok()
        );
    }
}
