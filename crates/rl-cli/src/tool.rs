//! `rl tool list|schema|call`: the agent tools from a shell, answering exactly as they do over
//! MCP, so an agent with only a shell uses the same interface.

use std::io::Read;

use anyhow::Context as _;
use clap::Subcommand;
use rl_tools::{Caller, ToolsError, error_answer, specs};
use serde_json::json;

use crate::context::{Context, until_interrupted};
use crate::output;

#[derive(Debug, Subcommand)]
pub(crate) enum ToolCommand {
    /// The tools, each with what it is for.
    List,
    /// Every tool in OpenAI function-calling form: `[{"type": "function", "function": {...}}]`.
    Schema,
    /// Call one tool and print its JSON answer. Exit 0 on success, 1 when the answer is an
    /// error, 2 when the call itself is malformed.
    Call {
        /// A tool name from `rl tool list`.
        name: String,
        /// The arguments as a JSON object (`-` reads it from stdin); none means `{}`.
        arguments: Option<String>,
    },
}

pub(crate) fn run(command: ToolCommand, context: &Context, as_json: bool) -> anyhow::Result<()> {
    match command {
        ToolCommand::List if as_json => {
            let tools: Vec<serde_json::Value> = specs()
                .into_iter()
                .map(|spec| {
                    json!({"name": spec.name, "description": spec.description, "parameters": spec.parameters})
                })
                .collect();
            output::json(&tools)
        }
        ToolCommand::List => {
            let mut table = output::table(&["tool", "what it does"]);
            for spec in specs() {
                let first = spec.description.split(". ").next().unwrap_or_default();
                table.add_row([spec.name, first]);
            }
            output::line(table)
        }
        ToolCommand::Schema => {
            let functions: Vec<serde_json::Value> = specs()
                .into_iter()
                .map(|spec| {
                    json!({
                        "type": "function",
                        "function": {
                            "name": spec.name,
                            "description": spec.description,
                            "parameters": spec.parameters,
                        }
                    })
                })
                .collect();
            output::json(&functions)
        }
        ToolCommand::Call { name, arguments } => call(context, &name, arguments.as_deref()),
    }
}

fn call(context: &Context, name: &str, arguments: Option<&str>) -> anyhow::Result<()> {
    let arguments = match parse_arguments(arguments) {
        Ok(arguments) => arguments,
        Err(message) => {
            output::json_compact(&json!({
                "error": message,
                "kind": "bad_request",
                "hint": "Pass the arguments as one JSON object, e.g. '{\"run_id\": \"…\"}'",
            }))?;
            return Err(output::AlreadyReported(2).into());
        }
    };
    if !rl_tools::TOOL_NAMES.contains(&name) {
        let unknown = ToolsError::UnknownTool {
            name: name.to_owned(),
        };
        output::json(&error_answer(&unknown, None))?;
        return Err(output::AlreadyReported(2).into());
    }
    // An agent reads stdout only: a state directory or settings rl cannot use is answered
    // there too, in the tools' shape.
    let registry = match context.registry() {
        Ok(registry) => registry,
        Err(error) => {
            output::json(&output::error_json(error, None))?;
            return Err(output::AlreadyReported(1).into());
        }
    };
    // An agent's shell that gives up on this call must not leave its pre-flight models running.
    let finished = until_interrupted(
        registry.tools(),
        registry.call(name, arguments, Caller::Agent),
    )?;
    let Some(reply) = finished else {
        output::json(&json!({
            "error": "interrupted: the call was stopped, with every model process it started",
            "kind": "internal",
            "hint": "Call again; a run already started keeps running (rl_list_runs shows it)",
        }))?;
        return Err(output::AlreadyReported(1).into());
    };
    output::json(&reply.value)?;
    if reply.malformed {
        return Err(output::AlreadyReported(2).into());
    }
    if reply.is_error() {
        return Err(output::AlreadyReported(1).into());
    }
    Ok(())
}

fn parse_arguments(text: Option<&str>) -> Result<serde_json::Value, String> {
    let text = match text {
        None => return Ok(json!({})),
        Some("-") => {
            let mut buffer = String::new();
            std::io::stdin()
                .read_to_string(&mut buffer)
                .context("cannot read the arguments from stdin")
                .map_err(|error| format!("{error:#}"))?;
            buffer
        }
        Some(text) => text.to_owned(),
    };
    let value: serde_json::Value = serde_json::from_str(&text)
        .map_err(|error| format!("the arguments are not JSON: {error}"))?;
    if value.is_object() {
        Ok(value)
    } else {
        Err("the arguments must be a JSON object".to_owned())
    }
}
