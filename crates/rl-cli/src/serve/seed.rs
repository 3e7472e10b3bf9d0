//! The original (seed 001) client's `POST /test/inference` body, `{prompts, max_tokens,
//! temperature}`, read as today's `{num_steps, group_size, models}`.

use axum::http::StatusCode;
use axum::response::Response;
use rl_tools::MAX_STEPS;
use serde_json::{Value, json};

use super::responses::with_hint;

/// The body keys of the original client; today's are the tool's arguments (its schema).
const OLD_INFERENCE_KEYS: [&str; 3] = ["prompts", "max_tokens", "temperature"];

/// The tool's arguments, and with the old body, what was made of it.
#[expect(
    clippy::result_large_err,
    reason = "the refusal is the response itself, built once per request"
)]
pub(super) fn inference_arguments(
    tool: &str,
    body: Value,
) -> Result<(Value, Option<Value>), Response> {
    let Value::Object(object) = body else {
        // The tool refuses it with its schema.
        return Ok((body, None));
    };
    let old: Vec<&str> = OLD_INFERENCE_KEYS
        .into_iter()
        .filter(|key| object.contains_key(*key))
        .collect();
    if old.is_empty() {
        // Today's body: the tool's arguments, which it checks against its schema.
        return Ok((Value::Object(object), None));
    }
    let current = rl_tools::spec(tool)
        .and_then(|spec| spec.parameters.get("properties").cloned())
        .unwrap_or(Value::Null);
    let new: Vec<&str> = object
        .keys()
        .map(String::as_str)
        .filter(|key| current.get(*key).is_some())
        .collect();
    let unknown: Vec<&str> = object
        .keys()
        .map(String::as_str)
        .filter(|key| current.get(*key).is_none() && !OLD_INFERENCE_KEYS.contains(key))
        .collect();
    let shapes = "Send the tool's arguments ({\"num_steps\": N, \"group_size\": N, \
                  \"models\": [...], \"wait\": false}, every key optional, or {\"test_id\": ID}), \
                  or the original {\"prompts\": [...], \"max_tokens\": N, \"temperature\": X}, \
                  not both";
    if !unknown.is_empty() {
        return Err(with_hint(
            StatusCode::BAD_REQUEST,
            &format!("unknown key(s) in the body: {}", unknown.join(", ")),
            shapes,
        ));
    }
    if !new.is_empty() && !old.is_empty() {
        return Err(with_hint(
            StatusCode::BAD_REQUEST,
            &format!(
                "the body mixes the current keys ({}) with the original client's ({})",
                new.join(", "),
                old.join(", ")
            ),
            shapes,
        ));
    }
    let prompts = match object.get("prompts") {
        None | Some(Value::Null) => 0,
        Some(Value::Array(prompts)) if prompts.iter().all(Value::is_string) => prompts.len(),
        Some(_) => {
            return Err(with_hint(
                StatusCode::BAD_REQUEST,
                "`prompts` must be a list of strings",
                shapes,
            ));
        }
    };
    if let Some(max_tokens) = object.get("max_tokens").filter(|value| !value.is_null())
        && max_tokens.as_u64().is_none_or(|tokens| tokens == 0)
    {
        return Err(with_hint(
            StatusCode::BAD_REQUEST,
            "`max_tokens` must be a positive integer",
            shapes,
        ));
    }
    if let Some(temperature) = object.get("temperature").filter(|value| !value.is_null())
        && temperature.as_f64().is_none_or(|value| value < 0.0)
    {
        return Err(with_hint(
            StatusCode::BAD_REQUEST,
            "`temperature` must be a non-negative number",
            shapes,
        ));
    }
    let num_steps = u32::try_from(prompts)
        .unwrap_or(u32::MAX)
        .clamp(1, MAX_STEPS);
    let translation = json!({
        "message": format!(
            "The original body was read as num_steps = {num_steps} (one group per prompt, at \
             least 1, at most {MAX_STEPS}) with the default group_size. `prompts`, \
             `max_tokens` and `temperature` were not sent as such: the test draws its items \
             from the environment itself, and atroposlib's process mode has no per-request \
             prompt input. Send {{\"num_steps\", \"group_size\", \"models\"}} to choose the \
             test's size directly."
        ),
        "num_steps": num_steps,
        "prompts_received": prompts,
        "not_sent": old,
    });
    Ok((json!({ "num_steps": num_steps }), Some(translation)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOOL: &str = "rl_test_inference";

    #[test]
    fn old_inference_bodies_become_num_steps() {
        let (arguments, translation) =
            inference_arguments(TOOL, json!({"prompts": ["a", "b"], "max_tokens": 9})).unwrap();
        assert_eq!(arguments, json!({"num_steps": 2}));
        assert_eq!(
            translation.unwrap()["not_sent"],
            json!(["prompts", "max_tokens"])
        );
        let many: Vec<String> = (0..500).map(|n| n.to_string()).collect();
        let (arguments, _) = inference_arguments(TOOL, json!({ "prompts": many })).unwrap();
        assert_eq!(arguments, json!({"num_steps": 100}));
        let (arguments, _) =
            inference_arguments(TOOL, json!({"prompts": [], "temperature": 1})).unwrap();
        assert_eq!(arguments, json!({"num_steps": 1}));
        // Today's body goes to the tool as it is, `wait` and `test_id` included: the tool
        // checks it against its schema.
        for current in [
            json!({"num_steps": 2}),
            json!({"num_steps": 1, "wait": false}),
            json!({"test_id": "x"}),
            json!({"steps": 2}),
        ] {
            let (arguments, translation) = inference_arguments(TOOL, current.clone()).unwrap();
            assert_eq!((arguments, translation), (current, None));
        }
        for bad in [
            json!({"prompts": ["a"], "num_steps": 2}),
            json!({"prompts": ["a"], "wait": false}),
            json!({"prompts": "a"}),
            json!({"prompts": ["a"], "max_tokens": 0}),
            json!({"prompts": ["a"], "temperature": "hot"}),
            json!({"prompts": ["a"], "steps": 2}),
        ] {
            let refused = inference_arguments(TOOL, bad.clone()).unwrap_err();
            assert_eq!(refused.status(), StatusCode::BAD_REQUEST, "{bad}");
        }
    }
}
