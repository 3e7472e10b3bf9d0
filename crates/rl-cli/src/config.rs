//! `rl select`, `rl config show|set|diff`: the selection and its configuration.

use std::time::Duration;

use anyhow::Context as _;
use clap::{Subcommand, ValueEnum};
use rl_config::ValueOrigin;
use rl_settings::Value;
use rl_tools::{ConfigView, FieldView};

use crate::context::Context;
use crate::output;

#[derive(Debug, Subcommand)]
pub(crate) enum ConfigCommand {
    /// Every field of the selected environment with the value a run would use.
    Show {
        /// Also import the environment with Python and report where the readings disagree.
        #[arg(long, value_name = "HOW")]
        introspect: Option<Introspect>,
        /// Seconds the Python introspection may take.
        #[arg(long, default_value_t = 60)]
        introspect_timeout: u64,
    },
    /// Set one field (validated; "16" becomes 16 where the field is an integer).
    Set { field: String, value: String },
    /// The edits made since selection, next to the defaults they replace.
    Diff,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum Introspect {
    Python,
}

pub(crate) fn select(context: &Context, name: &str, as_json: bool) -> anyhow::Result<()> {
    let selected = context.tools()?.select_environment(name)?;
    if as_json {
        return output::json(&selected);
    }
    output::line(format!(
        "selected {} ({}, {}); config class {} with {} fields; wandb_name {}",
        output::environment_label(&selected.environment, Some(selected.kind)),
        selected.key,
        selected.class_name,
        selected.config_class,
        selected.field_count,
        selected.wandb_name
    ))?;
    notes(&selected.notes)?;
    first_run_advice(&selected.first_run_advice)?;
    crate::envs::dependencies(selected.dependencies.as_ref())
}

pub(crate) fn run(command: ConfigCommand, context: &Context, as_json: bool) -> anyhow::Result<()> {
    let tools = context.tools()?;
    match command {
        ConfigCommand::Show {
            introspect,
            introspect_timeout,
        } => {
            let current = tools.current_config()?;
            let Some(Introspect::Python) = introspect else {
                return if as_json {
                    output::json(&current)
                } else {
                    print_current(&current)
                };
            };
            let introspected = tools
                .introspect_config(current, Duration::from_secs(introspect_timeout))
                .context("--introspect python")?;
            if as_json {
                return output::json(&introspected);
            }
            print_current(&introspected.config)?;
            let disagreements = &introspected.introspection_disagreements;
            if disagreements.is_empty() {
                output::line("python introspection agrees with the static reading")?;
            }
            for d in disagreements {
                output::line(format!(
                    "disagreement on {}: static {} / python {}",
                    d.field, d.static_reading, d.python
                ))?;
            }
            Ok(())
        }
        ConfigCommand::Set { field, value } => {
            let report = tools.edit_config(&field, &Value::Str(value))?;
            if as_json {
                return output::json(&report);
            }
            let coerced = match &report.coerced_from {
                Some(input) => format!(" (read {input} as {})", report.value),
                None => String::new(),
            };
            let unchecked = if report.checked {
                ""
            } else {
                "; its type is not checked statically"
            };
            let previous = report
                .previous
                .as_ref()
                .map_or_else(|| "unset".to_owned(), ToString::to_string);
            output::line(format!(
                "{} = {}  (was {previous}){coerced}{unchecked}",
                report.field, report.value
            ))
        }
        ConfigCommand::Diff => {
            let diff = tools.config_diff()?;
            if as_json {
                return output::json(&diff);
            }
            if diff.is_empty() {
                return output::line("no edits since the environment was selected");
            }
            let mut table = output::table(&["field", "default", "value", "edited at"]);
            for entry in diff {
                table.add_row([
                    entry.field,
                    entry.default_text,
                    entry.value.to_string(),
                    entry.edited_at,
                ]);
            }
            output::line(table)
        }
    }
}

fn print_current(current: &ConfigView) -> anyhow::Result<()> {
    output::line(format!(
        "{} ({}) — config class {}; wandb_name {}; wandb_project {}",
        output::environment_label(&current.environment, Some(current.kind)),
        current.key,
        current.config_class,
        current.wandb_name,
        current.wandb_project
    ))?;
    let mut table = output::table(&["field", "type", "value", "from", "description"]);
    let fields: Vec<&FieldView> = current
        .configurable_fields
        .iter()
        .chain(&current.locked_fields)
        .collect();
    for field in fields {
        let from = match field.origin {
            ValueOrigin::Locked => "locked",
            ValueOrigin::Edited => "edited",
            ValueOrigin::Selection => "selection",
            ValueOrigin::EnvironmentDefault => "environment",
            ValueOrigin::ClassDefault => "default",
        };
        let value = match (&field.current_value, &field.default_expression) {
            (Some(value), _) => value.to_string(),
            (None, Some(expression)) => format!("computed: {expression}"),
            (None, None) => "required".to_owned(),
        };
        let tone = match field.origin {
            ValueOrigin::Edited => output::Tone::Busy,
            ValueOrigin::Locked => output::Tone::Quiet,
            _ => output::Tone::Good,
        };
        table.add_row([
            output::cell(&field.name),
            output::cell(&field.spec.type_label),
            output::toned(value, tone),
            output::cell(from),
            output::cell(&field.description),
        ]);
    }
    output::line(table)?;
    let mut trainer = output::table(&["trainer setting", "value", "from"]);
    for setting in &current.trainer_settings {
        let tone = match setting.origin {
            "edited" => output::Tone::Busy,
            "locked" => output::Tone::Quiet,
            _ => output::Tone::Good,
        };
        let value = if setting.current_value == rl_settings::Value::Null {
            "the engine's".to_owned()
        } else {
            setting.current_value.to_string()
        };
        trainer.add_row([
            output::cell(&setting.name),
            output::toned(value, tone),
            output::cell(setting.origin),
        ]);
    }
    output::line(trainer)?;
    output::loss_table(&current.losses)?;
    notes(&current.notes)?;
    first_run_advice(&current.first_run_advice)
}

/// On the local engine, the settings that make a first run take hours or skip every group.
fn first_run_advice(advice: &[rl_tools::FirstRunAdvice]) -> anyhow::Result<()> {
    if advice.is_empty() {
        return Ok(());
    }
    output::line("for a first run on the local engine (this machine):")?;
    for one in advice {
        output::line(format!(
            "  {} {} → try {}: {}; {}",
            one.field, one.value, one.try_value, one.why, one.how
        ))?;
    }
    Ok(())
}

fn notes(notes: &[String]) -> anyhow::Result<()> {
    for note in notes {
        output::line(format!("note: {note}"))?;
    }
    Ok(())
}
