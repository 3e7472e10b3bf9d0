//! Writing to the terminal. Writes go through `io::Write` so a closed pipe (`rl … | head`)
//! ends quietly instead of panicking.

use std::io::Write;

use comfy_table::{ContentArrangement, Table, presets};
use serde::Serialize;

pub(crate) fn json<T: Serialize>(value: &T) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut stdout, value)?;
    ignore_broken_pipe(writeln!(stdout))
}

/// One line of JSON, for agents that read a long report in one go.
pub(crate) fn json_compact<T: Serialize>(value: &T) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    serde_json::to_writer(&mut stdout, value)?;
    ignore_broken_pipe(writeln!(stdout))
}

pub(crate) fn line(text: impl std::fmt::Display) -> anyhow::Result<()> {
    ignore_broken_pipe(writeln!(std::io::stdout().lock(), "{text}"))
}

pub(crate) fn table(header: &[&str]) -> Table {
    let mut table = Table::new();
    table
        .load_preset(presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(header.iter().copied());
    table
}

/// Errors go to stderr as a sentence, or with `--json` to stdout as `{"error": ...}` so agents
/// read one stream.
pub(crate) fn error(error: &anyhow::Error, as_json: bool) {
    let message = format!("{error:#}");
    if as_json {
        let _ = json(&serde_json::json!({ "error": message }));
    } else {
        let _ = writeln!(std::io::stderr().lock(), "error: {message}");
    }
}

/// A problem worth knowing that does not stop the command; stderr, so JSON on stdout stays clean.
pub(crate) fn warning(message: &str) {
    let _ = writeln!(std::io::stderr().lock(), "warning: {message}");
}

fn ignore_broken_pipe(result: std::io::Result<()>) -> anyhow::Result<()> {
    match result {
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}
