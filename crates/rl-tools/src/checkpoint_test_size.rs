//! How large a test of a run's checkpoint is: a comparison's defaults (`rl compare`, and the
//! evaluations' when the run's config sets none: the trainer's contract's), and an
//! evaluation's sizes as the run's config sets them, checked as a run starts (`check_locked`).

use std::time::Duration;

use rl_settings::trainer::{self, Trainer};
use rl_settings::{Locked, SettingsError};

use crate::ToolsError;

/// Prompts per model, and completions per prompt: enough for an interval that can tell a
/// clear gain from noise, few enough for minutes on a small machine.
pub const DEFAULT_COMPARE_PROMPTS: u32 = trainer::EVAL_PROMPTS.default_count();
pub const DEFAULT_COMPARE_GROUP_SIZE: u32 = trainer::EVAL_GROUP_SIZE.default_count();

/// The evaluation settings of a run, from its config through the trainer's contract.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct EvaluationSize {
    pub(crate) prompts: u32,
    pub(crate) group_size: u32,
    pub(crate) correct_from: f64,
    pub(crate) timeout: Duration,
}

impl EvaluationSize {
    pub(crate) fn of(trainer: &Trainer) -> Self {
        Self {
            prompts: trainer.eval_prompts,
            group_size: trainer.eval_group_size,
            correct_from: trainer.eval_correct_from,
            timeout: trainer.eval_timeout,
        }
    }
}

/// The operator's locked trainer settings, read through the trainer's contract as a run
/// starts (what the trainer would refuse seconds later is refused now), and with evaluation
/// on, the sizes a test takes. Returns how long one evaluation may hold the trainer (zero
/// when there is none).
pub(crate) fn check_locked(locked: &Locked) -> Result<Duration, ToolsError> {
    let trainer = Trainer::read(&locked.env, &locked.tinker).map_err(|error| match error {
        SettingsError::InvalidInput { what, reason } => {
            ToolsError::invalid(format!("[locked.{}]", what.replacen('.', "] ", 1)), reason)
        }
        other => other.into(),
    })?;
    if trainer.eval_every > 0 {
        rl_preflight::check_size(Some(trainer.eval_prompts), Some(trainer.eval_group_size))
            .map_err(|error| {
                ToolsError::invalid(
                    "[locked.tinker] eval_prompts / eval_group_size",
                    format!("{error}: an evaluation is a pre-flight of this size"),
                )
            })?;
    }
    Ok(trainer.evaluation_hold())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use rl_settings::Value;

    use super::*;

    fn locked(pairs: &[(&str, Value)]) -> Locked {
        Locked {
            env: BTreeMap::new(),
            tinker: pairs
                .iter()
                .map(|(key, value)| ((*key).to_owned(), value.clone()))
                .collect(),
            ..Locked::default()
        }
    }

    #[test]
    fn sizes_default_to_a_comparisons() {
        let trainer = Trainer::read(&BTreeMap::new(), &BTreeMap::new()).unwrap();
        let size = EvaluationSize::of(&trainer);
        assert_eq!(size.prompts, DEFAULT_COMPARE_PROMPTS);
        assert_eq!(size.group_size, DEFAULT_COMPARE_GROUP_SIZE);
        assert!((size.correct_from - 1.0).abs() < f64::EPSILON);
    }

    #[test]
    fn a_run_with_an_evaluation_that_cannot_run_is_refused_at_its_start() {
        assert_eq!(check_locked(&locked(&[])).unwrap(), Duration::ZERO);
        // Off: its sizes are not looked at.
        assert!(check_locked(&locked(&[("eval_prompts", Value::Int(100_000))])).is_ok());
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
            vec![("eval_prompts", Value::Str("many".to_owned()))],
            vec![("eval_correct_from", Value::Float(f64::NAN))],
        ] {
            let error = check_locked(&locked(&bad)).unwrap_err().to_string();
            assert!(
                error.contains("[locked.tinker]") && error.contains("eval_"),
                "{error}"
            );
        }
        let hold = check_locked(&locked(&[
            ("eval_every", Value::Int(5)),
            ("eval_prompts", Value::Int(4)),
            ("eval_timeout_secs", Value::Int(30)),
        ]))
        .unwrap();
        assert_eq!(hold, Duration::from_secs(30) + trainer::EVALUATE_MARGIN);
    }

    #[test]
    fn any_locked_trainer_setting_the_trainer_would_refuse_is_refused_at_the_start() {
        let error = check_locked(&locked(&[("lora_rank", Value::Str("big".to_owned()))]))
            .unwrap_err()
            .to_string();
        assert!(error.contains("[locked.tinker] lora_rank"), "{error}");
    }
}
