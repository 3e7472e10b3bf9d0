//! The trainer's contract: every key of a run config that rl's trainer reads (its own `tinker:`
//! section and the `env:` fields it shares with the environment), with its kind, default and
//! bounds, in one table. rl reads a run's settings through it (`RunConfig::trainer`,
//! `Trainer::read`) and writes it (`document.rs`) for the trainer as `contract.json` beside rl's Python packages, from which
//! the trainer's `config.py` takes every default and bound; `contract_file_is_current` keeps
//! that file equal to this table.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::{Caps, RunPrices, SettingsError, TokenPrices, Value};

/// The run config's section a key is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Section {
    Env,
    Tinker,
}

impl Section {
    pub fn name(self) -> &'static str {
        match self {
            Self::Env => "env",
            Self::Tinker => "tinker",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Integer,
    Number,
    Text,
    Boolean,
}

/// What a key is when the run config leaves it out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fallback {
    /// Nothing: the key is optional, or required where the reader says so.
    Absent,
    Integer(i64),
    Number(f64),
    Text(&'static str),
    Boolean(bool),
    /// Another key's value (`section.name`), else `otherwise`.
    Key {
        key: &'static str,
        otherwise: Option<&'static str>,
    },
    /// A bound that depends on where the Tinker API is: an engine on loopback answers at once
    /// or not at all; the hosted service may be slow to answer.
    ByEngine {
        loopback: f64,
        remote: f64,
    },
}

/// Who reads a key: the trainer, or rl itself (`rl runs evaluate` reads the evaluation's size
/// from the run's config, the trainer never does).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Reader {
    Trainer,
    Rl,
}

/// One key of the contract.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Key {
    pub section: Section,
    pub name: &'static str,
    pub kind: Kind,
    pub default: Fallback,
    pub minimum: Option<f64>,
    /// Whether the minimum itself is refused.
    pub exclusive: bool,
    pub maximum: Option<f64>,
    pub reader: Reader,
    /// The values a text key may take (empty: any text).
    pub choices: &'static [&'static str],
    pub doc: &'static str,
}

const fn key(section: Section, name: &'static str, kind: Kind, default: Fallback) -> Key {
    Key {
        section,
        name,
        kind,
        default,
        minimum: None,
        exclusive: false,
        maximum: None,
        reader: Reader::Trainer,
        choices: &[],
        doc: "",
    }
}

impl Key {
    const fn at_least(mut self, minimum: f64) -> Self {
        self.minimum = Some(minimum);
        self
    }

    const fn above(mut self, minimum: f64) -> Self {
        self.minimum = Some(minimum);
        self.exclusive = true;
        self
    }

    const fn at_most(mut self, maximum: f64) -> Self {
        self.maximum = Some(maximum);
        self
    }

    const fn one_of(mut self, choices: &'static [&'static str]) -> Self {
        self.choices = choices;
        self
    }

    const fn read_by_rl(mut self) -> Self {
        self.reader = Reader::Rl;
        self
    }

    const fn doc(mut self, doc: &'static str) -> Self {
        self.doc = doc;
        self
    }

    /// The value a config given none reads as, when it is a value of its own (not another
    /// key's, nor one that depends on the engine).
    pub fn default_value(&self) -> Value {
        match self.default {
            Fallback::Integer(n) => Value::Int(n),
            Fallback::Number(x) => Value::Float(x),
            Fallback::Text(text) => text.into(),
            Fallback::Boolean(b) => Value::Bool(b),
            Fallback::Absent | Fallback::Key { .. } | Fallback::ByEngine { .. } => Value::Null,
        }
    }

    /// A whole-number default as a count (0 for a key whose default is not a whole number).
    pub const fn default_count(&self) -> u32 {
        match self.default {
            Fallback::Integer(n) if n >= 0 && n <= u32::MAX as i64 => n as u32,
            _ => 0,
        }
    }

    /// The value a config gives, if any (a YAML `null` is none).
    pub fn given<'a>(
        &self,
        env: &'a BTreeMap<String, Value>,
        tinker: &'a BTreeMap<String, Value>,
    ) -> Option<&'a Value> {
        let section = match self.section {
            Section::Env => env,
            Section::Tinker => tinker,
        };
        section
            .get(self.name)
            .filter(|value| **value != Value::Null)
    }

    /// `section.name`, as errors and the trainer name it.
    pub fn dotted(&self) -> String {
        format!("{}.{}", self.section.name(), self.name)
    }
}

use Fallback as D;
use Kind::{Boolean, Integer, Number, Text};
use Section::{Env, Tinker};

// atroposlib 0.4.0's `BaseEnvConfig` defaults for the `env` fields the trainer shares
// (`rl-config`'s `base_env_config.py` restates the class; a test there checks these).
pub const ROLLOUT_SERVER_URL: Key = key(
    Env,
    "rollout_server_url",
    Text,
    D::Text("http://localhost:8000"),
);
pub const TOTAL_STEPS: Key = key(Env, "total_steps", Integer, D::Integer(1000)).at_least(1.0);
pub const BATCH_SIZE: Key = key(Env, "batch_size", Integer, D::Integer(-1))
    .doc("0 or less: twice the group size, as registered with run-api");
pub const GROUP_SIZE: Key = key(Env, "group_size", Integer, D::Integer(4)).at_least(1.0);
pub const MAX_TOKEN_LENGTH: Key =
    key(Env, "max_token_length", Integer, D::Integer(2048)).at_least(2.0);
pub const USE_WANDB: Key = key(Env, "use_wandb", Boolean, D::Boolean(true));
pub const TOKENIZER_NAME: Key = key(Env, "tokenizer_name", Text, D::Absent);
pub const WANDB_NAME: Key = key(Env, "wandb_name", Text, D::Absent);

pub const BASE_MODEL: Key = key(
    Tinker,
    "base_model",
    Text,
    D::Key {
        key: "env.tokenizer_name",
        otherwise: None,
    },
)
.doc("the model trained; required when env.tokenizer_name is not set");
pub const BASE_URL: Key = key(Tinker, "base_url", Text, D::Absent)
    .doc("the Tinker API; absent: the SDK's TINKER_BASE_URL, else the hosted service");
pub const LORA_RANK: Key = key(Tinker, "lora_rank", Integer, D::Integer(32)).at_least(1.0);
pub const LEARNING_RATE: Key = key(Tinker, "learning_rate", Number, D::Number(0.00004)).above(0.0);
pub const MAX_TOKEN_TRAINER_LENGTH: Key = key(
    Tinker,
    "max_token_trainer_length",
    Integer,
    D::Key {
        key: "env.max_token_length",
        otherwise: None,
    },
)
.at_least(2.0);
pub const SAVE_EVERY: Key = key(Tinker, "save_every", Integer, D::Integer(25))
    .at_least(0.0)
    .doc("weights and optimizer state every this many steps (and at the end); 0: at the end only");
pub const KEEP_ROLLOUTS: Key = key(Tinker, "keep_rollouts", Integer, D::Integer(100))
    .at_least(0.0)
    .doc("the batches of this many last steps kept in rollouts/");
pub const BATCH_TIMEOUT_SECS: Key =
    key(Tinker, "batch_timeout_secs", Number, D::Number(0.0)).at_least(0.0);
pub const WANDB_PROJECT: Key = key(Tinker, "wandb_project", Text, D::Text("atropos-tinker"));
pub const WANDB_RUN_NAME: Key = key(
    Tinker,
    "wandb_run_name",
    Text,
    D::Key {
        key: "env.wandb_name",
        otherwise: Some("rl"),
    },
);
pub const WANDB_GROUP: Key = key(
    Tinker,
    "wandb_group",
    Text,
    D::Key {
        key: "tinker.wandb_run_name",
        otherwise: None,
    },
);
pub const CHECKPOINT_DIR: Key = key(Tinker, "checkpoint_dir", Text, D::Text("./temp/"))
    .doc("registered with run-api, as the original trainer did");
pub const SAVE_CHECKPOINT_INTERVAL: Key =
    key(Tinker, "save_checkpoint_interval", Integer, D::Integer(25))
        .doc("registered with run-api, as the original trainer did");
pub const LINGER_SECS: Key = key(Tinker, "linger_secs", Number, D::Number(10.0)).at_least(0.0);
pub const REQUEST_TIMEOUT_SECS: Key =
    key(Tinker, "request_timeout_secs", Number, D::Number(1800.0)).at_least(0.0);
pub const ENGINE_UNREACHABLE_SECS: Key = key(
    Tinker,
    "engine_unreachable_secs",
    Number,
    D::ByEngine {
        loopback: 10.0,
        remote: 120.0,
    },
)
.at_least(1.0);
pub const MAX_RETRIES: Key = key(Tinker, "max_retries", Integer, D::Integer(3)).at_least(0.0);
pub const EVAL_EVERY: Key = key(Tinker, "eval_every", Integer, D::Integer(0))
    .at_least(0.0)
    .doc("evaluate the held-out items every this many steps; 0: never");
pub const EVAL_TIMEOUT_SECS: Key = key(Tinker, "eval_timeout_secs", Number, D::Number(1800.0))
    .above(0.0)
    .at_most(7.0 * 86_400.0)
    .doc("each model's limit in an evaluation, as a pre-flight's (at most a week)");
pub const EVAL_PROMPTS: Key = key(Tinker, "eval_prompts", Integer, D::Integer(16))
    .at_least(1.0)
    .read_by_rl()
    .doc("held-out prompts an evaluation draws (at most a pre-flight's steps)");
pub const EVAL_GROUP_SIZE: Key = key(Tinker, "eval_group_size", Integer, D::Integer(8))
    .at_least(1.0)
    .read_by_rl()
    .doc("completions per prompt in an evaluation (at most a pre-flight's group size)");
pub const EVAL_CORRECT_FROM: Key = key(Tinker, "eval_correct_from", Number, D::Number(1.0))
    .read_by_rl()
    .doc("a score from which a completion counts as correct (atroposlib's environments give 1.0)");
pub const RESUME_STATE: Key = key(Tinker, "resume_state", Text, D::Absent)
    .doc("a resumed run: the saved state (weights and optimizer) it continues from");
pub const STARTING_STEP: Key = key(Tinker, "starting_step", Integer, D::Integer(0))
    .at_least(0.0)
    .doc("a resumed run: the step its state was saved after");

pub const CURRENCY: Key = key(Tinker, "currency", Text, D::Text("USD"))
    .doc("the label of every cost figure (the operator's [prices] currency)");
pub const PRICE_PROMPT: Key = key(Tinker, "price_prompt_per_million", Number, D::Absent)
    .at_least(0.0)
    .doc("the price of a million prompt tokens; absent: no price");
pub const PRICE_SAMPLED: Key = key(Tinker, "price_sampled_per_million", Number, D::Absent)
    .at_least(0.0)
    .doc("the price of a million sampled (completion) tokens");
pub const PRICE_TRAINED: Key = key(Tinker, "price_trained_per_million", Number, D::Absent)
    .at_least(0.0)
    .doc("the price of a million trained (datum) tokens");
pub const PRICE_MACHINE: Key = key(Tinker, "price_machine_per_hour", Number, D::Absent)
    .at_least(0.0)
    .doc("the local engine's machine, per hour of the trainer's steps");
pub const MAX_COST: Key = key(Tinker, "max_cost", Number, D::Absent)
    .above(0.0)
    .doc("the run ends capped before a step that would pass this cost");
pub const MAX_TOKENS: Key = key(Tinker, "max_tokens", Integer, D::Absent)
    .at_least(1.0)
    .doc("... this many prompt, sampled and trained tokens together");
pub const MAX_HOURS: Key = key(Tinker, "max_hours", Number, D::Absent)
    .above(0.0)
    .doc("... this many hours since the trainer started");

/// Every key, in the order the trainer reads them.
pub const KEYS: &[Key] = &[
    ROLLOUT_SERVER_URL,
    TOTAL_STEPS,
    BATCH_SIZE,
    GROUP_SIZE,
    MAX_TOKEN_LENGTH,
    USE_WANDB,
    TOKENIZER_NAME,
    WANDB_NAME,
    BASE_MODEL,
    BASE_URL,
    LORA_RANK,
    LEARNING_RATE,
    MAX_TOKEN_TRAINER_LENGTH,
    SAVE_EVERY,
    KEEP_ROLLOUTS,
    BATCH_TIMEOUT_SECS,
    WANDB_PROJECT,
    WANDB_RUN_NAME,
    WANDB_GROUP,
    CHECKPOINT_DIR,
    SAVE_CHECKPOINT_INTERVAL,
    LINGER_SECS,
    REQUEST_TIMEOUT_SECS,
    ENGINE_UNREACHABLE_SECS,
    MAX_RETRIES,
    EVAL_EVERY,
    EVAL_TIMEOUT_SECS,
    EVAL_PROMPTS,
    EVAL_GROUP_SIZE,
    EVAL_CORRECT_FROM,
    RESUME_STATE,
    STARTING_STEP,
    CURRENCY,
    PRICE_PROMPT,
    PRICE_SAMPLED,
    PRICE_TRAINED,
    PRICE_MACHINE,
    MAX_COST,
    MAX_TOKENS,
    MAX_HOURS,
    LOSS,
    CLIP_LOW,
    CLIP_HIGH,
    DRO_BETA,
    ADVANTAGE_NORM,
    TRUNCATED,
    OVERLONG_BAND,
    KL_COEF,
    LOG_KL_BASE,
    MAX_STEPS_OFF_POLICY,
];

/// How much longer than an evaluation's own limit (`eval_timeout_secs`) the trainer waits for
/// `rl runs evaluate`: starting the test and reading it. rl adds it to a run's completion
/// grace; the trainer reads it from the contract file.
pub const EVALUATE_MARGIN: Duration = Duration::from_secs(120);

/// The trainer's exit code when it ended the run before a step that would pass one of its caps
/// (`max_cost`, `max_tokens`, `max_hours`), after saving its state: the run becomes `capped`,
/// and `rl runs resume` continues it. 1 is a failure, 2 a bad config, 128+n a signal.
pub const EXIT_CAPPED: i32 = 3;

/// A run's trainer settings, read through the contract: defaults applied, kinds and bounds
/// checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Trainer {
    /// `tinker.base_model`, else `env.tokenizer_name`; `None` when neither is set (the trainer
    /// refuses to start then).
    pub base_model: Option<String>,
    pub base_url: Option<String>,
    pub total_steps: u64,
    pub lora_rank: u32,
    pub learning_rate: f64,
    pub max_token_length: u32,
    pub max_token_trainer_length: u32,
    pub save_every: u32,
    pub keep_rollouts: u32,
    pub eval_every: u32,
    pub eval_timeout: Duration,
    pub eval_prompts: u32,
    pub eval_group_size: u32,
    pub eval_correct_from: f64,
    pub resume_state: Option<String>,
    pub starting_step: u64,
    pub currency: String,
    /// `None`: no price was set, the run counts tokens only.
    pub prices: Option<RunPrices>,
    pub caps: Caps,
    /// The loss, its bounds, the advantages and what becomes of truncated completions.
    pub algorithm: Algorithm,
}

impl Trainer {
    /// Reads a config's `env` and `tinker` sections (a run's, or the operator's locked ones).
    pub fn read(
        env: &BTreeMap<String, Value>,
        tinker: &BTreeMap<String, Value>,
    ) -> Result<Self, SettingsError> {
        let sections = Sections { env, tinker };
        let whole = |key: &Key| -> Result<u32, SettingsError> {
            let n = sections.integer(key)?.unwrap_or(0);
            u32::try_from(n).map_err(|_| invalid(key, format!("{n} is out of range")))
        };
        let eval_timeout = sections.number(&EVAL_TIMEOUT_SECS)?.unwrap_or(0.0);
        let starting_step = sections.integer(&STARTING_STEP)?.unwrap_or(0);
        Ok(Self {
            base_model: sections.text(&BASE_MODEL)?,
            base_url: sections.text(&BASE_URL)?,
            total_steps: u64::from(whole(&TOTAL_STEPS)?),
            lora_rank: whole(&LORA_RANK)?,
            learning_rate: sections.number(&LEARNING_RATE)?.unwrap_or(0.0),
            max_token_length: whole(&MAX_TOKEN_LENGTH)?,
            max_token_trainer_length: whole(&MAX_TOKEN_TRAINER_LENGTH)?,
            save_every: whole(&SAVE_EVERY)?,
            keep_rollouts: whole(&KEEP_ROLLOUTS)?,
            eval_every: whole(&EVAL_EVERY)?,
            eval_timeout: Duration::from_secs_f64(eval_timeout),
            eval_prompts: whole(&EVAL_PROMPTS)?,
            eval_group_size: whole(&EVAL_GROUP_SIZE)?,
            eval_correct_from: sections.number(&EVAL_CORRECT_FROM)?.unwrap_or(0.0),
            resume_state: sections.text(&RESUME_STATE)?,
            starting_step: u64::try_from(starting_step).unwrap_or(0),
            currency: sections.text(&CURRENCY)?.unwrap_or_default(),
            prices: sections.prices()?,
            caps: Caps {
                max_cost: sections.number(&MAX_COST)?,
                max_tokens: sections
                    .integer(&MAX_TOKENS)?
                    .and_then(|n| u64::try_from(n).ok()),
                max_hours: sections.number(&MAX_HOURS)?,
            },
            algorithm: sections.algorithm()?,
        })
    }

    /// How long one evaluation may hold the trainer: nothing when it never evaluates.
    pub fn evaluation_hold(&self) -> Duration {
        if self.eval_every == 0 {
            Duration::ZERO
        } else {
            self.eval_timeout + EVALUATE_MARGIN
        }
    }
}

/// The `env` fields whose value the trainer must get from the environment itself (its own
/// defaults, `config_init`), not atroposlib's: without them it would register another batch
/// size or step count than the environment uses. rl writes them into every run's config.
pub const ENVIRONMENT_VALUES: [Key; 4] = [GROUP_SIZE, BATCH_SIZE, TOTAL_STEPS, MAX_TOKEN_LENGTH];

/// The keys of a run's prices and caps.
const COSTS: [Key; 8] = [
    CURRENCY,
    PRICE_PROMPT,
    PRICE_SAMPLED,
    PRICE_TRAINED,
    PRICE_MACHINE,
    MAX_COST,
    MAX_TOKENS,
    MAX_HOURS,
];

/// Writes a run's prices (its currency with them) and caps into its `tinker` section,
/// replacing any it had (a resumed run's parent's); what is not set is left out.
pub fn set_costs(
    tinker: &mut BTreeMap<String, Value>,
    currency: &str,
    prices: Option<&RunPrices>,
    caps: &Caps,
) {
    for key in COSTS {
        tinker.remove(key.name);
    }
    let mut put = |key: &Key, value: Option<f64>| {
        if let Some(value) = value {
            tinker.insert(key.name.to_owned(), Value::Float(value));
        }
    };
    if let Some(prices) = prices {
        put(&PRICE_PROMPT, prices.tokens.prompt_per_million);
        put(&PRICE_SAMPLED, prices.tokens.sampled_per_million);
        put(&PRICE_TRAINED, prices.tokens.trained_per_million);
        put(&PRICE_MACHINE, prices.machine_per_hour);
    }
    put(&MAX_COST, caps.max_cost);
    put(&MAX_HOURS, caps.max_hours);
    if let Some(tokens) = caps.max_tokens {
        tinker.insert(
            MAX_TOKENS.name.to_owned(),
            Value::Int(i64::try_from(tokens).unwrap_or(i64::MAX)),
        );
    }
    if prices.is_some() || caps.max_cost.is_some() {
        tinker.insert(CURRENCY.name.to_owned(), currency.into());
    }
}

/// Writes `value` as `key` into the section of `config` it belongs to.
pub fn set(
    env: &mut BTreeMap<String, Value>,
    tinker: &mut BTreeMap<String, Value>,
    key: &Key,
    value: Value,
) {
    let section = match key.section {
        Section::Env => env,
        Section::Tinker => tinker,
    };
    section.insert(key.name.to_owned(), value);
}

/// The key `section.name` of the contract.
fn named(dotted: &str) -> Option<&'static Key> {
    KEYS.iter().find(|key| key.dotted() == dotted)
}

fn invalid(key: &Key, reason: String) -> SettingsError {
    SettingsError::InvalidInput {
        what: key.dotted(),
        reason,
    }
}

struct Sections<'a> {
    env: &'a BTreeMap<String, Value>,
    tinker: &'a BTreeMap<String, Value>,
}

impl Sections<'_> {
    fn prices(&self) -> Result<Option<RunPrices>, SettingsError> {
        let prices = RunPrices {
            tokens: TokenPrices {
                prompt_per_million: self.number(&PRICE_PROMPT)?,
                sampled_per_million: self.number(&PRICE_SAMPLED)?,
                trained_per_million: self.number(&PRICE_TRAINED)?,
            },
            machine_per_hour: self.number(&PRICE_MACHINE)?,
        };
        Ok((prices != RunPrices::default()).then_some(prices))
    }

    fn given(&self, key: &Key) -> Option<&Value> {
        key.given(self.env, self.tinker)
    }

    fn integer(&self, key: &Key) -> Result<Option<i64>, SettingsError> {
        let Some(value) = self.given(key) else {
            return match key.default {
                D::Integer(n) => Ok(Some(n)),
                D::Key { key: other, .. } => match named(other) {
                    Some(other) => self.integer(other),
                    None => Ok(None),
                },
                _ => Ok(None),
            };
        };
        let n = match value {
            Value::Int(n) => Some(*n),
            // Within f64's exact integers, as Python's `float.is_integer()` then `int()`.
            Value::Float(x) if x.fract() == 0.0 && x.abs() < 9.0e15 => Some(*x as i64),
            Value::Str(text) => text.trim().parse().ok(),
            _ => None,
        };
        let n =
            n.ok_or_else(|| invalid(key, format!("must be an integer, got {}", value.kind())))?;
        check_bounds(key, n as f64)?;
        Ok(Some(n))
    }

    fn number(&self, key: &Key) -> Result<Option<f64>, SettingsError> {
        let Some(value) = self.given(key) else {
            return Ok(match key.default {
                D::Number(x) => Some(x),
                D::Integer(n) => Some(n as f64),
                _ => None,
            });
        };
        let x = match value {
            Value::Int(n) => Some(*n as f64),
            Value::Float(x) => Some(*x),
            Value::Str(text) => text.trim().parse().ok(),
            _ => None,
        }
        .filter(|x: &f64| x.is_finite())
        .ok_or_else(|| {
            invalid(
                key,
                format!("must be a finite number, got {}", value.kind()),
            )
        })?;
        check_bounds(key, x)?;
        Ok(Some(x))
    }

    fn text(&self, key: &Key) -> Result<Option<String>, SettingsError> {
        let given = match self.given(key) {
            Some(Value::Str(text)) => Some(text.trim().to_owned()),
            Some(Value::Int(n)) => Some(n.to_string()),
            Some(Value::Float(x)) => Some(x.to_string()),
            Some(other) => {
                return Err(invalid(
                    key,
                    format!("must be a string, got {}", other.kind()),
                ));
            }
            None => None,
        };
        if let Some(text) = given.filter(|text| !text.is_empty()) {
            if !key.choices.is_empty() && !key.choices.contains(&text.as_str()) {
                return Err(invalid(
                    key,
                    format!("must be one of {}, got {text:?}", key.choices.join(", ")),
                ));
            }
            return Ok(Some(text));
        }
        Ok(match key.default {
            D::Text(text) => Some(text.to_owned()),
            D::Key {
                key: other,
                otherwise,
            } => match named(other) {
                Some(other) => self.text(other)?,
                None => None,
            }
            .or_else(|| otherwise.map(str::to_owned)),
            _ => None,
        })
    }
}

fn check_bounds(key: &Key, x: f64) -> Result<(), SettingsError> {
    if let Some(minimum) = key.minimum
        && (x < minimum || (key.exclusive && x == minimum))
    {
        let relation = if key.exclusive { ">" } else { ">=" };
        return Err(invalid(
            key,
            format!("must be {relation} {minimum}, got {x}"),
        ));
    }
    if let Some(maximum) = key.maximum
        && x > maximum
    {
        return Err(invalid(key, format!("must be <= {maximum}, got {x}")));
    }
    Ok(())
}

mod algorithm;
mod document;
mod per_run;
mod phase;
pub use algorithm::{
    ADVANTAGE_NORM, Algorithm, CLIP_HIGH, CLIP_LOW, DRO_BETA, KL_COEF, LOCAL_ADAPTER_CISPO_CLIP,
    LOCAL_ADAPTER_DRO_BETA, LOCAL_ENGINE_PPO_CLIP, LOG_KL_BASE, LOSS, LOSSES_OF_THE_LOCAL_ENGINE,
    LOSSES_THROUGH_THE_ADAPTER, MAX_STEPS_OFF_POLICY, OVERLONG_BAND, TRUNCATED,
};
pub use document::contract_document;
pub use per_run::{OnFork, PER_RUN, PerRun, coerce, per_run};
pub use phase::{TrainerPhase, stall_limit_secs};

#[cfg(test)]
mod tests;
