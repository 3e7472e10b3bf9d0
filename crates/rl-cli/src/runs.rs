//! `rl runs start|status|stop|resume|fork|results|list|events|logs|wait`: training runs (a
//! fork's and an extension's arguments in `runs/fork.rs`); the hidden `rl runs evaluate` that
//! rl's trainer calls every `eval_every` steps; and the hidden `rl supervise`, the body of each
//! run's detached supervisor.

use std::io::IsTerminal;
use std::time::Duration;

use clap::builder::TypedValueParser as _;
use clap::{Args, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use rl_process::{RunState, WaitOutcome, WaitUntil};
use rl_tools::{RunView, SourceChoice, Started, Tools, WaitView};

mod fork;
pub(crate) use fork::parse_setting;

use crate::context::{Context, runtime};
use crate::output;
use crate::run_views::{
    compact, metric_rows, money, print_accounting, print_cost, print_events, print_metrics,
    print_results, print_status,
};

#[derive(Debug, Subcommand)]
pub(crate) enum RunsCommand {
    /// Start a training run of the selected environment (API, trainer, environment).
    ///
    /// With `--wait`, the exit codes of `rl runs wait`: 0 reached (with `finished`: the run
    /// completed), 3 the run ended without completing, 4 timed out.
    Start {
        /// Wait until the run reaches this point before returning.
        #[arg(long, value_enum, value_name = "UNTIL")]
        wait: Option<Until>,
        /// Seconds `--wait` may take.
        #[arg(long, default_value_t = 1800.0)]
        timeout: f64,
        #[command(flatten)]
        caps: CapArgs,
    },
    /// A run's state, processes, latest metrics, health and events.
    Status {
        run_id: String,
        /// Only events after this cursor (`next_since` of an earlier answer).
        #[arg(long, default_value_t = 0)]
        since: i64,
        /// Where to read the run's metrics: auto, file, wandb-files or wandb-api.
        #[arg(long, default_value = "auto", value_parser = source_parser())]
        source: SourceChoice,
        /// Follow the run until it ends, as `rl runs watch` does.
        #[arg(long, short)]
        follow: bool,
    },
    /// Follow a run until it ends: state, step of total, ETA and its curves, redrawn as steps
    /// arrive (plain lines when stdout is not a terminal).
    ///
    /// Exit codes as `rl runs wait --until finished`: 0 the run completed, 3 it ended without
    /// completing. Ctrl-C stops watching; the run goes on.
    Watch { run_id: String },
    /// Stop a run: environment, trainer, then API, each as a whole process group.
    Stop { run_id: String },
    /// Continue a stopped, failed or lost run from its last saved state, as a new run.
    ///
    /// The new run has the parent's config and WandB group, loads its weights and optimizer
    /// state, and numbers its steps on. `--steps +N` extends it: N more steps than its
    /// total_steps (a completed run continues from its final state). With `--wait`, the exit
    /// codes of `rl runs wait`.
    Resume {
        run_id: String,
        /// Resume even though the environment's file changed since the run started.
        #[arg(long)]
        allow_changes: bool,
        /// Train N more steps than the run's total_steps (`+N` or `N`, N ≥ 1).
        #[arg(long, value_name = "+N", allow_hyphen_values = true,
              value_parser = fork::parse_extra_steps)]
        steps: Option<u64>,
        /// Wait until the new run reaches this point before returning.
        #[arg(long, value_enum, value_name = "UNTIL")]
        wait: Option<Until>,
        /// Seconds `--wait` may take.
        #[arg(long, default_value_t = 1800.0)]
        timeout: f64,
        #[command(flatten)]
        caps: CapArgs,
    },
    /// A new run from a run's state saved at a step (weights and optimizer), with changed
    /// settings; the parent is left as it is (it may still be going).
    ///
    /// `--set FIELD=VALUE` (repeatable) changes a field of the run's environment or a trainer
    /// key a run chooses (learning_rate, save_every, ...); the base model and lora_rank are
    /// fixed by the saved state. Its steps continue from S+1. With `--wait`, the exit codes of
    /// `rl runs wait`.
    Fork(fork::ForkArgs),
    /// A run's metrics: latest numbers, every step, final weights, checkpoints and health.
    Results {
        run_id: String,
        /// Where to read the run's metrics: auto, file, wandb-files or wandb-api.
        #[arg(long, default_value = "auto", value_parser = source_parser())]
        source: SourceChoice,
    },
    /// Every run, newest first, with its trained tokens and cost so far.
    List,
    /// The runs' own tokens and cost, per environment and per day (UTC, the day each step was
    /// logged); a resumed run counts without what its parent had spent.
    Cost {
        /// Only steps logged on or after this day (YYYY-MM-DD).
        #[arg(long, value_name = "DATE")]
        since: Option<String>,
    },
    /// A run's events after a cursor.
    Events {
        run_id: String,
        #[arg(long, default_value_t = 0)]
        since: i64,
        #[arg(long, default_value_t = rl_tools::DEFAULT_EVENT_LIMIT)]
        limit: usize,
    },
    /// The end of a run's logs (engine, api, trainer, env, supervisor), keys masked.
    Logs {
        run_id: String,
        /// Only this component's log.
        #[arg(long, value_name = "NAME")]
        component: Option<String>,
        /// Lines from the end of each log.
        #[arg(long, short = 'n', default_value_t = 40)]
        lines: usize,
    },
    /// Evaluate a run's checkpoint served at BASE_URL on its held-out prompts: what rl's
    /// trainer asks every `eval_every` steps. Prints the figures and the `eval/*` metrics.
    #[command(hide = true)]
    Evaluate {
        run_id: String,
        /// The step of the checkpoint being served.
        #[arg(long)]
        step: u64,
        /// Where the trainer serves it (loopback only), e.g. http://127.0.0.1:PORT/v1.
        #[arg(long)]
        base_url: String,
        /// The model name the trainer serves it as.
        #[arg(long)]
        model: String,
    },
    /// Block until a run changes state, is running, or has finished.
    ///
    /// Exit codes: 0 reached (with `--until finished`: the run completed), 3 the run ended
    /// without completing (failed, stopped or lost), 4 timed out, 1 the request failed.
    Wait {
        run_id: String,
        #[arg(long, value_enum, default_value = "change")]
        until: Until,
        /// Seconds to wait at most.
        #[arg(long, default_value_t = 60.0)]
        timeout: f64,
        #[arg(long, default_value_t = 0)]
        since: i64,
    },
}

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

/// The metrics sources by name, listed in `--help` and completions.
fn source_parser() -> impl clap::builder::TypedValueParser<Value = SourceChoice> {
    clap::builder::PossibleValuesParser::new(SourceChoice::NAMES)
        .try_map(|name| name.parse::<SourceChoice>())
}

/// A run's own caps, under the operator's `[caps]` (never above them): before a step that
/// would pass one, the trainer saves its state and the run ends `capped`.
#[derive(Debug, Args)]
pub(crate) struct CapArgs {
    /// The most this run may cost, in the operator's `[prices]` currency (needs a price).
    #[arg(long = "max-cost", value_name = "AMOUNT")]
    cost: Option<f64>,
    /// The most prompt, sampled and trained tokens this run may use, together.
    #[arg(long = "max-tokens", value_name = "TOKENS")]
    tokens: Option<u64>,
    /// The most hours this run's trainer may train.
    #[arg(long = "max-hours", value_name = "HOURS")]
    hours: Option<f64>,
}

impl From<CapArgs> for rl_settings::Caps {
    fn from(caps: CapArgs) -> Self {
        Self {
            max_cost: caps.cost,
            max_tokens: caps.tokens,
            max_hours: caps.hours,
        }
    }
}

pub(crate) fn run(command: RunsCommand, context: &Context, as_json: bool) -> anyhow::Result<()> {
    let tools = context.tools()?;
    match command {
        RunsCommand::Start {
            wait,
            timeout,
            caps,
        } => {
            let started = tools.start_training_with(&caps.into())?;
            follow_start(&tools, started, wait, timeout, as_json)
        }
        RunsCommand::Resume {
            run_id,
            allow_changes,
            steps,
            wait,
            timeout,
            caps,
        } => {
            let started = tools.resume_training_with(
                &tools.run_id(&run_id)?,
                allow_changes,
                &caps.into(),
                steps,
            )?;
            if !as_json {
                output::say(&started.message)?;
            }
            follow_start(&tools, started, wait, timeout, as_json)
        }
        RunsCommand::Fork(fork) => {
            let (started, wait, timeout) = fork::fork(&tools, fork)?;
            if !as_json {
                output::say(&started.message)?;
            }
            follow_start(&tools, started, wait, timeout, as_json)
        }
        RunsCommand::Watch { run_id }
        | RunsCommand::Status {
            run_id,
            follow: true,
            ..
        } => crate::watch::watch(&tools, &tools.run_id(&run_id)?),
        RunsCommand::Status {
            run_id,
            since,
            source,
            follow: false,
        } => {
            let id = tools.run_id(&run_id)?;
            let answer = runtime()?.block_on(tools.status_answer(&id, since, source))?;
            if as_json {
                return output::json(&answer);
            }
            print_status(&answer.status.run)?;
            print_metrics(&answer.status)?;
            print_accounting(answer.accounting.as_ref())
        }
        RunsCommand::Stop { run_id } => {
            let report = tools.stop_training(&tools.run_id(&run_id)?)?;
            if as_json {
                return output::json(&report);
            }
            output::say(&report.message)
        }
        RunsCommand::Results { run_id, source } => {
            let id = tools.run_id(&run_id)?;
            let answer = runtime()?.block_on(tools.results_answer(&id, source))?;
            if as_json {
                return output::json(&answer);
            }
            print_results(&answer.results)?;
            print_accounting(answer.accounting.as_ref())
        }
        RunsCommand::List => list(&tools, as_json),
        RunsCommand::Cost { since } => {
            let report = tools.cost_report(since.as_deref())?;
            if as_json {
                return output::json(&report);
            }
            print_cost(&report)
        }
        RunsCommand::Evaluate {
            run_id,
            step,
            base_url,
            model,
        } => {
            let request = rl_tools::EvaluationRequest {
                step,
                base_url,
                model,
            };
            let id = tools.run_id(&run_id)?;
            // The trainer's stop reaches this process too: its test's models are ended with it.
            let Some(evaluated) = crate::context::until_interrupted(
                &tools,
                tools.evaluate_checkpoint(&id, &request),
            )?
            else {
                anyhow::bail!("interrupted: the evaluation's processes were stopped");
            };
            let evaluated = evaluated?;
            if as_json {
                return output::json(&evaluated);
            }
            output::say(&evaluated.message)
        }
        RunsCommand::Events {
            run_id,
            since,
            limit,
        } => {
            let view = tools.events(&tools.run_id(&run_id)?, since, limit)?;
            if as_json {
                return output::json(&view);
            }
            print_events(&view.events)
        }
        RunsCommand::Logs {
            run_id,
            component,
            lines,
        } => {
            let tails = tools.logs(&tools.run_id(&run_id)?, component.as_deref(), lines)?;
            if as_json {
                return output::json(&tails);
            }
            for tail in tails {
                let more = match (tail.capped, tail.truncated) {
                    (true, _) => ", capped: its latest lines",
                    (false, true) => ", end only",
                    (false, false) => "",
                };
                output::line(format!(
                    "── {} ({}{more})",
                    tail.component,
                    tail.path.display()
                ))?;
                for line in tail.lines {
                    output::line(line)?;
                }
            }
            Ok(())
        }
        RunsCommand::Wait {
            run_id,
            until,
            timeout,
            since,
        } => {
            let id = tools.run_id(&run_id)?;
            let outcome = waiting(&tools, &id, until, timeout, since, as_json)?;
            if as_json {
                output::json(&WaitView::from(&outcome))?;
            }
            waited(&outcome, timeout, as_json)
        }
    }
}

/// Shows the outcome to a person (JSON was printed by the caller), then `Ok` when the wait
/// reached what it waited for and the run has not ended without completing, else the exit
/// code that says which.
fn waited(outcome: &WaitOutcome, timeout: f64, as_json: bool) -> anyhow::Result<()> {
    if !as_json {
        if outcome.timed_out {
            output::line(format!("timed out after {timeout} s"))?;
        }
        print_status(&RunView::from(&outcome.status))?;
    }
    output::wait_ended(outcome.status.run.state, outcome.timed_out)
}

/// Waits, showing the run's state and, once it trains, its latest step: a spinner on a
/// terminal, else a line on stderr each time that changes (nothing with `--json`).
fn waiting(
    tools: &Tools,
    id: &rl_settings::RunId,
    until: Until,
    timeout: f64,
    since: i64,
    as_json: bool,
) -> anyhow::Result<WaitOutcome> {
    let limit = crate::context::wait_limit(timeout)?;
    let on_terminal = std::io::stderr().is_terminal();
    let spinner = if as_json || !on_terminal {
        ProgressBar::hidden()
    } else {
        let spinner = ProgressBar::new_spinner();
        spinner.set_style(
            ProgressStyle::with_template("{spinner} {elapsed:>4} run {prefix}: {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        spinner.set_prefix(id.to_string());
        spinner.enable_steady_tick(Duration::from_millis(120));
        spinner
    };
    let runtime = runtime()?;
    let started = std::time::Instant::now();
    let mut cursor = since;
    let mut shown = String::new();
    // A change is a change from the state this wait began in, whichever slice it falls in.
    let initial = tools.run_status(id, i64::MAX)?.run.state;
    // Wait in short slices so each state the run passes through, and each step, can be shown.
    let reached = loop {
        let left = limit.saturating_sub(started.elapsed());
        let slice = left.min(Duration::from_secs(1));
        let outcome = tools.wait(id, until.into(), slice, cursor)?;
        cursor = outcome.status.next_since;
        let state = outcome.status.run.state;
        let mut message = state.label();
        // The latest step only where someone sees it: `--json` shows no progress.
        if !as_json && matches!(state, RunState::Running | RunState::Completed) {
            let view =
                runtime.block_on(tools.with_metrics(outcome.status.clone(), SourceChoice::File))?;
            let continued_after = outcome.status.run.resumed_from.as_ref().map(|l| l.step);
            message.push_str(&step_progress(&view.metrics, continued_after));
        }
        if message != shown {
            spinner.set_message(message.clone());
            if !as_json && !on_terminal {
                output::progress(&format!("run {id}: {message}"));
            }
            shown = message;
        }
        let reached = !outcome.timed_out || (matches!(until, Until::Change) && state != initial);
        if reached || left <= slice {
            break reached;
        }
    };
    spinner.finish_and_clear();
    // The caller asked from `since`: give the events since then, not just the last slice's.
    Ok(WaitOutcome {
        timed_out: !reached,
        status: tools.run_status(id, since)?,
    })
}

/// The step part of a progress line: the latest step and its numbers. A continued run's rows
/// up to the step it continued after are its parent's (their learning rate is not a fork's):
/// until it has logged a step of its own, it says only where it continues.
fn step_progress(metrics: &rl_tools::MetricsView, continued_after: Option<u64>) -> String {
    let Some(step) = metrics.step else {
        return String::new();
    };
    if let Some(after) = continued_after
        && u64::try_from(step).is_ok_and(|step| step <= after)
    {
        return format!(" — continues after step {after}");
    }
    let mut part = format!(" — step {step}");
    for (name, value) in metric_rows(metrics).into_iter().skip(1).take(4) {
        if value != "-" {
            part.push_str(&format!(", {name} {value}"));
        }
    }
    part
}

/// A run just started (or resumed): shown, or followed until `wait`.
pub(crate) fn follow_start(
    tools: &Tools,
    mut started: Started,
    wait: Option<Until>,
    timeout: f64,
    as_json: bool,
) -> anyhow::Result<()> {
    let Some(until) = wait else {
        return if as_json {
            output::json(&started)
        } else {
            print_status(&started.run)
        };
    };
    let id = tools.run_id(&started.run_id)?;
    let outcome = waiting(tools, &id, until, timeout, 0, as_json)?;
    started.status = outcome.status.run.state.name();
    started.run = RunView::from(&outcome.status);
    if as_json {
        output::json(&started)?;
    }
    waited(&outcome, timeout, as_json)
}

fn list(tools: &Tools, as_json: bool) -> anyhow::Result<()> {
    let all = tools.list_runs_with_usage()?;
    if as_json {
        return output::json(&all);
    }
    if all.runs.is_empty() {
        return output::line("no runs yet; start one with `rl runs start`");
    }
    let mut table = output::table(&[
        "run",
        "environment",
        "state",
        "created",
        "trained tokens",
        "cost",
        "error",
    ]);
    for run in all.runs {
        let state = match &run.phase {
            Some(phase) => format!("{}: {phase}", run.status),
            None => run.status.to_owned(),
        };
        table.add_row([
            output::cell(&run.run_id),
            output::cell(output::environment_label(
                &run.environment,
                run.environment_kind,
            )),
            output::toned(state, output::state_tone(run.status)),
            output::cell(&run.created_at),
            output::cell(
                run.usage
                    .as_ref()
                    .map_or_else(|| "-".to_owned(), |u| compact(u.tokens.trained)),
            ),
            output::cell(run.usage.as_ref().map_or_else(
                || "-".to_owned(),
                |u| match (u.cost, &u.currency) {
                    (Some(cost), currency) => money(cost, currency.as_deref().unwrap_or("")),
                    (None, _) => "no price".to_owned(),
                },
            )),
            output::cell(run.error_headline().unwrap_or_default()),
        ]);
    }
    output::line(table)
}

/// The detached supervisor's body: its output goes to the run's `supervisor.log`.
pub(crate) fn supervise(context: &Context, id: &str) -> anyhow::Result<()> {
    let ended = rl_tools::supervise(&context.home()?, id)?;
    output::line(format!("run {id} ended: {}", ended.label()))?;
    // The operator's policy applied as the run ends; a failure is said in the supervisor's
    // log and changes nothing of how the run ended.
    let tools = context.tools()?;
    if tools.settings()?.checkpoints.prune_when_ended {
        let pruned = rl_settings::RunId::parse(id)
            .map_err(rl_tools::ToolsError::from)
            .and_then(|id| tools.prune_checkpoints(&id));
        match pruned {
            Ok(pruned) => output::line(format!("checkpoints pruned: {}", pruned.message))?,
            Err(error) => output::line(format!("checkpoints not pruned: {error}"))?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::step_progress;
    use rl_tools::MetricsView;

    /// A fork's first progress line, before it has trained a step, showed its parent's last
    /// row: the parent's learning rate as if it were the fork's.
    #[test]
    fn a_continued_runs_progress_shows_none_of_its_parents_numbers() {
        let parents = MetricsView {
            step: Some(4),
            loss: Some(0.5),
            learning_rate: Some(1e-5),
            ..MetricsView::default()
        };
        assert_eq!(
            step_progress(&parents, Some(4)),
            " — continues after step 4"
        );
        let own = MetricsView {
            step: Some(5),
            learning_rate: Some(0.01),
            ..MetricsView::default()
        };
        let line = step_progress(&own, Some(4));
        assert!(
            line.starts_with(" — step 5") && line.contains("learning_rate 0.01"),
            "{line}"
        );
        // A run that continues nothing shows its latest step as it is.
        assert!(step_progress(&parents, None).contains("learning_rate"));
        assert_eq!(step_progress(&MetricsView::default(), Some(4)), "");
    }
}
