//! `rl mcp` fed malformed JSON-RPC (issue 45): a line that is not JSON is answered -32700 with
//! `"id": null`, a request whose params do not fit its method -32602 with its id, what the
//! answers repeat of the client's strings is bounded, and the session goes on after each.

use std::time::Duration;

use serde_json::{Value, json};

use crate::mcp::RawServer;

/// The bound on one answer: a client's patience, no speed claim (without the filter these
/// lines got no answer at all, and the client waited until its own timeout).
const PATIENCE: Duration = Duration::from_secs(20);

/// A session whose client declared the tasks extension.
fn session(home: &std::path::Path) -> RawServer {
    let mut server = RawServer::start(home, &[]);
    let init =
        server.initialize_with(&json!({"extensions": {"io.modelcontextprotocol/tasks": {}}}));
    assert!(init["result"]["serverInfo"].is_object(), "{init}");
    server
}

/// The error of `answer`: its code and message.
fn error_of(answer: &Value) -> (i64, String) {
    let code = answer["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("not an error: {answer}"));
    let message = answer["error"]["message"].as_str().unwrap().to_owned();
    (code, message)
}

/// The session still answers: `tools/list` as request `id` lists the tools.
fn still_serves(server: &mut RawServer, id: u64) {
    let listed = server.request(id, "tools/list", &json!({}));
    let tools = listed["result"]["tools"].as_array().unwrap();
    assert_eq!(tools.len(), rl_tools::TOOL_NAMES.len(), "{listed}");
}

/// Closing stdin still ends the server, and everything it wrote was a JSON-RPC message.
fn ends_cleanly(mut server: RawServer) {
    server.close_stdin();
    let status = server.wait(Duration::from_secs(15));
    assert!(status.success(), "{status:?}: {}", server.stderr());
    for line in server.rest() {
        let message: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(message["jsonrpc"], "2.0", "{line}");
    }
    assert!(!server.stderr().contains("panicked"), "{}", server.stderr());
}

#[test]
fn a_line_that_is_not_json_is_a_parse_error_and_the_next_request_is_answered() {
    let home = tempfile::tempdir().unwrap();
    let mut server = session(home.path());
    server.send_line("this is not JSON");
    let answer = server.answer_to(&Value::Null, PATIENCE);
    assert_eq!(answer["jsonrpc"], "2.0", "{answer}");
    let (code, message) = error_of(&answer);
    assert_eq!(code, -32700, "{answer}");
    assert!(message.starts_with("Parse error"), "{message}");
    still_serves(&mut server, 2);
    ends_cleanly(server);
}

#[test]
fn a_line_nested_too_deep_is_a_parse_error() {
    let home = tempfile::tempdir().unwrap();
    let mut server = session(home.path());
    let depth = 10_000;
    server.send_line(&format!("{}{}", "[".repeat(depth), "]".repeat(depth)));
    let answer = server.answer_to(&Value::Null, PATIENCE);
    let (code, message) = error_of(&answer);
    assert_eq!(code, -32700, "{answer}");
    assert!(message.contains("recursion limit"), "{message}");
    still_serves(&mut server, 2);
    ends_cleanly(server);
}

#[test]
fn a_line_over_the_length_bound_is_refused_unread() {
    let home = tempfile::tempdir().unwrap();
    let mut server = session(home.path());
    // A request that would be valid but for its size: 5 MiB of argument.
    let big = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
        "params": {"name": "rl_list_runs", "arguments": {"pad": "p".repeat(5 << 20)}}});
    server.send_line(&big.to_string());
    let answer = server.answer_to(&Value::Null, PATIENCE);
    let (code, message) = error_of(&answer);
    assert_eq!(code, -32600, "{answer}");
    assert!(message.contains("4194304 bytes"), "{message}");
    still_serves(&mut server, 2);
    ends_cleanly(server);
}

#[test]
fn tool_call_arguments_that_are_not_an_object_are_invalid_params_with_the_id() {
    let home = tempfile::tempdir().unwrap();
    let mut server = session(home.path());
    for (id, arguments) in [(3, json!([1])), (4, json!("x"))] {
        let answer = server.request(
            id,
            "tools/call",
            &json!({"name": "rl_list_runs", "arguments": arguments}),
        );
        assert_eq!(answer["id"], id, "{answer}");
        let (code, message) = error_of(&answer);
        assert_eq!(code, -32602, "{answer}");
        assert!(
            message.contains("`arguments` must be a JSON object"),
            "{message}"
        );
    }
    still_serves(&mut server, 5);
    ends_cleanly(server);
}

#[test]
fn a_task_id_that_is_not_a_string_is_invalid_params_with_the_id() {
    let home = tempfile::tempdir().unwrap();
    let mut server = session(home.path());
    for (id, method) in [(3, "tasks/get"), (4, "tasks/cancel")] {
        let answer = server.request(id, method, &json!({"taskId": 5}));
        assert_eq!(answer["id"], id, "{answer}");
        let (code, message) = error_of(&answer);
        assert_eq!(code, -32602, "{answer}");
        assert!(message.contains("`taskId` must be a string"), "{message}");
    }
    still_serves(&mut server, 5);
    ends_cleanly(server);
}

#[test]
fn a_long_task_id_or_method_is_not_repeated_in_full() {
    let home = tempfile::tempdir().unwrap();
    let mut server = session(home.path());
    let long = "t".repeat(10_000);
    for (id, method) in [(3, "tasks/get"), (4, "tasks/cancel")] {
        let answer = server.request(id, method, &json!({"taskId": long}));
        let (code, message) = error_of(&answer);
        assert_eq!(code, -32602, "{answer}");
        assert!(message.contains("unknown task"), "{message}");
        assert!(message.contains("(10000 characters)"), "{message}");
        assert!(message.chars().count() <= 200, "{message}");
        assert!(!answer.to_string().contains(&long), "{answer}");
    }
    let method = format!("x/{long}");
    let answer = server.request(5, &method, &json!({}));
    let (code, message) = error_of(&answer);
    assert_eq!(code, -32601, "{answer}");
    assert!(message.chars().count() <= 200, "{message}");
    assert!(!answer.to_string().contains(&long), "{answer}");
    still_serves(&mut server, 6);
    ends_cleanly(server);
}
