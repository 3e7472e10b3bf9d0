//! What atroposlib 0.4.0 and rl's trainer refuse, or break on, in a run's env section, checked
//! when a value is edited and again before a run starts: a bad value is refused with the rule
//! it breaks, not found inside a component seconds after the start.
//!
//! atroposlib's `BaseEnvConfig` declares no bounds of its own; these are the values its code
//! (and rl's trainer, which reads the same fields) cannot work with: `steps_per_eval = 0`
//! divides by zero, a group larger than the batch is refused when the env registers, a
//! negative group size makes no group at all.

use rl_settings::Value;

use crate::ConfigError;

/// The values a field may take.
#[derive(Debug, Clone, Copy)]
enum Allowed {
    /// At least this whole number.
    AtLeast(i64),
    /// `-1` (the field's "unset", with the meaning the reason gives), or at least this.
    UnsetOrAtLeast(i64),
    /// A number in this closed range.
    Between(f64, f64),
    /// `-1`, or a number above zero.
    UnsetOrPositive,
}

/// Each rule: the field, what it allows, and why (shown with a refusal).
const RULES: &[(&str, Allowed, &str)] = &[
    (
        "group_size",
        Allowed::AtLeast(1),
        "a group holds at least one completion",
    ),
    (
        "batch_size",
        Allowed::UnsetOrAtLeast(1),
        "-1 lets the trainer choose; else the completions of one training step",
    ),
    (
        "total_steps",
        Allowed::AtLeast(1),
        "rl's trainer counts at least one step",
    ),
    (
        "max_token_length",
        Allowed::AtLeast(2),
        "rl's trainer needs room for a prompt and a completion token",
    ),
    (
        "steps_per_eval",
        Allowed::AtLeast(1),
        "atroposlib divides the step by it",
    ),
    (
        "max_num_workers",
        Allowed::UnsetOrAtLeast(1),
        "-1 derives it from max_num_workers_per_node",
    ),
    (
        "max_num_workers_per_node",
        Allowed::AtLeast(1),
        "a node runs at least one worker",
    ),
    (
        "max_eval_workers",
        Allowed::AtLeast(1),
        "an evaluation runs at least one worker",
    ),
    (
        "max_batches_offpolicy",
        Allowed::AtLeast(1),
        "at least one batch must be allowed to wait for the trainer",
    ),
    (
        "num_rollouts_to_keep",
        Allowed::AtLeast(0),
        "a count of rollouts",
    ),
    (
        "eval_limit_ratio",
        Allowed::Between(0.0, 1.0),
        "a share of the training workers",
    ),
    (
        "min_batch_allocation",
        Allowed::Between(0.0, 1.0),
        "a share of each batch",
    ),
    (
        "worker_timeout",
        Allowed::UnsetOrPositive,
        "-1 for no limit; else the seconds a rollout may take",
    ),
    (
        "inference_weight",
        Allowed::UnsetOrPositive,
        "-1 leaves the environment out; else its weight",
    ),
];

/// Refuses a value of `field` that atroposlib or rl's trainer cannot work with. Fields without
/// a rule, and values that are not numbers (`None` for an optional field), pass.
pub(crate) fn check_field(field: &str, value: &Value) -> Result<(), ConfigError> {
    let Some((_, allowed, why)) = RULES.iter().find(|(name, _, _)| *name == field) else {
        return Ok(());
    };
    let Some(number) = value.as_f64() else {
        return Ok(());
    };
    let (fits, range) = match *allowed {
        Allowed::AtLeast(least) => (number >= least as f64, format!("must be >= {least}")),
        Allowed::UnsetOrAtLeast(least) => (
            number == -1.0 || number >= least as f64,
            format!("must be -1 or >= {least}"),
        ),
        Allowed::Between(low, high) => (
            (low..=high).contains(&number),
            format!("must be between {low} and {high}"),
        ),
        Allowed::UnsetOrPositive => (
            number == -1.0 || number > 0.0,
            "must be -1 or > 0".to_owned(),
        ),
    };
    if fits {
        return Ok(());
    }
    Err(ConfigError::OutOfRange {
        field: field.to_owned(),
        value: value.clone(),
        range: format!("{range}: {why}"),
    })
}

/// Refuses values that are each fine but not together. `value_of` gives a field's value as a
/// run would use it.
pub(crate) fn check_together<'a>(
    value_of: impl Fn(&str) -> Option<&'a Value>,
) -> Result<(), ConfigError> {
    let whole = |field: &str| value_of(field).and_then(Value::as_f64);
    if let (Some(group), Some(batch)) = (whole("group_size"), whole("batch_size"))
        && batch >= 1.0
        && group > batch
    {
        return Err(ConfigError::InvalidInput {
            what: format!("group_size {group} with batch_size {batch}"),
            reason: "atroposlib refuses a group larger than the batch (group_size <= \
                     batch_size): lower group_size or raise batch_size first"
                .to_owned(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_rule_names_the_range_and_why() {
        let refused = check_field("group_size", &Value::Int(-5)).unwrap_err();
        let text = refused.to_string();
        assert!(
            text.contains("group_size") && text.contains(">= 1"),
            "{text}"
        );
        assert!(text.contains("at least one completion"), "{text}");
        for (field, bad, good) in [
            ("group_size", 0.0, 1.0),
            ("batch_size", 0.0, -1.0),
            ("total_steps", 0.0, 1.0),
            ("steps_per_eval", 0.0, 5.0),
            ("eval_limit_ratio", 1.5, 1.0),
            ("worker_timeout", 0.0, -1.0),
            ("max_num_workers", -2.0, -1.0),
        ] {
            assert!(
                check_field(field, &Value::Float(bad)).is_err(),
                "{field} {bad}"
            );
            assert!(
                check_field(field, &Value::Float(good)).is_ok(),
                "{field} {good}"
            );
        }
        assert!(check_field("group_size", &Value::Null).is_ok());
        assert!(check_field("no_rule", &Value::Int(-99)).is_ok());
    }

    #[test]
    fn a_group_larger_than_the_batch_is_refused_unless_the_trainer_chooses() {
        let values = |group: i64, batch: i64| {
            move |field: &str| match field {
                "group_size" => Some(Value::Int(group)),
                "batch_size" => Some(Value::Int(batch)),
                _ => None,
            }
        };
        let check = |group, batch| {
            let lookup = values(group, batch);
            let owned: Vec<(String, Value)> = ["group_size", "batch_size"]
                .iter()
                .filter_map(|f| lookup(f).map(|v| ((*f).to_owned(), v)))
                .collect();
            check_together(|field| owned.iter().find(|(f, _)| f == field).map(|(_, v)| v))
        };
        let refused = check(16, 8).unwrap_err().to_string();
        assert!(refused.contains("group_size <= batch_size"), "{refused}");
        assert!(check(8, 8).is_ok());
        assert!(check(16, -1).is_ok());
    }
}
