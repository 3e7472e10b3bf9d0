//! The weights a trainer without a checkpoints file (tinker-atropos' `launch_training.py`) reports
//! live only in its output: after each step it prints
//! `Sampling client updated: tinker://<model>/sampler_weights/step_<n>`, and at the end
//! `Final weights are available here: tinker://<model>/sampler_weights/final` — a path it never
//! saved (it exits that way after a failed step too). Its last weights are therefore the last
//! `step_<n>` it printed after saving them, and the `final` line is never believed.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use crate::error::MetricsError;
use crate::model::Checkpoint;

/// What a trainer log says about saved weights.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WeightsReport {
    pub checkpoints: Vec<Checkpoint>,
    /// The last weights the log shows saved.
    pub final_weights: Option<String>,
}

/// Reads the trainer's log from its `files` in the order they were written: the log, then (once
/// rl capped it) its tail files, read as one so that a line split between two is read whole.
/// The first file must exist; a later one gone meanwhile (rotated away) is passed over.
pub fn scan(files: &[PathBuf]) -> Result<WeightsReport, MetricsError> {
    let Some((first, rest)) = files.split_first() else {
        return Ok(WeightsReport::default());
    };
    let open = |path: &Path| std::fs::File::open(path);
    let mut reader: Box<dyn Read> = Box::new(open(first).map_err(|source| MetricsError::Io {
        action: "open",
        path: first.clone(),
        source,
    })?);
    for path in rest {
        if let Ok(file) = open(path) {
            reader = Box::new(reader.chain(file));
        }
    }
    let mut report = WeightsReport::default();
    // Logs hold arbitrary bytes (progress bars, other encodings): read lossily, line by line.
    for_each_line(BufReader::new(reader), |line| {
        read_line(&String::from_utf8_lossy(line), &mut report);
    })
    .map_err(|source| MetricsError::Io {
        action: "read",
        path: first.clone(),
        source,
    })?;
    Ok(concluded(report))
}

/// A line longer than this is read in pieces of this size: a progress bar redrawn for hours
/// without a newline is never held whole. A line naming weights is a few hundred bytes.
const MAX_LINE: usize = 64 * 1024;

/// Calls `each` with every line of `reader` (ended by `\n`, or by the `\r` a progress bar
/// redraws with), a line longer than `MAX_LINE` in pieces of at most that.
fn for_each_line(mut reader: impl BufRead, mut each: impl FnMut(&[u8])) -> std::io::Result<()> {
    let mut buffer = Vec::with_capacity(MAX_LINE);
    loop {
        buffer.clear();
        let limit = u64::try_from(MAX_LINE).unwrap_or(u64::MAX);
        if (&mut reader).take(limit).read_until(b'\n', &mut buffer)? == 0 {
            return Ok(());
        }
        for line in buffer.split(|byte| *byte == b'\r') {
            each(line);
        }
    }
}

/// The report once every line is read: the last weights are the last ones saved.
fn concluded(mut report: WeightsReport) -> WeightsReport {
    report.final_weights = report.checkpoints.last().map(|last| last.path.clone());
    report
}

fn read_line(line: &str, report: &mut WeightsReport) {
    let Some(start) = line.find("tinker://") else {
        return;
    };
    let path: String = line[start..]
        .chars()
        .take_while(|c| !c.is_whitespace() && !matches!(c, '"' | '\'' | ',' | ')'))
        .collect();
    if path.ends_with("/final") && line.contains("inal weights") {
        // The phantom: printed whether or not anything was saved under that name.
        return;
    }
    if line.contains("ampling client") || path.contains("/sampler_weights/step_") {
        let step = path
            .rsplit_once("/step_")
            .and_then(|(_, step)| step.parse::<i64>().ok());
        if !report.checkpoints.iter().any(|seen| seen.path == path) {
            report.checkpoints.push(Checkpoint::sampler(step, path));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_text(text: &str) -> WeightsReport {
        let mut report = WeightsReport::default();
        for line in text.lines() {
            read_line(line, &mut report);
        }
        concluded(report)
    }

    #[test]
    fn a_capped_log_is_read_through_its_tail_files() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let files: Vec<PathBuf> = ["trainer.log", "trainer.log.tail.1", "trainer.log.tail"]
            .iter()
            .map(|name| dir.path().join(name))
            .collect();
        let texts = [
            "Sampling client updated: tinker://abc/sampler_weights/step_1\n[rl] log capped\n",
            "noise\nSampling client updated: tinker://abc/sampler_w",
            "eights/step_7\nnoise\n",
        ];
        for (path, text) in files.iter().zip(texts) {
            std::fs::write(path, text).unwrap_or_else(|e| panic!("{e}"));
        }
        let report = scan(&files).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            report.final_weights.as_deref(),
            Some("tinker://abc/sampler_weights/step_7"),
            "the latest weights, named across the two tail files"
        );
        // A tail file rotated away meanwhile is passed over.
        std::fs::remove_file(&files[1]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(scan(&files).map(|r| r.checkpoints.len()).ok(), Some(1));
        assert_eq!(scan(&[]).ok(), Some(WeightsReport::default()));
    }

    #[test]
    fn reads_the_real_trainers_lines() {
        let report = scan_text(
            "Initial sampling client created: tinker://abc/sampler_weights/step_0\n\
             Saving checkpoint and updating sampling client...\n\
             Sampling client updated: tinker://abc/sampler_weights/step_1\n\
             Sampling client updated: tinker://abc/sampler_weights/step_2\n\
             Final weights are available here: tinker://abc/sampler_weights/final\n",
        );
        assert_eq!(
            report.final_weights.as_deref(),
            Some("tinker://abc/sampler_weights/step_2"),
            "the last weights saved, never the final path it prints without saving"
        );
        let steps: Vec<_> = report.checkpoints.iter().map(|c| c.step).collect();
        assert_eq!(steps, vec![Some(0), Some(1), Some(2)]);
    }

    /// A progress bar redrawn with `\r` for hours makes one endless line: it is read in bounded
    /// pieces, and the weights after it are still found.
    #[test]
    fn an_endless_line_is_read_in_bounded_pieces() {
        let mut log = b"Sampling client updated: tinker://abc/sampler_weights/step_1\n".to_vec();
        for step in 0..200_000 {
            log.extend_from_slice(format!("\r{step}/200000 [####    ]").as_bytes());
        }
        log.extend_from_slice(b"x".repeat(3 * MAX_LINE).as_slice());
        log.extend_from_slice(b"\nSampling client updated: tinker://abc/sampler_weights/step_2\n");
        let mut longest = 0;
        let mut report = WeightsReport::default();
        for_each_line(log.as_slice(), |line| {
            longest = longest.max(line.len());
            read_line(&String::from_utf8_lossy(line), &mut report);
        })
        .unwrap();
        assert!(longest <= MAX_LINE, "a piece of {longest} bytes");
        assert_eq!(
            concluded(report).final_weights.as_deref(),
            Some("tinker://abc/sampler_weights/step_2")
        );
    }

    #[test]
    fn a_log_without_weights_reports_none() {
        let report = scan_text("Step 3/10\nLoss: 0.5\nError in step 4: boom\n");
        assert_eq!(report, WeightsReport::default());
    }
}
