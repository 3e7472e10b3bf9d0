//! `rl runs start|status|stop|results|list|events|logs|wait`: training runs; the hidden
//! `rl runs evaluate` that rl's trainer calls every `eval_every` steps; and the hidden
//! `rl supervise`, the body of each run's detached supervisor.

use std::io::IsTerminal;
use std::time::Duration;

use clap::builder::TypedValueParser as _;
use clap::{Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use rl_process::{RunState, WaitOutcome, WaitUntil};
use rl_tools::{
    AccountingView, CostReport, EventView, HealthView, MetricsView, ResultsView, RunView,
    SourceChoice, SourceFailureView, Started, StatusView, Tools, WaitView,
};

use crate::context::{Context, runtime};
use crate::curves;
use crate::output;

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
    /// state, and numbers its steps on. With `--wait`, the exit codes of `rl runs wait`.
    Resume {
        run_id: String,
        /// Resume even though the environment's file changed since the run started.
        #[arg(long)]
        allow_changes: bool,
        /// Wait until the new run reaches this point before returning.
        #[arg(long, value_enum, value_name = "UNTIL")]
        wait: Option<Until>,
        /// Seconds `--wait` may take.
        #[arg(long, default_value_t = 1800.0)]
        timeout: f64,
    },
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

pub(crate) fn run(command: RunsCommand, context: &Context, as_json: bool) -> anyhow::Result<()> {
    let tools = context.tools()?;
    match command {
        RunsCommand::Start { wait, timeout } => {
            let started = tools.start_training()?;
            follow_start(&tools, started, wait, timeout, as_json)
        }
        RunsCommand::Resume {
            run_id,
            allow_changes,
            wait,
            timeout,
        } => {
            let started = tools.resume_training(&tools.run_id(&run_id)?, allow_changes)?;
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
            if let Some(step) = view.metrics.step {
                message.push_str(&format!(" — step {step}"));
                for (name, value) in metric_rows(&view.metrics).into_iter().skip(1).take(4) {
                    if value != "-" {
                        message.push_str(&format!(", {name} {value}"));
                    }
                }
            }
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

/// A run just started (or resumed): shown, or followed until `wait`.
fn follow_start(
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
            output::cell(&run.environment),
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
            output::cell(
                run.error
                    .as_deref()
                    .and_then(|e| e.lines().next())
                    .unwrap_or_default(),
            ),
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

fn print_status(run: &RunView) -> anyhow::Result<()> {
    let state = match run.phase {
        Some(phase) => format!("{}: {phase}", run.state),
        None => run.state.to_owned(),
    };
    output::line(format!(
        "run {}  {}  {state}  ({:.1} s)",
        run.id, run.environment, run.elapsed_secs
    ))?;
    output::line(format!("config  {}", run.config_path.display()))?;
    if let Some(parent) = &run.resumed_from {
        output::line(format!(
            "resumes run {} after its step {}",
            parent.run_id, parent.step
        ))?;
    }
    if let (Some(api), Some(trainer)) = (run.api_port, run.trainer_port) {
        output::line(format!("ports   api {api}, trainer {trainer} (127.0.0.1)"))?;
    }
    let mut table = output::table(&["component", "status", "pid", "log"]);
    for component in &run.components {
        let tone = match (component.status, component.code) {
            ("running", _) => output::Tone::Busy,
            ("exited", Some(0)) => output::Tone::Good,
            ("not_started", _) => output::Tone::Quiet,
            _ => output::Tone::Bad,
        };
        table.add_row([
            output::cell(component.component),
            output::toned(&component.label, tone),
            output::cell(
                component
                    .process
                    .map(|p| p.pid.to_string())
                    .unwrap_or_default(),
            ),
            output::cell(component.log_path.display()),
        ]);
    }
    output::line(table)?;
    if let Some(error) = &run.error {
        output::say(&format!("error: {error}"))?;
    }
    print_events(&run.events)?;
    output::line(format!(
        "next events: rl runs events {} --since {}",
        run.id, run.next_since
    ))
}

fn metric_rows(metrics: &MetricsView) -> [(&'static str, String); 9] {
    let number = |value: Option<f64>| value.map_or_else(|| "-".to_owned(), curves::significant);
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
        ("eval_mean_score", number(metrics.eval_mean_score)),
        ("logprobs_diff", number(metrics.logprobs_diff)),
        ("advantages_std", number(metrics.advantages_std)),
    ]
}

fn print_metrics(view: &StatusView) -> anyhow::Result<()> {
    match view.metrics_source {
        None => output::line("metrics: none logged yet")?,
        Some(source) => {
            let numbers: Vec<String> = metric_rows(&view.metrics)
                .into_iter()
                .filter(|(_, value)| value != "-")
                .map(|(name, value)| format!("{name} {value}"))
                .collect();
            output::line(format!("metrics ({source}): {}", numbers.join(", ")))?;
            print_curves(&view.history)?;
        }
    }
    if let Some(groups) = &view.groups {
        output::line(format!(
            "groups: {} made, {} with signal ({})",
            groups.made, groups.with_signal, groups.summary
        ))?;
    }
    if let Some(health) = &view.health {
        print_health(health)?;
    }
    print_problems(&view.metrics_warnings, &view.metrics_errors)
}

/// Each logged series over the steps, when there are any.
fn print_curves(history: &[MetricsView]) -> anyhow::Result<()> {
    for line in curves::lines(history, curves::WIDTH) {
        output::line(line)?;
    }
    Ok(())
}

fn print_health(health: &HealthView) -> anyhow::Result<()> {
    if health.healthy {
        return output::line("health: no warning sign");
    }
    for flag in &health.flags {
        // A sign of the environment's groups (`no_signal`) judges no steps.
        if flag.window.rows == 0 {
            output::say(&format!("health: {}: {}", flag.kind, flag.detail))?;
            continue;
        }
        output::say(&format!(
            "health: {} ({}, steps {}-{}): {}",
            flag.kind, flag.metric, flag.window.first_step, flag.window.last_step, flag.detail
        ))?;
    }
    Ok(())
}

fn print_problems(warnings: &[String], failures: &[SourceFailureView]) -> anyhow::Result<()> {
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

fn print_results(view: &ResultsView) -> anyhow::Result<()> {
    output::line(format!(
        "run {}  {}  {}",
        view.run_id, view.environment, view.status
    ))?;
    if let Some(error) = &view.error {
        output::say(&format!("error: {error}"))?;
    }
    let Some(results) = &view.results else {
        output::line("no metrics logged yet")?;
        return print_problems(&[], &view.metrics_errors);
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
    print_curves(&results.history)?;
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
    print_problems(&results.warnings, &view.metrics_errors)
}

fn print_events(events: &[EventView]) -> anyhow::Result<()> {
    for event in events {
        output::say(&format!(
            "#{:<5} {}  {:<10} {}",
            event.seq, event.at, event.kind, event.message
        ))?;
    }
    Ok(())
}

/// A count as people read it: 950, 12.3k, 4.5M, 1.2G.
pub(crate) fn compact(count: u64) -> String {
    let value = count as f64;
    match count {
        0..1_000 => count.to_string(),
        1_000..1_000_000 => format!("{:.1}k", value / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1}M", value / 1e6),
        _ => format!("{:.1}G", value / 1e9),
    }
}

/// An amount and its currency: `12.34 USD`.
fn money(amount: f64, currency: &str) -> String {
    format!("{amount:.2} {currency}").trim_end().to_owned()
}

/// Where the run's tokens, seconds and money went.
fn print_accounting(accounting: Option<&AccountingView>) -> anyhow::Result<()> {
    let Some(accounting) = accounting else {
        return Ok(());
    };
    let tokens = accounting.tokens;
    let mut line = format!(
        "tokens: {} prompt · {} sampled · {} trained (to step {})",
        compact(tokens.prompt),
        compact(tokens.sampled),
        compact(tokens.trained),
        accounting.step
    );
    let pace = [
        ("trained", accounting.throughput.trained_tokens_per_sec),
        ("sampled", accounting.throughput.sampled_tokens_per_sec),
    ]
    .into_iter()
    .filter_map(|(name, pace)| Some(format!("{} {name}/s", compact(pace?.max(0.0) as u64))))
    .collect::<Vec<_>>();
    if !pace.is_empty() {
        line.push_str(&format!("; pace {}", pace.join(", ")));
    }
    output::line(line)?;
    if !accounting.shares.is_empty() {
        let shares: Vec<String> = accounting
            .shares
            .iter()
            .map(|share| format!("{} {:.0}%", share.part, share.share * 100.0))
            .collect();
        output::line(format!(
            "time: {} (of {:.0} s timed)",
            shares.join(" · "),
            accounting.timed_secs
        ))?;
    }
    if let Some(bottleneck) = accounting.bottleneck {
        output::line(format!(
            "bottleneck: {} ({:.0}% of the time)",
            bottleneck.part,
            bottleneck.share * 100.0
        ))?;
    }
    match &accounting.cost {
        Some(cost) => {
            let amount = |value: Option<f64>| {
                value.map_or_else(|| "-".to_owned(), |v| money(v, &cost.currency))
            };
            output::line(format!(
                "cost: {} so far, {} estimated at completion",
                amount(cost.total),
                amount(cost.estimate_at_completion)
            ))
        }
        None => output::line(format!(
            "cost: {}",
            accounting.cost_note.unwrap_or(rl_tools::NO_PRICE_NOTE)
        )),
    }
}

/// `rl runs cost`: per environment, per day, and the total.
fn print_cost(report: &CostReport) -> anyhow::Result<()> {
    let currency = match report.currencies.as_slice() {
        [one] => one.clone(),
        [] => String::new(),
        many => many.join("/"),
    };
    let cost = |value: Option<f64>| value.map_or_else(|| "-".to_owned(), |v| money(v, &currency));
    for (title, lines) in [
        ("environment", &report.by_environment),
        ("day (UTC)", &report.by_day),
    ] {
        let mut table = output::table(&[title, "runs", "prompt", "sampled", "trained", "cost"]);
        for line in lines.iter().chain([&report.total]) {
            table.add_row([
                output::cell(&line.key),
                output::cell(line.runs),
                output::cell(compact(line.tokens.prompt)),
                output::cell(compact(line.tokens.sampled)),
                output::cell(compact(line.tokens.trained)),
                output::cell(cost(line.cost)),
            ]);
        }
        output::line(table)?;
    }
    if let Some(since) = &report.since {
        output::line(format!("steps logged since {since} (UTC)"))?;
    }
    if report.unpriced_runs > 0 {
        output::line(format!(
            "{} run(s) without a price count tokens only ([prices] in config.toml)",
            report.unpriced_runs
        ))?;
    }
    if report.untracked_runs > 0 {
        output::line(format!(
            "{} run(s) logged no token totals (no step yet, or another trainer)",
            report.untracked_runs
        ))?;
    }
    Ok(())
}
