//! A log that never grows past its limit: the first half of the limit keeps the head (how the
//! process started, usually where its trouble began), then rl's marker line, then the latest
//! output in a tail of two rotating files; what came between is dropped. An environment printing
//! 2 MB/s would otherwise fill 6.5 GB an hour.
//!
//! `env.log` holds the head and the marker and stays as it was once capped (a reader that had it
//! open sees it stop); the tail is `env.log.tail`, and `env.log.tail.1` the part before it. Read
//! one after the other (head, `.tail.1`, `.tail`), they are the log with its middle cut out,
//! which is what the marker says and what `read_log_tail` shows. Every file name of a capped log
//! is made here, and nowhere else.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The limit when the caller has no operator setting at hand.
pub const DEFAULT_LOG_LIMIT: LogLimit = LogLimit(rl_settings::DEFAULT_LOG_LIMIT_BYTES);

/// The most bytes a log keeps, its head, marker and both tail files together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogLimit(pub u64);

impl Default for LogLimit {
    fn default() -> Self {
        DEFAULT_LOG_LIMIT
    }
}

impl LogLimit {
    /// The line between the head and the latest output, with the tail's file named.
    fn marker(self, head: &Path) -> Vec<u8> {
        format!(
            "[rl] log capped at {} bytes: the head above, the latest output below (older lines \
             dropped); the latest output is in {}, and {} before it\n",
            self.0,
            file_name(&tail_path(head)),
            file_name(&previous_tail_path(head)),
        )
        .into_bytes()
    }

    /// The head's share: half the limit, the marker included.
    fn head_bytes(self, marker: usize) -> u64 {
        (self.0 / 2).saturating_sub(marker as u64 + 1)
    }

    /// Each tail file's share: a quarter of the limit, so that both fit in the other half.
    fn tail_file_bytes(self) -> u64 {
        (self.0 / 4).max(1)
    }
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn with_suffix(head: &Path, suffix: &str) -> PathBuf {
    let mut name = head.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Where the latest output of the capped log `head` goes.
pub fn tail_path(head: &Path) -> PathBuf {
    with_suffix(head, ".tail")
}

/// The tail file before the current one.
pub(crate) fn previous_tail_path(head: &Path) -> PathBuf {
    with_suffix(head, ".tail.1")
}

/// Whether the log `head` reached its limit: from then on it has a tail file.
pub fn is_capped(head: &Path) -> bool {
    tail_path(head).exists()
}

/// The file a line appended to the log `head` now belongs in (rl's own notes after a process's
/// output): its tail once capped, so that the note stays the log's last line.
pub fn log_end(head: &Path) -> PathBuf {
    if is_capped(head) {
        tail_path(head)
    } else {
        head.to_owned()
    }
}

/// The files of the log `head` in the order they were written: the head, then (once capped) the
/// older and the current tail file, those that exist (the head always, for its reader to find
/// missing).
pub fn log_files(head: &Path) -> Vec<PathBuf> {
    [head.to_owned(), previous_tail_path(head), tail_path(head)]
        .into_iter()
        .enumerate()
        .filter(|(index, path)| *index == 0 || path.exists())
        .map(|(_, path)| path)
        .collect()
}

/// The writing end of a capped log. Writes are never refused for the limit: what does not fit
/// rotates the tail. An error writing (a full disk) is the caller's to ignore or not.
pub(crate) struct CappedLog {
    head_path: PathBuf,
    limit: LogLimit,
    /// Written once, where the head ends.
    marker: Vec<u8>,
    head: File,
    head_len: u64,
    /// The head's last byte was a newline (or it is empty): the marker starts a line of its own.
    head_at_line_start: bool,
    /// Once capped: the current tail file and its length.
    tail: Option<(File, u64)>,
}

impl CappedLog {
    /// Opens the log `head` for appending (created if missing), going on where an earlier
    /// writer left it: in its tail, if it was capped.
    pub(crate) fn open(head_path: &Path, limit: LogLimit) -> std::io::Result<Self> {
        let head = append_to(head_path)?;
        let head_len = head.metadata()?.len();
        let tail = if is_capped(head_path) {
            let tail = append_to(&tail_path(head_path))?;
            let length = tail.metadata()?.len();
            Some((tail, length))
        } else {
            None
        };
        Ok(Self {
            head_path: head_path.to_owned(),
            limit,
            marker: limit.marker(head_path),
            head,
            head_len,
            head_at_line_start: true,
            tail,
        })
    }

    /// Appends `bytes`: to the head while it has room, then the marker, then to the tail.
    pub(crate) fn write(&mut self, mut bytes: &[u8]) -> std::io::Result<()> {
        if self.tail.is_none() {
            let room = self
                .limit
                .head_bytes(self.marker.len())
                .saturating_sub(self.head_len);
            let fits = bytes.len().min(usize::try_from(room).unwrap_or(usize::MAX));
            let (head, rest) = bytes.split_at(fits);
            if !head.is_empty() {
                self.head.write_all(head)?;
                self.head_len += head.len() as u64;
                self.head_at_line_start = head.ends_with(b"\n");
            }
            if rest.is_empty() {
                return Ok(());
            }
            if !self.head_at_line_start {
                self.head.write_all(b"\n")?;
            }
            self.head.write_all(&self.marker)?;
            self.tail = Some((create(&tail_path(&self.head_path))?, 0));
            bytes = rest;
        }
        let piece = self.limit.tail_file_bytes();
        while !bytes.is_empty() {
            let Some((tail, length)) = self.tail.as_mut() else {
                break;
            };
            if *length >= piece {
                // The older tail file is dropped; the full one becomes the older.
                std::fs::rename(
                    tail_path(&self.head_path),
                    previous_tail_path(&self.head_path),
                )?;
                *tail = create(&tail_path(&self.head_path))?;
                *length = 0;
            }
            let room = usize::try_from(piece - *length).unwrap_or(usize::MAX);
            let (now, rest) = bytes.split_at(bytes.len().min(room));
            tail.write_all(now)?;
            *length += now.len() as u64;
            bytes = rest;
        }
        Ok(())
    }
}

fn append_to(path: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
}

fn create(path: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn total_size(head: &Path) -> u64 {
        log_files(head)
            .iter()
            .map(|path| std::fs::metadata(path).unwrap().len())
            .sum()
    }

    #[test]
    fn a_log_within_its_limit_is_one_file_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let head = dir.path().join("env.log");
        let mut log = CappedLog::open(&head, LogLimit(4096)).unwrap();
        log.write(b"one\n").unwrap();
        log.write(b"two\n").unwrap();
        assert_eq!(std::fs::read(&head).unwrap(), b"one\ntwo\n");
        assert!(!is_capped(&head));
        assert_eq!(log_end(&head), head);
    }

    #[test]
    fn past_its_limit_a_log_keeps_its_head_the_marker_and_its_latest_output() {
        let dir = tempfile::tempdir().unwrap();
        let head = dir.path().join("env.log");
        let limit = LogLimit(4096);
        let mut log = CappedLog::open(&head, limit).unwrap();
        for line in 0..2000 {
            log.write(format!("line {line:05}\n").as_bytes()).unwrap();
            assert!(
                total_size(&head) <= limit.0,
                "over the limit at line {line}"
            );
        }
        let head_text = std::fs::read_to_string(&head).unwrap();
        assert!(head_text.starts_with("line 00000\nline 00001\n"));
        assert!(
            head_text.ends_with(
                "[rl] log capped at 4096 bytes: the head above, the latest output below (older \
                 lines dropped); the latest output is in env.log.tail, and env.log.tail.1 before \
                 it\n"
            ),
            "{head_text}"
        );
        assert!(is_capped(&head));
        assert_eq!(log_end(&head), tail_path(&head));
        let tail = std::fs::read_to_string(tail_path(&head)).unwrap();
        assert!(tail.ends_with("line 01999\n"), "{tail}");
        // The older tail file ends where the current one begins.
        let older = std::fs::read_to_string(previous_tail_path(&head)).unwrap();
        let joined = format!("{older}{tail}");
        assert!(joined.contains("line 01900\nline 01901\n"));
        assert_eq!(log_files(&head).len(), 3);
    }

    #[test]
    fn a_line_cut_by_the_head_limit_ends_before_the_marker() {
        let dir = tempfile::tempdir().unwrap();
        let head = dir.path().join("model.log");
        let mut log = CappedLog::open(&head, LogLimit(2048)).unwrap();
        log.write(&[b'x'; 5000]).unwrap();
        let text = std::fs::read_to_string(&head).unwrap();
        let marker_line = text.lines().last().unwrap();
        assert!(marker_line.starts_with("[rl] log capped at 2048 bytes"));
        assert!(text.starts_with("xxx"));
        assert!(total_size(&head) <= 2048);
    }

    #[test]
    fn a_capped_log_opened_again_goes_on_in_its_tail() {
        let dir = tempfile::tempdir().unwrap();
        let head = dir.path().join("env.log");
        let limit = LogLimit(2048);
        CappedLog::open(&head, limit)
            .unwrap()
            .write(&[b'a'; 1500])
            .unwrap();
        let head_before = std::fs::read(&head).unwrap();
        CappedLog::open(&head, limit)
            .unwrap()
            .write(b"\nlater\n")
            .unwrap();
        assert_eq!(std::fs::read(&head).unwrap(), head_before);
        let tail = std::fs::read_to_string(tail_path(&head)).unwrap();
        assert!(tail.ends_with("\nlater\n"), "{tail}");
        assert!(total_size(&head) <= limit.0);
    }
}
