//! The line filter between `rl mcp`'s real stdin/stdout and rmcp (issue 45).
//!
//! rmcp 3.9's stdio transport drops a line that is not JSON (or nests deeper than serde_json's
//! recursion limit of 128) without a word, so the client waits until its timeout; and a request
//! for a method rmcp knows whose params do not fit its types (`tools/call` with `arguments: [1]`,
//! `tasks/get` with `taskId: 5`) falls through to rmcp's catch-all and is answered -32601
//! "Method not found". So every line from the client passes through here first: a line that
//! does not parse is answered -32700 with `"id": null` (the id cannot be read), a line longer
//! than [`MAX_LINE_BYTES`] is answered -32600 with `"id": null` without being buffered, a
//! request whose params do not fit is answered -32602 with its own id, and every other line
//! goes to rmcp unchanged through an in-memory pipe. What rmcp writes comes back through
//! another pipe; it and the filter's own answers reach stdout through one lock, one whole line
//! at a time, so lines never interleave. A notification (no id) is never answered.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CancelTaskRequest, GetTaskRequest, InitializeRequest, ListToolsRequest,
    PingRequest, UpdateTaskRequest,
};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::io::{
    AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream, duplex,
};
use tokio::sync::Mutex;
use tokio::task::JoinHandle;

/// The longest line (one JSON-RPC message) read from the client: tool arguments are a few
/// kilobytes at most, so 4 MiB is generous, and it keeps a client that never sends a newline
/// from making the server buffer without end (rmcp's own cap, 16 MiB, stays behind it).
pub(super) const MAX_LINE_BYTES: usize = 4 * 1024 * 1024;

/// The buffer of each in-memory pipe to and from rmcp.
const PIPE_BYTES: usize = 64 * 1024;

/// What becomes of one line from the client.
#[derive(Debug, PartialEq)]
enum Verdict {
    /// rmcp reads it as it came.
    Forward,
    /// The filter answers it with this message; rmcp never sees it.
    Answer(Value),
    /// Nothing: a blank line, or a malformed notification (JSON-RPC answers no notification).
    Ignore,
}

fn error_answer(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const INVALID_PARAMS: i64 = -32602;

/// The answer to a line longer than [`MAX_LINE_BYTES`]: its id was never read.
fn oversized_answer() -> Value {
    error_answer(
        &Value::Null,
        INVALID_REQUEST,
        &format!(
            "Invalid Request: a message longer than {MAX_LINE_BYTES} bytes (the most rl mcp reads \
             as one line); it was dropped unread"
        ),
    )
}

fn judge(line: &[u8]) -> Verdict {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    // RFC 8259 lets a parser ignore a leading byte order mark; rmcp does.
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Verdict::Ignore;
    }
    let message: Value = match serde_json::from_slice(line) {
        Ok(message) => message,
        Err(error) => {
            return Verdict::Answer(error_answer(
                &Value::Null,
                PARSE_ERROR,
                &format!("Parse error: the message is not JSON ({error})"),
            ));
        }
    };
    let Some(method) = message.get("method").and_then(Value::as_str) else {
        return Verdict::Forward;
    };
    let Some(problem) = params_problem(method, &message) else {
        return Verdict::Forward;
    };
    match message.get("id") {
        Some(id @ (Value::String(_) | Value::Number(_))) => Verdict::Answer(error_answer(
            id,
            INVALID_PARAMS,
            &format!("Invalid params for {method}: {problem}"),
        )),
        None => Verdict::Ignore,
        // An id JSON-RPC does not allow: rmcp answers that as an invalid request.
        Some(_) => Verdict::Forward,
    }
}

/// What is wrong with the params of `message`, a request for `method`, when it is one of the
/// methods rmcp types and `message` does not fit rmcp's type for it (rmcp would answer
/// "Method not found"). The common mistakes are named; anything else gets serde's words.
fn params_problem(method: &str, message: &Value) -> Option<String> {
    const TYPED: [&str; 7] = [
        "initialize",
        "ping",
        "tools/list",
        "tools/call",
        "tasks/get",
        "tasks/cancel",
        "tasks/update",
    ];
    if !TYPED.contains(&method) {
        return None;
    }
    let params = message.get("params").filter(|params| !params.is_null());
    if params.is_some_and(|params| !params.is_object()) {
        return Some("`params` must be a JSON object".to_owned());
    }
    let field = |name: &str| params.and_then(|params| params.get(name));
    let task_id = || {
        (!field("taskId").is_some_and(Value::is_string))
            .then(|| "`taskId` must be a string: the id of a task this server gave".to_owned())
    };
    match method {
        "initialize" => fits::<InitializeRequest>(message),
        "ping" => fits::<PingRequest>(message),
        "tools/list" => fits::<ListToolsRequest>(message),
        "tools/call" => {
            if !field("name").is_some_and(Value::is_string) {
                return Some("`name` must be a string: the tool to call".to_owned());
            }
            if field("arguments")
                .is_some_and(|arguments| !arguments.is_object() && !arguments.is_null())
            {
                return Some(
                    "`arguments` must be a JSON object: the tool's parameters by name".to_owned(),
                );
            }
            fits::<CallToolRequest>(message)
        }
        "tasks/get" => task_id().or_else(|| fits::<GetTaskRequest>(message)),
        "tasks/cancel" => task_id().or_else(|| fits::<CancelTaskRequest>(message)),
        "tasks/update" => task_id().or_else(|| {
            if field("inputResponses").is_some_and(Value::is_object) {
                fits::<UpdateTaskRequest>(message)
            } else {
                Some("`inputResponses` must be a JSON object".to_owned())
            }
        }),
        _ => None,
    }
}

/// serde's reason `message` is not a `T`, bounded (serde repeats the values it refuses).
fn fits<T: DeserializeOwned>(message: &Value) -> Option<String> {
    T::deserialize(message)
        .err()
        .map(|error| rl_settings::with_quotes_bounded(&error.to_string()))
}

/// One line read with a bound on its length.
#[derive(Debug, PartialEq)]
enum Line {
    /// A whole line, without its newline (the last one of the input may lack it).
    Whole(Vec<u8>),
    /// A line longer than the bound: its bytes were skipped to its newline, never kept.
    Oversized,
    /// The input ended (or failed).
    End,
}

/// Reads `input` line by line, keeping at most `max` bytes of a line.
struct BoundedLines<R> {
    input: BufReader<R>,
    max: usize,
}

impl<R: AsyncRead + Unpin> BoundedLines<R> {
    fn new(input: R, max: usize) -> Self {
        Self {
            input: BufReader::new(input),
            max,
        }
    }

    async fn next(&mut self) -> Line {
        let mut line = Vec::new();
        let mut oversized = false;
        loop {
            let (taken, ended) = {
                let Ok(available) = self.input.fill_buf().await else {
                    return Line::End;
                };
                if available.is_empty() {
                    // rmcp drops a last line without its newline too; keep to that.
                    return Line::End;
                }
                let newline = available.iter().position(|byte| *byte == b'\n');
                let part = &available[..newline.unwrap_or(available.len())];
                if !oversized && line.len() + part.len() > self.max {
                    oversized = true;
                    line = Vec::new();
                }
                if !oversized {
                    line.extend_from_slice(part);
                }
                (
                    newline.map_or(available.len(), |at| at + 1),
                    newline.is_some(),
                )
            };
            self.input.consume(taken);
            if ended {
                return if oversized {
                    Line::Oversized
                } else {
                    Line::Whole(line)
                };
            }
        }
    }
}

/// Standard output, shared by the filter and the pump from rmcp.
type Output<W> = Arc<Mutex<W>>;

/// Writes `line` and a newline as one piece, flushed.
async fn write_line<W: AsyncWrite + Unpin>(output: &Output<W>, line: &[u8]) -> std::io::Result<()> {
    let mut output = output.lock().await;
    output.write_all(line).await?;
    if !line.ends_with(b"\n") {
        output.write_all(b"\n").await?;
    }
    output.flush().await
}

/// The tasks moving lines between the client and rmcp.
pub(super) struct Wire {
    reading: JoinHandle<()>,
    pumping: JoinHandle<()>,
}

impl Wire {
    /// Once rmcp's session is over: stops reading the client, and waits (at most `grace`) for
    /// what rmcp wrote last to reach the client.
    pub(super) async fn finish(self, grace: Duration) {
        self.reading.abort();
        let _ = tokio::time::timeout(grace, self.pumping).await;
    }
}

/// Puts the filter between `input`/`output` (the client) and rmcp: returns the reader and
/// writer rmcp serves on, and the tasks that move the lines. When `input` ends, rmcp reads the
/// end of its input, as it would from stdin.
pub(super) fn filter<R, W>(input: R, output: W) -> ((DuplexStream, DuplexStream), Wire)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (to_rmcp, rmcp_reads) = duplex(PIPE_BYTES);
    let (rmcp_writes, from_rmcp) = duplex(PIPE_BYTES);
    let output = Arc::new(Mutex::new(output));
    let reading = tokio::spawn(read_client(input, to_rmcp, output.clone()));
    let pumping = tokio::spawn(pump(from_rmcp, output));
    ((rmcp_reads, rmcp_writes), Wire { reading, pumping })
}

/// Reads the client's lines until its input ends, answering or forwarding each; then drops
/// the pipe to rmcp, which is rmcp's end of input.
async fn read_client<R, W>(input: R, mut to_rmcp: DuplexStream, output: Output<W>)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut lines = BoundedLines::new(input, MAX_LINE_BYTES);
    loop {
        let answer = match lines.next().await {
            Line::End => return,
            Line::Oversized => oversized_answer(),
            Line::Whole(mut line) => match judge(&line) {
                Verdict::Ignore => continue,
                Verdict::Answer(answer) => answer,
                Verdict::Forward => {
                    line.push(b'\n');
                    // rmcp is gone: the session is over.
                    if to_rmcp.write_all(&line).await.is_err() {
                        return;
                    }
                    continue;
                }
            },
        };
        // The client is gone: so is the session.
        if write_line(&output, answer.to_string().as_bytes())
            .await
            .is_err()
        {
            return;
        }
    }
}

/// Copies rmcp's lines to the client, each whole, until rmcp closes its output.
async fn pump<W: AsyncWrite + Unpin>(from_rmcp: DuplexStream, output: Output<W>) {
    let mut from_rmcp = BufReader::new(from_rmcp);
    let mut line = Vec::new();
    loop {
        line.clear();
        match from_rmcp.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if write_line(&output, &line).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests;
