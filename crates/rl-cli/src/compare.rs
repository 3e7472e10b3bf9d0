//! `rl compare ID`: is the trained model better than the base on its environment? Both are
//! sampled through the run's engine started again, on the same pre-flight, and compared with
//! confidence intervals; the verdict says how many samples it rests on.

use std::sync::Arc;

use clap::Args;
use rl_preflight::{Measure, Progress, ProgressSink};
use rl_settings::RunId;
use rl_tools::{
    CompareOptions, ComparePlan, ComparedModel, DEFAULT_COMPARE_GROUP_SIZE,
    DEFAULT_COMPARE_PROMPTS, EstimateView, TrainedCheckpoint,
};

use crate::context::{Context, until_interrupted, wait_limit};
use crate::curves::significant;
use crate::output;
use crate::preflight::bars;

#[derive(Debug, Args)]
pub(crate) struct CompareArgs {
    /// The run whose checkpoint is compared with its base model (a finished local-engine run).
    run_id: String,
    /// The trained checkpoint: a step with a saved state, or `best` (the one `rl checkpoints
    /// list` marks; default: the last saved state, the final one when the run completed).
    #[arg(long, value_name = "STEP")]
    step: Option<String>,
    /// Prompts (groups) per model.
    #[arg(long, default_value_t = DEFAULT_COMPARE_PROMPTS)]
    prompts: u32,
    /// Completions per prompt.
    #[arg(long, default_value_t = DEFAULT_COMPARE_GROUP_SIZE)]
    group_size: u32,
    /// What the verdict rests on: mean_score, pass@1, pass@n or best_of_n (n: the group
    /// size); every one is shown either way.
    #[arg(long, default_value_t = Measure::MeanScore)]
    measure: Measure,
    /// Seconds each model may sample for, from its start.
    #[arg(long, default_value_t = 1800.0)]
    timeout: f64,
    /// Start the comparison in a worker of its own and print its test's id at once, as agents'
    /// calls do (each model then has the default limit); its verdict is then
    /// `rl tool call rl_compare_training '{"test_id": "ID"}'`.
    #[arg(long, conflicts_with = "timeout")]
    no_wait: bool,
}

pub(crate) fn run(context: &Context, args: CompareArgs, as_json: bool) -> anyhow::Result<()> {
    // The test's size rule, said with this command's own option names (the agents' tool calls
    // them num_steps and group_size).
    if let Err(rl_preflight::PreflightError::OutOfRange { what, value, max }) =
        rl_preflight::check_size(Some(args.prompts), Some(args.group_size))
    {
        let option = if what == "num_steps" {
            "--prompts"
        } else {
            "--group-size"
        };
        anyhow::bail!("{option} {value} is out of range: from 1 to {max}");
    }
    let tools = context.tools()?;
    let id = RunId::parse(&args.run_id)?;
    if args.no_wait {
        let started = tools.start_long_call(&rl_tools::LongCall::Compare {
            run_id: id.to_string(),
            step: args.step,
            num_steps: Some(args.prompts),
            group_size: Some(args.group_size),
            measure: Some(args.measure),
        })?;
        return crate::preflight::say_started(&started, as_json);
    }
    let options = CompareOptions {
        step: args.step,
        prompts: args.prompts,
        group_size: args.group_size,
        timeout: wait_limit(args.timeout)?,
        measure: args.measure,
    };
    let ComparePlan {
        test: plan,
        trained,
        measure,
    } = tools.compare_plan(&id, &options)?;
    let progress = if as_json {
        Arc::new(|_: Progress| {}) as ProgressSink
    } else {
        output::line(format!(
            "comparing {} ({}) with its base model on {} ({} prompts of {} completions each); \
             the run's engine loads both first, which compiles (minutes on a CPU)",
            plan.models[1],
            describe(trained),
            plan.environment,
            plan.steps,
            plan.group_size
        ))?;
        bars(&plan)
    };
    let Some(report) = until_interrupted(&tools, tools.test_inference(&plan, progress))? else {
        anyhow::bail!(
            "interrupted: the comparison's processes were stopped; its test is kept in {}",
            tools.preflight_dir().display()
        );
    };
    let answer = tools.comparison(&id, trained, &report?, measure)?;
    // Without a verdict the comparison did not do its work (a model failed or produced no
    // scored completion): the answer says why, and the exit code says it failed.
    let failed = || Err(output::AlreadyReported(1).into());
    if as_json {
        output::json(&answer)?;
        return if answer.verdict.is_none() {
            failed()
        } else {
            Ok(())
        };
    }
    // pass@1 is % correct over 100: the table shows it once.
    let n = answer.trained.n.or(answer.base.n).unwrap_or(0);
    let (pass_n, best_n) = (
        format!("pass@{n} (95% CI)"),
        format!("best-of-{n} (95% CI)"),
    );
    let mut table = output::table(&[
        "model",
        "status",
        "prompts",
        "completions",
        "mean score (95% CI)",
        "% correct (95% CI)",
        &pass_n,
        &best_n,
    ]);
    for model in [&answer.base, &answer.trained] {
        table.add_row(row(model));
    }
    output::line(table)?;
    if let Some(difference) = &answer.difference {
        output::line(format!(
            "difference in {} (trained - base): {}",
            answer.measure,
            interval(difference)
        ))?;
    }
    output::line(format!("trained: {}", describe(trained)))?;
    output::line(format!("verdict: {}", answer.explanation))?;
    output::line(format!(
        "prompts: {}; the test: rl preflight show {}",
        answer.prompts, answer.test_id
    ))?;
    if answer.verdict.is_none() {
        return failed();
    }
    Ok(())
}

/// The trained checkpoint as a person reads it: its step, and what made it the best if asked.
fn describe(trained: TrainedCheckpoint) -> String {
    match trained.best_by {
        Some(by) => format!(
            "step {}, the best saved checkpoint by {by}, as `rl checkpoints list` marks it",
            trained.step
        ),
        None => format!("step {}", trained.step),
    }
}

fn row(model: &ComparedModel) -> [String; 8] {
    let shown = |estimate: &Option<EstimateView>| {
        estimate.as_ref().map_or_else(|| "-".to_owned(), interval)
    };
    [
        model.model.clone(),
        model.status.to_owned(),
        model.prompts.to_string(),
        model.completions.to_string(),
        shown(&model.mean_score),
        shown(&model.percent_correct),
        shown(&model.pass_at_n),
        shown(&model.best_of_n),
    ]
}

fn interval(estimate: &EstimateView) -> String {
    let end = |x: Option<f64>| x.map_or_else(|| "?".to_owned(), significant);
    format!(
        "{} ({} to {})",
        significant(estimate.value),
        end(estimate.low),
        end(estimate.high)
    )
}
