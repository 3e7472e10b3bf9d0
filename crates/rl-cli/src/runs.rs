//! `rl start|runs|status|events|wait|stop`: training runs; and the hidden `rl supervise`, the
//! body of each run's detached supervisor.

use std::time::Duration;

use anyhow::Context as _;
use clap::ValueEnum;
use rl_config::RunId;
use rl_process::{
    ComponentStatus, Event, RunRecord, RunStatus, Runs, SupervisorCommand, WaitUntil,
};

use crate::context::Context;
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

pub(crate) fn status(context: &Context, id: &str, since: i64, as_json: bool) -> anyhow::Result<()> {
    let status = runs(context)?.status(&run_id(id)?, since)?;
    if as_json {
        return output::json(&status);
    }
    print_status(&status)
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

fn print_events(events: &[Event]) -> anyhow::Result<()> {
    for event in events {
        output::line(format!(
            "#{:<5} {}  {:<10} {}",
            event.seq, event.at, event.kind, event.message
        ))?;
    }
    Ok(())
}
