//! A whole test: every model at once (bounded), each cut at its timeout without stopping the
//! others, then figures against one shared notion of "correct", and the verdict.

use std::sync::Arc;
use std::time::Instant;

use rl_settings::Secrets;
use tokio::sync::Semaphore;

use crate::analysis::{self, Groups};
use crate::command::{ModelJob, model_job};
use crate::error::PreflightError;
use crate::folder::PreflightFolder;
use crate::model::{ModelOutcome, ModelReport};
use crate::plan::PreflightPlan;
use crate::report::PreflightReport;
use crate::runner::{ModelRun, ModelRunner, Progress, ProgressSink};
use crate::server;
use crate::store::PreflightStore;
use crate::tracking::{PreflightOwner, PreflightStarted, stop_request};
use crate::verdict::{Grading, summarise};

/// Lines of a failed model's log kept in its report.
const ERROR_TAIL_LINES: usize = 20;

pub async fn run_test(
    plan: &PreflightPlan,
    store: &PreflightStore,
    runner: Arc<dyn ModelRunner>,
    // Every key the models' logs must not hold (the endpoint's included).
    secrets: Secrets,
    progress: ProgressSink,
) -> Result<PreflightReport, PreflightError> {
    // Listing reconciles: what the killed runners of earlier tests left is ended before more
    // models start. A failure to look is no reason to refuse this test.
    let earlier = store.clone();
    let _ = tokio::task::spawn_blocking(move || earlier.list()).await;
    let owner = PreflightOwner::this_process();
    let started_at = jiff::Timestamp::now().to_string();
    let clock = Instant::now();
    let (started, dir) = store.create(|test_id| PreflightStarted {
        test_id: test_id.to_owned(),
        environment: plan.environment.clone(),
        models: plan.models.clone(),
        base_url: plan.endpoint.base_url.clone(),
        started_at: started_at.clone(),
        steps: Some(plan.steps),
        owner: owner.clone(),
    })?;
    progress(Progress::Created {
        test_id: started.test_id.clone(),
        dir: dir.clone(),
    });
    let jobs: Vec<ModelJob> = plan
        .models
        .iter()
        .enumerate()
        .map(|(index, model)| model_job(plan, index, model, &dir))
        .collect();

    let mut server_ready_secs = None;
    let runs = match &plan.server {
        None => run_models(plan, &jobs, &runner, &secrets, &progress).await,
        Some(server) => match server::start(server, &dir, &secrets, plan.log_limit).await {
            Ok(running) => {
                server_ready_secs = Some(clock.elapsed().as_secs_f64());
                let runs = run_models(plan, &jobs, &runner, &secrets, &progress).await;
                running.end().await;
                runs
            }
            Err(reason) => {
                let reason = secrets.redact(&reason);
                jobs.iter()
                    .map(|job| {
                        let outcome = ModelOutcome::NotStarted {
                            reason: reason.clone(),
                        };
                        progress(Progress::Finished {
                            model: job.model.clone(),
                            outcome: outcome.clone(),
                        });
                        Some(ModelRun {
                            outcome,
                            duration: std::time::Duration::ZERO,
                        })
                    })
                    .collect()
            }
        },
    };

    let groups: Vec<Groups> = jobs
        .iter()
        .map(|job| analysis::read_groups(&job.output_path).unwrap_or_default())
        .collect();
    let correct_from = analysis::threshold(
        plan.correct_rule,
        groups
            .iter()
            .flat_map(|g| g.scores.iter().flatten().copied()),
    );
    let models: Vec<ModelReport> = jobs
        .iter()
        .zip(runs)
        .zip(&groups)
        .map(|((job, run), groups)| {
            let run = run.unwrap_or(ModelRun {
                outcome: ModelOutcome::NotStarted {
                    reason: "its task ended without a result".to_owned(),
                },
                duration: std::time::Duration::ZERO,
            });
            let (error, error_tail) = if run.outcome == ModelOutcome::Succeeded {
                (None, Vec::new())
            } else {
                let log = read_log_end(&job.log_path);
                (
                    Some(failure_cause(&run.outcome, &log)),
                    tail(&log, ERROR_TAIL_LINES),
                )
            };
            ModelReport {
                model: job.model.clone(),
                outcome: run.outcome,
                duration_secs: run.duration.as_secs_f64(),
                figures: analysis::figures(groups, correct_from),
                error,
                error_tail,
                log_path: job.log_path.clone(),
                output_path: job.output_path.clone(),
            }
        })
        .collect();
    let stopped_at =
        stop_request(&PreflightFolder::at(&dir).stop()).map(|request| request.requested_at);
    let grading = Grading {
        rule: plan.correct_rule,
        correct_from,
    };
    let mut summary = summarise(&models, plan.verdict_policy, grading);
    if stopped_at.is_some() {
        summary.explanation = format!(
            "the test was stopped before its end (rl preflight stop); {}",
            summary.explanation
        );
    }
    let report = PreflightReport {
        test_id: started.test_id,
        environment: plan.environment.clone(),
        environment_file: Some(plan.env_file.clone()),
        base_url: plan.endpoint.base_url.clone(),
        key_variable: plan.endpoint.key_variable.clone(),
        steps: plan.steps,
        group_size: plan.group_size,
        correct_rule: plan.correct_rule,
        correct_from: correct_from.filter(|threshold| threshold.is_finite()),
        started_at,
        stopped_at,
        duration_secs: clock.elapsed().as_secs_f64(),
        server_ready_secs,
        output_dir: dir,
        models,
        summary,
    };
    store.save(&report)?;
    Ok(report)
}

/// Enough of a failed model's log to find the exception that ended it (tracebacks wrapped in
/// retries run to a few hundred lines), without reading a log of any length whole.
const CAUSE_SEARCH_LINES: usize = 2000;

/// Every model's job at once, up to the plan's concurrency.
async fn run_models(
    plan: &PreflightPlan,
    jobs: &[ModelJob],
    runner: &Arc<dyn ModelRunner>,
    secrets: &Secrets,
    progress: &ProgressSink,
) -> Vec<Option<ModelRun>> {
    let permits = Arc::new(Semaphore::new(plan.concurrency));
    let mut tasks = tokio::task::JoinSet::new();
    for (index, job) in jobs.iter().cloned().enumerate() {
        let (runner, permits, secrets, progress) = (
            runner.clone(),
            permits.clone(),
            secrets.clone(),
            progress.clone(),
        );
        let timeout = plan.timeout;
        tasks.spawn(async move {
            // The semaphore is never closed, so a permit always comes.
            let _permit = permits.acquire_owned().await.ok();
            (index, runner.run(job, timeout, secrets, progress).await)
        });
    }
    let mut runs: Vec<Option<ModelRun>> = vec![None; jobs.len()];
    while let Some(joined) = tasks.join_next().await {
        if let Ok((index, run)) = joined {
            runs[index] = Some(run);
        }
    }
    runs
}

fn read_log_end(path: &std::path::Path) -> String {
    rl_process::read_log_tail(path, CAUSE_SEARCH_LINES)
        .map(|tail| tail.lines.join("\n"))
        .unwrap_or_default()
}

fn tail(log: &str, lines: usize) -> Vec<String> {
    let all: Vec<&str> = log.lines().filter(|line| !line.trim().is_empty()).collect();
    all[all.len().saturating_sub(lines)..]
        .iter()
        .map(|line| (*line).to_owned())
        .collect()
}

/// What explains a model that did not succeed, never nothing: the cause its log shows, else
/// the reason it was not started, else its log's last line, else that it printed nothing.
fn failure_cause(outcome: &ModelOutcome, log: &str) -> String {
    let last = log
        .lines()
        .rev()
        .map(str::trim)
        .find(|line| !line.is_empty());
    // A runner that exited on its own said why in its last line (a signal cuts it anywhere).
    if let (ModelOutcome::Failed { code: Some(_), .. }, Some(last)) = (outcome, last)
        && RUNNER_PREFIXES
            .iter()
            .any(|prefix| last.starts_with(prefix))
    {
        return clipped(last);
    }
    if let Some(cause) = cause(log) {
        return cause;
    }
    if let ModelOutcome::NotStarted { reason } = outcome {
        return reason.clone();
    }
    match last {
        Some(last) => format!("its log ends: {}", clipped(last)),
        None => "it printed nothing".to_owned(),
    }
}

/// A line cut to a message's length.
fn clipped(line: &str) -> String {
    if line.chars().count() <= MESSAGE_CHARS {
        return line.to_owned();
    }
    let kept: String = line.chars().take(MESSAGE_CHARS).collect();
    format!("{kept} …")
}

/// rl's environment runners (`rl_env`, `rl_verifiers`) end a failure (exit 1 or 2) with one
/// line of their own saying why, their last.
const RUNNER_PREFIXES: [&str; 2] = ["rl_verifiers: ", "rl_env: "];

/// The exception that explains a failure. atroposlib wraps the real one (an HTTP error, a
/// timeout) in tenacity's `RetryError`, twice, and a harmless "no running event loop" follows:
/// the last exception line that is neither is the cause, with the rest of its message (an
/// exception's message may run over several lines, and its fix is often on a later one:
/// atroposlib's refusal of a ManagedServer on an OpenAI endpoint names the variable that allows
/// it three lines down). Our own notes (`rl: cut after …`) win.
fn cause(log: &str) -> Option<String> {
    const WRAPPERS: [&str; 2] = ["tenacity.RetryError", "RuntimeError: no running event loop"];
    let lines: Vec<&str> = log.lines().collect();
    if let Some(note) = lines.iter().rev().find(|line| line.starts_with("rl: ")) {
        return Some((*note).to_owned());
    }
    let at = lines.iter().rposition(|line| {
        let line = exception_text(line);
        is_exception_line(line) && !WRAPPERS.iter().any(|w| line.starts_with(w))
    })?;
    let mut cause = exception_text(lines[at]).to_owned();
    for line in lines[at + 1..]
        .iter()
        .take_while(|line| !ends_a_message(line))
        .map(|line| exception_text(line))
        .filter(|line| !line.is_empty())
        .take(MESSAGE_LINES)
    {
        if cause.chars().count() + line.chars().count() > MESSAGE_CHARS {
            cause.push_str(" …");
            break;
        }
        cause.push(' ');
        cause.push_str(line);
    }
    Some(cause)
}

/// A line as Python prints an exception, also within an exception group (`  | ValueError: …`,
/// what asyncio's and anyio's task groups raise).
fn exception_text(line: &str) -> &str {
    let line = line.trim();
    line.strip_prefix('|').map_or(line, str::trim_start)
}

/// Lines after an exception's first one kept as the rest of its message, and its length in
/// all: enough for a paragraph that names a fix, not a log.
const MESSAGE_LINES: usize = 8;
const MESSAGE_CHARS: usize = 800;

/// What Python prints after an exception's message: another exception, a chained traceback, or
/// the next record of a logger.
fn ends_a_message(line: &str) -> bool {
    const AFTER: [&str; 3] = [
        "Traceback (most recent call last)",
        "The above exception was the direct cause",
        "During handling of the above exception",
    ];
    let line = exception_text(line);
    AFTER.iter().any(|start| line.starts_with(start))
        || line.starts_with("+-")
        || is_exception_line(line)
        || line.starts_with("rl: ")
        || looks_like_a_log_record(line)
}

/// `2024-05-01 12:00:00,123 …`, `[2024-05-01 …`, `INFO:name:…` or `INFO - …`: a logger's line.
fn looks_like_a_log_record(line: &str) -> bool {
    const LEVELS: [&str; 5] = ["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"];
    let start = line.trim_start_matches('[').as_bytes();
    let starts_dated =
        start.len() > 4 && start[..4].iter().all(u8::is_ascii_digit) && start[4] == b'-';
    starts_dated
        || LEVELS.iter().any(|level| {
            line.strip_prefix(level).is_some_and(|rest| {
                (rest.starts_with(':') && !rest.starts_with(": ")) || rest.starts_with(" - ")
            })
        })
}

/// `module.SomeError: message` or `SomeError` at the start of a line, as Python prints them.
fn is_exception_line(line: &str) -> bool {
    let name = line.split(':').next().unwrap_or_default();
    !name.is_empty()
        && !name.contains(' ')
        && (name.ends_with("Error") || name.ends_with("Exception") || name.ends_with("Exit"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cause_is_the_exception_under_the_retry_wrappers() {
        let log = "Traceback (most recent call last):\n\
             openai.InternalServerError: Error code: 500 - boom\n\
             The above exception was the direct cause of the following exception:\n\
             tenacity.RetryError: RetryError[<Future raised InternalServerError>]\n\
             RuntimeError: no running event loop\n";
        assert_eq!(
            cause(log).as_deref(),
            Some("openai.InternalServerError: Error code: 500 - boom")
        );
        assert_eq!(
            cause("x\nrl: cut after 5 s (the test's timeout)\n").as_deref(),
            Some("rl: cut after 5 s (the test's timeout)")
        );
        assert_eq!(cause("all good\n"), None);
    }

    /// atroposlib's refusal of a ManagedServer on an OpenAI endpoint is a paragraph whose fix
    /// (the variable to set) is on its third line: the cause keeps it.
    #[test]
    fn a_cause_over_several_lines_keeps_the_line_that_names_the_fix() {
        let log = "INFO:env:starting\n\
             Traceback (most recent call last):\n\
             \x20 File \"server_manager.py\", line 509, in managed_server\n\
             NotImplementedError: This endpoint gives no token ids. To go on with placeholders, set the variable:\n\
             \n\
             \x20   export ATROPOS_ALLOW_DUMMY_MANAGED_SERVER=1\n\
             \n\
             WARNING: placeholders are not for training.\n\
             \n\
             The above exception was the direct cause of the following exception:\n\
             tenacity.RetryError: RetryError[<Future raised NotImplementedError>]\n\
             RuntimeError: no running event loop\n\
             INFO:env:shutting down\n";
        assert_eq!(
            cause(log).as_deref(),
            Some(
                "NotImplementedError: This endpoint gives no token ids. To go on with \
                 placeholders, set the variable: export ATROPOS_ALLOW_DUMMY_MANAGED_SERVER=1 \
                 WARNING: placeholders are not for training."
            )
        );
        // A one-line cause is followed by the next log record, not kept with it.
        let log = "openai.APIConnectionError: Connection error.\n\
             2025-01-01 10:00:00,000 - INFO - retrying\n";
        assert_eq!(
            cause(log).as_deref(),
            Some("openai.APIConnectionError: Connection error.")
        );
    }

    #[test]
    fn a_failure_always_has_its_cause() {
        let failed = ModelOutcome::Failed {
            code: Some(1),
            signal: None,
        };
        // An exception group (asyncio's, anyio's task groups): the exception inside it.
        let grouped = "  + Exception Group Traceback (most recent call last):\n\
             \x20 | ExceptionGroup: unhandled errors in a TaskGroup (1 sub-exception)\n\
             \x20 +-+---------------- 1 ----------------\n\
             \x20   | Traceback (most recent call last):\n\
             \x20   | httpx.ConnectError: All connection attempts failed\n\
             \x20   +------------------------------------\n";
        assert_eq!(
            failure_cause(&failed, grouped),
            "httpx.ConnectError: All connection attempts failed"
        );
        // rl's runner's own last line, over an exception it met on the way.
        let runner = "ValueError: one rollout\nrl_verifiers: every rollout failed\n";
        assert_eq!(
            failure_cause(&failed, runner),
            "rl_verifiers: every rollout failed"
        );
        // Killed by a signal: its last line is what it was doing, not why it ended.
        let killed = ModelOutcome::Failed {
            code: None,
            signal: Some(9),
        };
        assert_eq!(
            failure_cause(&killed, "rl_verifiers: group 1/2: scores [0.0]\n"),
            "its log ends: rl_verifiers: group 1/2: scores [0.0]"
        );
        assert_eq!(failure_cause(&failed, "\n\n"), "it printed nothing");
        let refused = ModelOutcome::NotStarted {
            reason: "the server did not start".to_owned(),
        };
        assert_eq!(failure_cause(&refused, ""), "the server did not start");
    }
}
