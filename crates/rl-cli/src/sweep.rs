//! `rl sweep start|status|results|stop|list`: a grid of settings trained as runs of the
//! selected environment, a few at a time, ranked by a metric; `rl sweep drive` is the detached
//! driver that starts queued points as places free up.

use clap::{Args, Subcommand};
use rl_settings::{SweepId, Value};
use rl_tools::{SweepRequest, SweepView};

use crate::context::Context;
use crate::output;
use crate::runs::CapArgs;

#[derive(Debug, Subcommand)]
pub(crate) enum SweepCommand {
    /// Start a grid of runs: every combination of the values given.
    Start(StartArgs),
    /// One row per run: settings, state, step, last reward.
    Status { sweep_id: String },
    /// The runs ranked by the sweep's metric, the best marked, with held-out scores, tokens
    /// and cost.
    Results { sweep_id: String },
    /// Stop the sweep: its going runs stopped, its queued points dropped.
    Stop { sweep_id: String },
    /// Every sweep, newest first.
    List,
    /// Start the sweep's queued points as places free up (started by `rl sweep start`).
    #[command(hide = true)]
    Drive { sweep_id: String },
}

#[derive(Debug, Args)]
pub(crate) struct StartArgs {
    /// A setting and its values, e.g. `--set learning_rate=1e-4,3e-4 --set group_size=8,16`:
    /// an environment field, or a trainer setting a run chooses (learning_rate, lora_rank,
    /// save_every, keep_rollouts, eval_every, eval_prompts, eval_group_size,
    /// max_token_trainer_length).
    #[arg(long = "set", value_name = "FIELD=V1,V2,…", required = true)]
    set: Vec<String>,
    /// Runs going at once (the operator's max_active_runs when not given).
    #[arg(long, value_name = "N")]
    max_parallel: Option<u32>,
    /// What ranks the runs: reward (the default), held_out, or a metric the trainer logs.
    #[arg(long, value_name = "METRIC")]
    metric: Option<String>,
    /// The lowest value ranks first (the default only for a metric ending in `loss`).
    #[arg(long)]
    lower_is_better: bool,
    #[command(flatten)]
    caps: CapArgs,
}

pub(crate) fn run(command: SweepCommand, context: &Context, as_json: bool) -> anyhow::Result<()> {
    let tools = context.tools()?;
    match command {
        SweepCommand::Start(args) => {
            let grid = args
                .set
                .iter()
                .map(|pair| grid_axis(pair))
                .collect::<anyhow::Result<Vec<_>>>()?;
            let started = tools.start_sweep(&SweepRequest {
                grid,
                max_parallel: args.max_parallel,
                metric: args.metric,
                lower_is_better: args.lower_is_better.then_some(true),
                caps: args.caps.into(),
            })?;
            if as_json {
                return output::json(&started);
            }
            output::say(&started.message)?;
            for note in &started.notes {
                output::warning(note);
            }
            show(&started.sweep, false)
        }
        SweepCommand::Status { sweep_id } => {
            let view = tools.sweep_view(&SweepId::parse(&sweep_id)?)?;
            if as_json {
                return output::json(&view);
            }
            show(&view, false)
        }
        SweepCommand::Results { sweep_id } => {
            let view = tools.sweep_view(&SweepId::parse(&sweep_id)?)?;
            if as_json {
                return output::json(&view);
            }
            show(&view, true)
        }
        SweepCommand::Stop { sweep_id } => {
            let stopped = tools.stop_sweep(&SweepId::parse(&sweep_id)?)?;
            if as_json {
                return output::json(&stopped);
            }
            output::say(&stopped.message)?;
            for failure in &stopped.failures {
                output::warning(failure);
            }
            Ok(())
        }
        SweepCommand::List => {
            let list = tools.list_sweeps()?;
            if as_json {
                return output::json(&list);
            }
            let mut table = output::table(&["sweep", "environment", "state", "runs", "created"]);
            for sweep in &list.sweeps {
                table.add_row(vec![
                    output::cell(&sweep.sweep_id),
                    output::cell(&sweep.environment),
                    output::toned(sweep.state, output::state_tone(sweep.state)),
                    output::cell(format!("{}/{}", sweep.run_ids.len(), sweep.points)),
                    output::cell(&sweep.created_at),
                ]);
            }
            output::line(table)
        }
        SweepCommand::Drive { sweep_id } => {
            let id = SweepId::parse(&sweep_id)?;
            // The tree the sweep was started with, whatever this process was given.
            let state = tools.drive_sweep(&id)?;
            output::line(format!("sweep {id} is {}", state.as_str()))
        }
    }
}

/// `field=v1,v2,…` → the field and its values (as text: each is read as the field's type
/// when the sweep checks it).
fn grid_axis(pair: &str) -> anyhow::Result<(String, Vec<Value>)> {
    let (field, values) = crate::runs::parse_setting(pair).map_err(anyhow::Error::msg)?;
    let values: Vec<Value> = values
        .split(',')
        .map(str::trim)
        .map(|value| {
            if value.is_empty() {
                anyhow::bail!("--set {pair}: a value is empty (two commas, or a trailing one)");
            }
            Ok(Value::Str(value.to_owned()))
        })
        .collect::<anyhow::Result<_>>()?;
    Ok((field, values))
}

/// The sweep's rows as a table: progress (`status`) or the ranking (`results`).
fn show(view: &SweepView, ranked: bool) -> anyhow::Result<()> {
    output::line(format!(
        "sweep {} of {}: {} — {} runs, {} started, {} waiting, at most {} at once; ranked by {} ({} first)",
        view.sweep_id,
        view.environment,
        view.state,
        view.points,
        view.started,
        view.waiting,
        view.max_parallel,
        view.metric.name,
        if view.metric.lower_is_better {
            "lowest"
        } else {
            "highest"
        },
    ))?;
    let header: &[&str] = if ranked {
        &[
            "rank",
            "settings",
            "run",
            "state",
            "step",
            "metric",
            "held-out [95%]",
            "tokens",
            "cost",
            "",
        ]
    } else {
        &["#", "settings", "run", "state", "step", "reward"]
    };
    let mut table = output::table(header);
    for row in &view.rows {
        let settings = row
            .settings
            .iter()
            .map(|(field, value)| format!("{field}={value}"))
            .collect::<Vec<_>>()
            .join(" ");
        let number =
            |value: Option<f64>| value.map_or_else(|| "-".to_owned(), |x| format!("{x:.4}"));
        let mut cells = vec![
            output::cell(if ranked {
                row.rank
                    .map_or_else(|| "-".to_owned(), |rank| rank.to_string())
            } else {
                row.point.to_string()
            }),
            output::cell(settings),
            output::cell(row.run_id.as_deref().unwrap_or("-")),
            output::toned(row.state, output::state_tone(row.state)),
            output::cell(
                row.step
                    .map_or_else(|| "-".to_owned(), |step| step.to_string()),
            ),
        ];
        if ranked {
            let held_out = row.held_out.as_ref().map_or_else(
                || "-".to_owned(),
                |score| match (score.low, score.high) {
                    (Some(low), Some(high)) => {
                        format!("{:.3} [{low:.3}, {high:.3}]", score.mean_score)
                    }
                    _ => format!("{:.3}", score.mean_score),
                },
            );
            let (tokens, cost) = row.usage.as_ref().map_or_else(
                || ("-".to_owned(), "-".to_owned()),
                |usage| {
                    let tokens = usage.tokens.prompt + usage.tokens.sampled + usage.tokens.trained;
                    let cost = usage.cost.map_or_else(
                        || "no price".to_owned(),
                        |cost| format!("{cost:.2} {}", usage.currency.as_deref().unwrap_or("")),
                    );
                    (tokens.to_string(), cost)
                },
            );
            cells.extend([
                output::cell(number(row.metric)),
                output::cell(held_out),
                output::cell(tokens),
                output::cell(cost),
                output::cell(if row.best { "◀ best" } else { "" }),
            ]);
        } else {
            cells.push(output::cell(number(row.reward)));
        }
        table.add_row(cells);
        if let Some(error) = &row.error {
            output::warning(&format!("point {}: {error}", row.point));
        }
    }
    output::line(table)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_setting_and_its_values_are_read_and_bad_ones_named() {
        let (field, values) = grid_axis("learning_rate=1e-4, 3e-4").unwrap();
        assert_eq!(field, "learning_rate");
        assert_eq!(values, [Value::from("1e-4"), Value::from("3e-4")]);
        for bad in ["learning_rate", "=1", "a=1,,2", "a=1,", "a="] {
            assert!(grid_axis(bad).is_err(), "{bad}");
        }
    }
}
