//! A verifiers environment's settings, read from source like an Atropos config class: the
//! run-level fields rl's verifiers runner (`rl_verifiers`) honours, then the environment's own
//! — a v1 taskset's config class (its bases followed to verifiers' `TasksetConfig`), or a v0
//! module's `load_environment` keyword arguments. `rl_verifiers` tells the two apart at run
//! time by the environment's own names, so a key of both is the environment's.

use rl_discovery::{Environment, LOAD_ENVIRONMENT};
use ruff_python_ast::{self as ast, Stmt};

use super::values::default_for;
use super::{Reader, TypeContext, builtin, field_type, slice};
use crate::ConfigError;
use crate::schema::{Constraints, DefaultValue, FieldSpec, FieldType};

/// The run config's `env:` keys `rl_verifiers` reads (atroposlib's names, with their meaning
/// there: `rl_verifiers/config.py`'s `RunSettings`, which a test holds to this list);
/// atroposlib's other fields mean nothing to a verifiers environment and are not shown.
pub(crate) const RUN_FIELDS: &[&str] = &[
    "group_size",
    "max_token_length",
    "total_steps",
    "batch_size",
    "max_num_workers",
    "max_batches_offpolicy",
    "rollout_server_url",
    "tokenizer_name",
    "wandb_name",
    "inference_weight",
    "worker_timeout",
    "ensure_scores_are_not_same",
    "data_path_to_save_groups",
];

/// verifiers' own taskset config fields a user may set (`verifiers/v1/configs/taskset.py`):
/// `id` is rl's to set and `task` is a nested config rl does not edit.
const TASKSET_CONFIG: &str = "TasksetConfig";

pub(super) fn run_fields() -> Result<Vec<FieldSpec>, ConfigError> {
    Ok(builtin()?
        .fields
        .iter()
        .filter(|field| RUN_FIELDS.contains(&field.name.as_str()))
        .cloned()
        .collect())
}

/// verifiers' `TasksetConfig` (and `SharedTasksetConfig`), the end of a taskset config's bases.
pub(super) fn is_taskset_config(qualified: &str) -> bool {
    let name = qualified.rsplit('.').next().unwrap_or(qualified);
    qualified.starts_with("verifiers.") && matches!(name, TASKSET_CONFIG | "SharedTasksetConfig")
}

pub(super) fn taskset_config_fields() -> Vec<FieldSpec> {
    vec![FieldSpec {
        name: "system_prompt".to_owned(),
        type_text: "Path | None".to_owned(),
        field_type: FieldType::Optional {
            inner: Box::new(FieldType::Str),
        },
        class_default: DefaultValue::Value {
            value: rl_settings::Value::Null,
        },
        env_default: None,
        description: Some(
            "File whose text replaces each task's system prompt (verifiers' TasksetConfig)."
                .to_owned(),
        ),
        constraints: Constraints::default(),
        declared_in: TASKSET_CONFIG.to_owned(),
    }]
}

/// A v0 environment's keyword arguments: each parameter of its module's top-level
/// `load_environment` with its annotation and default.
pub(super) fn load_environment_fields(
    reader: &Reader<'_>,
    env: &Environment,
    notes: &mut Vec<String>,
) -> Result<Vec<FieldSpec>, ConfigError> {
    let parsed = reader.file(&env.file)?;
    let Some(function) = parsed.module.body.iter().find_map(|stmt| match stmt {
        Stmt::FunctionDef(function) if function.name.as_str() == LOAD_ENVIRONMENT => Some(function),
        _ => None,
    }) else {
        notes.push(format!("{} has no top-level {LOAD_ENVIRONMENT}", env.file));
        return Ok(Vec::new());
    };
    let context = TypeContext::Scanned {
        reader,
        file: env.file.clone(),
    };
    let parameters = &function.parameters;
    if !parameters.posonlyargs.is_empty() || parameters.vararg.is_some() {
        notes.push(format!(
            "{LOAD_ENVIRONMENT} takes positional-only or *args parameters; rl passes keyword \
             arguments only"
        ));
    }
    if let Some(kwarg) = &parameters.kwarg {
        notes.push(format!(
            "{LOAD_ENVIRONMENT} also takes **{}: other keyword arguments reach it unchecked",
            kwarg.name
        ));
    }
    let fields = parameters
        .args
        .iter()
        .chain(&parameters.kwonlyargs)
        .map(|parameter| parameter_field(&parsed.text, parameter, &context))
        .collect();
    Ok(fields)
}

fn parameter_field(
    text: &str,
    parameter: &ast::ParameterWithDefault,
    context: &TypeContext<'_>,
) -> FieldSpec {
    let annotation = parameter.parameter.annotation.as_deref();
    let default = parameter.default.as_deref();
    let field_type = match (annotation, default) {
        (Some(annotation), _) => field_type(text, annotation, context),
        // Unannotated: the type its literal default has, as Python would see it.
        (None, Some(default)) => match default_for(text, default, None) {
            DefaultValue::Value { value } => type_of(&value),
            _ => FieldType::Any,
        },
        (None, None) => FieldType::Any,
    };
    let class_default = match default {
        Some(default) => default_for(text, default, Some(&field_type)),
        None => DefaultValue::Required,
    };
    FieldSpec {
        name: parameter.parameter.name.to_string(),
        type_text: annotation.map_or_else(String::new, |a| slice(text, a).to_owned()),
        field_type,
        class_default,
        env_default: None,
        description: None,
        constraints: Constraints::default(),
        declared_in: LOAD_ENVIRONMENT.to_owned(),
    }
}

fn type_of(value: &rl_settings::Value) -> FieldType {
    use rl_settings::Value;
    match value {
        Value::Bool(_) => FieldType::Bool,
        Value::Int(_) => FieldType::Int,
        Value::Float(_) => FieldType::Float,
        Value::Str(_) => FieldType::Str,
        _ => FieldType::Any,
    }
}

#[cfg(test)]
mod tests {
    use super::RUN_FIELDS;

    /// The fields shown are the ones the runner reads: `RunSettings`' annotated names.
    #[test]
    fn the_run_fields_are_the_runners() {
        let source = include_str!("../../../rl-python/python/rl_verifiers/config.py");
        let body = source
            .split("class RunSettings:")
            .nth(1)
            .and_then(|rest| rest.split("\n\n\n").next())
            .unwrap_or_default();
        let names: Vec<&str> = body
            .lines()
            .filter(|line| line.starts_with("    ") && !line.starts_with("     "))
            .filter_map(|line| line.trim().split_once(':'))
            .map(|(name, _)| name)
            .filter(|name| name.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
            .collect();
        assert_eq!(names, RUN_FIELDS);
    }
}
