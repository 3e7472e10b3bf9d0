//! The weights a trainer without a checkpoints file (tinker-atropos' `launch_training.py`) reports
//! live only in its output: after each step it prints
//! `Sampling client updated: tinker://<model>/sampler_weights/step_<n>`, and at the end
//! `Final weights are available here: tinker://<model>/sampler_weights/final` — a path it never
//! saved (it exits that way after a failed step too). Its last weights are therefore the last
//! `step_<n>` it printed after saving them, and the `final` line is never believed.

use std::io::{BufRead, BufReader};
use std::path::Path;

use crate::error::MetricsError;
use crate::model::Checkpoint;

/// What a trainer log says about saved weights.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WeightsReport {
    pub checkpoints: Vec<Checkpoint>,
    /// The last weights the log shows saved.
    pub final_weights: Option<String>,
}

pub fn scan(path: &Path) -> Result<WeightsReport, MetricsError> {
    let file = std::fs::File::open(path).map_err(|source| MetricsError::Io {
        action: "open",
        path: path.to_owned(),
        source,
    })?;
    let mut report = WeightsReport::default();
    // Logs hold arbitrary bytes (progress bars, other encodings): read lossily, line by line.
    let mut reader = BufReader::new(file);
    let mut buffer = Vec::new();
    loop {
        buffer.clear();
        match reader.read_until(b'\n', &mut buffer) {
            Ok(0) => break,
            Ok(_) => read_line(&String::from_utf8_lossy(&buffer), &mut report),
            Err(source) => {
                return Err(MetricsError::Io {
                    action: "read",
                    path: path.to_owned(),
                    source,
                });
            }
        }
    }
    Ok(concluded(report))
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

    #[test]
    fn a_log_without_weights_reports_none() {
        let report = scan_text("Step 3/10\nLoss: 0.5\nError in step 4: boom\n");
        assert_eq!(report, WeightsReport::default());
    }
}
