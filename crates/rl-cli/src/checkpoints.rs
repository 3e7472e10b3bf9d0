//! `rl checkpoints list|export|keep|prune` (and `serve|served|stop`, in `serving.rs`): what
//! runs saved, a checkpoint as a PEFT adapter folder, a hosted checkpoint kept past its expiry,
//! and the operator's policy applied to an ended run.

use std::path::PathBuf;

use clap::Subcommand;
use rl_tools::CheckpointList;

use crate::context::Context;
use crate::output;

#[derive(Debug, Subcommand)]
pub(crate) enum CheckpointsCommand {
    /// A run's checkpoints (every run's without an id): step, paths, size, the best, and the
    /// one a resume loads.
    List { run_id: Option<String> },
    /// Write a checkpoint's LoRA adapter (`adapter_model.safetensors`, `adapter_config.json`)
    /// into a folder, as PEFT loads it; never overwrites. A hosted run's is downloaded from the
    /// Tinker service (TINKER_API_KEY).
    Export {
        run_id: String,
        step: i64,
        dir: PathBuf,
        /// Fold the adapter into the base model's weights: a Hugging Face model folder
        /// (config, safetensors, tokenizer, a model card) that transformers loads alone.
        #[arg(long)]
        merged: bool,
        /// The base model's folder to merge into (default: the run's base model, when it is a
        /// folder here; a hosted run's base is a name, so name its folder).
        #[arg(long, requires = "merged", value_name = "DIR")]
        base_dir: Option<PathBuf>,
    },
    /// Keep a hosted run's checkpoint (its sampler weights and state) at the Tinker service
    /// for DAYS from now, or for ever: hosted checkpoints expire unless kept.
    Keep {
        run_id: String,
        step: i64,
        /// Days from now until it expires.
        #[arg(long, required_unless_present = "forever", conflicts_with = "forever")]
        days: Option<u32>,
        /// It never expires.
        #[arg(long)]
        forever: bool,
    },
    /// Serve checkpoints of a finished run as an OpenAI-compatible endpoint on loopback
    /// (`/v1/models`, `/v1/chat/completions`, `/v1/completions`) until Ctrl-C, or detached; a
    /// hosted run's are served by Tinker: this prints where.
    Serve(crate::serving::ServeArgs),
    /// The checkpoints served now, by `rl checkpoints serve`.
    Served,
    /// End a served endpoint (`rl checkpoints served` lists their ids).
    Stop { serve_id: String },
    /// Delete the files of an ended run's checkpoints that `[checkpoints] keep_last` does not
    /// keep; never the last ones, the best, the final weights or the state a resume loads.
    Prune { run_id: String },
}

pub(crate) fn run(
    command: CheckpointsCommand,
    context: &Context,
    as_json: bool,
) -> anyhow::Result<()> {
    let tools = context.tools()?;
    match command {
        CheckpointsCommand::List { run_id } => {
            let id = run_id.map(|id| tools.run_id(&id)).transpose()?;
            let list = tools.list_checkpoints(id.as_ref())?;
            if as_json {
                return output::json(&list);
            }
            print_list(&list)
        }
        CheckpointsCommand::Export {
            run_id,
            step,
            dir,
            merged: true,
            base_dir,
        } => {
            let merged =
                tools.export_merged(&tools.run_id(&run_id)?, step, &dir, base_dir.as_deref())?;
            if as_json {
                return output::json(&merged);
            }
            output::line(format!(
                "wrote {} ({}), merged into {}",
                merged.dir.display(),
                merged.files.join(", "),
                merged.base_dir.display()
            ))?;
            output::line(format!("load it with:\n{}", merged.load_with))
        }
        CheckpointsCommand::Export {
            run_id, step, dir, ..
        } => {
            let exported = tools.export_checkpoint(&tools.run_id(&run_id)?, step, &dir)?;
            if as_json {
                return output::json(&exported);
            }
            for file in &exported.files {
                output::line(format!("wrote {}", file.display()))?;
            }
            output::line(format!("load it with:\n{}", exported.load_with))
        }
        CheckpointsCommand::Keep {
            run_id,
            step,
            days,
            forever,
        } => {
            let keep_for = match days {
                Some(days) if !forever => rl_tools::KeepFor::Days(days),
                _ => rl_tools::KeepFor::Forever,
            };
            let kept = tools.keep_checkpoint(&tools.run_id(&run_id)?, step, keep_for)?;
            if as_json {
                return output::json(&kept);
            }
            output::say(&kept.message)
        }
        CheckpointsCommand::Serve(args) => crate::serving::serve(context, &args, as_json),
        CheckpointsCommand::Served => crate::serving::served(context, as_json),
        CheckpointsCommand::Stop { serve_id } => crate::serving::stop(context, &serve_id, as_json),
        CheckpointsCommand::Prune { run_id } => {
            let pruned = tools.prune_checkpoints(&tools.run_id(&run_id)?)?;
            if as_json {
                return output::json(&pruned);
            }
            output::say(&pruned.message)
        }
    }
}

fn print_list(list: &CheckpointList) -> anyhow::Result<()> {
    if list.runs.is_empty() {
        return output::line("no runs yet; start one with `rl runs start`");
    }
    for run in &list.runs {
        output::line(format!(
            "run {}  {}  {}",
            run.run_id, run.environment, run.status
        ))?;
        for warning in &run.warnings {
            output::warning(warning);
        }
        if run.checkpoints.is_empty() {
            output::line("  no checkpoints")?;
            continue;
        }
        // The mark names its measure, as `rl compare --step best` does.
        let best = format!("best by {}", run.best_by);
        let mut table = output::table(&["step", "name", "state", "size", "", "sampler path"]);
        for checkpoint in &run.checkpoints {
            let marks = [
                (checkpoint.best, best.as_str()),
                (checkpoint.resume_point, "resume point"),
            ]
            .iter()
            .filter(|(on, _)| *on)
            .map(|(_, mark)| *mark)
            .collect::<Vec<_>>()
            .join(", ");
            table.add_row([
                output::cell(checkpoint.step.map(|s| s.to_string()).unwrap_or_default()),
                output::cell(checkpoint.name.clone().unwrap_or_default()),
                output::cell(
                    match (
                        checkpoint.state_path.is_some(),
                        checkpoint.pruned,
                        checkpoint.state_missing,
                    ) {
                        (false, _, _) => "",
                        (true, true, _) => "pruned",
                        (true, false, true) => "missing",
                        (true, false, false) => "saved",
                    },
                ),
                output::cell(
                    checkpoint
                        .size_bytes
                        .map(|bytes| format!("{:.1} MB", bytes as f64 / 1e6))
                        .unwrap_or_default(),
                ),
                output::cell(marks),
                output::cell(&checkpoint.sampler_path),
            ]);
        }
        output::line(table)?;
    }
    Ok(())
}
