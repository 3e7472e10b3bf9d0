//! Writing to the terminal. Writes go through `io::Write` so a closed pipe (`rl … | head`)
//! ends quietly instead of panicking.

use std::io::{IsTerminal, Write};
use std::sync::OnceLock;

use comfy_table::{Cell, Color, ContentArrangement, Table, presets};
use serde::Serialize;

/// A failure the command has already shown (a failed health check, a tool's error answer):
/// only its exit code is left to give.
#[derive(Debug)]
pub(crate) struct AlreadyReported(pub(crate) u8);

impl std::fmt::Display for AlreadyReported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the command failed (see above)")
    }
}

impl std::error::Error for AlreadyReported {}

/// The exit code a script reads after a wait. A wait is not a run: a run that failed, was
/// stopped or was lost is not a success to wait for, and a timeout is not an arrival.
const ENDED_UNCOMPLETED: u8 = 3;
const TIMED_OUT: u8 = 4;

/// How a wait for a run ends, for scripts: 0 (`Ok`) reached, 3 the run ended without
/// completing, 4 timed out.
pub(crate) fn wait_ended(state: rl_process::RunState, timed_out: bool) -> anyhow::Result<()> {
    let code = if state.is_finished() && state != rl_process::RunState::Completed {
        ENDED_UNCOMPLETED
    } else if timed_out {
        TIMED_OUT
    } else {
        return Ok(());
    };
    Err(anyhow::Error::new(AlreadyReported(code)))
}

/// What a coloured cell says at a glance.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Tone {
    Good,
    Busy,
    Bad,
    Quiet,
}

/// Colour only for a person at a terminal who has not asked for none (https://no-color.org).
pub(crate) fn colour() -> bool {
    static COLOUR: OnceLock<bool> = OnceLock::new();
    *COLOUR.get_or_init(|| {
        std::env::var_os("NO_COLOR").is_none_or(|value| value.is_empty())
            && std::io::stdout().is_terminal()
    })
}

pub(crate) fn cell(text: impl std::fmt::Display) -> Cell {
    Cell::new(text)
}

pub(crate) fn toned(text: impl std::fmt::Display, tone: Tone) -> Cell {
    let cell = Cell::new(text);
    if !colour() {
        return cell;
    }
    match tone {
        Tone::Good => cell.fg(Color::Green),
        Tone::Busy => cell.fg(Color::Cyan),
        Tone::Bad => cell.fg(Color::Red),
        Tone::Quiet => cell.fg(Color::DarkGrey),
    }
}

/// The tone of a run state's name.
pub(crate) fn state_tone(state: &str) -> Tone {
    match state {
        "completed" | "running" => Tone::Good,
        "failed" | "lost" => Tone::Bad,
        // Capped: ended where the operator's or the agent's caps said, its state saved.
        "stopped" | "capped" => Tone::Quiet,
        _ => Tone::Busy,
    }
}

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

/// An environment's name as people read it, with its kind unless it is Atropos (the kind of
/// every run and environment before verifiers) or unknown: `digit-sum (verifiers-v1)`.
pub(crate) fn environment_label(name: &str, kind: Option<rl_settings::EnvironmentKind>) -> String {
    match kind {
        Some(kind) if kind != rl_settings::EnvironmentKind::Atropos => format!("{name} ({kind})"),
        _ => name.to_owned(),
    }
}

/// The losses the configured engine takes, under a heading saying where that is known from
/// (`rl doctor`, `rl config show`).
pub(crate) fn loss_table(losses: &rl_tools::LossTable) -> anyhow::Result<()> {
    line(losses.heading())?;
    let mut table = table(&["loss", "", "settings", "note"]);
    for row in &losses.losses {
        let (mark, tone) = if row.taken {
            ("taken", Tone::Good)
        } else {
            ("refused", Tone::Quiet)
        };
        let settings = if row.settings.is_empty() {
            "-".to_owned()
        } else {
            row.settings.join(", ")
        };
        table.add_row([
            cell(row.loss),
            toned(mark, tone),
            cell(settings),
            cell(row.note.as_deref().unwrap_or_default()),
        ]);
    }
    line(table)
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
    if !colour() {
        table.force_no_tty();
    }
    table
}

/// Errors go to stderr as a sentence, or with `--json` to stdout in the tools' shape
/// (`{"error", "kind", "hint", ...}`) so agents read one stream.
pub(crate) fn error(error: anyhow::Error, as_json: bool, tools: Option<&rl_tools::Tools>) {
    if as_json {
        let _ = json(&error_json(error, tools));
    } else {
        let _ = writeln!(
            std::io::stderr().lock(),
            "error: {}",
            for_people(&message(&error))
        );
    }
}

pub(crate) use crate::as_commands::for_people;

/// A message of an operation, as a person reads it (see [`for_people`]).
pub(crate) fn say(text: &str) -> anyhow::Result<()> {
    line(for_people(text))
}

/// The error and its causes, each said once: an error that shows its source in its own text
/// (`cannot open X: Not a directory`) would otherwise repeat it.
pub(crate) fn message(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let said = cause.to_string();
        if text.contains(&said) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&said);
    }
    text
}

/// The tools' error answer for an error of any layer, its message the whole chain of context.
pub(crate) fn error_json(
    error: anyhow::Error,
    tools: Option<&rl_tools::Tools>,
) -> serde_json::Value {
    let message = message(&error);
    let answer = match as_tools_error(error) {
        Ok(error) => rl_tools::ErrorAnswer {
            error: message,
            ..rl_tools::ErrorAnswer::of(&error, tools)
        },
        // Not of any layer below: the command line's own refusal.
        Err(_) => rl_tools::ErrorAnswer::of_command(message),
    };
    serde_json::to_value(&answer)
        .unwrap_or_else(|error| serde_json::json!({"error": error.to_string()}))
}

/// The error of the tools, so every face gives the same advice; the command goes through them
/// for everything below.
fn as_tools_error(error: anyhow::Error) -> Result<rl_tools::ToolsError, anyhow::Error> {
    error.downcast::<rl_tools::ToolsError>()
}

/// What a long command is doing, for a log or a pipe (a terminal gets a spinner instead).
pub(crate) fn progress(message: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{}", for_people(message));
}

/// A problem worth knowing that does not stop the command; stderr, so JSON on stdout stays clean.
pub(crate) fn warning(message: &str) {
    let _ = writeln!(std::io::stderr().lock(), "warning: {}", for_people(message));
}

fn ignore_broken_pipe(result: std::io::Result<()>) -> anyhow::Result<()> {
    match result {
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

#[cfg(test)]
mod tests {
    #[derive(Debug, thiserror::Error)]
    #[error("cannot open x.lock: {source}")]
    struct Opening {
        #[source]
        source: std::io::Error,
    }

    #[test]
    fn each_cause_is_said_once() {
        let io = std::io::Error::other("Not a directory");
        let error = anyhow::Error::new(Opening { source: io }).context("state directory /dev/null");
        assert_eq!(
            super::message(&error),
            "state directory /dev/null: cannot open x.lock: Not a directory"
        );
    }
}
