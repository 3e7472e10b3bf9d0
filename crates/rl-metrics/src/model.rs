//! What every source produces: the runs a training run logged (the trainer's and the env's),
//! each with its summary and full history, plus the weights the trainer reported.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

/// A logged value. Numbers keep NaN and the infinities, which are exactly what the health digest
/// looks for; JSON has no such numbers, so answers spell them as Python's `json` and WandB do
/// ([`non_finite_spelling`]).
#[derive(Debug, Clone, PartialEq)]
pub enum MetricValue {
    Number(f64),
    Other(serde_json::Value),
}

impl MetricValue {
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Self::Number(number) => Some(*number),
            Self::Other(_) => None,
        }
    }

    /// Reads one JSON value as Python writes it: besides standard JSON, the bare tokens `NaN`,
    /// `Infinity` and `-Infinity` (WandB's `value_json` and `json.dumps` both emit them).
    pub fn parse(text: &str) -> Result<Self, serde_json::Error> {
        match text.trim() {
            "NaN" => Ok(Self::Number(f64::NAN)),
            "Infinity" => Ok(Self::Number(f64::INFINITY)),
            "-Infinity" => Ok(Self::Number(f64::NEG_INFINITY)),
            other => serde_json::from_str(other).map(Self::from_json),
        }
    }

    /// A value from [`parse_python_json`]: its stand-ins for non-finite numbers become numbers.
    pub fn from_json(value: serde_json::Value) -> Self {
        match &value {
            serde_json::Value::Number(number) => {
                number.as_f64().map_or(Self::Other(value), Self::Number)
            }
            serde_json::Value::String(text) => match text.as_str() {
                NAN_STAND_IN => Self::Number(f64::NAN),
                INFINITY_STAND_IN => Self::Number(f64::INFINITY),
                NEG_INFINITY_STAND_IN => Self::Number(f64::NEG_INFINITY),
                _ => Self::Other(value),
            },
            _ => Self::Other(value),
        }
    }
}

// Strings no logger writes, standing in for the bare tokens standard JSON lacks.
const NAN_STAND_IN: &str = "\u{0}NaN";
const INFINITY_STAND_IN: &str = "\u{0}Infinity";
const NEG_INFINITY_STAND_IN: &str = "\u{0}-Infinity";

/// Parses JSON as Python's `json.dumps` writes it, which includes the bare tokens `NaN`,
/// `Infinity` and `-Infinity`; they come back as stand-in strings that
/// [`MetricValue::from_json`] turns into numbers again.
pub fn parse_python_json(text: &str) -> Result<serde_json::Value, serde_json::Error> {
    match serde_json::from_str(text) {
        Ok(value) => Ok(value),
        Err(first_error) => {
            let Some(standard) = replace_non_finite_tokens(text) else {
                return Err(first_error);
            };
            serde_json::from_str(&standard)
        }
    }
}

/// `None` when there is no bare token to replace (the text is broken in another way).
fn replace_non_finite_tokens(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len() + 16);
    let mut replaced = false;
    let mut in_string = false;
    let mut escaped = false;
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if in_string {
            out.push(c);
            rest = &rest[c.len_utf8()..];
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        let token = [
            ("-Infinity", NEG_INFINITY_STAND_IN),
            ("Infinity", INFINITY_STAND_IN),
            ("NaN", NAN_STAND_IN),
        ]
        .into_iter()
        .find(|(token, _)| rest.starts_with(token));
        if let Some((token, stand_in)) = token {
            out.push('"');
            out.push_str(&stand_in.replace('\u{0}', "\\u0000"));
            out.push('"');
            rest = &rest[token.len()..];
            replaced = true;
            continue;
        }
        if c == '"' {
            in_string = true;
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    replaced.then_some(out)
}

impl fmt::Display for MetricValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Number(number) => match non_finite_spelling(*number) {
                Some(spelling) => f.write_str(spelling),
                None => write!(f, "{number}"),
            },
            Self::Other(serde_json::Value::String(text)) => f.write_str(text),
            Self::Other(value) => write!(f, "{value}"),
        }
    }
}

/// `NaN`, `Infinity` or `-Infinity`, as Python's `json` and WandB write the numbers JSON lacks;
/// `None` for a finite number.
pub fn non_finite_spelling(number: f64) -> Option<&'static str> {
    if number.is_nan() {
        Some("NaN")
    } else if number.is_infinite() {
        Some(if number > 0.0 {
            "Infinity"
        } else {
            "-Infinity"
        })
    } else {
        None
    }
}

/// One logged step. `step` is the trainer's own count of finished steps (the real trainer logs
/// step `n` after its n-th optimiser step; WandB's `_step`).
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryRow {
    pub step: i64,
    /// Seconds since the Unix epoch when the row was logged (`_timestamp`), when known.
    pub timestamp: Option<f64>,
    pub values: BTreeMap<String, MetricValue>,
}

impl HistoryRow {
    /// A row of numbers, as tests write one.
    #[cfg(test)]
    pub(crate) fn of_numbers(step: i64, values: &[(&str, f64)]) -> Self {
        Self {
            step,
            timestamp: None,
            values: values
                .iter()
                .map(|(key, value)| ((*key).to_owned(), MetricValue::Number(*value)))
                .collect(),
        }
    }

    pub fn number(&self, key: &str) -> Option<f64> {
        self.values.get(key).and_then(MetricValue::as_f64)
    }
}

/// Which process of the training run logged a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunRole {
    Trainer,
    Env,
}

impl fmt::Display for RunRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Trainer => "trainer",
            Self::Env => "env",
        })
    }
}

/// One logged run: the trainer's WandB run, the env's, or the trainer's metrics file.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LoggedRun {
    /// WandB's run id (the `<id>` in `run-<id>.wandb` and in the run's URL).
    pub id: Option<String>,
    /// WandB's display name, e.g. `gsm8k-1a2b3c4d-trainer-x7k2`.
    pub name: Option<String>,
    pub group: Option<String>,
    /// WandB's run state (`running`, `finished`, `crashed`, …) when the source knows it.
    pub state: Option<String>,
    pub url: Option<String>,
    /// The file this run was read from, for local sources.
    pub path: Option<PathBuf>,
    /// Last value of every key, as WandB keeps it (keys starting with `_` included).
    pub summary: BTreeMap<String, MetricValue>,
    /// Every logged row in step order; not a sample.
    pub history: Vec<HistoryRow>,
}

impl LoggedRun {
    pub fn last_step(&self) -> Option<i64> {
        let from_history = self.history.iter().map(|row| row.step).max();
        let from_summary = self
            .summary
            .get("_step")
            .and_then(MetricValue::as_f64)
            .map(|step| step as i64);
        from_history.max(from_summary)
    }

    /// The summary value of `key`, or, for env runs whose keys WandB prefixes with the env's
    /// registered name (`gsm8k-20261121_0_train/percent_correct`), of the one key ending `_key`.
    pub fn summary_number(&self, key: &str) -> Option<f64> {
        if let Some(value) = self.summary.get(key) {
            return value.as_f64();
        }
        let suffix = format!("_{key}");
        let mut matching = self
            .summary
            .iter()
            .filter(|(name, _)| name.ends_with(&suffix));
        match (matching.next(), matching.next()) {
            (Some((_, value)), None) => value.as_f64(),
            // Several envs logged the key: no single answer, so none (never a guess).
            _ => None,
        }
    }
}

/// Where a run's metrics came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    /// The JSON-lines file the trainer writes into the run folder.
    MetricsFile,
    /// WandB's local `run-<id>.wandb` files (offline mode, or the local copy of an online run).
    WandbFiles,
    /// WandB's public GraphQL API.
    WandbApi,
    /// Only the trainer's log: the weights it saved, no numbers.
    TrainerLog,
    /// Only the trainer's `checkpoints.jsonl`: the checkpoints it saved, no numbers.
    CheckpointsFile,
}

impl SourceKind {
    /// The source's name in answers and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MetricsFile => "metrics_file",
            Self::WandbFiles => "wandb_files",
            Self::WandbApi => "wandb_api",
            Self::TrainerLog => "trainer_log",
            Self::CheckpointsFile => "checkpoints_file",
        }
    }
}

impl fmt::Display for SourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A set of weights the trainer saved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    pub step: Option<i64>,
    /// The sampler weights (`tinker://…/sampler_weights/<name>`): what sampling needs.
    pub path: String,
    /// `step_<n>` or `final`, as the trainer named it.
    pub name: Option<String>,
    /// The weights and optimizer state (`save_state`): what resuming needs.
    pub state_path: Option<String>,
    /// When it was saved (RFC 3339).
    pub time: Option<String>,
}

impl Checkpoint {
    /// Sampler weights known only by their path (a log line, a metrics event).
    pub fn sampler(step: Option<i64>, path: String) -> Self {
        Self {
            step,
            path,
            name: None,
            state_path: None,
            time: None,
        }
    }
}

/// Everything one source knows about a training run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunMetrics {
    pub source: SourceKind,
    pub trainer: Option<LoggedRun>,
    pub env: Option<LoggedRun>,
    /// `tinker://…/sampler_weights/final`, when the trainer reported it.
    pub final_weights: Option<String>,
    pub checkpoints: Vec<Checkpoint>,
    /// What was read only in part: a truncated or corrupt tail, an unparsable line.
    pub warnings: Vec<String>,
}

impl RunMetrics {
    pub fn empty(source: SourceKind) -> Self {
        Self {
            source,
            trainer: None,
            env: None,
            final_weights: None,
            checkpoints: Vec::new(),
            warnings: Vec::new(),
        }
    }

    pub fn run(&self, role: RunRole) -> Option<&LoggedRun> {
        match role {
            RunRole::Trainer => self.trainer.as_ref(),
            RunRole::Env => self.env.as_ref(),
        }
    }
}

/// The summary WandB would keep for a history: the last value of every key, and `_step`.
pub fn summary_of(history: &[HistoryRow]) -> BTreeMap<String, MetricValue> {
    let mut summary = BTreeMap::new();
    // From the newest row back, each key is copied once: its last value.
    for row in history.iter().rev() {
        for (key, value) in &row.values {
            if !summary.contains_key(key) {
                summary.insert(key.clone(), value.clone());
            }
        }
    }
    if let Some(last) = history.last() {
        summary.insert("_step".to_owned(), MetricValue::Number(last.step as f64));
    }
    if let Some(timestamp) = history.iter().rev().find_map(|row| row.timestamp) {
        summary.insert("_timestamp".to_owned(), MetricValue::Number(timestamp));
    }
    summary
}
