//! WandB's local run files, `wandb/<run folder>/run-<id>.wandb`. In current SDKs this binary
//! file is the only local copy of a run's history, summary and config (offline runs write no
//! `wandb-summary.json`), and online runs keep one too, so metrics need no network.

mod log;
mod records;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use async_trait::async_trait;
use prost::Message;

use crate::error::MetricsError;
use crate::model::{
    HistoryRow, LoggedRun, MetricValue, RunMetrics, RunRole, SourceKind, parse_python_json,
    summary_of,
};
use crate::source::{MetricsSource, RunTarget, WandbNames, read_off_thread};
use records::{Item, Record};

/// Keys WandB adds to every row; they become the row's step and time, not metrics.
const STEP_KEY: &str = "_step";
const TIMESTAMP_KEY: &str = "_timestamp";
const RUNTIME_KEY: &str = "_runtime";

/// One run file, read as far as it could be.
#[derive(Debug, Clone, PartialEq)]
pub struct WandbRunFile {
    pub run: LoggedRun,
    pub entity: Option<String>,
    pub project: Option<String>,
    pub tags: Vec<String>,
    /// The run's config, keys as logged (values unwrapped from WandB's `{"value": …}`).
    pub config: BTreeMap<String, MetricValue>,
    /// Present once the run finished (`wandb.finish()` or the process's end).
    pub exit_code: Option<i32>,
    /// What could not be read: a truncated or corrupt tail, an undecodable record.
    pub problems: Vec<String>,
}

pub fn read_wandb_file(path: &Path) -> Result<WandbRunFile, MetricsError> {
    let bytes = std::fs::read(path).map_err(|source| MetricsError::Io {
        action: "read",
        path: path.to_owned(),
        source,
    })?;
    log::check_header(&bytes).map_err(|reason| MetricsError::NotAWandbFile {
        path: path.to_owned(),
        reason,
    })?;
    let payloads = log::payloads(&bytes);
    let mut reader = RunReader {
        problems: payloads.problems,
        ..RunReader::default()
    };
    for (index, payload) in payloads.records.iter().enumerate() {
        match Record::decode(payload.bytes()) {
            Ok(record) => reader.add(record),
            Err(error) => reader
                .problems
                .push(format!("record {index} does not decode ({error}); skipped")),
        }
    }
    Ok(reader.finish(path))
}

#[derive(Default)]
struct RunReader {
    run: LoggedRun,
    entity: Option<String>,
    project: Option<String>,
    tags: Vec<String>,
    config: BTreeMap<String, MetricValue>,
    summary_updates: BTreeMap<String, MetricValue>,
    exit_code: Option<i32>,
    problems: Vec<String>,
}

impl RunReader {
    fn add(&mut self, record: Record) {
        if let Some(run) = record.run {
            self.run.id = non_empty(run.run_id);
            self.run.name = non_empty(run.display_name);
            self.run.group = non_empty(run.run_group);
            self.entity = non_empty(run.entity);
            self.project = non_empty(run.project);
            self.tags = run.tags;
            if let Some(config) = run.config {
                self.add_config(&config.update);
            }
            if let Some(summary) = run.summary {
                self.add_summary(&summary.update, &summary.remove);
            }
        }
        if let Some(history) = record.history {
            self.add_history(history);
        }
        if let Some(summary) = record.summary {
            self.add_summary(&summary.update, &summary.remove);
        }
        if let Some(config) = record.config {
            self.add_config(&config.update);
        }
        if let Some(exit) = record.exit {
            self.exit_code = Some(exit.exit_code);
        }
    }

    fn add_history(&mut self, history: records::HistoryRecord) {
        let mut step = history.step.map(|step| step.num);
        let mut timestamp = None;
        let mut values = BTreeMap::new();
        for item in &history.item {
            let name = item.name();
            let Some(value) = self.value_of(item, "history") else {
                continue;
            };
            match name.as_str() {
                STEP_KEY => step = step.or(value.as_f64().map(|s| s as i64)),
                TIMESTAMP_KEY => timestamp = value.as_f64(),
                RUNTIME_KEY => {}
                _ => {
                    values.insert(name, value);
                }
            }
        }
        let Some(step) = step else {
            self.problems
                .push("a history row without a step; skipped".to_owned());
            return;
        };
        // Several log calls at one step make one row, as in WandB's own history.
        match self.run.history.last_mut() {
            Some(last) if last.step == step => {
                last.values.extend(values);
                last.timestamp = timestamp.or(last.timestamp);
            }
            _ => self.run.history.push(HistoryRow {
                step,
                timestamp,
                values,
            }),
        }
    }

    fn add_summary(&mut self, update: &[Item], remove: &[Item]) {
        for item in update {
            if let Some(value) = self.value_of(item, "summary") {
                self.summary_updates.insert(item.name(), value);
            }
        }
        for item in remove {
            self.summary_updates.remove(&item.name());
        }
    }

    fn add_config(&mut self, update: &[Item]) {
        for item in update {
            if let Some(value) = self.value_of(item, "config") {
                let value = match value {
                    MetricValue::Other(serde_json::Value::Object(mut wrapped))
                        if wrapped.len() == 1 && wrapped.contains_key("value") =>
                    {
                        wrapped
                            .remove("value")
                            .map_or(MetricValue::Other(serde_json::Value::Null), |inner| {
                                MetricValue::from_json(inner)
                            })
                    }
                    other => other,
                };
                self.config.insert(item.name(), value);
            }
        }
    }

    fn value_of(&mut self, item: &Item, part: &str) -> Option<MetricValue> {
        match parse_python_json(&item.value_json) {
            Ok(value) => Some(MetricValue::from_json(value)),
            Err(error) => {
                self.problems.push(format!(
                    "{part} value of '{}' is not JSON ({error}); skipped",
                    item.name()
                ));
                None
            }
        }
    }

    fn finish(mut self, path: &Path) -> WandbRunFile {
        self.run.history.sort_by_key(|row| row.step);
        // Summary records are written from time to time; what the history says is at least as
        // new for a file cut short, so it comes first and explicit updates (non-history keys
        // such as a final path) are laid over it.
        let mut summary = summary_of(&self.run.history);
        summary.extend(self.summary_updates);
        self.run.summary = summary;
        self.run.path = Some(path.to_owned());
        self.run.state = self
            .exit_code
            .map(|code| if code == 0 { "finished" } else { "failed" }.to_owned());
        WandbRunFile {
            run: self.run,
            entity: self.entity,
            project: self.project,
            tags: self.tags,
            config: self.config,
            exit_code: self.exit_code,
            problems: self.problems,
        }
    }
}

fn non_empty(text: String) -> Option<String> {
    (!text.is_empty()).then_some(text)
}

/// The source over the run folder's `wandb/` directory (the run's `WANDB_DIR`).
#[derive(Debug, Clone, Copy, Default)]
pub struct WandbFiles;

#[async_trait]
impl MetricsSource for WandbFiles {
    fn kind(&self) -> SourceKind {
        SourceKind::WandbFiles
    }

    async fn fetch(&self, target: &RunTarget) -> Result<Option<RunMetrics>, MetricsError> {
        let dir = target.wandb_dir();
        let names = target.wandb.clone();
        read_off_thread(dir.clone(), move || read_run_files(&dir, names.as_ref())).await
    }
}

#[expect(
    clippy::unnecessary_wraps,
    reason = "read_off_thread takes a reader that may fail; this one turns problems into warnings"
)]
fn read_run_files(
    dir: &Path,
    names: Option<&WandbNames>,
) -> Result<Option<RunMetrics>, MetricsError> {
    if !dir.is_dir() {
        return Ok(None);
    }
    let mut trainers = Vec::new();
    let mut envs = Vec::new();
    let mut metrics = RunMetrics::empty(SourceKind::WandbFiles);
    for path in run_files(dir) {
        let file = match read_wandb_file(&path) {
            Ok(file) => file,
            // Unreadable files are reported; the other runs of the folder still count.
            Err(error) => {
                metrics.warnings.push(error.to_string());
                continue;
            }
        };
        let modified = std::fs::metadata(&path)
            .and_then(|meta| meta.modified())
            .unwrap_or(SystemTime::UNIX_EPOCH);
        match role_of(&file, names) {
            Some(RunRole::Trainer) => trainers.push((modified, file)),
            Some(RunRole::Env) => envs.push((modified, file)),
            None => {}
        }
    }
    metrics.trainer = newest(trainers, RunRole::Trainer, &mut metrics.warnings);
    metrics.env = newest(envs, RunRole::Env, &mut metrics.warnings);
    if metrics.trainer.is_none() && metrics.env.is_none() && metrics.warnings.is_empty() {
        return Ok(None);
    }
    Ok(Some(metrics))
}

fn run_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = walkdir::WalkDir::new(dir)
        .max_depth(2)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|entry| entry.file_type().is_file())
        .filter(|entry| {
            let name = entry.file_name().to_string_lossy();
            name.starts_with("run-") && name.ends_with(".wandb")
        })
        .map(walkdir::DirEntry::into_path)
        .collect();
    files.sort();
    files
}

fn role_of(file: &WandbRunFile, names: Option<&WandbNames>) -> Option<RunRole> {
    let display_name = file.run.name.as_deref().unwrap_or_default();
    match names {
        Some(names) if names.is_trainer_run(display_name) => Some(RunRole::Trainer),
        Some(names) if names.is_env_run(display_name) => Some(RunRole::Env),
        Some(_) => None,
        // Without the run's names, the trainer is known by its tag and name pattern.
        None if file.tags.iter().any(|tag| tag == "trainer")
            || display_name.contains("-trainer-") =>
        {
            Some(RunRole::Trainer)
        }
        None => Some(RunRole::Env),
    }
}

fn newest(
    mut files: Vec<(SystemTime, WandbRunFile)>,
    role: RunRole,
    warnings: &mut Vec<String>,
) -> Option<LoggedRun> {
    files.sort_by_key(|(modified, _)| *modified);
    let count = files.len();
    let (_, file) = files.pop()?;
    if count > 1 {
        warnings.push(format!(
            "{count} WandB {role} runs in the run folder; using the newest, {}",
            file.run.name.as_deref().unwrap_or("(unnamed)")
        ));
    }
    let where_ = file
        .run
        .path
        .as_deref()
        .map(|path| path.display().to_string())
        .unwrap_or_default();
    warnings.extend(
        file.problems
            .iter()
            .map(|problem| format!("{where_}: {problem}")),
    );
    Some(file.run)
}
