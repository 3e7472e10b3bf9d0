//! A process's output on its way to its log: the process writes into a pipe, and a thread of
//! ours writes what it reads to the log with every key we know redacted, so that no log on disk
//! holds a key, whoever reads it later. A run's components (the supervisor) and a pre-flight's
//! models (the process running the test) are logged through it alike.
//!
//! The thread is the pipe's only reader and does nothing else: the output keeps flowing while
//! its owner waits for something else, and a process never blocks on it for long. Output is
//! copied as bytes, whatever it is (not UTF-8, no newline for hours), in chunks of bounded
//! size: nothing is held back but the end of a chunk that may be the start of a key whose rest
//! is still to come.
//!
//! The log is capped (`capped_log.rs`): past its limit it keeps its head and its latest output.
//! Keys are redacted before the cap cuts anything, so no cut can leave a key's start in one
//! file and its rest in another.

use std::io::{PipeWriter, Read};
use std::os::fd::AsFd;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use rl_settings::Secrets;
use tokio::sync::watch;

use crate::capped_log::{CappedLog, LogLimit};

const CHUNK: usize = 64 * 1024;
/// How long the thread waits for output before it looks whether it was asked to report.
const IDLE_POLL_MS: u16 = 50;

/// How far the copy has got.
#[derive(Debug, Clone, Copy, Default)]
struct Progress {
    /// The last drain request answered: everything written before it is in the log.
    drained: u64,
    /// The pipe is closed (every process holding it has ended) and everything is in the log.
    ended: bool,
}

/// The owner's side of a running copy.
#[derive(Clone)]
pub struct OutputCopy {
    requested: Arc<AtomicU64>,
    cut: Arc<AtomicBool>,
    progress: watch::Receiver<Progress>,
}

/// A pipe whose write end is for the process (its stdout and stderr, so that their lines stay
/// in the order written), and the copy of what it carries into the log at `log_path` (created,
/// else appended to), which keeps at most `limit` bytes.
pub fn redacted_output(
    log_path: &Path,
    secrets: Secrets,
    limit: LogLimit,
) -> std::io::Result<(PipeWriter, OutputCopy)> {
    let log = CappedLog::open(log_path, limit)?;
    let (reader, writer) = std::io::pipe()?;
    let requested = Arc::new(AtomicU64::new(0));
    let cut = Arc::new(AtomicBool::new(false));
    let (progress_tx, progress) = watch::channel(Progress::default());
    let (asked, told_to_cut) = (requested.clone(), cut.clone());
    std::thread::Builder::new()
        .name("rl-output".to_owned())
        .spawn(move || copy(&reader, log, &secrets, &asked, &told_to_cut, &progress_tx))?;
    Ok((
        writer,
        OutputCopy {
            requested,
            cut,
            progress,
        },
    ))
}

impl OutputCopy {
    /// Waits until everything written into the pipe before this call is in the log (what a
    /// process printed before it ended), up to `limit`. False when the limit ran out: a
    /// process it left keeps writing.
    pub async fn drained(&mut self, limit: Duration) -> bool {
        let ticket = self.requested.fetch_add(1, Ordering::SeqCst) + 1;
        self.until(limit, |progress| progress.drained >= ticket)
            .await
    }

    /// Waits until the pipe is closed and everything is in the log, up to `limit`.
    pub async fn ended(&mut self, limit: Duration) -> bool {
        self.until(limit, |_| false).await
    }

    /// Ends the copy although the pipe is still open (a process out of reach holds it): what
    /// was read is written out, and nothing more is, so that a note written to the log after
    /// this is its last line. Waits up to `limit` for the thread to be done.
    pub async fn cut(&mut self, limit: Duration) -> bool {
        self.cut.store(true, Ordering::SeqCst);
        self.ended(limit).await
    }

    async fn until(&mut self, limit: Duration, reached: impl Fn(&Progress) -> bool) -> bool {
        // A copy whose thread is gone (the receiver errs) has nothing more to write.
        tokio::time::timeout(
            limit,
            self.progress
                .wait_for(|progress| progress.ended || reached(progress)),
        )
        .await
        .is_ok()
    }
}

fn copy(
    reader: &std::io::PipeReader,
    mut log: CappedLog,
    secrets: &Secrets,
    requested: &AtomicU64,
    cut: &AtomicBool,
    progress: &watch::Sender<Progress>,
) {
    let mut chunk = vec![0; CHUNK];
    // The end of what was read that may be the start of a key: never longer than a key.
    let mut held = Vec::new();
    // Looked at least once per idle poll: a cut is obeyed within one.
    while !cut.load(Ordering::SeqCst) {
        // Read before looking at the pipe: an empty pipe then answers every request made
        // before the look, and so covers all that was written before them.
        let asked = requested.load(Ordering::SeqCst);
        let pending = asked > progress.borrow().drained;
        let wait = if pending {
            PollTimeout::ZERO
        } else {
            PollTimeout::from(IDLE_POLL_MS)
        };
        let mut fds = [PollFd::new(reader.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, wait) {
            Ok(0) => {
                if pending {
                    progress.send_modify(|progress| progress.drained = asked);
                }
                continue;
            }
            Ok(_) => {}
            Err(Errno::EINTR) => continue,
            Err(_) => break,
        }
        let read = match (&*reader).read(&mut chunk) {
            Ok(0) => break,
            Ok(read) => read,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        held.extend_from_slice(&chunk[..read]);
        let mut redacted = secrets.redact_bytes(&held);
        held = redacted.split_off(redacted.len() - secrets.unfinished_secret_len(&redacted));
        // A log that cannot be written (a full disk) loses output; the pipe is still read,
        // so that the component never waits on it.
        let _ = log.write(&redacted);
    }
    let _ = log.write(&held);
    progress.send_modify(|progress| progress.ended = true);
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn secrets() -> Secrets {
        let environment = [(
            "TINKER_API_KEY".to_owned(),
            "tk-secret-0123456789".to_owned(),
        )]
        .into_iter()
        .collect();
        Secrets::load(Path::new("/nonexistent"), &environment)
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// Writes `pieces` into a copy's pipe one by one, each seen by the copy before the next
    /// (a key split over two writes arrives in two reads), and returns the log.
    fn copied(pieces: &[&[u8]]) -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("component.log");
        let (mut writer, mut copy) = redacted_output(&log, secrets(), LogLimit::default()).unwrap();
        runtime().block_on(async {
            for piece in pieces {
                writer.write_all(piece).unwrap();
                assert!(copy.drained(Duration::from_secs(10)).await);
            }
            drop(writer);
            assert!(copy.ended(Duration::from_secs(10)).await);
        });
        std::fs::read(&log).unwrap()
    }

    #[test]
    fn a_key_is_redacted_even_when_split_over_two_writes() {
        let log = copied(&[
            b"key=tk-secret-01",
            b"23456789 end\n",
            b"again tk-secret-0123456789",
        ]);
        assert_eq!(
            String::from_utf8(log).unwrap(),
            "key=[REDACTED TINKER_API_KEY] end\nagain [REDACTED TINKER_API_KEY]"
        );
    }

    #[test]
    fn output_that_is_not_text_or_lines_is_kept_as_written() {
        let endless = vec![b'x'; 3 * CHUNK];
        let log = copied(&[b"\xff\xfe\r50%", &endless, b"tk-", b"not a key"]);
        let mut expected = b"\xff\xfe\r50%".to_vec();
        expected.extend_from_slice(&endless);
        expected.extend_from_slice(b"tk-not a key");
        assert_eq!(log, expected);
    }

    #[test]
    fn a_chatty_process_fills_its_log_only_to_its_limit_and_no_key_survives_the_cut() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("env.log");
        let limit = LogLimit(8192);
        let (mut writer, mut copy) = redacted_output(&log, secrets(), limit).unwrap();
        runtime().block_on(async {
            // A key in every line, split over two writes now and then: wherever the cap cuts,
            // it cuts redacted text.
            for line in 0..3000 {
                writer
                    .write_all(format!("step {line:05} key=tk-secret-01").as_bytes())
                    .unwrap();
                if line % 7 == 0 {
                    assert!(copy.drained(Duration::from_secs(10)).await);
                }
                writer.write_all(b"23456789\n").unwrap();
            }
            writer.write_all(b"the last line\n").unwrap();
            drop(writer);
            assert!(copy.ended(Duration::from_secs(10)).await);
        });
        let files = crate::capped_log::log_files(&log);
        assert_eq!(files.len(), 3, "{files:?}");
        let mut total = 0;
        for file in &files {
            let text = std::fs::read_to_string(file).unwrap();
            assert!(!text.contains("tk-secret"), "{}: {text}", file.display());
            total += text.len() as u64;
        }
        assert!(total <= limit.0, "{total} bytes kept");
        let tail = crate::read_log_tail(&log, 2).unwrap();
        assert_eq!(
            tail.lines,
            ["step 02999 key=[REDACTED TINKER_API_KEY]", "the last line"]
        );
    }

    #[test]
    fn the_start_of_a_key_left_at_the_end_is_written_when_the_pipe_closes() {
        assert_eq!(copied(&[b"partial tk-sec"]), b"partial tk-sec");
    }

    #[test]
    fn a_cut_copy_writes_nothing_more_though_the_pipe_stays_open() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("model.log");
        let (mut writer, mut copy) = redacted_output(&log, secrets(), LogLimit::default()).unwrap();
        runtime().block_on(async {
            writer.write_all(b"before\n").unwrap();
            assert!(copy.drained(Duration::from_secs(10)).await);
            assert!(copy.cut(Duration::from_secs(10)).await);
        });
        // The pipe has no reader left: the writer learns it rather than blocking.
        let _ = writer.write_all(b"after\n");
        assert_eq!(std::fs::read(&log).unwrap(), b"before\n");
    }

    #[test]
    fn drained_means_what_was_written_before_is_in_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("component.log");
        let (mut writer, mut copy) = redacted_output(&log, secrets(), LogLimit::default()).unwrap();
        runtime().block_on(async {
            for round in 0..20 {
                let line = format!("line {round}\n");
                writer.write_all(line.as_bytes()).unwrap();
                assert!(copy.drained(Duration::from_secs(10)).await);
                let text = std::fs::read_to_string(&log).unwrap();
                assert!(text.ends_with(&line), "{text:?}");
            }
            // The other end is still open: the copy goes on.
            assert!(!copy.ended(Duration::from_millis(200)).await);
        });
    }
}
