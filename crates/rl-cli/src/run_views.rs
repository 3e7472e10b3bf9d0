//! A run as people read it in a terminal: its state and processes, numbers, curves, health,
//! events, where its time and money went, and the cost report.

use rl_tools::{
    AccountingView, CostReport, EventView, HealthView, MetricsView, ResultsView, ResumedFrom,
    RunView, SourceFailureView, StatusView,
};

use crate::curves;
use crate::output;

/// Where a run comes from, in one line: "forked from run P at step S (learning_rate=1e-05)".
pub(crate) fn lineage(parent: &ResumedFrom) -> String {
    let how = match parent.kind {
        "fork" => "forked from",
        "extension" => "extended from",
        _ => "resumed from",
    };
    let changes: Vec<String> = parent
        .changes
        .iter()
        .map(|(field, value)| format!("{field}={value}"))
        .collect();
    let changed = if changes.is_empty() {
        String::new()
    } else {
        format!(" ({})", changes.join(", "))
    };
    format!(
        "{how} run {} at step {}{changed}",
        parent.run_id, parent.step
    )
}

pub(crate) fn print_status(run: &RunView) -> anyhow::Result<()> {
    let state = match run.phase {
        Some(phase) => format!("{}: {phase}", run.state),
        None => run.state.to_owned(),
    };
    output::line(format!(
        "run {}  {}  {state}  ({:.1} s)",
        run.id,
        output::environment_label(&run.environment, run.environment_kind),
        run.elapsed_secs
    ))?;
    output::line(format!("config  {}", run.config_path.display()))?;
    if let Some(parent) = &run.resumed_from {
        output::line(lineage(parent))?;
    }
    if let Some(sweep) = &run.sweep_id {
        output::line(format!(
            "a run of sweep {sweep} (`rl sweep status {sweep}`)"
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

pub(crate) fn metric_rows(metrics: &MetricsView) -> [(&'static str, String); 13] {
    let number = |value: Option<f64>| value.map_or_else(|| "-".to_owned(), curves::significant);
    // An estimate with its 95% interval, when the evaluation logged one.
    let estimate = |value: Option<f64>, low: Option<f64>, high: Option<f64>| match (low, high) {
        (Some(low), Some(high)) if value.is_some() => format!(
            "{} [{}, {}]",
            number(value),
            curves::significant(low),
            curves::significant(high)
        ),
        _ => number(value),
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
        (
            "eval_mean_score",
            estimate(
                metrics.eval_mean_score,
                metrics.eval_mean_score_low,
                metrics.eval_mean_score_high,
            ),
        ),
        ("eval_pass_at_1", number(metrics.eval_pass_at_1)),
        (
            "eval_pass_at_n",
            estimate(
                metrics.eval_pass_at_n,
                metrics.eval_pass_at_n_low,
                metrics.eval_pass_at_n_high,
            ),
        ),
        (
            "eval_best_of_n",
            estimate(
                metrics.eval_best_of_n,
                metrics.eval_best_of_n_low,
                metrics.eval_best_of_n_high,
            ),
        ),
        (
            "eval_n",
            metrics
                .eval_n
                .map_or_else(|| "-".to_owned(), |n| n.to_string()),
        ),
        ("logprobs_diff", number(metrics.logprobs_diff)),
        ("advantages_std", number(metrics.advantages_std)),
    ]
}

/// What the run's `max_steps_off_policy` did at the latest step (nothing without the bound).
fn print_off_policy(metrics: &MetricsView) -> anyhow::Result<()> {
    let Some(stale) = metrics.stale_groups else {
        return Ok(());
    };
    let oldest = metrics.max_age_steps.map_or_else(
        || "no trained completion of a known age".to_owned(),
        |age| format!("trained completions at most {age} optimizer step(s) old"),
    );
    output::line(format!(
        "off-policy (latest step): {stale} group(s) dropped as stale, {} completion(s) of unknown age kept, {oldest}",
        metrics.unknown_age_completions.unwrap_or(0)
    ))
}

pub(crate) fn print_metrics(view: &StatusView) -> anyhow::Result<()> {
    if let Some(algorithm) = &view.algorithm {
        output::line(format!("algorithm: {}", algorithm.summary))?;
    }
    match view.metrics_source {
        None => output::line("metrics: none logged yet")?,
        Some(source) => {
            let numbers: Vec<String> = metric_rows(&view.metrics)
                .into_iter()
                .filter(|(_, value)| value != "-")
                .map(|(name, value)| format!("{name} {value}"))
                .collect();
            output::line(format!("metrics ({source}): {}", numbers.join(", ")))?;
            print_off_policy(&view.metrics)?;
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

pub(crate) fn print_results(view: &ResultsView) -> anyhow::Result<()> {
    output::line(format!(
        "run {}  {}  {}",
        view.run_id,
        output::environment_label(&view.environment, view.environment_kind),
        view.status
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

pub(crate) fn print_events(events: &[EventView]) -> anyhow::Result<()> {
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
pub(crate) fn money(amount: f64, currency: &str) -> String {
    format!("{amount:.2} {currency}").trim_end().to_owned()
}

/// Where the run's tokens, seconds and money went.
pub(crate) fn print_accounting(accounting: Option<&AccountingView>) -> anyhow::Result<()> {
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
pub(crate) fn print_cost(report: &CostReport) -> anyhow::Result<()> {
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
