#![allow(clippy::unwrap_used)]

use tokio::io::AsyncReadExt;

use super::*;

fn answered(line: &str) -> Value {
    match judge(line.as_bytes()) {
        Verdict::Answer(answer) => answer,
        other => panic!("{line} was not answered: {other:?}"),
    }
}

fn nested(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

#[test]
fn a_line_that_is_not_json_is_a_parse_error_with_a_null_id() {
    for line in [
        "not json",
        r#"{"jsonrpc": "2.0", "id": 1, "method": "tools/list""#,
        &nested(10_000),
    ] {
        let answer = answered(line);
        assert_eq!(answer["jsonrpc"], "2.0");
        assert_eq!(answer["id"], Value::Null, "{answer}");
        assert_eq!(answer["error"]["code"], -32700, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.starts_with("Parse error"), "{message}");
    }
    let deep = answered(&nested(10_000));
    assert!(
        deep["error"]["message"]
            .as_str()
            .unwrap()
            .contains("recursion limit"),
        "{deep}"
    );
}

#[test]
fn well_formed_messages_go_to_rmcp_as_they_are() {
    for line in [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"0"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"rl_list_runs"}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"rl_list_runs","arguments":null}}"#,
        r#"{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"rl_list_runs","arguments":{"a":1},"_meta":{"progressToken":1}}}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"tasks/get","params":{"taskId":"abc"}}"#,
        r#"{"jsonrpc":"2.0","id":5,"method":"tasks/cancel","params":{"taskId":"abc"}}"#,
        r#"{"jsonrpc":"2.0","id":6,"method":"tasks/update","params":{"taskId":"abc","inputResponses":{}}}"#,
        r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#,
        // Not rmcp's to type, and answers: rmcp says what they are.
        r#"{"jsonrpc":"2.0","id":8,"method":"no/such/method","params":[1]}"#,
        r#"{"jsonrpc":"2.0","id":9,"result":{}}"#,
        "[1, 2]",
        "\u{feff}{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}\r",
    ] {
        assert_eq!(judge(line.as_bytes()), Verdict::Forward, "{line}");
    }
    assert_eq!(judge(b"  \r"), Verdict::Ignore);
}

#[test]
fn ill_typed_params_are_invalid_params_with_the_requests_id() {
    for (line, id, says) in [
        (
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"rl_list_runs","arguments":[1]}}"#,
            json!(3),
            "`arguments` must be a JSON object",
        ),
        (
            r#"{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"rl_list_runs","arguments":"x"}}"#,
            json!("c"),
            "`arguments` must be a JSON object",
        ),
        (
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"arguments":{}}}"#,
            json!(3),
            "`name` must be a string",
        ),
        (
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":[1]}"#,
            json!(3),
            "`params` must be a JSON object",
        ),
        (
            r#"{"jsonrpc":"2.0","id":4,"method":"tasks/get","params":{"taskId":5}}"#,
            json!(4),
            "`taskId` must be a string",
        ),
        (
            r#"{"jsonrpc":"2.0","id":4,"method":"tasks/get","params":{}}"#,
            json!(4),
            "`taskId` must be a string",
        ),
        (
            r#"{"jsonrpc":"2.0","id":5,"method":"tasks/cancel","params":{"taskId":[]}}"#,
            json!(5),
            "`taskId` must be a string",
        ),
        (
            r#"{"jsonrpc":"2.0","id":6,"method":"tasks/update","params":{"taskId":true,"inputResponses":{}}}"#,
            json!(6),
            "`taskId` must be a string",
        ),
        (
            r#"{"jsonrpc":"2.0","id":6,"method":"tasks/update","params":{"taskId":"a","inputResponses":1}}"#,
            json!(6),
            "`inputResponses` must be a JSON object",
        ),
        (
            r#"{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":5,"capabilities":{},"clientInfo":{"name":"c","version":"0"}}}"#,
            json!(7),
            "invalid type",
        ),
    ] {
        let answer = answered(line);
        assert_eq!(answer["id"], id, "{answer}");
        assert_eq!(answer["error"]["code"], -32602, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{message}");
    }
}

#[test]
fn a_malformed_notification_is_never_answered() {
    for line in [
        r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x","arguments":[1]}}"#,
        r#"{"jsonrpc":"2.0","method":"tasks/get","params":{"taskId":5}}"#,
    ] {
        assert_eq!(judge(line.as_bytes()), Verdict::Ignore, "{line}");
    }
}

#[test]
fn what_serde_repeats_of_a_long_value_is_bounded() {
    let long = "y".repeat(10_000);
    let initialize = |params: Value| {
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}).to_string()
    };
    let client = json!({"name": "c", "version": "0"});
    for line in [
        initialize(
            json!({"protocolVersion": "2025-11-25", "capabilities": long, "clientInfo": client}),
        ),
        initialize(
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": long}),
        ),
    ] {
        let answer = answered(&line);
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.chars().count() < 200, "{message}");
        assert!(!message.contains(&long), "{message}");
    }
}

#[tokio::test]
async fn lines_are_read_whole_and_an_oversized_one_is_skipped_unkept() {
    let input = format!("one\r\n{}\ntwo\n\nthree", "x".repeat(100));
    let mut lines = BoundedLines::new(input.as_bytes(), 10);
    assert_eq!(lines.next().await, Line::Whole(b"one\r".to_vec()));
    assert_eq!(lines.next().await, Line::Oversized);
    assert_eq!(lines.next().await, Line::Whole(b"two".to_vec()));
    assert_eq!(lines.next().await, Line::Whole(Vec::new()));
    // A last line without its newline is dropped, as rmcp drops it.
    assert_eq!(lines.next().await, Line::End);
    // Exactly the bound fits.
    let mut lines = BoundedLines::new(&b"0123456789\n01234567890\n"[..], 10);
    assert_eq!(lines.next().await, Line::Whole(b"0123456789".to_vec()));
    assert_eq!(lines.next().await, Line::Oversized);
    assert_eq!(lines.next().await, Line::End);
}

/// The filter end to end, rmcp played by the test: what rmcp should read reaches it unchanged,
/// the filter's answers and rmcp's lines reach the client whole, and the end of the client's
/// input is the end of rmcp's.
#[tokio::test]
async fn the_filter_forwards_answers_and_ends_with_its_input() {
    let (mut client, server_input) = duplex(1024);
    let (server_output, client_reads) = duplex(1024);
    let ((mut rmcp_reads, mut rmcp_writes), wire) = filter(server_input, server_output);
    let ping = r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#;
    client
        .write_all(format!("garbage\n{ping}\n").as_bytes())
        .await
        .unwrap();
    let mut forwarded = vec![0; ping.len() + 1];
    rmcp_reads.read_exact(&mut forwarded).await.unwrap();
    assert_eq!(forwarded, format!("{ping}\n").as_bytes());
    rmcp_writes
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n")
        .await
        .unwrap();
    drop(client);
    let mut rest = Vec::new();
    rmcp_reads.read_to_end(&mut rest).await.unwrap();
    assert!(rest.is_empty(), "{rest:?}");
    drop(rmcp_writes);
    wire.finish(Duration::from_secs(5)).await;
    let mut said = String::new();
    let mut client_reads = client_reads;
    client_reads.read_to_string(&mut said).await.unwrap();
    let lines: Vec<Value> = said
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{said}");
    assert_eq!(lines[0]["error"]["code"], -32700, "{said}");
    assert_eq!(lines[1]["id"], 7, "{said}");
}
