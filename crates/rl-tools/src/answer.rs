//! Error answers: `{"error": ..., "kind": ..., "hint": ...}` and what the caller needs to
//! correct the call (the names that exist, the values allowed, the key that is missing). One
//! place for every face: the registry, and the CLI's `--json`.

use rl_config::ConfigError;
use rl_discovery::DiscoveryError;
use rl_settings::SettingsError;
use serde_json::{Map, Value, json};

use crate::environments::selectable_name;
use crate::registry::{TOOL_NAMES, specs};
use crate::{Tools, ToolsError};

/// The answer to a failed call. `tools` looks up the names to offer (environments, fields);
/// without it the answer still has its hint.
pub fn error_answer(error: &ToolsError, tools: Option<&Tools>) -> Value {
    let mut extra = Map::new();
    let hint = advice(error, tools, &mut extra);
    answer(&error.to_string(), json!(error.kind()), &hint, extra)
}

fn answer(message: &str, kind: Value, hint: &str, extra: Map<String, Value>) -> Value {
    let mut object = Map::new();
    object.insert("error".to_owned(), json!(message));
    object.insert("kind".to_owned(), kind);
    object.insert("hint".to_owned(), json!(hint));
    object.extend(extra);
    Value::Object(object)
}

fn advice(error: &ToolsError, tools: Option<&Tools>, extra: &mut Map<String, Value>) -> String {
    use rl_preflight::PreflightError as I;
    use rl_process::ProcessError as P;
    match error {
        ToolsError::Config(error) | ToolsError::Preflight(I::Config(error)) => {
            config_advice(error, tools, extra)
        }
        ToolsError::Settings(error)
        | ToolsError::Process(P::Settings(error))
        | ToolsError::Preflight(I::Settings(error)) => settings_advice(error).to_owned(),
        ToolsError::Discovery(error) => discovery_advice(error, tools, extra),
        ToolsError::UnknownTool { .. } => {
            extra.insert("available".to_owned(), json!(TOOL_NAMES));
            "Call one of `available`".to_owned()
        }
        ToolsError::BadArguments { tool, .. } => {
            if let Some(spec) = specs().into_iter().find(|spec| spec.name == tool) {
                extra.insert("parameters".to_owned(), spec.parameters);
            }
            "Pass an argument object that matches `parameters`".to_owned()
        }
        ToolsError::UnknownRun { active, known, .. } => {
            extra.insert("active_runs".to_owned(), json!(active));
            extra.insert("known_runs".to_owned(), json!(known));
            "Pass a run id from rl_list_runs (`active_runs` lists those still going, \
             `known_runs` the newest of all)"
                .to_owned()
        }
        ToolsError::Process(P::MissingTinkerKey { .. }) => missing_key(extra, "TINKER_API_KEY"),
        ToolsError::Preflight(I::MissingKey { variable }) => missing_key(extra, variable),
        ToolsError::Metrics(rl_metrics::MetricsError::MissingApiKey) => {
            missing_key(extra, "WANDB_API_KEY")
        }
        ToolsError::Preflight(_) | ToolsError::Invalid { .. } | ToolsError::Exists { .. } => {
            "Correct the request as the error says".to_owned()
        }
        _ => "rl_health_check shows whether the machine is ready; the same call may work once \
              the cause is fixed"
            .to_owned(),
    }
}

fn missing_key(extra: &mut Map<String, Value>, variable: &str) -> String {
    extra.insert("missing_key".to_owned(), json!(variable));
    format!("The operator must provide {variable} (environment or the state directory's .env)")
}

fn config_advice(
    error: &ConfigError,
    tools: Option<&Tools>,
    extra: &mut Map<String, Value>,
) -> String {
    use ConfigError as C;
    let hint = match error {
        C::Discovery(error) => return discovery_advice(error, tools, extra),
        C::NothingSelected => "Select an environment first with rl_select_environment(name)",
        C::UnknownField { closest, .. } => {
            extra.insert("closest".to_owned(), json!(closest));
            if let Some(fields) = tools.and_then(field_names) {
                extra.insert("available_fields".to_owned(), json!(fields));
            }
            "Pass one of `available_fields` (rl_get_current_config describes them)"
        }
        C::LockedField { value, .. } => {
            extra.insert("locked_value".to_owned(), json!(value));
            "Locked fields are the operator's; change another field"
        }
        C::WrongType { expected, .. } => {
            extra.insert("expected".to_owned(), json!(expected));
            "Pass a value of the expected type"
        }
        C::NotAllowed { allowed, .. } => {
            extra.insert("allowed_values".to_owned(), json!(allowed));
            "Pass one of `allowed_values`"
        }
        C::OutOfRange { range, .. } => {
            extra.insert("allowed_range".to_owned(), json!(range));
            "Pass a value inside `allowed_range`"
        }
        C::InvalidInput { .. } => "Correct the request as the error says",
        C::Settings(error) => settings_advice(error),
        _ => "Check the state directory; rl_health_check shows whether the machine is ready",
    };
    hint.to_owned()
}

fn settings_advice(error: &SettingsError) -> &'static str {
    match error {
        SettingsError::Invalid(_) => {
            "The operator's configuration (config.toml in the state directory, or RL_* \
             variables) needs fixing; `rl doctor` shows what is missing. Settings are read when \
             `rl serve` or `rl mcp` starts: restart a running one after the fix"
        }
        SettingsError::InvalidInput { .. } => "Correct the request as the error says",
        SettingsError::NotAFile { .. } | SettingsError::Io { .. } => {
            "Check the state directory; rl_health_check shows whether the machine is ready"
        }
    }
}

fn discovery_advice(
    error: &DiscoveryError,
    tools: Option<&Tools>,
    extra: &mut Map<String, Value>,
) -> String {
    match error {
        DiscoveryError::UnknownEnvironment { suggestions, .. } => {
            extra.insert("suggestions".to_owned(), json!(suggestions));
            if let Some(names) = tools.and_then(environment_names) {
                extra.insert("available".to_owned(), json!(names));
            }
            "Pass one of `available` (rl_list_environments shows them all)".to_owned()
        }
        DiscoveryError::AmbiguousEnvironment { candidates, .. } => {
            extra.insert("candidates".to_owned(), json!(candidates));
            "Several environments share this name: pass one of `candidates`".to_owned()
        }
        _ => "The operator must point rl at a tinker-atropos tree (RL_TINKER_ATROPOS_ROOT or \
              tinker_atropos_root in config.toml); rl_health_check shows what is missing"
            .to_owned(),
    }
}

fn environment_names(tools: &Tools) -> Option<Vec<String>> {
    let scan = tools.scan(false).ok()?;
    Some(
        scan.environments
            .iter()
            .map(|env| selectable_name(&scan, env))
            .collect(),
    )
}

fn field_names(tools: &Tools) -> Option<Vec<String>> {
    let mut names: Vec<String> = tools
        .service()
        .ok()?
        .current()
        .ok()?
        .fields
        .into_iter()
        .filter(|field| !field.locked)
        .map(|field| field.spec.name)
        .collect();
    names.push(rl_config::WANDB_PROJECT_FIELD.to_owned());
    Some(names)
}
