//! Snapshot helpers: what varies between machines and calls, replaced in a JSON answer.

use serde_json::Value;

/// `word_ladder-20260101-120000` (a WandB name made at selection) as `word_ladder-[stamp]`.
pub fn without_stamps(text: &str) -> String {
    const SHAPE: &[u8] = b"dddddddd-dddddd";
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut index = 0;
    while index < bytes.len() {
        let stamp = bytes.len() - index >= SHAPE.len()
            && SHAPE
                .iter()
                .zip(&bytes[index..])
                .all(|(shape, byte)| match shape {
                    b'd' => byte.is_ascii_digit(),
                    _ => byte == shape,
                });
        if stamp {
            out.push_str("[stamp]");
            index += SHAPE.len();
        } else {
            let next = text[index..].chars().next().map_or(1, char::len_utf8);
            out.push_str(&text[index..index + next]);
            index += next;
        }
    }
    out
}

/// `value` with `scrub` applied to every string in it, object keys included.
pub fn scrub_strings(value: Value, scrub: &dyn Fn(&str) -> String) -> Value {
    match value {
        Value::String(text) => Value::String(scrub(&text)),
        Value::Array(items) => Value::Array(
            items
                .into_iter()
                .map(|item| scrub_strings(item, scrub))
                .collect(),
        ),
        Value::Object(object) => Value::Object(
            object
                .into_iter()
                .map(|(key, item)| (scrub(&key), scrub_strings(item, scrub)))
                .collect(),
        ),
        other => other,
    }
}
