//! A route's tool arguments: the id its path names, and its query (GET) or its JSON body (POST)
//! with every key as it came. The tool checks them against its own schema, so the HTTP face
//! takes exactly the arguments every other face does, from one source.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Map, Value};

use super::responses::with_hint;

/// The query's pairs as the tool's arguments, each value read as the type the tool's schema
/// gives its key (a query carries only text): `?since=3` is the integer 3, `?recursive=true`
/// is true. A value that does not read as that type stays text, which the tool refuses in its
/// own words; a key the schema lacks goes to the tool too, which refuses it by name.
#[expect(
    clippy::result_large_err,
    reason = "the refusal is the response itself, built once per request"
)]
pub(super) fn from_query(
    tool: &str,
    pairs: Vec<(String, String)>,
) -> Result<Map<String, Value>, Response> {
    if pairs.is_empty() {
        return Ok(Map::new());
    }
    let properties = rl_tools::spec(tool)
        .and_then(|spec| spec.parameters.get("properties").cloned())
        .unwrap_or(Value::Null);
    let mut arguments = Map::new();
    for (key, text) in pairs {
        let kind = properties
            .get(&key)
            .and_then(|property| property.get("type"))
            .and_then(Value::as_str);
        let value = typed(kind, &text);
        if arguments.insert(key.clone(), value).is_some() {
            return Err(with_hint(
                StatusCode::BAD_REQUEST,
                &format!(
                    "`{}` is given twice in the query",
                    rl_settings::quoted(&key)
                ),
                "Give each argument once",
            ));
        }
    }
    Ok(arguments)
}

/// `text` read as a JSON Schema `type`, when it reads as one.
fn typed(kind: Option<&str>, text: &str) -> Value {
    let parsed = match kind {
        Some("integer") => text
            .parse::<i64>()
            .map(Value::from)
            .or_else(|_| text.parse::<u64>().map(Value::from))
            .ok(),
        Some("number") => text
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(Value::Number),
        Some("boolean") => match text {
            "true" | "1" => Some(Value::Bool(true)),
            "false" | "0" => Some(Value::Bool(false)),
            _ => None,
        },
        Some("array" | "object") => serde_json::from_str(text).ok(),
        _ => None,
    };
    parsed.unwrap_or_else(|| Value::String(text.to_owned()))
}

/// The arguments with the path's id under `key`. The path names what the call acts on: the
/// same key given again with another value is refused as the contradiction it is. Arguments
/// that are not an object go to the tool as they are; it refuses them with its schema.
#[expect(
    clippy::result_large_err,
    reason = "the refusal is the response itself, built once per request"
)]
pub(super) fn with_path(arguments: Value, key: &str, id: String) -> Result<Value, Response> {
    let Value::Object(mut object) = arguments else {
        return Ok(arguments);
    };
    match object.get(key) {
        None => {}
        Some(Value::String(given)) if *given == id => {}
        Some(_) => {
            return Err(with_hint(
                StatusCode::BAD_REQUEST,
                &format!(
                    "the path names {key} `{}`, and the request gives another `{key}`",
                    rl_settings::quoted(&id)
                ),
                &format!("Give `{key}` in the path alone"),
            ));
        }
    }
    object.insert(key.to_owned(), Value::String(id));
    Ok(Value::Object(object))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_take_the_schemas_types() {
        let pairs = |list: &[(&str, &str)]| {
            list.iter()
                .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
                .collect::<Vec<_>>()
        };
        let status = from_query("rl_check_status", pairs(&[("since", "3")])).unwrap();
        assert_eq!(status["since"], 3);
        let listed = from_query("rl_list_environments", pairs(&[("recursive", "true")])).unwrap();
        assert_eq!(listed["recursive"], true);
        // Not of the schema's type, or not in it: the tool's to refuse.
        let odd = from_query("rl_check_status", pairs(&[("since", "-x"), ("zz", "1")])).unwrap();
        assert_eq!(odd["since"], "-x");
        assert_eq!(odd["zz"], "1");
        assert_eq!(typed(Some("number"), "0.5"), 0.5);
        assert_eq!(typed(Some("boolean"), "1"), true);
        assert_eq!(typed(Some("boolean"), "yes"), "yes");
        assert_eq!(typed(Some("array"), "[\"a\"]"), serde_json::json!(["a"]));
        assert_eq!(typed(Some("integer"), "18446744073709551615"), u64::MAX);
        let twice = from_query("rl_check_status", pairs(&[("since", "1"), ("since", "2")]));
        assert_eq!(twice.unwrap_err().status(), StatusCode::BAD_REQUEST);
    }

    #[test]
    fn the_path_names_the_id_and_a_contradiction_is_refused() {
        let id = "0badc0de".to_owned();
        let merged = with_path(serde_json::json!({"steps": 2}), "run_id", id.clone()).unwrap();
        assert_eq!(
            merged,
            serde_json::json!({"steps": 2, "run_id": "0badc0de"})
        );
        let same = with_path(serde_json::json!({"run_id": id}), "run_id", id.clone()).unwrap();
        assert_eq!(same["run_id"], "0badc0de");
        let other = with_path(serde_json::json!({"run_id": "x"}), "run_id", id.clone());
        assert_eq!(other.unwrap_err().status(), StatusCode::BAD_REQUEST);
        assert_eq!(
            with_path(serde_json::json!([1]), "run_id", id).unwrap(),
            serde_json::json!([1])
        );
    }
}
