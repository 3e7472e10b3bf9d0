//! Checking an edited value against its field, as pydantic would, before it is stored.

use crate::schema::{FieldSpec, FieldType};
use rl_settings::Value;

use crate::ConfigError;

/// A string value longer than this is refused: no config field needs it, and it would bloat
/// every stored state and run config.
pub const MAX_STRING_CHARS: usize = 4096;

/// A field name longer than this is refused before it is looked up.
pub(crate) const MAX_FIELD_NAME_CHARS: usize = 100;

#[derive(Debug, Clone, PartialEq)]
pub struct Checked {
    pub value: Value,
    /// The input, when it was converted (`"16"` → 16): callers tell the user so.
    pub coerced_from: Option<Value>,
    /// `false` for a type rl cannot check statically; the value is stored as given.
    pub checked: bool,
}

pub fn check_value(field: &FieldSpec, input: &Value) -> Result<Checked, ConfigError> {
    check_plain(input, &field.name)?;
    let value = check_type(&field.name, &field.field_type, input)?;
    check_constraints(field, &value)?;
    crate::rules::check_field(&field.name, &value)?;
    let checked = !matches!(field.field_type, FieldType::Unknown { .. });
    let coerced_from = (value != *input).then(|| input.clone());
    Ok(Checked {
        value,
        coerced_from,
        checked,
    })
}

/// Refuses what no field accepts: huge strings, control characters, deep nesting.
fn check_plain(input: &Value, field: &str) -> Result<(), ConfigError> {
    fn walk(value: &Value, depth: usize, field: &str) -> Result<(), ConfigError> {
        if depth > 8 {
            return Err(invalid(field, "the value is nested too deeply"));
        }
        match value {
            Value::Str(s) => {
                if s.chars().count() > MAX_STRING_CHARS {
                    return Err(invalid(
                        field,
                        &format!("strings are limited to {MAX_STRING_CHARS} characters"),
                    ));
                }
                if s.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
                    return Err(invalid(field, "the string contains control characters"));
                }
            }
            Value::List(items) => items
                .iter()
                .try_for_each(|item| walk(item, depth + 1, field))?,
            Value::Map(map) => map
                .values()
                .try_for_each(|item| walk(item, depth + 1, field))?,
            Value::Float(f) if !f.is_finite() => {
                return Err(invalid(field, "numbers must be finite"));
            }
            _ => {}
        }
        Ok(())
    }
    walk(input, 0, field)
}

fn invalid(field: &str, reason: &str) -> ConfigError {
    ConfigError::InvalidInput {
        what: format!("value of '{field}'"),
        reason: reason.to_owned(),
    }
}

fn wrong(field: &str, expected: &FieldType, got: &Value) -> ConfigError {
    ConfigError::WrongType {
        field: field.to_owned(),
        expected: expected.to_string(),
        got: describe(got),
    }
}

fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::List(_) | Value::Map(_) => value.kind().to_owned(),
        other => {
            let text = other.to_string();
            let shown: String = text.chars().take(60).collect();
            let ellipsis = if shown.len() < text.len() { "…" } else { "" };
            format!("{} {shown}{ellipsis}", other.kind())
        }
    }
}

fn check_type(field: &str, expected: &FieldType, input: &Value) -> Result<Value, ConfigError> {
    let fail = || wrong(field, expected, input);
    match expected {
        FieldType::Int => match input {
            Value::Int(i) => Ok(Value::Int(*i)),
            Value::Float(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Ok(Value::Int(*f as i64)),
            Value::Str(s) => s.trim().parse::<i64>().map(Value::Int).map_err(|_| fail()),
            _ => Err(fail()),
        },
        FieldType::Float => match input {
            Value::Int(i) => Ok(Value::Float(*i as f64)),
            Value::Float(f) => Ok(Value::Float(*f)),
            Value::Str(s) => match s.trim().parse::<f64>() {
                Ok(f) if f.is_finite() => Ok(Value::Float(f)),
                _ => Err(fail()),
            },
            _ => Err(fail()),
        },
        FieldType::Bool => match input {
            Value::Bool(b) => Ok(Value::Bool(*b)),
            Value::Int(0) => Ok(Value::Bool(false)),
            Value::Int(1) => Ok(Value::Bool(true)),
            Value::Str(s) => match s.trim().to_ascii_lowercase().as_str() {
                "true" | "yes" | "on" | "1" => Ok(Value::Bool(true)),
                "false" | "no" | "off" | "0" => Ok(Value::Bool(false)),
                _ => Err(fail()),
            },
            _ => Err(fail()),
        },
        FieldType::Str => match input {
            Value::Str(s) => Ok(Value::Str(s.clone())),
            _ => Err(fail()),
        },
        FieldType::Optional { inner } => match input {
            Value::Null => Ok(Value::Null),
            Value::Str(s) if matches!(s.trim(), "None" | "null") && **inner != FieldType::Str => {
                Ok(Value::Null)
            }
            other => check_type(field, inner, other).map_err(|error| match error {
                ConfigError::WrongType { .. } => fail(),
                other => other,
            }),
        },
        FieldType::Literal { values } => {
            let matches = |candidate: &Value| {
                values.iter().find(|allowed| {
                    *allowed == candidate
                        || matches!((allowed, candidate), (Value::Int(a), Value::Str(s)) if s.trim().parse() == Ok(*a))
                })
            };
            matches(input)
                .cloned()
                .ok_or_else(|| ConfigError::NotAllowed {
                    field: field.to_owned(),
                    value: input.clone(),
                    allowed: values.clone(),
                })
        }
        FieldType::Enum { members, .. } => {
            let found = members.iter().find(|member| {
                member.value == *input || matches!(input, Value::Str(s) if *s == member.name)
            });
            found
                .map(|member| member.value.clone())
                .ok_or_else(|| ConfigError::NotAllowed {
                    field: field.to_owned(),
                    value: input.clone(),
                    allowed: members.iter().map(|m| m.value.clone()).collect(),
                })
        }
        FieldType::List { item } => {
            let items = match input {
                Value::List(items) => items.clone(),
                // `"[1, 2]"` from a command line.
                Value::Str(s) if s.trim_start().starts_with('[') => {
                    match serde_json::from_str::<Value>(s) {
                        Ok(Value::List(items)) => items,
                        _ => return Err(fail()),
                    }
                }
                _ => return Err(fail()),
            };
            items
                .iter()
                .map(|element| check_type(field, item, element))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::List)
                .map_err(|_| fail())
        }
        FieldType::Map => match input {
            Value::Map(map) => Ok(Value::Map(map.clone())),
            _ => Err(fail()),
        },
        FieldType::Any | FieldType::Unknown { .. } => Ok(input.clone()),
    }
}

fn check_constraints(field: &FieldSpec, value: &Value) -> Result<(), ConfigError> {
    let c = &field.constraints;
    let out_of_range = |range: String| ConfigError::OutOfRange {
        field: field.name.clone(),
        value: value.clone(),
        range,
    };
    if let Some(number) = value.as_f64() {
        let bounds = [
            (c.ge, number >= c.ge.unwrap_or(f64::MIN), ">="),
            (c.gt, number > c.gt.unwrap_or(f64::MIN), ">"),
            (c.le, number <= c.le.unwrap_or(f64::MAX), "<="),
            (c.lt, number < c.lt.unwrap_or(f64::MAX), "<"),
        ];
        if bounds.iter().any(|(bound, ok, _)| bound.is_some() && !ok) {
            let range: Vec<String> = bounds
                .iter()
                .filter_map(|(bound, _, op)| bound.map(|b| format!("{op} {}", show_bound(b))))
                .collect();
            return Err(out_of_range(format!("must be {}", range.join(" and "))));
        }
    }
    let length = match value {
        Value::Str(s) => Some(s.chars().count() as u64),
        Value::List(items) => Some(items.len() as u64),
        _ => None,
    };
    if let Some(length) = length {
        let too_short = c.min_length.is_some_and(|min| length < min);
        let too_long = c.max_length.is_some_and(|max| length > max);
        if too_short || too_long {
            let min = c
                .min_length
                .map_or(String::new(), |m| format!("at least {m}"));
            let max = c
                .max_length
                .map_or(String::new(), |m| format!("at most {m}"));
            let both = [min, max]
                .into_iter()
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>();
            return Err(out_of_range(format!(
                "length must be {}",
                both.join(" and ")
            )));
        }
    }
    Ok(())
}

/// `2` rather than `2.0` for whole bounds, which are most of them.
fn show_bound(bound: f64) -> String {
    if bound.fract() == 0.0 && bound.abs() < 1e15 {
        format!("{}", bound as i64)
    } else {
        bound.to_string()
    }
}
