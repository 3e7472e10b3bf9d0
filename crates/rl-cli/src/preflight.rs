//! `rl preflight [list|show|wait|stop]`: the selected environment against several models before
//! training; tests run by another process (or left by one killed) followed and stopped.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use rl_preflight::{
    DEFAULT_CONCURRENCY, DEFAULT_GROUP_SIZE, DEFAULT_STEPS, ModelOutcome, PreflightPlan,
    PreflightProgress, PreflightReport, PreflightStatus, PreflightView, Progress, ProgressSink,
};
use rl_tools::{
    InferenceOptions, LongCall, LongCallStarted, PreflightListingView, PreflightShown,
    PreflightStopView, PreflightWaited, Tools,
};

use crate::context::{Context, until_interrupted};
use crate::output;

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct PreflightCommand {
    #[command(subcommand)]
    command: Option<PreflightSubcommand>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, Subcommand)]
enum PreflightSubcommand {
    /// Earlier tests, newest first, with their status (running, finished, stopped,
    /// interrupted). A test whose process is gone is marked interrupted and the model
    /// processes it left are ended.
    List,
    /// One test's report, or how far it got while it has none.
    Show { test_id: String },
    /// Follow a test another process runs until it ends, then show it.
    Wait {
        test_id: String,
        /// Seconds to wait at most.
        #[arg(long, default_value_t = 600.0)]
        timeout: f64,
    },
    /// Stop a test, whichever process runs it: its models' process groups are ended and its
    /// process writes the report; for a test whose process is gone, what it left is ended.
    Stop { test_id: String },
}

#[derive(Debug, Args)]
struct RunArgs {
    /// A model id, as the endpoint names it; repeat for several (default: the operator's
    /// `[inference] models`, else the original's three OpenRouter models). `run:RUN_ID[@STEP|
    /// @best|@base]` names a run's checkpoints; `base` alone the base model the next run trains
    /// (on the local engine, through an engine started for the test).
    #[arg(long = "model", value_name = "ID")]
    models: Vec<String>,
    /// An OpenAI-compatible endpoint (a local vLLM, sglang, Ollama…); default: the operator's
    /// `[inference] base_url`, else OpenRouter.
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// The variable holding the endpoint's key (default OPENROUTER_API_KEY for OpenRouter;
    /// none for another endpoint).
    #[arg(long, value_name = "NAME")]
    key_var: Option<String>,
    /// Groups per model (`--env.total_steps`).
    #[arg(long, default_value_t = DEFAULT_STEPS)]
    steps: u32,
    /// Completions per group (`--env.group_size`).
    #[arg(long, default_value_t = DEFAULT_GROUP_SIZE)]
    group_size: u32,
    /// Models run at once.
    #[arg(long, default_value_t = DEFAULT_CONCURRENCY)]
    concurrency: usize,
    /// Seconds before a model's process group is stopped.
    #[arg(long, default_value_t = 600.0)]
    timeout: f64,
    /// A completion is correct from this score on (default: the top score the test saw).
    #[arg(long)]
    threshold: Option<f64>,
    /// Let the environment log to WandB (off by default).
    #[arg(long)]
    use_wandb: bool,
    /// Start the test in a worker of its own and print its id at once, as agents' calls do;
    /// follow it with `rl preflight wait ID`. It takes the operator's endpoint and limits
    /// (`[inference]`): only --model, --steps and --group-size go with it.
    #[arg(
        long,
        conflicts_with_all = ["base_url", "key_var", "concurrency", "timeout", "threshold", "use_wandb"]
    )]
    no_wait: bool,
}

pub(crate) fn run(
    context: &Context,
    command: PreflightCommand,
    as_json: bool,
) -> anyhow::Result<()> {
    let tools = context.tools()?;
    match command.command {
        None => run_test(&tools, command.run, as_json),
        Some(PreflightSubcommand::List) => list(&tools, as_json),
        Some(PreflightSubcommand::Show { test_id }) => show(&tools.preflight(&test_id)?, as_json),
        Some(PreflightSubcommand::Wait { test_id, timeout }) => {
            wait(&tools, &test_id, timeout, as_json)
        }
        Some(PreflightSubcommand::Stop { test_id }) => {
            let stopped = tools.stop_preflight(&test_id)?;
            if as_json {
                return output::json(&PreflightStopView::from(&stopped));
            }
            output::say(&stopped.message)
        }
    }
}

fn show(view: &PreflightView, as_json: bool) -> anyhow::Result<()> {
    if as_json {
        return output::json(&PreflightShown::from(view));
    }
    match view {
        PreflightView::Reported(report) => print_report(report),
        PreflightView::Unfinished(progress) => print_progress(progress),
    }
}

/// Polls the test's folder until it is no longer running, telling each change of its models'
/// groups on stderr (nothing with `--json`), then shows it; `timed_out` in JSON says whether
/// it was still running.
fn wait(tools: &Tools, id: &str, timeout: f64, as_json: bool) -> anyhow::Result<()> {
    let limit = crate::context::wait_limit(timeout)?;
    let started = std::time::Instant::now();
    let mut shown = String::new();
    let view = loop {
        let view = tools.preflight(id)?;
        let PreflightView::Unfinished(progress) = &view else {
            break view;
        };
        if progress.status != PreflightStatus::Running || started.elapsed() >= limit {
            break view;
        }
        let now = progress_line(progress);
        if !as_json && now != shown {
            output::progress(&now);
            shown = now;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let timed_out =
        matches!(&view, PreflightView::Unfinished(p) if p.status == PreflightStatus::Running);
    if as_json {
        return output::json(&PreflightWaited {
            timed_out,
            test: PreflightShown::from(&view),
        });
    }
    if timed_out {
        output::line(format!(
            "timed out after {timeout} s; the test is still running"
        ))?;
    }
    show(&view, false)
}

/// A long call started (or found running) without waiting: its answer with `--json`, else
/// what it is and how to follow it.
pub(crate) fn say_started(started: &LongCallStarted, as_json: bool) -> anyhow::Result<()> {
    if as_json {
        return output::json(started);
    }
    let begun = if started.started {
        "started"
    } else {
        "was already running (the same request): this is it"
    };
    output::line(format!(
        "test {} {begun}: {} model(s) on {}, about {:.0} s; follow it with `rl preflight wait \
         {}`, stop it with `rl preflight stop {}`",
        started.test_id,
        started.models.len(),
        started.environment,
        started.estimated_seconds,
        started.test_id,
        started.test_id
    ))
}

fn progress_line(progress: &PreflightProgress) -> String {
    let models: Vec<String> = progress
        .models
        .iter()
        .map(|model| {
            let total = model
                .total_groups
                .map_or_else(|| "?".to_owned(), |total| total.to_string());
            let state = if model.running {
                "running"
            } else {
                "waiting or done"
            };
            format!("{} {}/{total} ({state})", model.model, model.groups_done)
        })
        .collect();
    format!("test {}: {}", progress.test_id, models.join(", "))
}

fn print_progress(progress: &PreflightProgress) -> anyhow::Result<()> {
    output::line(format!(
        "test {}  {}  {}  started {}",
        progress.test_id,
        progress.environment,
        progress.status.label(),
        progress.started_at
    ))?;
    let mut table = output::table(&["model", "groups", "running", "log"]);
    for model in &progress.models {
        table.add_row([
            model.model.clone(),
            format!(
                "{}/{}",
                model.groups_done,
                model
                    .total_groups
                    .map_or_else(|| "?".to_owned(), |total| total.to_string())
            ),
            if model.running { "yes" } else { "no" }.to_owned(),
            model.log_path.display().to_string(),
        ]);
    }
    output::line(table)?;
    print_capped_logs(
        progress
            .models
            .iter()
            .map(|model| (model.model.as_str(), model.log_path.as_path())),
    )?;
    if let Some(pid) = progress
        .owner_pid
        .filter(|_| progress.status == PreflightStatus::Running)
    {
        output::line(format!(
            "run by process {pid}; follow it with `rl preflight wait {0}`, stop it with `rl preflight stop {0}`",
            progress.test_id
        ))?;
    }
    if let Some(at) = &progress.stop_requested_at {
        output::line(format!("stop requested at {at}"))?;
    }
    if let Some(interruption) = &progress.interruption {
        output::line(format!(
            "interrupted: {}; {} (found at {})",
            interruption.reason, interruption.ended, interruption.found_at
        ))?;
    }
    output::line(format!("in {}", progress.output_dir.display()))
}

/// One line per model whose log reached its size limit: what it printed is then in two files.
fn print_capped_logs<'a>(logs: impl Iterator<Item = (&'a str, &'a Path)>) -> anyhow::Result<()> {
    for (model, log) in logs.filter(|(_, log)| rl_process::is_capped(log)) {
        output::line(format!(
            "{model}: log capped at its size limit (run.log_limit_bytes): the head in {}, the \
             latest output in {}",
            log.display(),
            rl_process::tail_path(log).display()
        ))?;
    }
    Ok(())
}

fn run_test(tools: &Tools, args: RunArgs, as_json: bool) -> anyhow::Result<()> {
    if args.no_wait {
        let started = tools.start_long_call(&LongCall::Inference {
            models: args.models,
            num_steps: Some(args.steps),
            group_size: Some(args.group_size),
            base_url: None,
        })?;
        return say_started(&started, as_json);
    }
    let timeout = Duration::try_from_secs_f64(args.timeout)
        .ok()
        .filter(|timeout| !timeout.is_zero())
        .with_context(|| {
            format!(
                "--timeout {} is not a positive number of seconds",
                args.timeout
            )
        })?;
    let plan = tools.inference_plan(&InferenceOptions {
        models: args.models,
        num_steps: Some(args.steps),
        group_size: Some(args.group_size),
        base_url: args.base_url,
        key_variable: args.key_var,
        keyless_endpoint: None,
        concurrency: Some(args.concurrency),
        timeout: Some(timeout),
        threshold: args.threshold,
        use_wandb: args.use_wandb,
    })?;
    let progress = if as_json {
        Arc::new(|_: Progress| {}) as ProgressSink
    } else {
        output::line(format!(
            "pre-flight of {} against {} model(s) at {} ({} groups of {} each)",
            plan.environment,
            plan.models.len(),
            plan.endpoint.base_url,
            plan.steps,
            plan.group_size
        ))?;
        bars(&plan)
    };
    let finished = until_interrupted(tools, tools.test_inference(&plan, progress))?;
    let Some(report) = finished else {
        anyhow::bail!(
            "interrupted: every model's processes were stopped; the test is kept in {} \
             (`rl preflight list` shows it interrupted)",
            tools.preflight_dir().display()
        );
    };
    let report = report?;
    if as_json {
        return output::json_compact(&rl_tools::report_json(&report)?);
    }
    print_report(&report)
}

/// One bar per model, groups done of total. atroposlib writes a model's groups only when it
/// finishes, so a bar shows its elapsed time until then.
pub(crate) fn bars(plan: &PreflightPlan) -> ProgressSink {
    let multi = MultiProgress::new();
    let style = ProgressStyle::with_template(
        "{prefix:>24} [{bar:20}] {pos}/{len} groups  {elapsed}  {msg}",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar())
    .progress_chars("=> ");
    let bars: BTreeMap<String, ProgressBar> = plan
        .models
        .iter()
        .map(|model| {
            let bar = multi.add(ProgressBar::new(u64::from(plan.steps)));
            bar.set_style(style.clone());
            bar.set_prefix(model.clone());
            bar.set_message("waiting");
            (model.clone(), bar)
        })
        .collect();
    let bars = Mutex::new(bars);
    Arc::new(move |event: Progress| {
        let Ok(bars) = bars.lock() else { return };
        match event {
            Progress::Created { .. } => {}
            Progress::Started { model, .. } => {
                if let Some(bar) = bars.get(&model) {
                    bar.set_message("running");
                    bar.enable_steady_tick(Duration::from_millis(500));
                }
            }
            Progress::Groups { model, done, .. } => {
                if let Some(bar) = bars.get(&model) {
                    bar.set_position(u64::from(done));
                }
            }
            Progress::Finished { model, outcome } => {
                if let Some(bar) = bars.get(&model) {
                    bar.finish_with_message(outcome_text(&outcome));
                }
            }
        }
    })
}

fn outcome_text(outcome: &ModelOutcome) -> String {
    match outcome {
        ModelOutcome::Succeeded => "done".to_owned(),
        ModelOutcome::Failed {
            code: Some(code), ..
        } => format!("failed (exit {code})"),
        ModelOutcome::Failed {
            signal: Some(signal),
            ..
        } => format!("failed (signal {signal})"),
        ModelOutcome::Failed { .. } => "failed".to_owned(),
        ModelOutcome::TimedOut { after_secs } => format!("cut after {after_secs:.0} s"),
        ModelOutcome::Stopped => "stopped".to_owned(),
        ModelOutcome::NotStarted { reason } => format!("not started: {reason}"),
        ModelOutcome::NoSignal { cause } => format!("no signal: {cause}"),
    }
}

fn percent(share: Option<f64>) -> String {
    share.map_or_else(|| "-".to_owned(), |share| format!("{:.0} %", share * 100.0))
}

fn print_report(report: &PreflightReport) -> anyhow::Result<()> {
    let mut table = output::table(&[
        "model",
        "outcome",
        "groups",
        "accuracy",
        "score > 0",
        "steps with a correct",
        "zero-variance groups",
        "mean score",
        "seconds",
        "verdict",
    ]);
    for model in &report.models {
        let figures = &model.figures;
        let own = report
            .summary
            .by_model
            .iter()
            .find(|verdict| verdict.model == model.model)
            .map_or("-", |verdict| rl_preflight::label(verdict.verdict));
        table.add_row([
            model.model.clone(),
            outcome_text(&model.outcome),
            figures.steps_tested.to_string(),
            percent(figures.accuracy),
            percent(figures.accuracy_score_above_zero),
            format!("{}/{}", figures.steps_with_correct, figures.steps_tested),
            figures.zero_variance_groups.to_string(),
            figures
                .scores
                .as_ref()
                .map_or_else(|| "-".to_owned(), |s| format!("{:.2}", s.mean)),
            format!("{:.1}", model.duration_secs),
            own.to_owned(),
        ]);
    }
    output::line(table)?;
    for model in report
        .models
        .iter()
        .filter(|m| m.outcome != ModelOutcome::Succeeded)
    {
        output::line(format!(
            "{}: {}  (log: {})",
            model.model,
            model.error.as_deref().unwrap_or("no error printed"),
            model.log_path.display()
        ))?;
    }
    print_capped_logs(
        report
            .models
            .iter()
            .map(|model| (model.model.as_str(), model.log_path.as_path())),
    )?;
    if let Some(at) = &report.stopped_at {
        output::line(format!(
            "stopped (rl preflight stop) at {at}: the test did not run to its end"
        ))?;
    }
    let summary = &report.summary;
    output::line(format!(
        "verdict: {} — {}",
        rl_preflight::label(summary.verdict),
        summary.explanation
    ))?;
    // Each model's own verdict with what it rests on (one model's is the verdict above).
    if summary.by_model.len() > 1 {
        for own in &summary.by_model {
            output::line(format!(
                "  {}: {} — {}",
                own.model,
                rl_preflight::label(own.verdict),
                own.explanation
            ))?;
        }
    }
    output::line(format!(
        "{} of {} models succeeded; best {}; average accuracy {}; correct from score {}",
        summary.models_succeeded,
        summary.models_tested,
        summary.best_model.as_deref().unwrap_or("-"),
        percent(summary.average_accuracy),
        report.correct_from.map_or_else(
            || "- (no score counted as correct)".to_owned(),
            |s| s.to_string()
        )
    ))?;
    output::line(format!(
        "test {} in {}",
        report.test_id,
        report.output_dir.display()
    ))
}

fn list(tools: &Tools, as_json: bool) -> anyhow::Result<()> {
    let tests = tools.preflights()?;
    if as_json {
        let listed: Vec<PreflightListingView> =
            tests.iter().map(PreflightListingView::from).collect();
        return output::json(&listed);
    }
    if tests.is_empty() {
        return output::line("no pre-flight tests yet; run one with `rl preflight`");
    }
    let mut table = output::table(&[
        "test",
        "environment",
        "started",
        "models",
        "status",
        "verdict",
    ]);
    for test in tests {
        table.add_row([
            test.test_id,
            test.environment,
            test.started_at,
            test.models.join(", "),
            test.status.label().to_owned(),
            test.verdict.map_or("-", rl_preflight::label).to_owned(),
        ]);
    }
    output::line(table)
}
