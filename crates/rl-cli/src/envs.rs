//! `rl envs …`: environment discovery.

use anyhow::Context as _;
use clap::Subcommand;
use rl_tools::{EnvironmentDetail, EnvironmentList, FailureKind};

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
    let tools = context.tools()?;
    match command {
        EnvsCommand::List { recursive } => {
            let list = tools
                .list_environments(recursive)
                .context(WHERE_ENVIRONMENTS_ARE)?;
            if as_json {
                output::json(&list)
            } else {
                print_list(&list)
            }
        }
        EnvsCommand::New { name } => {
            let dir = tools.settings()?.environments_dir()?;
            let created = rl_tools::new_environment(&dir, &name)?;
            if as_json {
                return output::json(&created);
            }
            output::line(format!(
                "wrote {} ({}) and its sample dataset {}\nnext: rl select {}, then rl preflight to try it against models",
                created.file.display(),
                created.class_name,
                created.dataset.display(),
                created.name
            ))
        }
        EnvsCommand::Show { name, recursive } => {
            // The folder hint helps when the folder could not be read, not when the name is
            // unknown there.
            let env = tools
                .environment(&name, recursive)
                .map_err(|error| match error.kind() {
                    FailureKind::NotFound => anyhow::Error::new(error),
                    _ => anyhow::Error::new(error).context(WHERE_ENVIRONMENTS_ARE),
                })?;
            if as_json {
                output::json(&env)
            } else {
                print_one(&env)
            }
        }
    }
}

const WHERE_ENVIRONMENTS_ARE: &str = "pass --root DIR (a tinker-atropos tree) or --envs-dir DIR";

fn print_list(list: &EnvironmentList) -> anyhow::Result<()> {
    let mut table = output::table(&["name", "kind", "class", "file", "config", "description"]);
    for env in &list.environments {
        let file = env
            .file_path
            .strip_prefix(&list.root)
            .unwrap_or(&env.file_path);
        table.add_row([
            env.name.clone(),
            env.kind.to_string(),
            env.class_name.clone(),
            format!("{}:{}", file.display(), env.line),
            env.config_class.clone(),
            env.description.clone(),
        ]);
    }
    output::line(table)?;
    output::line(format!(
        "{} environments in {} ({} files read)",
        list.count,
        list.root.display(),
        list.files_scanned
    ))?;
    if let Some(note) = list.unlisted_note() {
        output::say(&note)?;
    }
    for duplicate in &list.duplicate_names {
        output::line(format!(
            "name '{}' is used {} times; select by key: {}",
            duplicate.name,
            duplicate.keys.len(),
            duplicate.keys.join(", ")
        ))?;
    }
    if !list.skipped.is_empty() {
        output::line(format!("{} files skipped:", list.skipped.len()))?;
        for skipped in &list.skipped {
            output::line(format!("  {}: {}", skipped.file, skipped.reason_text))?;
        }
    }
    if !list.warnings.is_empty() {
        output::line(format!("{} files with warnings:", list.warnings.len()))?;
        for warned in &list.warnings {
            output::line(format!("  {}: {}", warned.file, warned.warning_text))?;
        }
    }
    Ok(())
}

fn print_one(env: &EnvironmentDetail) -> anyhow::Result<()> {
    let mut table = output::table(&["field", "value"]);
    let path = &env.file_path;
    let rows = [
        ("name", env.name.clone()),
        ("kind", env.kind.to_string()),
        ("key", env.key.clone()),
        ("class", env.class_name.clone()),
        ("file", format!("{}:{}", path.display(), env.line)),
        ("description", env.description.clone()),
        ("config class", env.config_class.clone()),
        ("config_init", yes_no(env.has_config_init).to_owned()),
        ("runnable", yes_no(env.runnable).to_owned()),
        ("bases", env.bases.join(" → ")),
        (
            "package",
            env.package.as_ref().map_or_else(String::new, |package| {
                format!(
                    "{} ({}, {})",
                    package.name,
                    package.folder.display(),
                    package.verifiers
                )
            }),
        ),
    ];
    for (field, value) in rows {
        table.add_row([field.to_owned(), value]);
    }
    output::line(table)?;
    dependencies(env.dependencies.as_ref())
}

/// An environment's own dependencies the Python it runs in lacks, and its requirements file.
pub(crate) fn dependencies(view: Option<&rl_tools::DependenciesView>) -> anyhow::Result<()> {
    let Some(view) = view else {
        return Ok(());
    };
    let python = view.python.display();
    if let Some(problem) = &view.python_problem {
        output::line(format!("its Python: {problem}"))?;
    }
    if !view.missing_imports.is_empty() {
        output::line(format!(
            "{python} cannot import: {}",
            view.missing_imports.join(", ")
        ))?;
    }
    if !view.missing_optional_imports.is_empty() {
        output::line(format!(
            "{python} cannot import (optional: the environment goes on without them, with less): {}",
            view.missing_optional_imports.join(", ")
        ))?;
    }
    if let Some(file) = &view.requirements {
        let unmet = if view.unmet_requirements.is_empty() {
            "all installed".to_owned()
        } else {
            format!("unmet: {}", view.unmet_requirements.join(", "))
        };
        output::line(format!("requirements: {} ({unmet})", file.display()))?;
    }
    if let Some(fix) = &view.fix {
        output::say(&format!("fix: {fix}"))?;
    }
    Ok(())
}

fn yes_no(value: bool) -> &'static str {
    if value { "yes" } else { "no" }
}
