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
            "the next step would pass one of its caps; its state is saved and rl_resume_training \
             continues it"
                .to_owned()
        });
        self.secrets.redact(&end_of(&why, LOG_LINE_CHARS))
    }

    /// `: LookupError: Resource words not found. … nltk.download('words')`: the line of the
    /// component's log that says what went wrong (the last exception Python printed), put
    /// first in a failure's message; empty when the log shows none.
    pub(super) fn cause_line(&self, component: Component) -> String {
        let Some(spec) = self.plan.spec(component) else {
            return String::new();
        };
        crate::read_log_tail(&spec.log_path, CAUSE_SEARCH_LINES)
            .ok()
            .and_then(|tail| exception_line(&tail.lines))
            .map(|line| format!(": {}", self.secrets.redact(&end_of(&line, LOG_LINE_CHARS))))
            .unwrap_or_default()
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

/// Lines of a log's end searched for the exception that ended it.
const CAUSE_SEARCH_LINES: usize = 60;
/// Lines of an exception's message kept when it continues below its first line.
const CAUSE_CONTINUED_LINES: usize = 4;

/// The last exception line of a Python traceback in `lines` (`Name: message`, unindented, the
/// name ending in `Error`, `Exception`, `Exit` or `Interrupt`), with the lines that continue
/// its message (NLTK's banner: `Resource words not found.`, `>>> nltk.download('words')`).
pub(super) fn exception_line(lines: &[String]) -> Option<String> {
    let start = lines.iter().rposition(|line| is_exception_line(line))?;
    let mut parts = vec![lines[start].trim_end().to_owned()];
    for line in lines.iter().skip(start + 1).take(CAUSE_CONTINUED_LINES * 3) {
        let text = line.trim();
        // A banner's rule or an empty line continues the message without saying anything.
        if text.is_empty() || text.chars().all(|c| c == '*' || c == '-' || c == '=') {
            continue;
        }
        // Unindented text is a new line of the log, not the message.
        if !line.starts_with([' ', '\t']) || parts.len() > CAUSE_CONTINUED_LINES {
            break;
        }
        parts.push(text.to_owned());
    }
    Some(parts.join(" "))
}

fn is_exception_line(line: &str) -> bool {
    let Some((name, _)) = line.split_once(':') else {
        return false;
    };
    let valid_name = !name.is_empty()
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
    let kind = name.rsplit('.').next().unwrap_or(name);
    valid_name
        && ["Error", "Exception", "Exit", "Interrupt"]
            .iter()
            .any(|suffix| kind.ends_with(suffix) && kind.len() > suffix.len())
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

#[cfg(test)]
mod tests {
    use super::exception_line;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(str::to_owned).collect()
    }

    #[test]
    fn the_exception_that_ended_a_traceback_is_found_with_its_continued_message() {
        let nltk = lines(
            "INFO: loading\nTraceback (most recent call last):\n  File \"env.py\", line 3, in setup\n    \
             words.words()\nLookupError: \n****\n  Resource words not found.\n  Please use the NLTK \
             Downloader to obtain the resource:\n\n  >>> import nltk\n  >>> nltk.download('words')\n  \
             \n****\n",
        );
        assert_eq!(
            exception_line(&nltk).unwrap(),
            "LookupError: Resource words not found. Please use the NLTK Downloader to obtain the \
             resource: >>> import nltk >>> nltk.download('words')"
        );
        let hub = lines(
            "Traceback (most recent call last):\n  File \"x\"\ndatasets.exceptions.DatasetNotFoundError: \
             Couldn't reach 'openai/gsm8k' on the Hub (offline mode is enabled)\nrl_env: done\n",
        );
        assert_eq!(
            exception_line(&hub).unwrap(),
            "datasets.exceptions.DatasetNotFoundError: Couldn't reach 'openai/gsm8k' on the Hub \
             (offline mode is enabled)"
        );
        assert_eq!(
            exception_line(&lines("ERROR: no\nError in handle: x\nINFO: ok")),
            None
        );
    }
}
