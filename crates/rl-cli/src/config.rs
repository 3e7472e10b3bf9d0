//! `rl select`, `rl config show|set|diff`: the selection and its configuration.

use std::time::Duration;

use anyhow::Context as _;
use clap::{Subcommand, ValueEnum};
use rl_config::{CurrentConfig, DefaultValue, FieldType, Value, ValueOrigin};

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
    let report = context.service()?.select(name)?;
    if as_json {
        return output::json(&report);
    }
    output::line(format!(
        "selected {} ({}, {}); config class {} with {} fields; wandb_name {}",
        report.environment.name,
        report.environment.key,
        report.environment.class_name,
        report.config_class,
        report.field_count,
        report.wandb_name
    ))?;
    notes(&report.notes)
}

pub(crate) fn run(command: ConfigCommand, context: &Context, as_json: bool) -> anyhow::Result<()> {
    let service = context.service()?;
    match command {
        ConfigCommand::Show {
            introspect,
            introspect_timeout,
        } => {
            let current = service.current()?;
            let disagreements = match introspect {
                None => None,
                Some(Introspect::Python) => {
                    let scan = service.scan()?;
                    let env = scan.find(&current.environment.key)?;
                    let schema = rl_config::config_schema(&scan, env)?;
                    let python = rl_config::introspect(
                        &service.settings().python,
                        &env.path_in(&scan.root),
                        &env.class_name,
                        Duration::from_secs(introspect_timeout),
                    )
                    .context("--introspect python")?;
                    Some(rl_config::compare(&schema, &python))
                }
            };
            if as_json {
                return output::json(&serde_json::json!({
                    "config": current,
                    "introspection_disagreements": disagreements,
                }));
            }
            print_current(&current)?;
            if let Some(disagreements) = disagreements {
                if disagreements.is_empty() {
                    output::line("python introspection agrees with the static reading")?;
                }
                for d in disagreements {
                    output::line(format!(
                        "disagreement on {}: static {} / python {}",
                        d.field, d.static_reading, d.python
                    ))?;
                }
            }
            Ok(())
        }
        ConfigCommand::Set { field, value } => {
            let report = service.edit(&field, &Value::Str(value))?;
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
            output::line(format!(
                "{} = {} (was {}){coerced}{unchecked}",
                report.field, report.value, report.previous
            ))
        }
        ConfigCommand::Diff => {
            let diff = service.diff()?;
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
                    entry.default.to_string(),
                    entry.value.to_string(),
                    entry.edited_at,
                ]);
            }
            output::line(table)
        }
    }
}

fn print_current(current: &CurrentConfig) -> anyhow::Result<()> {
    output::line(format!(
        "{} ({}) — config class {}; wandb_name {}; wandb_project {}",
        current.environment.name,
        current.environment.key,
        current.config_class,
        current.wandb_name,
        current.wandb_project
    ))?;
    let mut table = output::table(&["field", "type", "value", "from", "description"]);
    for field in &current.fields {
        let from = match field.origin {
            ValueOrigin::Locked => "locked",
            ValueOrigin::Edited => "edited",
            ValueOrigin::Selection => "selection",
            ValueOrigin::EnvironmentDefault => "environment",
            ValueOrigin::ClassDefault => "default",
        };
        let value = match &field.current {
            DefaultValue::Value { value } => value.to_string(),
            other => other.to_string(),
        };
        let kind = match &field.spec.field_type {
            FieldType::Unknown { annotation } => annotation.clone(),
            other => other.to_string(),
        };
        table.add_row([
            field.spec.name.clone(),
            kind,
            value,
            from.to_owned(),
            field.spec.description.clone().unwrap_or_default(),
        ]);
    }
    output::line(table)?;
    notes(&current.notes)
}

fn notes(notes: &[String]) -> anyhow::Result<()> {
    for note in notes {
        output::line(format!("note: {note}"))?;
    }
    Ok(())
}
