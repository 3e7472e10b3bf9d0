//! The answers about training runs. Every key is named here: the record rl-process keeps is
//! read into these, so a renamed field there is a compile error here, never a changed answer.
//!
//! `run_id` and `status` are the original tool's keys; `id`, `state` and `phase` (the run's
//! record, which `rl runs ... --json` has always shown) stay beside them for the scripts that
//! read those (see docs/decisions.md).

use std::collections::BTreeMap;
use std::path::PathBuf;

use rl_process::{
    ComponentRecord, ComponentStatus, Event, ProcessIdentity, RunRecord, RunStatus, WaitOutcome,
};
use rl_settings::{EnvironmentKind, Value};
use serde::Serialize;

use super::algorithm::AlgorithmView;
use super::metrics::{
    AccountingView, GroupsView, HealthView, MetricsView, ResultsPart, SourceFailureView, UsageView,
};

/// A run's record and its events after the caller's cursor.
#[derive(Debug, Clone, Serialize)]
pub struct RunView {
    pub id: String,
    pub environment: String,
    /// `atropos`, `verifiers-v1` or `verifiers-v0`, as the run recorded it; `null` when its
    /// folder holds no record of it.
    pub environment_kind: Option<EnvironmentKind>,
    /// starting, running, stopping, stopped, completed, capped, failed or lost.
    pub state: &'static str,
    /// What a starting run waits for (`queued`, `engine`, `api`, `trainer`, `env`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<&'static str>,
    pub created_at: String,
    pub updated_at: String,
    pub config_path: PathBuf,
    pub api_port: Option<u16>,
    pub trainer_port: Option<u16>,
    pub supervisor: Option<ProcessView>,
    /// Absent while there is none: a present `error` key means a failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The SLURM job holding the run (the SLURM backend only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slurm_job: Option<String>,
    /// The run this one continues, and the step it continues after (a resumed run only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resumed_from: Option<ResumedFrom>,
    /// The sweep it is a point of.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sweep_id: Option<String>,
    pub components: Vec<ComponentView>,
    /// Seconds since the run was created, until it finished.
    pub elapsed_secs: f64,
    pub supervisor_log: PathBuf,
    /// Events after the `since` cursor the caller gave.
    pub events: Vec<EventView>,
    /// Pass this as `since` to get only what happens next.
    pub next_since: i64,
}

impl From<&RunStatus> for RunView {
    fn from(status: &RunStatus) -> Self {
        let run = &status.run;
        Self {
            id: run.id.clone(),
            environment: run.environment.clone(),
            environment_kind: environment_kind_of(run),
            state: run.state.name(),
            phase: run.state.phase().map(rl_process::Phase::as_str),
            created_at: run.created_at.clone(),
            updated_at: run.updated_at.clone(),
            config_path: run.config_path.clone(),
            api_port: run.api_port,
            trainer_port: run.trainer_port,
            supervisor: run.supervisor.map(ProcessView::from),
            error: run.error.clone(),
            slurm_job: run.slurm_job.clone(),
            resumed_from: run.resumed_from.as_ref().map(ResumedFrom::from),
            sweep_id: run.sweep.clone(),
            components: run
                .components
                .iter()
                .map(|component| {
                    let capped = status.capped_logs.contains(&component.component);
                    ComponentView::new(component, capped)
                })
                .collect(),
            elapsed_secs: status.elapsed_secs,
            supervisor_log: status.supervisor_log.clone(),
            events: status.events.iter().map(EventView::from).collect(),
            next_since: status.next_since,
        }
    }
}

/// Where a run that continues another comes from: its lineage.
#[derive(Debug, Clone, Serialize)]
pub struct ResumedFrom {
    pub run_id: String,
    /// The parent's step whose saved state it continues from: its first step is the next.
    pub step: u64,
    /// `resume` (from the last saved state, as it was), `fork` (from a chosen step, with
    /// changes) or `extension` (given more steps).
    pub kind: &'static str,
    /// What it runs with instead of its parent's settings (a fork's changes, an extension's
    /// last step).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub changes: BTreeMap<String, rl_settings::Value>,
}

impl From<&rl_process::Lineage> for ResumedFrom {
    fn from(lineage: &rl_process::Lineage) -> Self {
        Self {
            run_id: lineage.parent.to_string(),
            step: lineage.step,
            kind: lineage.kind.as_str(),
            changes: lineage.changes.clone(),
        }
    }
}

/// A process as rl knows it again after pid reuse.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ProcessView {
    pub pid: u32,
    pub start_ticks: u64,
}

impl From<ProcessIdentity> for ProcessView {
    fn from(process: ProcessIdentity) -> Self {
        Self {
            pid: process.pid,
            start_ticks: process.start_ticks,
        }
    }
}

/// One component of a run: `"status": "exited", "code": 1`, `"status": "signalled",
/// "signal": 15`, or `not_started`, `running`, `lost`.
#[derive(Debug, Clone, Serialize)]
pub struct ComponentView {
    pub component: &'static str,
    pub process: Option<ProcessView>,
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    pub log_path: PathBuf,
    /// The log reached the run's `log_limit_bytes`: `log_path` keeps its head, and its latest
    /// output is in `log_tail_path` (`rl runs logs` shows it).
    pub log_capped: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_tail_path: Option<PathBuf>,
    /// For people: `running`, `not started`, `exited (0)`, `signalled (15)`, each with
    /// `, log capped` once it is.
    #[serde(skip)]
    pub label: String,
}

impl ComponentView {
    /// `component` as seen now; `capped` when its log reached its limit.
    fn new(component: &ComponentRecord, capped: bool) -> Self {
        let (status, code, signal) = match component.status {
            ComponentStatus::NotStarted => ("not_started", None, None),
            ComponentStatus::Running => ("running", None, None),
            ComponentStatus::Exited { code } => ("exited", Some(code), None),
            ComponentStatus::Signalled { signal } => ("signalled", None, Some(signal)),
            ComponentStatus::Lost => ("lost", None, None),
        };
        Self {
            component: component.component.as_str(),
            process: component.process.map(ProcessView::from),
            status,
            code,
            signal,
            log_path: component.log_path.clone(),
            log_capped: capped,
            log_tail_path: capped.then(|| rl_process::tail_path(&component.log_path)),
            label: if capped {
                format!("{}, log capped", process_label(component.status))
            } else {
                process_label(component.status)
            },
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct EventView {
    /// Increases across all runs; pass the last one seen as `since` to get only newer events.
    pub seq: i64,
    pub at: String,
    pub kind: String,
    pub message: String,
}

impl From<&Event> for EventView {
    fn from(event: &Event) -> Self {
        Self {
            seq: event.seq,
            at: event.at.clone(),
            kind: event.kind.clone(),
            message: event.message.clone(),
        }
    }
}

/// `rl_start_training`: the original's keys next to the run's record.
#[derive(Debug, Clone, Serialize)]
pub struct Started {
    pub run_id: String,
    pub status: &'static str,
    /// The environment section of the run's config: what the environment will use.
    pub config: BTreeMap<String, Value>,
    pub wandb_project: Option<String>,
    pub wandb_group: Option<String>,
    pub wandb_run_name: Option<String>,
    pub logs: BTreeMap<String, PathBuf>,
    /// The run's caps (its own under the operator's): before a step that would pass one, the
    /// trainer saves its state and the run ends `capped`.
    pub caps: CapsView,
    /// What the run pays per million tokens (and per hour of the local engine's machine), or
    /// a sentence saying no price is set (the run then counts tokens only).
    pub prices: PricesView,
    pub message: String,
    #[serde(flatten)]
    pub run: RunView,
}

/// A run's caps as its trainer reads them; `null` where none is set.
#[derive(Debug, Clone, Serialize)]
pub struct CapsView {
    pub max_cost: Option<f64>,
    pub max_tokens: Option<u64>,
    pub max_hours: Option<f64>,
    /// The label of `max_cost` (the operator's `[prices] currency`).
    pub currency: String,
}

/// A run's prices, or that none is set.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum PricesView {
    Set {
        currency: String,
        prompt_per_million: Option<f64>,
        sampled_per_million: Option<f64>,
        trained_per_million: Option<f64>,
        machine_per_hour: Option<f64>,
    },
    NotSet(&'static str),
}

/// What a run's answer says when the operator set no price for its model.
const NO_PRICE_SET: &str = "no price is set ([prices] in config.toml): the run counts tokens only";

impl Started {
    /// The caps and prices of a run as its trainer reads them from its config (`None`: the
    /// config is unreadable: no cap and no price shown).
    pub(crate) fn costs(trainer: Option<&rl_settings::Trainer>) -> (CapsView, PricesView) {
        let Some(trainer) = trainer else {
            let caps = CapsView {
                max_cost: None,
                max_tokens: None,
                max_hours: None,
                currency: String::new(),
            };
            return (caps, PricesView::NotSet(NO_PRICE_SET));
        };
        let caps = CapsView {
            max_cost: trainer.caps.max_cost,
            max_tokens: trainer.caps.max_tokens,
            max_hours: trainer.caps.max_hours,
            currency: trainer.currency.clone(),
        };
        let prices = match trainer.prices {
            Some(prices) => PricesView::Set {
                currency: trainer.currency.clone(),
                prompt_per_million: prices.tokens.prompt_per_million,
                sampled_per_million: prices.tokens.sampled_per_million,
                trained_per_million: prices.tokens.trained_per_million,
                machine_per_hour: prices.machine_per_hour,
            },
            None => PricesView::NotSet(NO_PRICE_SET),
        };
        (caps, prices)
    }
}

/// `rl_check_status`: the original's keys and the latest metrics next to the run's record.
#[derive(Debug, Clone, Serialize)]
pub struct StatusView {
    pub run_id: String,
    /// starting, running, stopping, stopped, completed, capped, failed or lost.
    pub status: &'static str,
    pub running_time_minutes: f64,
    /// Each component: `running`, `not started`, `exited (0)`, `signalled (15)`.
    pub processes: BTreeMap<String, String>,
    pub wandb_project: Option<String>,
    pub wandb_group: Option<String>,
    pub wandb_run_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wandb_url: Option<String>,
    pub logs: BTreeMap<String, PathBuf>,
    /// Every key present; each `null` until the run logs it.
    pub metrics: MetricsView,
    pub health: Option<HealthView>,
    /// The groups the environment made (`rl_env`'s counts); absent before the first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub groups: Option<GroupsView>,
    /// The loss, advantages and truncation its config sets (issue 43); `null` when its config
    /// cannot be read.
    pub algorithm: Option<AlgorithmView>,
    /// `metrics_file`, `wandb_files`, `wandb_api`, `trainer_log` or `checkpoints_file`.
    pub metrics_source: Option<&'static str>,
    pub metrics_warnings: Vec<String>,
    pub metrics_errors: Vec<SourceFailureView>,
    #[serde(flatten)]
    pub run: RunView,
    /// For people: every trainer step's numbers, in step order (the curves `rl runs status`
    /// draws); agents read them from `rl_get_results`.
    #[serde(skip)]
    pub history: Vec<MetricsView>,
    /// For people: the steps the run trains (`env.total_steps` of its config).
    #[serde(skip)]
    pub total_steps: Option<u64>,
    /// For people: seconds until the last step, at the pace of the latest steps.
    #[serde(skip)]
    pub eta_secs: Option<f64>,
}

/// `rl_check_status` / `rl runs status --json`: the status and where the run's tokens, seconds
/// and money went.
#[derive(Debug, Clone, Serialize)]
pub struct StatusAnswer {
    #[serde(flatten)]
    pub status: StatusView,
    /// `null` for a trainer that logs no token totals.
    pub accounting: Option<AccountingView>,
}

/// `rl_get_results` / `rl runs results --json`: the results and the run's accounting.
#[derive(Debug, Clone, Serialize)]
pub struct ResultsAnswer {
    #[serde(flatten)]
    pub results: ResultsView,
    /// `null` for a trainer that logs no token totals.
    pub accounting: Option<AccountingView>,
}

/// `rl_wait_training`: the status once the wait ended, and how it ended.
#[derive(Debug, Clone, Serialize)]
pub struct WaitAnswer {
    #[serde(flatten)]
    pub status: StatusAnswer,
    pub waited: WaitedView,
}

/// How a wait ended: `reached` what it waited for (or the run ended), or `timed_out`.
#[derive(Debug, Clone, Serialize)]
pub struct WaitedView {
    /// step, change or finished.
    pub until: &'static str,
    pub reached: bool,
    pub timed_out: bool,
    pub seconds: f64,
}

/// `rl_check_status` within the interval an agent must wait between checks of a run: an
/// answer, not an error.
#[derive(Debug, Clone, Serialize)]
pub struct RateLimited {
    pub rate_limited: bool,
    pub run_id: String,
    pub message: String,
    pub next_check_in_seconds: f64,
    pub hint: &'static str,
}

/// `rl_stop_training`.
#[derive(Debug, Clone, Serialize)]
pub struct Stopped {
    pub message: String,
    pub run_id: String,
    pub status: &'static str,
    /// Whether this call stopped anything (false for a run that had already ended).
    pub stopped: bool,
    pub run: RunView,
}

/// `rl_get_results`.
#[derive(Debug, Clone, Serialize)]
pub struct ResultsView {
    pub run_id: String,
    pub status: &'static str,
    pub environment: String,
    /// As in [`RunView`].
    pub environment_kind: Option<EnvironmentKind>,
    /// Absent while there is none: a present `error` key means a failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub wandb_project: Option<String>,
    pub wandb_group: Option<String>,
    pub wandb_run_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wandb_url: Option<String>,
    /// Absent when no source has anything yet.
    #[serde(flatten)]
    pub results: Option<ResultsPart>,
    pub metrics_errors: Vec<SourceFailureView>,
}

/// `rl_list_runs`.
#[derive(Debug, Clone, Serialize)]
pub struct RunList {
    pub runs: Vec<RunEntry>,
    pub count: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunEntry {
    pub run_id: String,
    pub environment: String,
    /// As in [`RunView`].
    pub environment_kind: Option<EnvironmentKind>,
    pub status: &'static str,
    pub phase: Option<String>,
    pub wandb_run_name: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    /// Absent while there is none: a present `error` key means a failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Its tokens and cost so far (`rl runs list`); absent when not read or never logged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<UsageView>,
    /// The sweep it is a point of.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sweep_id: Option<String>,
}

impl RunEntry {
    pub(crate) fn new(run: RunRecord, wandb_run_name: Option<String>) -> Self {
        Self {
            phase: run.state.phase().map(|phase| phase.to_string()),
            environment_kind: environment_kind_of(&run),
            wandb_run_name,
            run_id: run.id,
            environment: run.environment,
            status: run.state.name(),
            created_at: run.created_at,
            updated_at: run.updated_at,
            error: run.error,
            usage: None,
            sweep_id: run.sweep,
        }
    }

    /// Its error in one line, as a table of runs shows it: never cut before its cause.
    pub fn error_headline(&self) -> Option<String> {
        self.error.as_deref().map(error_headline)
    }
}

/// A run's error in one line: its first line, without the pointer to the log lines below it
/// (`; last lines of LOG:`), which one line cannot show. When what precedes names no cause
/// (no `: ` after what ended, as when rl's trainer refused without a Python exception, its
/// last words the last line of its log), the log's last line that says something follows
/// it: the line of a failure is never cut before its cause.
fn error_headline(error: &str) -> String {
    let mut lines = error.lines();
    let first = lines.next().unwrap_or_default().trim_end();
    let Some((head, _)) = first
        .strip_suffix(':')
        .and_then(|line| line.rsplit_once("; last lines of "))
    else {
        return first.to_owned();
    };
    if head.contains(": ") {
        return head.to_owned();
    }
    match lines
        .rev()
        .map(str::trim)
        .find(|line| line.chars().any(char::is_alphanumeric))
    {
        Some(last) => format!("{head}: {last}"),
        None => head.to_owned(),
    }
}

#[cfg(test)]
mod headline_tests {
    use super::error_headline;

    #[test]
    fn a_failure_whose_cause_is_only_in_the_log_keeps_it_in_its_line() {
        // rl's trainer refused (a 404 of the engine) without a Python exception: its last
        // words are the last line of its log, and the only place the cause is.
        let error = "trainer exited with code 1 before it was ready; last lines of \
                     /h/runs/ab/trainer.log:\n[rl-trainer] connecting\n\
                     rl-trainer: setup failed: Checkpoint not found: model_1/step_4\n\n";
        assert_eq!(
            error_headline(error),
            "trainer exited with code 1 before it was ready: rl-trainer: setup failed: \
             Checkpoint not found: model_1/step_4"
        );
        // A cause already in the first line is kept there, the log pointer left out.
        let error = "env exited with code 1: LookupError: words not found; last lines of \
                     /h/env.log:\n  raise LookupError(\n*****\n";
        assert_eq!(
            error_headline(error),
            "env exited with code 1: LookupError: words not found"
        );
        // One line with no log after it is the error.
        assert_eq!(
            error_headline("its supervisor is gone; the stop ended what it found"),
            "its supervisor is gone; the stop ended what it found"
        );
        assert_eq!(
            error_headline("trainer exited with code 1; its log /h/t.log is empty"),
            "trainer exited with code 1; its log /h/t.log is empty"
        );
    }
}

/// A run's events after a cursor.
#[derive(Debug, Clone, Serialize)]
pub struct EventsView {
    pub run_id: String,
    pub events: Vec<EventView>,
    pub next_since: i64,
}

/// The end of one component's log (`rl runs logs`): rl-process's `LogTail` of its file, named
/// and with secrets masked.
#[derive(Debug, Clone, Serialize)]
pub struct ComponentLog {
    pub component: String,
    pub path: PathBuf,
    /// The last lines, oldest first; secrets the run could see are masked.
    pub lines: Vec<String>,
    /// Whether earlier lines were left out.
    pub truncated: bool,
    /// The log reached its limit: its head is kept in `path`, and these lines are its latest
    /// (from its tail files).
    pub capped: bool,
}

/// A wait for a run: whether it timed out, and the run as it is now.
#[derive(Debug, Clone, Serialize)]
pub struct WaitView {
    pub timed_out: bool,
    pub status: RunView,
}

impl From<&WaitOutcome> for WaitView {
    fn from(outcome: &WaitOutcome) -> Self {
        Self {
            timed_out: outcome.timed_out,
            status: RunView::from(&outcome.status),
        }
    }
}

/// The kind of environment `run` ran, as its folder's `environment.json` records it.
pub(crate) fn environment_kind_of(run: &RunRecord) -> Option<EnvironmentKind> {
    let folder = rl_settings::RunFolder::at(run.config_path.parent()?);
    rl_config::run_environment_kind(&folder)
}

/// A component's process as people read it: its view's `label`, and the status's `processes`.
pub(crate) fn process_label(status: ComponentStatus) -> String {
    match status {
        ComponentStatus::NotStarted => "not started".to_owned(),
        ComponentStatus::Running => "running".to_owned(),
        ComponentStatus::Exited { code } => format!("exited ({code})"),
        ComponentStatus::Signalled { signal } => format!("signalled ({signal})"),
        ComponentStatus::Lost => "lost (ended unseen)".to_owned(),
    }
}
