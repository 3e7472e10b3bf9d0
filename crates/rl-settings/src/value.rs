//! A config value: what a Python literal, a YAML scalar or a JSON value can be.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    List(Vec<Value>),
    Map(BTreeMap<String, Value>),
}

impl Value {
    /// The name of the kind, as used in error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Int(_) => "an integer",
            Value::Float(_) => "a number",
            Value::Str(_) => "a string",
            Value::List(_) => "a list",
            Value::Map(_) => "a mapping",
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::Float(f) => Some(*f),
            _ => None,
        }
    }
}

/// Read by hand rather than `untagged`: a whole number beyond `i64` would silently become an
/// approximate float (9223372036854775808 shown back as 9223372036854776000); it is refused
/// with its exact digits instead.
impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ValueVisitor)
    }
}

struct ValueVisitor;

fn too_large<E: de::Error>(digits: impl fmt::Display) -> E {
    E::custom(format!(
        "{digits} is outside the whole numbers a value may hold ({} to {})",
        i64::MIN,
        i64::MAX
    ))
}

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a number, string, boolean, list, mapping or null")
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Value, E> {
        Ok(Value::Int(value))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Value, E> {
        i64::try_from(value)
            .map(Value::Int)
            .map_err(|_| too_large(value))
    }

    fn visit_i128<E: de::Error>(self, value: i128) -> Result<Value, E> {
        i64::try_from(value)
            .map(Value::Int)
            .map_err(|_| too_large(value))
    }

    fn visit_u128<E: de::Error>(self, value: u128) -> Result<Value, E> {
        i64::try_from(value)
            .map(Value::Int)
            .map_err(|_| too_large(value))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Value, E> {
        Ok(Value::Float(value))
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Value, E> {
        Ok(Value::Str(value.to_owned()))
    }

    fn visit_string<E: de::Error>(self, value: String) -> Result<Value, E> {
        Ok(Value::Str(value))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        Value::deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::List(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut entries = BTreeMap::new();
        while let Some((key, value)) = map.next_entry::<String, Value>()? {
            entries.insert(key, value);
        }
        Ok(Value::Map(entries))
    }
}

impl From<&str> for Value {
    fn from(value: &str) -> Self {
        Value::Str(value.to_owned())
    }
}

impl From<String> for Value {
    fn from(value: String) -> Self {
        Value::Str(value)
    }
}

impl From<i64> for Value {
    fn from(value: i64) -> Self {
        Value::Int(value)
    }
}

impl From<f64> for Value {
    fn from(value: f64) -> Self {
        Value::Float(value)
    }
}

impl From<bool> for Value {
    fn from(value: bool) -> Self {
        Value::Bool(value)
    }
}

/// JSON-like text: what users type and read in messages.
impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => f.write_str("null"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) if x.fract() == 0.0 && x.is_finite() && x.abs() < 1e16 => {
                write!(f, "{x:.1}")
            }
            Value::Float(x) => write!(f, "{x}"),
            Value::Str(s) => write!(f, "{}", serde_json::Value::String(s.clone())),
            Value::List(items) => {
                f.write_str("[")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_str("]")
            }
            Value::Map(map) => {
                f.write_str("{")?;
                for (i, (key, item)) in map.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{}: {item}", serde_json::Value::String(key.clone()))?;
                }
                f.write_str("}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_json_like() {
        let value = Value::List(vec![
            Value::Int(1),
            Value::Float(2.0),
            Value::Str("a\"b".into()),
            Value::Null,
        ]);
        assert_eq!(value.to_string(), r#"[1, 2.0, "a\"b", null]"#);
    }

    #[test]
    fn untagged_round_trip_keeps_int_and_float_apart() {
        let value: Value =
            serde_json::from_str(r#"{"a": 1, "b": 1.5, "c": [true, null]}"#).unwrap();
        let Value::Map(map) = &value else { panic!() };
        assert_eq!(map["a"], Value::Int(1));
        assert_eq!(map["b"], Value::Float(1.5));
        assert_eq!(
            serde_json::to_string(&value).unwrap(),
            r#"{"a":1,"b":1.5,"c":[true,null]}"#
        );
    }

    #[test]
    fn a_whole_number_beyond_i64_is_refused_with_its_exact_digits() {
        let error = serde_json::from_str::<Value>("9223372036854775808")
            .unwrap_err()
            .to_string();
        assert!(error.contains("9223372036854775808 is outside"), "{error}");
        assert_eq!(
            serde_json::from_str::<Value>("9223372036854775807").unwrap(),
            Value::Int(i64::MAX)
        );
        assert_eq!(
            serde_norway::from_str::<Value>("[1, x, ~]").unwrap(),
            Value::List(vec![Value::Int(1), Value::from("x"), Value::Null])
        );
    }
}
