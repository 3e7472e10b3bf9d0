//! The trainer keys a run may choose for itself (a sweep's `--set`, a fork's changes), beside
//! the environment's fields: the rest of the contract is the operator's (`[locked.tinker]`) or
//! rl's own (addresses, the resume, prices and caps).

use crate::{SettingsError, Value};

use super::{
    ADVANTAGE_NORM, CLIP_HIGH, CLIP_LOW, DRO_BETA, EVAL_EVERY, EVAL_GROUP_SIZE, EVAL_PROMPTS,
    KEEP_ROLLOUTS, KL_COEF, Key, Kind, LEARNING_RATE, LOG_KL_BASE, LORA_RANK, LOSS,
    MAX_STEPS_OFF_POLICY, MAX_TOKEN_TRAINER_LENGTH, OVERLONG_BAND, SAVE_EVERY, Sections, TRUNCATED,
};

/// Whether a fork (a run continuing another's saved state) may change a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnFork {
    /// Free to change from one step to the next.
    Changes,
    /// Fixed by the saved state; the reason says why.
    Fixed(&'static str),
}

/// A trainer key a run chooses, and whether a fork may change it.
#[derive(Debug, Clone, Copy)]
pub struct PerRun {
    pub key: Key,
    pub on_fork: OnFork,
}

/// Every trainer key a run may choose.
pub const PER_RUN: &[PerRun] = &[
    PerRun {
        key: LEARNING_RATE,
        on_fork: OnFork::Changes,
    },
    PerRun {
        key: LORA_RANK,
        on_fork: OnFork::Fixed(
            "the saved state is a LoRA adapter of the parent's rank; another rank cannot load it",
        ),
    },
    PerRun {
        key: MAX_TOKEN_TRAINER_LENGTH,
        on_fork: OnFork::Changes,
    },
    PerRun {
        key: SAVE_EVERY,
        on_fork: OnFork::Changes,
    },
    PerRun {
        key: KEEP_ROLLOUTS,
        on_fork: OnFork::Changes,
    },
    PerRun {
        key: EVAL_EVERY,
        on_fork: OnFork::Changes,
    },
    PerRun {
        key: EVAL_PROMPTS,
        on_fork: OnFork::Changes,
    },
    PerRun {
        key: EVAL_GROUP_SIZE,
        on_fork: OnFork::Changes,
    },
    // The algorithm (issue 43): each step's loss and batch are its own, so a fork may change
    // any of it.
    PerRun {
        key: LOSS,
        on_fork: OnFork::Changes,
    },
    PerRun {
        key: CLIP_LOW,
        on_fork: OnFork::Changes,
    },
    PerRun {
        key: CLIP_HIGH,
        on_fork: OnFork::Changes,
    },
    PerRun {
        key: DRO_BETA,
        on_fork: OnFork::Changes,
    },
    PerRun {
        key: ADVANTAGE_NORM,
        on_fork: OnFork::Changes,
    },
    PerRun {
        key: TRUNCATED,
        on_fork: OnFork::Changes,
    },
    PerRun {
        key: OVERLONG_BAND,
        on_fork: OnFork::Changes,
    },
    PerRun {
        key: KL_COEF,
        on_fork: OnFork::Changes,
    },
    PerRun {
        key: LOG_KL_BASE,
        on_fork: OnFork::Changes,
    },
    PerRun {
        key: MAX_STEPS_OFF_POLICY,
        on_fork: OnFork::Changes,
    },
];

/// The per-run trainer key `name` (bare, or as `tinker.name`).
pub fn per_run(name: &str) -> Option<&'static PerRun> {
    let bare = name.strip_prefix("tinker.").unwrap_or(name);
    PER_RUN.iter().find(|entry| entry.key.name == bare)
}

/// `value` as `key` holds it: of its kind (a string read as the kind, as `rl config set` reads
/// its argument) and within its bounds.
pub fn coerce(key: &Key, value: &Value) -> Result<Value, SettingsError> {
    let mut env = std::collections::BTreeMap::new();
    let mut tinker = std::collections::BTreeMap::new();
    super::set(&mut env, &mut tinker, key, value.clone());
    let sections = Sections {
        env: &env,
        tinker: &tinker,
    };
    let read = match key.kind {
        Kind::Integer => sections.integer(key)?.map(Value::Int),
        Kind::Number => sections.number(key)?.map(Value::Float),
        Kind::Text => sections.text(key)?.map(Value::Str),
        Kind::Boolean => sections.boolean(key)?.map(Value::Bool),
    };
    read.ok_or_else(|| SettingsError::InvalidInput {
        what: key.dotted(),
        reason: format!("must be {}, got {}", kind_name(key.kind), value.kind()),
    })
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Integer => "an integer",
        Kind::Number => "a number",
        Kind::Text => "a string",
        Kind::Boolean => "true or false",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_read_as_their_keys_kind_within_bounds() {
        let rate = &per_run("learning_rate").unwrap().key;
        assert_eq!(coerce(rate, &"3e-4".into()).unwrap(), Value::Float(3e-4));
        assert_eq!(coerce(rate, &Value::Int(1)).unwrap(), Value::Float(1.0));
        assert!(coerce(rate, &"0".into()).is_err());
        assert!(coerce(rate, &"fast".into()).is_err());
        assert!(coerce(rate, &"NaN".into()).is_err());
        let rank = &per_run("tinker.lora_rank").unwrap().key;
        assert_eq!(coerce(rank, &"16".into()).unwrap(), Value::Int(16));
        assert!(coerce(rank, &"1.5".into()).is_err());
        assert!(coerce(rank, &Value::List(vec![])).is_err());
        assert!(per_run("base_model").is_none());
        assert!(per_run("resume_state").is_none());
    }
}
