//! `rl_wait_training`: a run followed without polling. The call blocks until the run logs a new
//! step, changes state or ends (as asked), or its timeout passes, telling each step as
//! progress, then answers what `rl_check_status` answers. It is the way on from the agents'
//! status-check limit, so it is not under it: its own minimum wait paces it.

use std::time::{Duration, Instant};

use rl_settings::RunId;
use serde::Deserialize;

use super::{CallProgress, Registry, parse};
use crate::ToolsError;
use crate::answers::{WaitAnswer, WaitedView, to_json};
use crate::limits::{MAX_WAIT_SECONDS, MIN_WAIT_SECONDS};
use crate::metrics::SourceChoice;
use crate::tool_specs::DEFAULT_WAIT_SECONDS;

/// How often the run's record and metrics file are read while waiting.
const LOOK_EVERY: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum WaitFor {
    Step,
    Change,
    Finished,
}

impl WaitFor {
    const fn name(self) -> &'static str {
        match self {
            Self::Step => "step",
            Self::Change => "change",
            Self::Finished => "finished",
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WaitArgs {
    run_id: String,
    #[serde(default)]
    until: Option<WaitFor>,
    #[serde(default)]
    timeout_seconds: Option<f64>,
    #[serde(default)]
    since: u32,
}

/// Where a run stands, as far as a wait cares.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Position {
    state: rl_process::RunState,
    step: Option<i64>,
    total_steps: Option<u64>,
}

impl Registry {
    pub(super) async fn wait_training(
        &self,
        name: &str,
        arguments: serde_json::Value,
        progress: Option<CallProgress>,
    ) -> Result<serde_json::Value, ToolsError> {
        let WaitArgs {
            run_id,
            until,
            timeout_seconds,
            since,
        } = parse(name, arguments)?;
        let until = until.unwrap_or(WaitFor::Step);
        let timeout = timeout_seconds.unwrap_or(DEFAULT_WAIT_SECONDS);
        if !(MIN_WAIT_SECONDS..=MAX_WAIT_SECONDS).contains(&timeout) {
            return Err(ToolsError::BadArguments {
                tool: name.to_owned(),
                // `{:e}`: 1e308 as written, not its 309 digits.
                reason: format!(
                    "timeout_seconds is {timeout:e}: a wait is {MIN_WAIT_SECONDS} to \
                     {MAX_WAIT_SECONDS} seconds (a shorter one is a poll: rl_check_status)"
                ),
            });
        }
        let id = self.tools.run_id(&run_id)?;
        let began = Instant::now();
        let limit = Duration::from_secs_f64(timeout);
        let first = self.position(&id).await?;
        let mut told = None;
        let reached = loop {
            let now = self.position(&id).await?;
            if let Some(progress) = &progress
                && told != Some((now.state, now.step))
            {
                told = Some((now.state, now.step));
                progress(
                    now.step.map_or(0.0, |step| step as f64),
                    now.total_steps.map(|total| total as f64),
                    progress_message(&id, &now),
                );
            }
            let reached = now.state.is_finished()
                || match until {
                    WaitFor::Finished => false,
                    WaitFor::Change => now.state != first.state,
                    WaitFor::Step => now.state != first.state || now.step > first.step,
                };
            let elapsed = began.elapsed();
            if reached || elapsed >= limit {
                break reached;
            }
            tokio::time::sleep(LOOK_EVERY.min(limit.saturating_sub(elapsed))).await;
        };
        let owned = id.clone();
        let status = self
            .tools
            .blocking(move |tools| tools.run_status(&owned, i64::from(since)))
            .await?;
        let status = self
            .tools
            .with_metrics_and_accounting(status, SourceChoice::Auto)
            .await?;
        to_json(&WaitAnswer {
            status,
            waited: WaitedView {
                until: until.name(),
                reached,
                timed_out: !reached,
                seconds: (began.elapsed().as_secs_f64() * 10.0).round() / 10.0,
            },
        })
    }

    /// The run's state and latest step, read from its record and metrics file (never WandB:
    /// this is read every second).
    async fn position(&self, id: &RunId) -> Result<Position, ToolsError> {
        let owned = id.clone();
        let status = self
            .tools
            .blocking(move |tools| tools.run_status(&owned, i64::MAX))
            .await?;
        let state = status.run.state;
        let view = self.tools.with_metrics(status, SourceChoice::File).await?;
        Ok(Position {
            state,
            step: view.metrics.step,
            total_steps: view.total_steps,
        })
    }
}

fn progress_message(id: &RunId, position: &Position) -> String {
    let state = position.state.name();
    match (position.step, position.total_steps) {
        (Some(step), Some(total)) => format!("run {id}: {state}, step {step} of {total}"),
        (Some(step), None) => format!("run {id}: {state}, step {step}"),
        (None, _) => format!("run {id}: {state}"),
    }
}
