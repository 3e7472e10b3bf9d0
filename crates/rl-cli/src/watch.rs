//! `rl runs watch ID` (also `rl runs status ID --follow`): a run followed until it ends. On a
//! terminal the view is redrawn in place as steps arrive (state, step of total, ETA, the
//! curves, the health flags); otherwise one plain line per new step or state, without escape
//! codes. It ends with the run, with `rl runs wait`'s exit codes; Ctrl-C leaves the run going.

use std::io::{IsTerminal as _, Write as _};
use std::time::Duration;

use rl_process::RunState;
use rl_settings::RunId;
use rl_tools::{MetricsView, SourceChoice, StatusView, Tools};

use crate::context::runtime;
use crate::curves;
use crate::output;

/// Between two looks at the run: a step takes seconds at the least.
const POLL: Duration = Duration::from_secs(1);

/// What one look at the run shows.
#[derive(Debug, Clone)]
pub(crate) struct Progress {
    pub(crate) run_id: String,
    pub(crate) environment: String,
    /// `running`, `starting: trainer`, `completed`, …
    pub(crate) state: String,
    pub(crate) finished: bool,
    pub(crate) step: Option<i64>,
    pub(crate) total_steps: Option<u64>,
    pub(crate) eta_secs: Option<f64>,
    pub(crate) history: Vec<MetricsView>,
    pub(crate) latest: MetricsView,
    /// One line per health flag.
    pub(crate) health: Vec<String>,
    pub(crate) error: Option<String>,
}

impl Progress {
    fn of(view: &StatusView) -> Self {
        let run = &view.run;
        Self {
            run_id: run.id.clone(),
            environment: run.environment.clone(),
            state: match run.phase {
                Some(phase) => format!("{}: {phase}", run.state),
                None => run.state.to_owned(),
            },
            finished: RunState::from_parts(run.state, None).is_ok_and(RunState::is_finished),
            step: view.metrics.step,
            total_steps: view.total_steps,
            eta_secs: view.eta_secs,
            history: view.history.clone(),
            latest: view.metrics,
            health: view
                .health
                .iter()
                .flat_map(|health| &health.flags)
                .map(|flag| format!("health: {} ({}): {}", flag.kind, flag.metric, flag.detail))
                .collect(),
            error: run.error.clone(),
        }
    }

    /// `step 7/12`, `step 7`, or nothing before the first step.
    fn steps(&self) -> String {
        match (self.step, self.total_steps) {
            (Some(step), Some(total)) => format!("step {step}/{total}"),
            (Some(step), None) => format!("step {step}"),
            (None, Some(total)) => format!("step 0/{total}"),
            (None, None) => String::new(),
        }
    }

    fn eta(&self) -> String {
        if self.finished {
            return String::new();
        }
        match (self.step, self.eta_secs) {
            (Some(_), Some(secs)) => format!("ETA {}", clock(secs)),
            _ => "ETA unknown".to_owned(),
        }
    }
}

/// `1:02:03`, `2:03`, `0:05`.
fn clock(secs: f64) -> String {
    let total = secs.max(0.0).round() as u64;
    let (hours, minutes, seconds) = (total / 3600, total / 60 % 60, total % 60);
    if hours > 0 {
        format!("{hours}:{minutes:02}:{seconds:02}")
    } else {
        format!("{minutes}:{seconds:02}")
    }
}

/// The live view: a heading, the curves, the health flags, and the error of a failed run.
pub(crate) fn frame(progress: &Progress) -> Vec<String> {
    let heading = [
        format!("run {}", progress.run_id),
        progress.environment.clone(),
        progress.state.clone(),
        progress.steps(),
        progress.eta(),
    ]
    .into_iter()
    .filter(|part| !part.is_empty())
    .collect::<Vec<_>>()
    .join("  ");
    let mut lines = vec![heading];
    lines.extend(curves::lines(&progress.history, curves::WIDTH));
    lines.extend(progress.health.iter().cloned());
    lines.extend(progress.error.iter().map(|error| format!("error: {error}")));
    lines
}

/// The plain-lines form: the state, the step and its numbers, the ETA, in one line.
pub(crate) fn plain_line(progress: &Progress) -> String {
    let numbers = [
        ("reward_mean", progress.latest.reward_mean),
        ("loss", progress.latest.loss),
        ("percent_correct", progress.latest.percent_correct),
    ]
    .into_iter()
    .filter_map(|(name, value)| Some(format!("{name} {}", curves::significant(value?))))
    .collect::<Vec<_>>()
    .join("  ");
    [
        format!("run {}", progress.run_id),
        progress.state.clone(),
        progress.steps(),
        numbers,
        progress.eta(),
    ]
    .into_iter()
    .filter(|part| !part.is_empty())
    .collect::<Vec<_>>()
    .join("  ")
}

/// A line for each step after `after` and before the current one that was done between two
/// looks, with that step's numbers: a log of a run has every step.
pub(crate) fn passed_lines(progress: &Progress, after: Option<i64>) -> Vec<String> {
    let Some(now) = progress.step else {
        return Vec::new();
    };
    let after = after.unwrap_or(0);
    progress
        .history
        .iter()
        .filter(|row| row.step.is_some_and(|step| step > after && step < now))
        .map(|row| {
            let mut at = progress.clone();
            at.step = row.step;
            at.latest = *row;
            at.eta_secs = None;
            plain_line(&at)
        })
        .collect()
}

/// Follows run `id` until it ends.
pub(crate) fn watch(tools: &Tools, id: &RunId) -> anyhow::Result<()> {
    let runtime = runtime()?;
    let live = std::io::stdout().is_terminal();
    let mut drawn = 0;
    let mut last_plain = String::new();
    let mut last_step = None;
    loop {
        let view = runtime.block_on(tools.check_status(id, i64::MAX, SourceChoice::Auto))?;
        let progress = Progress::of(&view);
        if live {
            let lines = frame(&progress);
            let mut stdout = std::io::stdout().lock();
            if drawn > 0 {
                // Up to the first line of the last frame, and clear to the end of the screen.
                write!(stdout, "\x1b[{drawn}F\x1b[J")?;
            }
            for line in &lines {
                writeln!(stdout, "{line}")?;
            }
            stdout.flush()?;
            drawn = lines.len();
        } else {
            // A line when the state or the step changes, not when only the ETA moves.
            let key = format!("{} {:?}", progress.state, progress.step);
            if key != last_plain {
                for line in passed_lines(&progress, last_step) {
                    output::line(line)?;
                }
                output::line(plain_line(&progress))?;
                last_plain = key;
                last_step = progress.step.max(last_step);
            }
        }
        if progress.finished {
            if !live {
                for line in frame(&progress).into_iter().skip(1) {
                    output::line(line)?;
                }
            }
            let state = tools.run_status(id, i64::MAX)?.run.state;
            return output::wait_ended(state, false);
        }
        let stop = runtime.block_on(async {
            tokio::select! {
                () = tokio::time::sleep(POLL) => false,
                () = crate::context::interrupted() => true,
            }
        });
        if stop {
            output::line(format!(
                "stopped watching; run {id} goes on (rl runs stop {id} stops it)"
            ))?;
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn progress(state: &str, steps: &[(f64, f64)], eta: Option<f64>) -> Progress {
        let history: Vec<MetricsView> = steps
            .iter()
            .zip(1..)
            .map(|((reward, loss), step)| MetricsView {
                step: Some(step),
                reward_mean: Some(*reward),
                loss: Some(*loss),
                ..MetricsView::default()
            })
            .collect();
        Progress {
            run_id: "1a2b3c4d".to_owned(),
            environment: "digits@digits_env.py".to_owned(),
            state: state.to_owned(),
            finished: matches!(state, "completed" | "failed" | "stopped" | "lost"),
            step: history.last().and_then(|row| row.step),
            total_steps: Some(12),
            eta_secs: eta,
            latest: history.last().copied().unwrap_or_default(),
            history,
            health: Vec::new(),
            error: None,
        }
    }

    const STEPS: [(f64, f64); 7] = [
        (0.25, 1.008_000_000_000_000_2),
        (0.3125, 0.97),
        (0.291_666, 0.91),
        (0.375, 0.84),
        (0.458_333_3, 0.8),
        (0.5, 0.77),
        (0.583_333_3, 0.7),
    ];

    #[test]
    fn a_training_run_as_drawn_live() {
        insta::assert_snapshot!(frame(&progress("running", &STEPS, Some(83.4))).join("\n"));
    }

    #[test]
    fn a_run_before_its_first_step_and_after_its_last() {
        let starting = progress("starting: trainer", &[], None);
        assert_eq!(
            frame(&starting),
            ["run 1a2b3c4d  digits@digits_env.py  starting: trainer  step 0/12  ETA unknown"]
        );
        let mut failed = progress("failed", &STEPS[..2], None);
        failed.error = Some("the trainer exited with 1".to_owned());
        failed.health = vec!["health: stalled (step): no new step for 15 minutes".to_owned()];
        insta::assert_snapshot!(frame(&failed).join("\n"));
    }

    #[test]
    fn plain_lines_carry_the_step_its_numbers_and_the_eta() {
        let lines: Vec<String> = (0..=STEPS.len())
            .map(|done| plain_line(&progress("running", &STEPS[..done], Some(3725.0))))
            .chain(std::iter::once(plain_line(&progress(
                "completed",
                &STEPS,
                None,
            ))))
            .collect();
        insta::assert_snapshot!(lines.join("\n"));
    }

    #[test]
    fn steps_done_between_two_looks_each_get_their_line() {
        let now = progress("running", &STEPS[..4], None);
        let passed = passed_lines(&now, Some(1));
        assert_eq!(passed.len(), 2, "{passed:#?}");
        assert!(passed[0].contains("step 2/12"), "{passed:#?}");
        assert!(passed[1].contains("step 3/12"), "{passed:#?}");
        assert_eq!(passed_lines(&now, None).len(), 3);
        assert!(passed_lines(&now, Some(4)).is_empty());
        assert!(passed_lines(&progress("starting: env", &[], None), None).is_empty());
    }

    #[test]
    fn clocks() {
        assert_eq!(clock(5.0), "0:05");
        assert_eq!(clock(125.4), "2:05");
        assert_eq!(clock(3725.0), "1:02:05");
        assert_eq!(clock(-3.0), "0:00");
        assert_eq!(clock(f64::NAN), "0:00");
    }
}
