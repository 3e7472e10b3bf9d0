//! `rollouts/step_NNNNNN.jsonl`, which rl's trainer keeps in the run folder for its newest
//! steps: one row per completion of the step's batch (`group`, `index`, `prompt`,
//! `completion`, `score`, `advantage`, `skipped`, `skip_reason`, …; `rollout`, whose branch a
//! completion is, and `messages`, the conversation, when the environment sent them). Read for
//! people to look at what the model wrote, so never trusted: files, rows and texts are read up
//! to a bound, a line that is not such a row is skipped with a warning.

use std::io::{BufRead as _, BufReader, Read as _};
use std::path::Path;

use serde_json::Value;

use rl_settings::RunFolder;

use crate::error::MetricsError;

mod messages;

use messages::{Cutter, messages_of};
pub use messages::{MAX_ROLLOUT_MESSAGES, MAX_TOOL_CALLS, RolloutMessage, ToolCall};

/// Bytes of one step's file read at most.
pub const MAX_ROLLOUT_BYTES: u64 = 8 * 1024 * 1024;
/// Rows of one step returned at most.
pub const MAX_ROLLOUT_ROWS: usize = 1024;
/// Characters of one prompt or completion kept at most.
pub const MAX_ROLLOUT_TEXT: usize = 16 * 1024;

/// One completion as the trainer recorded it; a skipped group without completions has no
/// index, prompt or completion.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RolloutRow {
    pub group: Option<i64>,
    pub index: Option<i64>,
    pub prompt: Option<String>,
    pub completion: Option<String>,
    pub score: Option<f64>,
    pub advantage: Option<f64>,
    pub skipped: bool,
    pub skip_reason: Option<String>,
    /// The rollout this completion is a branch of (a verifiers environment's, whose rollout
    /// may give several).
    pub rollout: Option<i64>,
    /// The conversation the environment sent with it, turn by turn; `None` when it sent none.
    pub messages: Option<Vec<RolloutMessage>>,
}

/// One step's rows, and what could not be read of them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StepRollouts {
    pub step: i64,
    pub rows: Vec<RolloutRow>,
    /// The file, a row or a text went past its bound and was cut.
    pub truncated: bool,
    pub warnings: Vec<String>,
}

/// The steps whose rollouts the run kept, oldest first.
pub fn rollout_steps(run_dir: &Path) -> Vec<i64> {
    let Ok(entries) = std::fs::read_dir(RunFolder::at(run_dir).rollouts()) else {
        return Vec::new();
    };
    let mut steps: Vec<i64> = entries
        .filter_map(Result::ok)
        .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_file()))
        .filter_map(|entry| step_of(&entry.file_name().to_string_lossy()))
        .collect();
    steps.sort_unstable();
    steps
}

/// `step_000012.jsonl` → 12.
fn step_of(name: &str) -> Option<i64> {
    let digits = name.strip_prefix("step_")?.strip_suffix(".jsonl")?;
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// The rows of `step`; `Ok(None)` when the run kept none for it (or kept something that is no
/// regular file there: a FIFO would block the read for good).
///
/// Read a line at a time, within [`MAX_ROLLOUT_BYTES`] of the file: what is held is the rows
/// kept and the line being read, never the file (`rl serve` answers many such reads at once).
pub fn read_rollouts(run_dir: &Path, step: i64) -> Result<Option<StepRollouts>, MetricsError> {
    let path = RunFolder::at(run_dir)
        .rollouts()
        .join(format!("step_{step:06}.jsonl"));
    let io_error = |action: &'static str| {
        let path = path.clone();
        move |source| MetricsError::Io {
            action,
            path,
            source,
        }
    };
    match std::fs::metadata(&path) {
        Ok(metadata) if metadata.is_file() => {}
        Ok(_) => return Ok(None),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(io_error("open")(source)),
    }
    let file = std::fs::File::open(&path).map_err(io_error("open"))?;
    if !file.metadata().is_ok_and(|metadata| metadata.is_file()) {
        return Ok(None);
    }
    let mut reader = BufReader::new(file).take(MAX_ROLLOUT_BYTES);
    let mut rollouts = StepRollouts {
        step,
        ..StepRollouts::default()
    };
    let mut line = Vec::new();
    let mut number = 0;
    loop {
        line.clear();
        number += 1;
        let read = reader
            .read_until(b'\n', &mut line)
            .map_err(io_error("read"))?;
        // At the bound with more to come: the line being read is cut, and dropped.
        let cut = read == 0 || line.last() != Some(&b'\n');
        if cut && reader.limit() == 0 && more_to_read(reader.get_mut()).map_err(io_error("read"))? {
            rollouts.truncated = true;
            break;
        }
        if read == 0 {
            break;
        }
        if line.trim_ascii().is_empty() {
            continue;
        }
        if rollouts.rows.len() == MAX_ROLLOUT_ROWS {
            rollouts.truncated = true;
            break;
        }
        let text = String::from_utf8_lossy(&line);
        // serde_json refuses nesting past 128 levels, so a hostile line cannot exhaust the stack.
        match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(row)) => {
                let (row, cut) = row_of(&row);
                rollouts.truncated |= cut;
                rollouts.rows.push(row);
            }
            Ok(_) | Err(_) => rollouts.warnings.push(format!(
                "line {number} of step {step}'s rollouts is not a rollout row; skipped"
            )),
        }
    }
    Ok(Some(rollouts))
}

/// Whether a read would give another byte (it takes it).
fn more_to_read(reader: &mut impl std::io::Read) -> std::io::Result<bool> {
    let mut byte = [0_u8; 1];
    Ok(reader.read(&mut byte)? > 0)
}

fn row_of(row: &serde_json::Map<String, Value>) -> (RolloutRow, bool) {
    let mut cutter = Cutter::default();
    let mut text = |key: &str| Some(cutter.text(row.get(key)?.as_str()?));
    let prompt = text("prompt");
    let completion = text("completion");
    let skip_reason = text("skip_reason");
    let messages = row
        .get("messages")
        .and_then(|messages| messages_of(messages, &mut cutter));
    let number = |key: &str| {
        row.get(key)
            .and_then(Value::as_f64)
            .filter(|v| v.is_finite())
    };
    let row = RolloutRow {
        group: row.get("group").and_then(Value::as_i64),
        index: row.get("index").and_then(Value::as_i64),
        prompt,
        completion,
        score: number("score"),
        advantage: number("advantage"),
        skipped: row.get("skipped").and_then(Value::as_bool).unwrap_or(false),
        skip_reason,
        rollout: row.get("rollout").and_then(Value::as_i64),
        messages,
    };
    (row, cutter.cut)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_with(files: &[(&str, &[u8])]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(RunFolder::at(dir.path()).rollouts()).unwrap();
        for (name, bytes) in files {
            std::fs::write(RunFolder::at(dir.path()).rollouts().join(name), bytes).unwrap();
        }
        dir
    }

    #[test]
    fn rows_are_read_and_steps_listed() {
        let run = run_with(&[
            (
                "step_000002.jsonl",
                b"{\"group\": 0, \"index\": 1, \"prompt\": \"<script>alert(1)</script>\", \"completion\": \"42\", \"score\": 1.0, \"advantage\": 0.5, \"skipped\": false}\n{\"group\": 1, \"index\": null, \"skipped\": true, \"skip_reason\": \"all scores equal\"}\n",
            ),
            ("step_000010.jsonl", b""),
            ("notes.txt", b"x"),
            ("step_.jsonl", b""),
        ]);
        assert_eq!(rollout_steps(run.path()), [2, 10]);
        let read = read_rollouts(run.path(), 2).unwrap().unwrap();
        assert_eq!(read.rows.len(), 2);
        assert_eq!(
            read.rows[0].prompt.as_deref(),
            Some("<script>alert(1)</script>")
        );
        assert!(read.rows[1].skipped && read.rows[1].index.is_none());
        assert_eq!(read_rollouts(run.path(), 3).unwrap(), None);
    }

    /// A verifiers environment's row: whose branch it is, and its conversation.
    #[test]
    fn a_rows_rollout_and_conversation_are_read() {
        let run = run_with(&[(
            "step_000001.jsonl",
            b"{\"group\": 0, \"index\": 1, \"rollout\": 0, \"prompt\": \"p\", \"completion\": \"c\", \"messages\": [{\"role\": \"user\", \"content\": \"2+2?\"}, {\"role\": \"assistant\", \"content\": \"4\"}]}\n{\"group\": 0, \"index\": 2, \"messages\": \"no list\"}\n",
        )]);
        let read = read_rollouts(run.path(), 1).unwrap().unwrap();
        assert_eq!(read.rows[0].rollout, Some(0));
        let messages = read.rows[0].messages.as_ref().unwrap();
        assert_eq!(
            messages
                .iter()
                .map(|m| (m.role.as_str(), m.content.as_str()))
                .collect::<Vec<_>>(),
            [("user", "2+2?"), ("assistant", "4")]
        );
        assert_eq!(
            (read.rows[1].rollout, &read.rows[1].messages),
            (None, &None)
        );
        assert!(!read.truncated && read.warnings.is_empty());
    }

    #[test]
    fn hostile_files_are_bounded_and_never_trusted() {
        let nested = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        let long = "x".repeat(MAX_ROLLOUT_TEXT + 10);
        let mut text = format!("{nested}\n\u{0}\u{1}not json\n");
        text.push_str(&format!(
            "{{\"prompt\": \"{long}\", \"score\": \"high\"}}\n"
        ));
        let mut bytes = text.into_bytes();
        bytes.extend_from_slice(b"{\"completion\": \"caf\xe9\"}\n");
        let run = run_with(&[("step_000001.jsonl", &bytes)]);
        let read = read_rollouts(run.path(), 1).unwrap().unwrap();
        assert_eq!(read.warnings.len(), 2, "{:?}", read.warnings);
        assert_eq!(read.rows.len(), 2);
        assert!(read.truncated);
        assert_eq!(
            read.rows[0].prompt.as_ref().map(|p| p.chars().count()),
            Some(MAX_ROLLOUT_TEXT)
        );
        assert_eq!(read.rows[0].score, None);
        assert_eq!(read.rows[1].completion.as_deref(), Some("caf\u{fffd}"));

        let many = (0..MAX_ROLLOUT_ROWS + 5).fold(String::new(), |mut text, i| {
            text.push_str(&format!("{{\"index\": {i}}}\n"));
            text
        });
        let huge = "y".repeat(usize::try_from(MAX_ROLLOUT_BYTES).unwrap());
        let run = run_with(&[
            ("step_000002.jsonl", many.as_bytes()),
            (
                "step_000003.jsonl",
                format!("{{\"prompt\": \"a\"}}\n{huge}\n").as_bytes(),
            ),
        ]);
        let read = read_rollouts(run.path(), 2).unwrap().unwrap();
        assert_eq!(read.rows.len(), MAX_ROLLOUT_ROWS);
        assert!(read.truncated);
        let read = read_rollouts(run.path(), 3).unwrap().unwrap();
        assert_eq!(read.rows.len(), 1);
        assert!(read.truncated);
    }

    /// A line that ends exactly at the bound is kept, and what follows it is said to be cut.
    #[test]
    fn the_byte_bound_keeps_whole_lines() {
        let bound = usize::try_from(MAX_ROLLOUT_BYTES).unwrap();
        let head = "{\"prompt\": \"";
        let tail = "\"}\n";
        let filler = "z".repeat(bound - head.len() - tail.len());
        let exact = format!("{head}{filler}{tail}");
        let run = run_with(&[
            ("step_000001.jsonl", exact.as_bytes()),
            (
                "step_000002.jsonl",
                format!("{exact}{{\"index\": 1}}\n").as_bytes(),
            ),
        ]);
        let read = read_rollouts(run.path(), 1).unwrap().unwrap();
        assert_eq!((read.rows.len(), read.truncated), (1, true), "cut text");
        let read = read_rollouts(run.path(), 2).unwrap().unwrap();
        assert_eq!(read.rows.len(), 1);
        assert!(read.truncated, "the row past the bound is not read");
    }

    /// Something other than a file in a step's place is no rollouts, and never blocks the read.
    #[test]
    fn a_fifo_is_no_rollouts() {
        let run = run_with(&[]);
        let fifo = RunFolder::at(run.path())
            .rollouts()
            .join("step_000004.jsonl");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        assert_eq!(read_rollouts(run.path(), 4).unwrap(), None);
        std::fs::create_dir(
            RunFolder::at(run.path())
                .rollouts()
                .join("step_000005.jsonl"),
        )
        .unwrap();
        assert_eq!(read_rollouts(run.path(), 5).unwrap(), None);
    }
}
