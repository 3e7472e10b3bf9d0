//! How a run's end is worded in its record: a component's end, the tail of its log, why the
//! trainer capped the run, durations.

use super::{CAPPED_LINE, LOG_LINE_CHARS, LOG_TAIL_LINES, Supervisor};
use crate::state::{Component, ComponentStatus};

impl Supervisor<'_> {
    /// Why the trainer capped the run: its own last line (`rl-trainer: capped …`: the cap, the
    /// figures, how to continue), else a plain sentence.
    pub(super) fn capped_reason(&self) -> String {
        let said = self.plan.spec(Component::Trainer).and_then(|spec| {
            let tail = crate::read_log_tail(&spec.log_path, LOG_TAIL_LINES).ok()?;
            tail.lines
                .iter()
                .rev()
                .find_map(|line| {
                    line.split_once(CAPPED_LINE)
                        .map(|(_, why)| why.trim().to_owned())
                })
                .filter(|why| !why.is_empty())
        });
        let why = said.unwrap_or_else(|| {
            "the next step would pass one of its caps; its state is saved and `rl runs resume` \
             continues it"
                .to_owned()
        });
        self.secrets.redact(&end_of(&why, LOG_LINE_CHARS))
    }

    pub(super) fn log_tail(&self, component: Component) -> String {
        let Some(spec) = self.plan.spec(component) else {
            return String::new();
        };
        // The message is a run's error, in every status answer: each line is kept short.
        let tail = crate::read_log_tail(&spec.log_path, LOG_TAIL_LINES)
            .map(|tail| {
                tail.lines
                    .iter()
                    .map(|line| end_of(line, LOG_LINE_CHARS))
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default();
        if tail.trim().is_empty() {
            format!("; its log {} is empty", spec.log_path.display())
        } else {
            format!(
                "; last lines of {}:\n{}",
                spec.log_path.display(),
                self.secrets.redact(&tail)
            )
        }
    }
}

pub(super) fn describe_end(status: ComponentStatus, passed_gate: bool) -> String {
    let before = if passed_gate {
        ""
    } else {
        " before it was ready"
    };
    match status {
        ComponentStatus::Exited { code } => format!("exited with code {code}{before}"),
        ComponentStatus::Signalled { signal } => {
            let name = nix::sys::signal::Signal::try_from(signal)
                .map_or_else(|_| format!("signal {signal}"), |s| s.as_str().to_owned());
            format!("was ended by {name}{before}")
        }
        ComponentStatus::NotStarted | ComponentStatus::Running | ComponentStatus::Lost => {
            format!("ended in an unknown way{before}")
        }
    }
}

/// `0.3 s`, `12 s`: tenths only where they matter.
pub(super) fn seconds(value: f64) -> String {
    if value < 10.0 {
        format!("{value:.1} s")
    } else {
        format!("{value:.0} s")
    }
}

/// The last `chars` characters of `line`, marked as cut when it is longer.
fn end_of(line: &str, chars: usize) -> String {
    let total = line.chars().count();
    if total <= chars {
        return line.to_owned();
    }
    let kept: String = line.chars().skip(total - chars).collect();
    format!("…{kept}")
}

pub(super) fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or(text)
}
