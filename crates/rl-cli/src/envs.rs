//! `rl envs …`: environment discovery.

use anyhow::Context as _;
use clap::Subcommand;
use rl_discovery::{Environment, Scan, ScanOptions};

use crate::context::Context;
use crate::output;

#[derive(Debug, Subcommand)]
pub(crate) enum EnvsCommand {
    /// List the environments of the environments folder.
    List {
        /// Also scan sub-folders.
        #[arg(long, short)]
        recursive: bool,
    },
    /// Show one environment, by name, key (`name@file.py`) or class name.
    Show {
        name: String,
        #[arg(long, short)]
        recursive: bool,
    },
    /// Write a new environment from rl's template (and a sample dataset) into the environments
    /// folder; never overwrites.
    New {
        /// Lowercase letters, digits and underscores, e.g. `word_count`.
        name: String,
    },
}

pub(crate) fn run(command: EnvsCommand, context: &Context, as_json: bool) -> anyhow::Result<()> {
    match command {
        EnvsCommand::List { recursive } => {
            let scan = scan(context, recursive)?;
            if as_json {
                output::json(&scan)
            } else {
                print_list(&scan)
            }
        }
        EnvsCommand::New { name } => {
            let dir = context.settings()?.environments_dir()?;
            let created = rl_tools::new_environment(&dir, &name)?;
            if as_json {
                return output::json(&created);
            }
            output::line(format!(
                "wrote {} ({}) and its sample dataset {}\nnext: rl select {}, then rl preflight run to try it against models",
                created.file.display(),
                created.class_name,
                created.dataset.display(),
                created.name
            ))
        }
        EnvsCommand::Show { name, recursive } => {
            let scan = scan(context, recursive)?;
            let env = scan.find(&name)?;
            if as_json {
                output::json(env)
            } else {
                print_one(&scan, env)
            }
        }
    }
}

fn scan(context: &Context, recursive: bool) -> anyhow::Result<Scan> {
    let settings = context.settings()?;
    let options = ScanOptions {
        recursive: recursive || settings.recursive_discovery,
        ..Default::default()
    };
    rl_discovery::scan(&settings.environments_dir()?, &options)
        .context("pass --root DIR (a tinker-atropos tree) or --envs-dir DIR")
}

fn print_list(scan: &Scan) -> anyhow::Result<()> {
    let mut table = output::table(&["name", "class", "file", "config", "description"]);
    for env in &scan.environments {
        table.add_row([
            selectable_name(scan, env),
            env.class_name.clone(),
            format!("{}:{}", env.file, env.line),
            env.config_class.clone(),
            env.description.clone(),
        ]);
    }
    output::line(table)?;
    output::line(format!(
        "{} environments in {} ({} files read)",
        scan.environments.len(),
        scan.root.display(),
        scan.files_scanned
    ))?;
    for duplicate in &scan.duplicate_names {
        output::line(format!(
            "name '{}' is used {} times; select by key: {}",
            duplicate.name,
            duplicate.keys.len(),
            duplicate.keys.join(", ")
        ))?;
    }
    if !scan.skipped.is_empty() {
        output::line(format!("{} files skipped:", scan.skipped.len()))?;
        for skipped in &scan.skipped {
            output::line(format!("  {}: {}", skipped.file, skipped.reason))?;
        }
    }
    Ok(())
}

fn print_one(scan: &Scan, env: &Environment) -> anyhow::Result<()> {
    let mut table = output::table(&["field", "value"]);
    let path = env.path_in(&scan.root);
    let rows = [
        ("name", env.name.clone()),
        ("key", env.key.clone()),
        ("class", env.class_name.clone()),
        ("file", format!("{}:{}", path.display(), env.line)),
        ("description", env.description.clone()),
        ("config class", env.config_class.clone()),
        ("config_init", yes_no(env.has_config_init).to_owned()),
        ("runnable", yes_no(env.runnable).to_owned()),
        ("bases", env.bases.join(" → ")),
    ];
    for (field, value) in rows {
        table.add_row([field.to_owned(), value]);
    }
    output::line(table)
}

fn yes_no(value: bool) -> &'static str {
    if value { "yes" } else { "no" }
}

/// The name where it is unique, the key where it is not, so every row can be selected by what
/// it shows.
fn selectable_name(scan: &Scan, env: &Environment) -> String {
    let ambiguous = scan.duplicate_names.iter().any(|d| d.name == env.name);
    if ambiguous {
        env.key.clone()
    } else {
        env.name.clone()
    }
}
