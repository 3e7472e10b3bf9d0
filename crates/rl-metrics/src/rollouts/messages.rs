//! A rollout row's `messages`: the conversation the environment sent with a completion
//! (run-api's `ScoredData.messages`, OpenAI chat messages: `role`, `content` as text or a list
//! of parts, an assistant's `tool_calls`, a tool result's `tool_call_id`), read for people to
//! follow turn by turn. Never trusted: what is no message is left out, texts are cut at
//! [`MAX_ROLLOUT_TEXT`], a row's turns at [`MAX_ROLLOUT_MESSAGES`], each turn's calls at
//! [`MAX_TOOL_CALLS`].

use serde_json::{Map, Value};

use super::MAX_ROLLOUT_TEXT;

/// Turns of one row kept at most.
pub const MAX_ROLLOUT_MESSAGES: usize = 256;
/// Tool calls of one turn kept at most.
pub const MAX_TOOL_CALLS: usize = 64;

/// One turn of a conversation.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RolloutMessage {
    /// `system`, `user`, `assistant`, `tool`, … as the environment wrote it.
    pub role: String,
    /// Its text (a list of parts: the text parts, another part as `[type]`).
    pub content: String,
    /// The model's reasoning, when the environment kept it apart (`reasoning_content`).
    pub reasoning: Option<String>,
    /// The tools an assistant turn calls.
    pub tool_calls: Vec<ToolCall>,
    /// The call a tool turn answers.
    pub tool_call_id: Option<String>,
    /// The tool's (or the speaker's) name.
    pub name: Option<String>,
}

/// A tool call as the model made it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolCall {
    pub id: Option<String>,
    pub name: String,
    /// Its arguments as the model wrote them (JSON text, most often).
    pub arguments: String,
}

/// Texts cut at their bound, and whether any was.
#[derive(Debug, Default)]
pub(super) struct Cutter {
    pub(super) cut: bool,
}

impl Cutter {
    pub(super) fn text(&mut self, text: &str) -> String {
        if text.chars().count() > MAX_ROLLOUT_TEXT {
            self.cut = true;
            text.chars().take(MAX_ROLLOUT_TEXT).collect()
        } else {
            text.to_owned()
        }
    }

    fn field(&mut self, object: &Map<String, Value>, key: &str) -> Option<String> {
        object.get(key)?.as_str().map(|text| self.text(text))
    }

    /// Up to `bound` of `items`, saying when there were more.
    fn bounded<'a, T>(&mut self, items: &'a [T], bound: usize) -> &'a [T] {
        if items.len() > bound {
            self.cut = true;
            &items[..bound]
        } else {
            items
        }
    }
}

/// The turns of `value` (a row's `messages`), `None` when it is no list: an entry that is no
/// message object (without a `role`) is left out.
pub(super) fn messages_of(value: &Value, cutter: &mut Cutter) -> Option<Vec<RolloutMessage>> {
    let list = value.as_array()?;
    let kept = cutter.bounded(list, MAX_ROLLOUT_MESSAGES);
    Some(
        kept.iter()
            .filter_map(Value::as_object)
            .filter_map(|message| message_of(message, cutter))
            .collect(),
    )
}

fn message_of(message: &Map<String, Value>, cutter: &mut Cutter) -> Option<RolloutMessage> {
    let role = cutter.field(message, "role")?;
    let content = match message.get("content") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(text)) => cutter.text(text),
        Some(Value::Array(parts)) => cutter.text(&parts_text(parts)),
        Some(other) => cutter.text(&other.to_string()),
    };
    let calls = message
        .get("tool_calls")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let tool_calls = cutter
        .bounded(calls, MAX_TOOL_CALLS)
        .iter()
        .filter_map(Value::as_object)
        .map(|call| tool_call_of(call, cutter))
        .collect();
    Some(RolloutMessage {
        role,
        content,
        reasoning: cutter.field(message, "reasoning_content"),
        tool_calls,
        tool_call_id: cutter.field(message, "tool_call_id"),
        name: cutter.field(message, "name"),
    })
}

/// A list of content parts as text: each text part's text, another part as `[its type]`.
fn parts_text(parts: &[Value]) -> String {
    let texts: Vec<String> = parts
        .iter()
        .map(|part| match part {
            Value::String(text) => text.clone(),
            Value::Object(part) => match part.get("text").and_then(Value::as_str) {
                Some(text) => text.to_owned(),
                None => format!(
                    "[{}]",
                    part.get("type").and_then(Value::as_str).unwrap_or("part")
                ),
            },
            other => other.to_string(),
        })
        .collect();
    texts.join("\n")
}

/// `{"id", "type": "function", "function": {"name", "arguments"}}` (or a `custom` call's
/// `input`); the call's own `name`/`arguments` when it has no such object.
fn tool_call_of(call: &Map<String, Value>, cutter: &mut Cutter) -> ToolCall {
    let kind = call
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("function");
    let inner = call.get(kind).and_then(Value::as_object).unwrap_or(call);
    let arguments = match inner.get("arguments").or_else(|| inner.get("input")) {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(text)) => cutter.text(text),
        Some(other) => cutter.text(&other.to_string()),
    };
    ToolCall {
        id: cutter.field(call, "id"),
        name: cutter.field(inner, "name").unwrap_or_default(),
        arguments,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(value: &Value) -> (Option<Vec<RolloutMessage>>, bool) {
        let mut cutter = Cutter::default();
        (messages_of(value, &mut cutter), cutter.cut)
    }

    #[test]
    fn a_tool_using_conversation_is_read_turn_by_turn() {
        let (messages, cut) = read(&json!([
            {"role": "system", "content": "Use the tools."},
            {"role": "user", "content": [{"type": "text", "text": "2+2?"}, {"type": "image_url", "image_url": {"url": "x"}}]},
            {"role": "assistant", "content": null, "reasoning_content": "add them",
             "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{\"a\": 2, \"b\": 2}"}},
                            {"id": "c2", "type": "custom", "custom": {"name": "calc", "input": {"expr": "2+2"}}}]},
            {"role": "tool", "tool_call_id": "c1", "name": "add", "content": "4"},
            {"role": "assistant", "content": "4"},
            "not a message",
            {"content": "no role"},
        ]));
        let messages = messages.unwrap();
        assert!(!cut);
        let roles: Vec<&str> = messages.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "tool", "assistant"]);
        assert_eq!(messages[1].content, "2+2?\n[image_url]");
        assert_eq!(messages[2].content, "");
        assert_eq!(messages[2].reasoning.as_deref(), Some("add them"));
        assert_eq!(
            messages[2].tool_calls,
            [
                ToolCall {
                    id: Some("c1".into()),
                    name: "add".into(),
                    arguments: "{\"a\": 2, \"b\": 2}".into()
                },
                ToolCall {
                    id: Some("c2".into()),
                    name: "calc".into(),
                    arguments: "{\"expr\":\"2+2\"}".into()
                },
            ]
        );
        assert_eq!(messages[3].tool_call_id.as_deref(), Some("c1"));
        assert_eq!(messages[3].name.as_deref(), Some("add"));
    }

    #[test]
    fn hostile_conversations_are_bounded() {
        assert_eq!(read(&json!("text")).0, None);
        let long = "x".repeat(MAX_ROLLOUT_TEXT + 1);
        let many: Vec<Value> = (0..MAX_ROLLOUT_MESSAGES + 3)
            .map(|_| json!({"role": "user", "content": "hi"}))
            .collect();
        let (messages, cut) = read(&Value::Array(many));
        assert_eq!((messages.unwrap().len(), cut), (MAX_ROLLOUT_MESSAGES, true));
        let calls: Vec<Value> = (0..=MAX_TOOL_CALLS)
            .map(|_| json!({"function": {"name": long, "arguments": 7}}))
            .collect();
        let (messages, cut) =
            read(&json!([{"role": long, "content": {"a": 1}, "tool_calls": calls}]));
        let message = &messages.unwrap()[0];
        assert!(cut);
        assert_eq!(message.role.chars().count(), MAX_ROLLOUT_TEXT);
        assert_eq!(message.content, "{\"a\":1}");
        assert_eq!(message.tool_calls.len(), MAX_TOOL_CALLS);
        assert_eq!(message.tool_calls[0].arguments, "7");
    }
}
