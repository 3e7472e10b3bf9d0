//! The last lines of a log, read from its end: a component's log grows for hours, and showing
//! its tail must cost what the tail costs, not what the log does. A capped log's files are read
//! as the one log they make (head, marker, latest output), so its tail is its latest lines.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::capped_log::{previous_tail_path, tail_path};

/// The first read from the end; most tails fit in it.
const FIRST_WINDOW: u64 = 64 * 1024;
/// The most read for one tail: the first line of a tail that does not fit is cut at its start.
const LARGEST_WINDOW: u64 = 4 * 1024 * 1024;

/// The last lines of a log.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LogTail {
    pub lines: Vec<String>,
    /// Whether the log has lines before these.
    pub earlier: bool,
}

/// The last `count` lines of the log at `path` (with its tail files, once capped), invalid UTF-8
/// replaced. A missing log is an error of kind `NotFound`, for the caller to read as "nothing
/// written yet" where it is.
pub fn read_log_tail(path: &Path, count: usize) -> std::io::Result<LogTail> {
    let mut log = LogFiles::open(path)?;
    let length = log.length;
    let mut window = FIRST_WINDOW;
    loop {
        let start = length.saturating_sub(window);
        let bytes = log.read_from(start)?;
        let mut lines: Vec<&[u8]> = bytes.split(|&byte| byte == b'\n').collect();
        // A final newline ends the last line; it does not begin another.
        if lines.last().is_some_and(|line| line.is_empty()) {
            lines.pop();
        }
        // Unless the window reaches the start, its first line is the end of a longer one; once
        // the window can grow no more, that end is shown rather than nothing.
        let whole = if start == 0 || window >= LARGEST_WINDOW {
            &lines[..]
        } else {
            &lines[1.min(lines.len())..]
        };
        if whole.len() > count || start == 0 || window >= LARGEST_WINDOW {
            let first = whole.len().saturating_sub(count);
            return Ok(LogTail {
                lines: whole[first..]
                    .iter()
                    .map(|line| {
                        let line = line.strip_suffix(b"\r").unwrap_or(line);
                        String::from_utf8_lossy(line).into_owned()
                    })
                    .collect(),
                earlier: first > 0 || start > 0,
            });
        }
        window = window.saturating_mul(4).min(LARGEST_WINDOW);
    }
}

/// A log's files, opened at once and read as one: their lengths as they were when opened.
struct LogFiles {
    files: Vec<(File, u64)>,
    length: u64,
}

impl LogFiles {
    fn open(head: &Path) -> std::io::Result<Self> {
        let mut opened = vec![File::open(head)?];
        // The current tail before the older one: a rotation between the two opens then shows
        // the same file twice (recognised by its inode), never loses one.
        let tail = File::open(tail_path(head)).ok();
        let previous = File::open(previous_tail_path(head)).ok();
        let inode = |file: &File| file.metadata().map(|metadata| metadata.ino()).ok();
        if let Some(previous) = previous
            && tail.as_ref().and_then(inode) != inode(&previous)
        {
            opened.push(previous);
        }
        opened.extend(tail);
        let mut files = Vec::with_capacity(opened.len());
        for file in opened {
            let length = file.metadata()?.len();
            files.push((file, length));
        }
        let length = files.iter().map(|(_, length)| length).sum();
        Ok(Self { files, length })
    }

    /// Everything from `start` (counted over all the files) to the end.
    fn read_from(&mut self, start: u64) -> std::io::Result<Vec<u8>> {
        let mut bytes = Vec::new();
        let mut offset = 0;
        for (file, length) in &mut self.files {
            let end = offset + *length;
            if end > start {
                let from = start.saturating_sub(offset);
                file.seek(SeekFrom::Start(from))?;
                file.by_ref().take(*length - from).read_to_end(&mut bytes)?;
            }
            offset = end;
        }
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tail_of(text: &[u8], count: usize) -> LogTail {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        std::fs::write(&path, text).unwrap();
        read_log_tail(&path, count).unwrap()
    }

    #[test]
    fn the_last_lines_and_whether_any_precede_them() {
        let tail = tail_of(b"one\ntwo\r\nthree\n", 2);
        assert_eq!(tail.lines, ["two", "three"]);
        assert!(tail.earlier);
        let all = tail_of(b"one\ntwo", 5);
        assert_eq!(all.lines, ["one", "two"]);
        assert!(!all.earlier);
        assert_eq!(tail_of(b"", 5), LogTail::default());
    }

    #[test]
    fn a_long_log_is_read_from_its_end_past_the_first_window() {
        // Lines longer than the first window: the window grows until the tail is whole.
        let line = "x".repeat(50_000);
        let text = format!("first\n{line}\n{line}\n{line}\nlast\n");
        let tail = tail_of(text.as_bytes(), 3);
        assert_eq!(tail.lines.len(), 3);
        assert_eq!(tail.lines[0], line);
        assert_eq!(tail.lines[2], "last");
        assert!(tail.earlier);
    }

    #[test]
    fn a_line_longer_than_the_largest_window_is_cut_not_read_whole() {
        let giant = "y".repeat(usize::try_from(LARGEST_WINDOW).unwrap() + 10);
        let tail = tail_of(format!("{giant}\nend\n").as_bytes(), 2);
        assert_eq!(tail.lines.len(), 2);
        assert!(tail.lines[0].len() < giant.len() && tail.lines[0].starts_with('y'));
        assert_eq!(tail.lines[1], "end");
        assert!(tail.earlier);
        // A log that is one endless line (a progress bar rewriting itself) still shows its end.
        let endless = tail_of(giant.as_bytes(), 5);
        assert_eq!(endless.lines.len(), 1);
        assert!(!endless.lines[0].is_empty());
    }

    #[test]
    fn a_capped_log_is_read_across_its_files_from_its_latest_output() {
        let dir = tempfile::tempdir().unwrap();
        let head = dir.path().join("env.log");
        std::fs::write(&head, "first\n[rl] log capped\n").unwrap();
        std::fs::write(previous_tail_path(&head), "older tail\nstart of a li").unwrap();
        std::fs::write(tail_path(&head), "ne\nlatest\n").unwrap();
        let tail = read_log_tail(&head, 3).unwrap();
        assert_eq!(tail.lines, ["older tail", "start of a line", "latest"]);
        assert!(tail.earlier);
        let all = read_log_tail(&head, 10).unwrap();
        assert_eq!(all.lines[..2], ["first", "[rl] log capped"]);
        // Just capped: no older tail file yet.
        std::fs::remove_file(previous_tail_path(&head)).unwrap();
        assert_eq!(
            read_log_tail(&head, 3).unwrap().lines,
            ["[rl] log capped", "ne", "latest"]
        );
    }

    #[test]
    fn invalid_utf8_is_replaced_and_a_missing_file_is_not_found() {
        assert_eq!(tail_of(b"a\xffb\n", 1).lines, ["a\u{fffd}b"]);
        let error = read_log_tail(Path::new("/nonexistent/log"), 1).unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::NotFound);
    }
}
