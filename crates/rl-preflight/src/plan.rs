//! What a pre-flight test runs: which environment, which models at which endpoint, and with
//! which settings; checked before anything starts.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use rl_config::Selection;
use rl_settings::{Settings, Value};
use serde::{Deserialize, Serialize};

use crate::analysis::CorrectRule;
use crate::error::PreflightError;
use crate::server::ModelServer;
use crate::verdict::VerdictPolicy;

/// OpenRouter, and the three models the original tool tested by default.
pub const OPENROUTER_BASE_URL: &str = "https://openrouter.ai/api/v1";
pub const OPENROUTER_KEY_VARIABLE: &str = "OPENROUTER_API_KEY";
pub const DEFAULT_MODELS: [&str; 3] = [
    "qwen/qwen3-8b",
    "z-ai/glm-4.7-flash",
    "minimax/minimax-m2.7",
];

pub const DEFAULT_STEPS: u32 = 3;
pub const DEFAULT_GROUP_SIZE: u32 = 16;
/// The largest test anyone may ask for, agent or person: a test is a quick check, not a run,
/// and every completion is paid for at the endpoint.
pub const MAX_STEPS: u32 = 100;
pub const MAX_GROUP_SIZE: u32 = 256;
/// Models in one test: a test runs each in processes of its own, and one that outlives its caller
/// must not queue thousands.
pub const MAX_MODELS: usize = 32;
pub const DEFAULT_CONCURRENCY: usize = 4;
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// Locked fields the test passes on, so the test sees the tokenizer and limits training will.
pub const LOCKED_FIELDS: [&str; 4] = [
    "tokenizer_name",
    "max_token_length",
    "max_num_workers",
    "max_batches_offpolicy",
];
/// Fields the test sets itself; an edit of one of them is not passed on.
const TEST_FIELDS: [&str; 5] = [
    "total_steps",
    "group_size",
    "use_wandb",
    "data_path_to_save_groups",
    "include_messages",
];

/// An OpenAI-compatible endpoint. The key is held here only to hand it to the child's
/// environment; it is never serialised.
#[derive(Clone, Serialize, Deserialize, PartialEq)]
pub struct Endpoint {
    pub base_url: String,
    /// The variable the key was read from (shown; its value never is).
    pub key_variable: String,
    #[serde(skip)]
    pub key: Option<String>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("base_url", &self.base_url)
            .field("key_variable", &self.key_variable)
            .field("key", &self.key.as_ref().map(|_| "[REDACTED]"))
            .finish()
    }
}

/// A key held only to hand it to a child's environment: `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct Key(pub String);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[REDACTED]")
    }
}

/// Everything a test needs, checked.
#[derive(Debug, Clone)]
pub struct PreflightPlan {
    /// The selected environment's key (`name@file.py`).
    pub environment: String,
    pub env_file: PathBuf,
    /// Which API it is written against: how it runs (`rl_discovery::run_module`) and what
    /// rl's environment runner is told (`RL_ENV_KIND`).
    pub kind: rl_settings::EnvironmentKind,
    /// The Python it runs in (a verifiers environment's own).
    pub python: PathBuf,
    /// Where the environment runs from (the tinker-atropos tree, as for training).
    pub working_dir: PathBuf,
    pub models: Vec<String>,
    pub endpoint: Endpoint,
    pub steps: u32,
    pub group_size: u32,
    pub use_wandb: bool,
    /// Handed to the children as `WANDB_API_KEY` when they log to WandB.
    pub wandb_key: Option<Key>,
    /// The keys the operator allows environments (`environment_keys`), by name, handed to each
    /// model's environment process as a run's environment gets them.
    pub environment_keys: Vec<(String, Key)>,
    /// `--env.<field> <value>` pairs: the locked fields, then the selection's scalar edits.
    pub env_args: Vec<(String, String)>,
    /// The operator's extra variables for child processes (never keys).
    pub child_environment: BTreeMap<String, String>,
    pub concurrency: usize,
    pub timeout: Duration,
    pub correct_rule: CorrectRule,
    pub verdict_policy: VerdictPolicy,
    /// The process serving the models at `endpoint`, when the test starts it itself.
    pub server: Option<ModelServer>,
    /// Only the held-out items, each once, when set: the environment runs through rl's runner.
    pub held_out: Option<HeldOutItems>,
    /// What each model's log (and the server's) keeps at most: the operator's
    /// `run.log_limit_bytes`.
    pub log_limit: rl_process::LogLimit,
    /// rl's environment runner (installed there), through which every model runs when set
    /// (and always with `held_out`): it counts the groups made, which end a model early.
    pub runner: Option<PathBuf>,
    /// A model whose environment made this many groups, none with scores that differ, is ended
    /// at once (`no signal`) rather than left to retry until the timeout: the operator's
    /// `run.no_signal_warn_groups` (0: never).
    pub no_signal_groups: u64,
}

/// The items a run kept out of training (or the environment's eval split), asked through rl's
/// environment runner, which is installed in `programs`.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldOutItems {
    pub programs: PathBuf,
    pub slice: rl_settings::HeldOut,
}

/// What a caller may choose; everything else comes from the selection and the settings.
#[derive(Debug, Clone)]
pub struct PreflightRequest {
    pub models: Vec<String>,
    pub endpoint: Endpoint,
    pub steps: u32,
    pub group_size: u32,
    pub use_wandb: bool,
    pub wandb_key: Option<Key>,
    /// The keys the operator allows environments, with their values (never serialised).
    pub environment_keys: Vec<(String, Key)>,
    pub concurrency: usize,
    pub timeout: Duration,
    pub correct_rule: CorrectRule,
    /// Started before the models and ended after them; `endpoint` is then its URL.
    pub server: Option<ModelServer>,
    pub held_out: Option<HeldOutItems>,
    /// rl's environment runner, installed: every model then runs through it (its groups
    /// counted).
    pub runner: Option<PathBuf>,
    /// The Python the environment runs in when it is not the run's (a verifiers
    /// environment's own: `rl_settings::environment_python`).
    pub python: Option<PathBuf>,
}

impl PreflightRequest {
    /// The original's defaults: OpenRouter, its three models, 3 steps of groups of 16.
    pub fn openrouter(key: Option<String>) -> Self {
        Self {
            models: DEFAULT_MODELS.iter().map(|m| (*m).to_owned()).collect(),
            endpoint: Endpoint {
                base_url: OPENROUTER_BASE_URL.to_owned(),
                key_variable: OPENROUTER_KEY_VARIABLE.to_owned(),
                key,
            },
            steps: DEFAULT_STEPS,
            group_size: DEFAULT_GROUP_SIZE,
            use_wandb: false,
            wandb_key: None,
            environment_keys: Vec::new(),
            concurrency: DEFAULT_CONCURRENCY,
            timeout: DEFAULT_TIMEOUT,
            correct_rule: CorrectRule::default(),
            server: None,
            held_out: None,
            runner: None,
            python: None,
        }
    }
}

impl PreflightPlan {
    pub fn new(
        request: PreflightRequest,
        selection: &Selection,
        settings: &Settings,
        working_dir: PathBuf,
    ) -> Result<Self, PreflightError> {
        check_models(&request.models)?;
        check_size(Some(request.steps), Some(request.group_size))?;
        check_range("concurrency", request.concurrency as u64, 1, 64)?;
        check_range(
            "timeout (seconds)",
            request.timeout.as_secs(),
            1,
            7 * 86_400,
        )?;
        check_url(&request.endpoint.base_url)?;
        if let CorrectRule::AtLeast { threshold } = request.correct_rule
            && !threshold.is_finite()
        {
            return Err(PreflightError::invalid(
                "threshold",
                "must be a finite number",
            ));
        }
        let env_file = selection
            .environment
            .environments_dir
            .join(&selection.environment.file);
        let mut env_args: Vec<(String, String)> = LOCKED_FIELDS
            .iter()
            .filter_map(|field| {
                let value = settings.locked.env.get(*field)?;
                Some(((*field).to_owned(), cli_text(value)?))
            })
            .collect();
        for edit in &selection.edits {
            let settable = edit.section == rl_config::Section::Env
                && !TEST_FIELDS.contains(&edit.field.as_str())
                && !LOCKED_FIELDS.contains(&edit.field.as_str());
            if let Some(text) = cli_text(&edit.value).filter(|_| settable) {
                env_args.push((edit.field.clone(), text));
            }
        }
        Ok(Self {
            environment: selection.environment.key.clone(),
            env_file,
            kind: selection.environment.kind,
            python: request.python.unwrap_or_else(|| settings.python.clone()),
            working_dir,
            models: request.models,
            endpoint: request.endpoint,
            steps: request.steps,
            group_size: request.group_size,
            use_wandb: request.use_wandb,
            wandb_key: request.wandb_key,
            environment_keys: request.environment_keys,
            env_args,
            child_environment: settings.child_environment.clone(),
            concurrency: request.concurrency,
            timeout: request.timeout,
            correct_rule: request.correct_rule,
            verdict_policy: VerdictPolicy::default(),
            server: request.server,
            held_out: request.held_out,
            log_limit: rl_process::LogLimit(settings.run.log_limit_bytes),
            runner: request.runner,
            no_signal_groups: settings.run.no_signal_warn_groups,
        })
    }
}

/// A scalar as atroposlib's CLI reads it (`None` is Python's None); lists and maps have no
/// flag form and are left to the environment's defaults.
fn cli_text(value: &Value) -> Option<String> {
    match value {
        Value::Null => Some("None".to_owned()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Int(i) => Some(i.to_string()),
        Value::Float(x) => Some(x.to_string()),
        Value::Str(s) => Some(s.clone()),
        Value::List(_) | Value::Map(_) => None,
    }
}

/// Model ids as every test takes them: 1 to 200 printable characters without spaces, none twice.
/// Callers that read a model id before the plan check it first, so that what they echo is bounded.
pub fn check_models(models: &[String]) -> Result<(), PreflightError> {
    if models.is_empty() {
        return Err(PreflightError::invalid("models", "name at least one model"));
    }
    if models.len() > MAX_MODELS {
        return Err(PreflightError::invalid(
            "models",
            format!(
                "{} models is more than a test takes ({MAX_MODELS}): split them into tests",
                models.len()
            ),
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    for model in models {
        let printable = !model.is_empty()
            && model.len() <= 200
            && !model.chars().any(|c| c.is_control() || c.is_whitespace());
        if !printable {
            return Err(PreflightError::invalid(
                "models",
                format!(
                    "{} is not a model id (1 to 200 characters, no spaces or control characters)",
                    shown(model)
                ),
            ));
        }
        if !seen.insert(model) {
            return Err(PreflightError::invalid(
                "models",
                format!("{model} is listed twice"),
            ));
        }
    }
    Ok(())
}

/// A refused id as an error shows it: quoted, and only its start when it is long (the whole of
/// a huge one would be echoed to the caller).
fn shown(model: &str) -> String {
    const SHOWN: usize = 60;
    if model.chars().count() <= SHOWN {
        return format!("{model:?}");
    }
    let start: String = model.chars().take(SHOWN).collect();
    format!("{start:?}… ({} characters)", model.chars().count())
}

/// The test's size, as far as the caller gave it: `num_steps` groups of `group_size`
/// completions per model, each between 1 and its maximum ([`MAX_STEPS`], [`MAX_GROUP_SIZE`]).
/// Callers check before anything else (a key, a selection) so an oversized request is refused
/// as such; [`PreflightPlan::new`] checks again, for every caller.
pub fn check_size(steps: Option<u32>, group_size: Option<u32>) -> Result<(), PreflightError> {
    for (name, value, limit) in [
        ("num_steps", steps, MAX_STEPS),
        ("group_size", group_size, MAX_GROUP_SIZE),
    ] {
        if let Some(value) = value
            && !(1..=limit).contains(&value)
        {
            return Err(PreflightError::OutOfRange {
                what: name,
                value,
                max: limit,
            });
        }
    }
    Ok(())
}

fn check_range(what: &str, value: u64, low: u64, high: u64) -> Result<(), PreflightError> {
    if (low..=high).contains(&value) {
        Ok(())
    } else {
        Err(PreflightError::invalid(
            what,
            format!("{value} is out of range ({low} to {high})"),
        ))
    }
}

fn check_url(url: &str) -> Result<(), PreflightError> {
    let scheme_ok = url.starts_with("http://") || url.starts_with("https://");
    let rest = url.split_once("://").map_or("", |(_, rest)| rest);
    if scheme_ok && !rest.is_empty() && !url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Ok(())
    } else {
        Err(PreflightError::invalid(
            "base_url",
            format!("{url:?} is not an http(s) URL, e.g. http://127.0.0.1:8000/v1"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_lists_are_checked() {
        assert!(check_models(&["a/b".to_owned(), "c".to_owned()]).is_ok());
        for bad in [
            vec![],
            vec![String::new()],
            vec!["a b".to_owned()],
            vec!["x".to_owned(), "x".to_owned()],
            (0..=MAX_MODELS).map(|n| format!("m{n}")).collect(),
        ] {
            assert!(check_models(&bad).is_err(), "{bad:?}");
        }
        let most: Vec<String> = (0..MAX_MODELS).map(|n| format!("m{n}")).collect();
        assert!(check_models(&most).is_ok());
    }

    #[test]
    fn urls_are_checked() {
        assert!(check_url("http://127.0.0.1:8000/v1").is_ok());
        assert!(check_url(OPENROUTER_BASE_URL).is_ok());
        for bad in ["", "127.0.0.1:8000", "ftp://x", "http://", "http://a b"] {
            assert!(check_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_key_never_shows_in_debug_or_json() {
        let endpoint = Endpoint {
            base_url: "http://x".to_owned(),
            key_variable: "K".to_owned(),
            key: Some("sk-secret-value".to_owned()),
        };
        assert!(!format!("{endpoint:?}").contains("sk-secret-value"));
        let json = serde_json::to_string(&endpoint).unwrap_or_default();
        assert!(!json.contains("sk-secret-value"), "{json}");
    }
}
