//! `rl start|runs|status|results|events|wait|stop`: training runs; and the hidden `rl supervise`, the
//! body of each run's detached supervisor.

use std::time::Duration;

use anyhow::Context as _;
use clap::ValueEnum;
use rl_config::{RunConfig, RunId};
use rl_metrics::{HealthDigest, MetricValue, Results, SourceFailure, SourceKind, StatusMetrics};
use rl_process::{
    ComponentStatus, Event, RunRecord, RunStatus, Runs, SupervisorCommand, WaitUntil,
};
use serde::Serialize;

use crate::context::Context;
use crate::metrics::{self, Patience, SourceChoice};
use crate::output;

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum Until {
    /// Any change of state or phase.
    Change,
    /// `running`, or an end.
    Running,
    /// stopped, completed, failed or lost.
    Finished,
}

impl From<Until> for WaitUntil {
    fn from(until: Until) -> Self {
        match until {
            Until::Change => WaitUntil::Change,
            Until::Running => WaitUntil::Running,
            Until::Finished => WaitUntil::Finished,
        }
    }
}

fn runs(context: &Context) -> anyhow::Result<Runs> {
    Ok(Runs::open(&context.home()?)?)
}

fn run_id(text: &str) -> anyhow::Result<RunId> {
    Ok(RunId::parse(text)?)
}

pub(crate) fn start(
    context: &Context,
    wait: Option<Until>,
    timeout: f64,
    as_json: bool,
) -> anyhow::Result<()> {
    let service = context.service()?;
    let secrets = context.secrets()?;
    let supervisor = SupervisorCommand {
        program: std::env::current_exe().context("cannot find the rl executable")?,
        args: vec!["supervise".to_owned()],
    };
    let mut runs = runs(context)?;
    let started = runs.start(&service, &secrets, &supervisor)?;
    let id = run_id(&started.run.id)?;
    let status = match wait {
        None => started,
        Some(until) => runs.wait(&id, until.into(), seconds(timeout)?, 0)?.status,
    };
    if as_json {
        return output::json(&status);
    }
    print_status(&status)
}

pub(crate) fn list(context: &Context, as_json: bool) -> anyhow::Result<()> {
    let all = runs(context)?.list()?;
    if as_json {
        return output::json(&all);
    }
    if all.is_empty() {
        return output::line("no runs yet; start one with `rl start`");
    }
    let mut table = output::table(&["run", "environment", "state", "created", "error"]);
    for run in all {
        table.add_row([
            run.id.clone(),
            run.environment.clone(),
            run.state.label(),
            run.created_at.clone(),
            run.error
                .as_deref()
                .and_then(|e| e.lines().next())
                .unwrap_or_default()
                .to_owned(),
        ]);
    }
    output::line(table)
}

/// A status with the run's latest numbers and health.
#[derive(Serialize)]
struct StatusWithMetrics<'a> {
    #[serde(flatten)]
    status: &'a RunStatus,
    /// Every key present; each `null` until the run logs it.
    metrics: StatusMetrics,
    health: Option<HealthDigest>,
    metrics_source: Option<SourceKind>,
    metrics_warnings: Vec<String>,
    metrics_errors: Vec<SourceFailure>,
}

pub(crate) fn status(
    context: &Context,
    id: &str,
    since: i64,
    source: SourceChoice,
    as_json: bool,
) -> anyhow::Result<()> {
    let status = runs(context)?.status(&run_id(id)?, since)?;
    let collected = metrics::collect(&status.run, source, Patience::Status, &context.secrets()?)?;
    let found = collected.metrics.as_ref();
    let view = StatusWithMetrics {
        status: &status,
        metrics: found.map(StatusMetrics::of).unwrap_or_default(),
        health: found.and_then(|metrics| {
            let trainer = metrics.trainer.as_ref()?;
            Some(HealthDigest::assess(
                trainer,
                metrics::activity_of(&status.run),
                &metrics::policy(),
            ))
        }),
        metrics_source: found.map(|metrics| metrics.source),
        metrics_warnings: found.map(|m| m.warnings.clone()).unwrap_or_default(),
        metrics_errors: collected.failures.clone(),
    };
    if as_json {
        return output::json(&view);
    }
    print_status(&status)?;
    print_metrics(&view)
}

pub(crate) fn results(
    context: &Context,
    id: &str,
    source: SourceChoice,
    as_json: bool,
) -> anyhow::Result<()> {
    let status = runs(context)?.status(&run_id(id)?, i64::MAX)?;
    let run = &status.run;
    let collected = metrics::collect(run, source, Patience::Results, &context.secrets()?)?;
    let results = collected
        .metrics
        .as_ref()
        .map(|found| Results::of(found, metrics::activity_of(run), &metrics::policy()));
    let wandb = RunConfig::read(&run.config_path)
        .ok()
        .map(|config| config.wandb());
    let view = RunResults {
        run_id: &run.id,
        environment: &run.environment,
        status: run.state.label(),
        error: run.error.as_deref(),
        wandb_project: wandb.as_ref().and_then(|w| w.project.clone()),
        wandb_group: wandb.as_ref().and_then(|w| w.group.clone()),
        wandb_run_name: wandb.as_ref().and_then(|w| w.run_name.clone()),
        results: results.as_ref(),
        metrics_errors: &collected.failures,
    };
    if as_json {
        return output::json(&view);
    }
    print_results(&view)
}

#[derive(Serialize)]
struct RunResults<'a> {
    run_id: &'a str,
    environment: &'a str,
    status: String,
    error: Option<&'a str>,
    wandb_project: Option<String>,
    wandb_group: Option<String>,
    wandb_run_name: Option<String>,
    /// Absent when no source has anything yet.
    #[serde(flatten)]
    results: Option<&'a Results>,
    metrics_errors: &'a [SourceFailure],
}

pub(crate) fn events(
    context: &Context,
    id: &str,
    since: i64,
    limit: usize,
    as_json: bool,
) -> anyhow::Result<()> {
    let events = runs(context)?.events(&run_id(id)?, since, limit)?;
    if as_json {
        let next_since = events.last().map_or(since, |e| e.seq);
        return output::json(&serde_json::json!({ "events": events, "next_since": next_since }));
    }
    print_events(&events)
}

pub(crate) fn wait(
    context: &Context,
    id: &str,
    until: Until,
    timeout: f64,
    since: i64,
    as_json: bool,
) -> anyhow::Result<()> {
    let outcome = runs(context)?.wait(&run_id(id)?, until.into(), seconds(timeout)?, since)?;
    if as_json {
        return output::json(&outcome);
    }
    if outcome.timed_out {
        output::line(format!("timed out after {timeout} s"))?;
    }
    print_status(&outcome.status)
}

pub(crate) fn stop(context: &Context, id: &str, as_json: bool) -> anyhow::Result<()> {
    let report = runs(context)?.stop(&run_id(id)?)?;
    if as_json {
        return output::json(&report);
    }
    output::line(&report.message)
}

/// The detached supervisor's body: its output goes to the run's `supervisor.log`.
pub(crate) fn supervise(context: &Context, id: &str) -> anyhow::Result<()> {
    let id = run_id(id)?;
    let ended = rl_process::supervise(&context.home()?, &id)?;
    output::line(format!("run {id} ended: {}", ended.label()))
}

fn seconds(value: f64) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(value)
        .ok()
        .filter(|_| value <= 7.0 * 86_400.0)
        .with_context(|| format!("--timeout {value} is not a number of seconds up to a week"))
}

fn print_status(status: &RunStatus) -> anyhow::Result<()> {
    let run: &RunRecord = &status.run;
    output::line(format!(
        "run {}  {}  {}  ({:.1} s)",
        run.id,
        run.environment,
        run.state.label(),
        status.elapsed_secs
    ))?;
    output::line(format!("config  {}", run.config_path.display()))?;
    if let (Some(api), Some(trainer)) = (run.api_port, run.trainer_port) {
        output::line(format!("ports   api {api}, trainer {trainer} (127.0.0.1)"))?;
    }
    let mut table = output::table(&["component", "status", "pid", "log"]);
    for component in &run.components {
        let state = match component.status {
            ComponentStatus::NotStarted => "not started".to_owned(),
            ComponentStatus::Running => "running".to_owned(),
            ComponentStatus::Exited { code } => format!("exited ({code})"),
            ComponentStatus::Signalled { signal } => format!("signalled ({signal})"),
        };
        table.add_row([
            component.component.to_string(),
            state,
            component
                .process
                .map(|p| p.pid.to_string())
                .unwrap_or_default(),
            component.log_path.display().to_string(),
        ]);
    }
    output::line(table)?;
    if let Some(error) = &run.error {
        output::line(format!("error: {error}"))?;
    }
    print_events(&status.events)?;
    output::line(format!(
        "next events: rl events {} --since {}",
        run.id, status.next_since
    ))
}

fn metric_rows(metrics: &StatusMetrics) -> [(&'static str, String); 8] {
    let number = |value: Option<f64>| {
        value.map_or_else(|| "-".to_owned(), |v| MetricValue::Number(v).to_string())
    };
    [
        (
            "step",
            metrics
                .step
                .map_or_else(|| "-".to_owned(), |s| s.to_string()),
        ),
        ("reward_mean", number(metrics.reward_mean)),
        ("loss", number(metrics.loss)),
        ("learning_rate", number(metrics.learning_rate)),
        ("percent_correct", number(metrics.percent_correct)),
        ("eval_percent_correct", number(metrics.eval_percent_correct)),
        ("logprobs_diff", number(metrics.logprobs_diff)),
        ("advantages_std", number(metrics.advantages_std)),
    ]
}

fn print_metrics(view: &StatusWithMetrics<'_>) -> anyhow::Result<()> {
    match view.metrics_source {
        None => output::line("metrics: none logged yet")?,
        Some(source) => {
            let numbers: Vec<String> = metric_rows(&view.metrics)
                .into_iter()
                .filter(|(_, value)| value != "-")
                .map(|(name, value)| format!("{name} {value}"))
                .collect();
            output::line(format!("metrics ({source}): {}", numbers.join(", ")))?;
        }
    }
    if let Some(health) = &view.health {
        print_health(health)?;
    }
    print_problems(&view.metrics_warnings, &view.metrics_errors)
}

fn print_health(health: &HealthDigest) -> anyhow::Result<()> {
    if health.healthy {
        return output::line("health: no warning sign");
    }
    for flag in &health.flags {
        output::line(format!(
            "health: {} ({}, steps {}-{}): {}",
            serde_json::to_value(flag.kind)?
                .as_str()
                .unwrap_or_default(),
            flag.metric,
            flag.window.first_step,
            flag.window.last_step,
            flag.detail
        ))?;
    }
    Ok(())
}

fn print_problems(warnings: &[String], failures: &[SourceFailure]) -> anyhow::Result<()> {
    for warning in warnings {
        output::line(format!("metrics warning: {warning}"))?;
    }
    for failure in failures {
        output::line(format!(
            "metrics from {}: {}",
            failure.source, failure.error
        ))?;
    }
    Ok(())
}

fn print_results(view: &RunResults<'_>) -> anyhow::Result<()> {
    output::line(format!(
        "run {}  {}  {}",
        view.run_id, view.environment, view.status
    ))?;
    if let Some(error) = view.error {
        output::line(format!("error: {error}"))?;
    }
    let Some(results) = view.results else {
        output::line("no metrics logged yet")?;
        return print_problems(&[], view.metrics_errors);
    };
    output::line(format!(
        "source: {}, {} steps",
        results.source,
        results.history.len()
    ))?;
    let mut table = output::table(&["metric", "latest"]);
    for (name, value) in metric_rows(&results.metrics) {
        table.add_row([name.to_owned(), value]);
    }
    output::line(table)?;
    output::line(format!(
        "final weights: {}",
        results.final_weights.as_deref().unwrap_or("not reported")
    ))?;
    if let Some(last) = results.checkpoints.last() {
        output::line(format!(
            "checkpoints: {} (last {})",
            results.checkpoints.len(),
            last.path
        ))?;
    }
    for run in [&results.trainer_run, &results.env_run]
        .into_iter()
        .flatten()
    {
        if let Some(url) = &run.url {
            output::line(format!("wandb: {url}"))?;
        }
    }
    print_health(&results.health)?;
    print_problems(&results.warnings, view.metrics_errors)
}

fn print_events(events: &[Event]) -> anyhow::Result<()> {
    for event in events {
        output::line(format!(
            "#{:<5} {}  {:<10} {}",
            event.seq, event.at, event.kind, event.message
        ))?;
    }
    Ok(())
}
