//! The operator's configuration: where things are, and the settings agents may not change.
//!
//! Layers, later ones winning: built-in defaults (the original tool's locked values), then
//! `config.toml` in the state directory, then `RL_*` environment variables (`__` separates
//! levels: `RL_LOCKED__ENV__MAX_TOKEN_LENGTH=4096`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use figment::Figment;
use figment::providers::{Format, Serialized, Toml};
use serde::{Deserialize, Serialize};

use crate::{SettingsError, Value, trainer};

mod check;
mod costs;
mod defaults;
mod tables;

pub use costs::{Caps, Prices, RunPrices, TokenPrices};
pub use defaults::{Commands, Locked};
pub use tables::{
    AgentInstalls, AgentSettings, Backend, CheckpointPolicy, ComponentGpus,
    DEFAULT_LOG_LIMIT_BYTES, EngineKind, EngineSettings, HOSTED_TINKER_URL, HeldOut,
    InferenceSettings, RunTiming, SlurmSettings, VerifiersSettings,
};

/// The file in the state directory that holds the operator's settings.
pub const SETTINGS_FILE: &str = "config.toml";
/// The original tool's limit: one status check per run per 30 minutes for an agent.
pub const DEFAULT_STATUS_CHECK_INTERVAL_SECS: f64 = 1800.0;
/// Unfinished runs at once, unless the operator says otherwise.
pub(crate) const DEFAULT_MAX_ACTIVE_RUNS: u32 = 8;
/// Sweeps going at once, unless the operator says otherwise: each has a driver process.
pub(crate) const DEFAULT_MAX_ACTIVE_SWEEPS: u32 = 4;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Settings {
    /// The tinker-atropos tree; the trainer runs from here.
    pub tinker_atropos_root: Option<PathBuf>,
    /// The environments folder; defaults to `<root>/tinker_atropos/environments`.
    pub environments_dir: Option<PathBuf>,
    /// Discover environments in sub-folders too.
    pub recursive_discovery: bool,
    /// The Python interpreter that runs environments and the trainer.
    pub python: PathBuf,
    /// The Weights & Biases project runs go to unless an agent sets `wandb_project`.
    pub wandb_project: String,
    pub locked: Locked,
    /// The `[locked.tinker]` keys the operator wrote (in `config.toml` or an `RL_*` variable):
    /// no run may choose these. The others there are rl's defaults (the original tool's), which
    /// a sweep or a fork may replace for the trainer keys a run chooses (`trainer::PER_RUN`).
    #[serde(skip)]
    pub operator_tinker_locks: std::collections::BTreeSet<String>,
    /// How the components of a run are started.
    pub commands: Commands,
    /// Whether the trainer needs `TINKER_API_KEY` to reach the hosted Tinker; never with a
    /// local engine. The local fixture stack needs none either.
    pub trainer_needs_tinker_key: bool,
    /// The Tinker-compatible engine runs train on: the hosted Tinker, or one rl starts.
    pub engine: EngineSettings,
    /// Extra environment variables for the run's processes (e.g. `HF_HUB_OFFLINE = "1"`).
    /// API keys are refused here: they belong in the environment or `<home>/.env`.
    pub child_environment: BTreeMap<String, String>,
    /// The keys (of those rl knows) a run's environment process, and a pre-flight's, is
    /// handed: it runs the environment's own code, so by default none (WandB's key aside, as
    /// its logging needs it). An environment that calls a provider itself (a judge model)
    /// needs its key named here: `environment_keys = ["OPENAI_API_KEY"]`.
    pub environment_keys: Vec<String>,
    /// Readiness timeouts and grace periods of a run.
    pub run: RunTiming,
    /// The port the trainer serves inference on, for a trainer that cannot be told: the
    /// published Tinker `launch_training.py` binds 8001 whatever its config says, so it needs
    /// `trainer_port = 8001` (and allows one run at a time). Unset: each run gets a free port,
    /// written into its config (`openai[0].base_url`) and offered to templates as `{trainer_port}`.
    pub trainer_port: Option<u16>,
    /// The least time between two agent status checks of one run (the original's 30 minutes);
    /// 0 lets agents check as often as they like. People at the CLI are never limited.
    pub status_check_interval_secs: f64,
    /// Runs that may be unfinished at once; a start beyond is refused (each run is several
    /// processes, and its engine or environment may use a machine's every core).
    pub max_active_runs: u32,
    /// Sweeps that may be going at once; a new one beyond is refused (an identical request
    /// answers the sweep already going instead).
    pub max_active_sweeps: u32,
    /// Where a pre-flight sends its requests when the caller does not say.
    pub inference: InferenceSettings,
    /// Where a run's components run: on this machine, or as steps of a SLURM job.
    pub backend: Backend,
    /// The SLURM job of each run, when `backend = "slurm"`.
    pub slurm: SlurmSettings,
    /// Which of a run's saved checkpoints `rl checkpoints prune` keeps.
    pub checkpoints: CheckpointPolicy,
    /// The slice of each environment's items kept out of training, for `rl compare`.
    pub held_out: HeldOut,
    /// What training costs (none by default: runs then count tokens only).
    pub prices: Prices,
    /// The most a run may spend, in money, tokens or hours (none by default).
    pub caps: Caps,
    /// Shared Pythons for verifiers environments without one of their own.
    pub verifiers: VerifiersSettings,
    /// What agents may install (`[agents] install`).
    pub agents: AgentSettings,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            tinker_atropos_root: None,
            environments_dir: None,
            recursive_discovery: false,
            python: PathBuf::from("python3"),
            wandb_project: "atropos-tinker".to_owned(),
            locked: Locked::default(),
            operator_tinker_locks: std::collections::BTreeSet::new(),
            commands: Commands::default(),
            trainer_needs_tinker_key: true,
            engine: EngineSettings::default(),
            child_environment: BTreeMap::new(),
            environment_keys: Vec::new(),
            run: RunTiming::default(),
            trainer_port: None,
            status_check_interval_secs: DEFAULT_STATUS_CHECK_INTERVAL_SECS,
            max_active_runs: DEFAULT_MAX_ACTIVE_RUNS,
            max_active_sweeps: DEFAULT_MAX_ACTIVE_SWEEPS,
            inference: InferenceSettings::default(),
            backend: Backend::Local,
            slurm: SlurmSettings::default(),
            checkpoints: CheckpointPolicy::default(),
            held_out: HeldOut::default(),
            prices: Prices::default(),
            caps: Caps::default(),
            verifiers: VerifiersSettings::default(),
            agents: AgentSettings::default(),
        }
    }
}

impl Settings {
    /// Built-in defaults, then `<home>/config.toml`, then the `RL_*` variables of `environment`
    /// (the process environment in real use; a fixed list in tests).
    pub fn load(
        home: &Path,
        environment: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, SettingsError> {
        let variables: Vec<(String, String)> = environment
            .into_iter()
            .filter(|(key, _)| key.starts_with("RL_") && !NOT_SETTINGS.contains(&key.as_str()))
            .collect();
        // Variables come as a list rather than from figment's `Env` provider, which reads the
        // process environment itself: the layering stays explicit and testable in parallel.
        crate::files::refuse_special_file(&home.join(SETTINGS_FILE))?;
        let mut figment = Figment::from(Serialized::defaults(Settings::default()))
            .merge(Toml::file(home.join(SETTINGS_FILE)));
        let mut from_env = Figment::new();
        for (key, value) in &variables {
            let path = key["RL_".len()..].to_lowercase().replace("__", ".");
            from_env = from_env.merge(Serialized::default(&path, parse_env_value(value)));
        }
        let operator = Figment::from(Toml::file(home.join(SETTINGS_FILE))).merge(from_env.clone());
        figment = figment.merge(from_env);
        let mut settings: Settings = figment
            .extract()
            .map_err(|error| SettingsError::Invalid(shortened(&error.to_string())))?;
        settings.operator_tinker_locks = operator
            .find_value("locked.tinker")
            .ok()
            .and_then(figment::value::Value::into_dict)
            .map(|table| table.into_keys().collect())
            .unwrap_or_default();
        refuse_unknown_keys(&home.join(SETTINGS_FILE))?;
        settings.check()?;
        settings.lock_engine_model();
        Ok(settings)
    }

    /// The folder environments are discovered in.
    pub fn environments_dir(&self) -> Result<PathBuf, SettingsError> {
        if let Some(dir) = &self.environments_dir {
            return Ok(dir.clone());
        }
        match &self.tinker_atropos_root {
            Some(root) => Ok(root.join("tinker_atropos").join("environments")),
            None => Err(SettingsError::Invalid(
                "no tinker-atropos tree is configured: set RL_TINKER_ATROPOS_ROOT (or \
                 tinker_atropos_root in config.toml, or pass --root)"
                    .to_owned(),
            )),
        }
    }

    /// With a local engine, its model is the one trained, so the trainer, the environment and
    /// its first inference server all tokenize with that model's tokenizer: one model, one
    /// vocabulary, locked (what `rl config show` shows is what runs get).
    fn lock_engine_model(&mut self) {
        if !self.engine.is_local() {
            return;
        }
        let Some(model) = self.engine.base_model.as_mut() else {
            return;
        };
        // One spelling everywhere: the engine refuses a request naming its model otherwise.
        if let Ok(absolute) = std::path::absolute(&*model) {
            *model = absolute;
        }
        let model: Value = model.to_string_lossy().as_ref().into();
        let locked = &mut self.locked;
        trainer::set(
            &mut locked.env,
            &mut locked.tinker,
            &trainer::BASE_MODEL,
            model.clone(),
        );
        trainer::set(
            &mut locked.env,
            &mut locked.tinker,
            &trainer::TOKENIZER_NAME,
            model.clone(),
        );
        // atroposlib's server entry has a field of the same name (`APIServerConfig`).
        if let Some(server) = locked.openai.first_mut() {
            server.insert(trainer::TOKENIZER_NAME.name.to_owned(), model);
        }
    }

    /// Whether a run must have `TINKER_API_KEY` before it starts: only a trainer that talks to
    /// the hosted Tinker needs one.
    pub fn needs_tinker_key(&self) -> bool {
        self.trainer_needs_tinker_key && !self.engine.is_local()
    }

    /// The interpreter of the local engine.
    pub fn engine_python(&self) -> &Path {
        self.engine.python.as_deref().unwrap_or(&self.python)
    }

    /// Whether an env-section field is locked, and at what value.
    pub fn locked_env_value(&self, field: &str) -> Option<&Value> {
        self.locked.env.get(field)
    }

    /// Whether the operator locked a trainer key (`[locked.tinker]`), and at what value.
    pub fn operator_locked_trainer_value(&self, name: &str) -> Option<&Value> {
        self.operator_tinker_locks
            .contains(name)
            .then(|| self.locked.tinker.get(name))
            .flatten()
    }
}

/// `RL_*` variables that configure something other than these settings.
const NOT_SETTINGS: &[&str] = &["RL_HOME", "RL_TEST_PYTHON", crate::KIND_VARIABLE];

/// A key of `config.toml` that no setting reads is a mistake (a misspelling, a key outside its
/// table): silently ignored, it would leave the operator believing a run is configured as they
/// wrote. `RL_*` variables are not checked this way: other programs use the prefix too.
fn refuse_unknown_keys(file: &Path) -> Result<(), SettingsError> {
    let Ok(text) = std::fs::read_to_string(file) else {
        // No file: nothing to check. An unreadable one has been reported by the load.
        return Ok(());
    };
    let mut unknown = Vec::new();
    let parsed: Result<Settings, _> =
        serde_ignored::deserialize(toml::Deserializer::new(&text), |path| {
            unknown.push(format!("`{path}`"));
        });
    // The file alone may not parse where an `RL_*` variable overrides a wrong value; the keys
    // met before that point are still reported.
    let _ = parsed;
    if unknown.is_empty() {
        return Ok(());
    }
    Err(SettingsError::Invalid(format!(
        "{}: no setting is named {}; check the spelling and the [table] it is under",
        file.display(),
        unknown.join(", ")
    )))
}

/// The parser's message with each line cut to a readable length: it quotes the offending line
/// of the file, which may be hundreds of kilobytes long.
fn shortened(message: &str) -> String {
    const LINE_CHARS: usize = 200;
    message
        .lines()
        .map(|line| match line.char_indices().nth(LINE_CHARS) {
            Some((cut, _)) => format!(
                "{}… ({} more characters)",
                &line[..cut],
                line[cut..].chars().count()
            ),
            None => line.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Environment values are text; numbers and booleans are read as such, as figment's own
/// environment provider does.
fn parse_env_value(raw: &str) -> Value {
    let trimmed = raw.trim();
    if let Ok(int) = trimmed.parse::<i64>() {
        return Value::Int(int);
    }
    if let Ok(float) = trimmed.parse::<f64>()
        && float.is_finite()
    {
        return Value::Float(float);
    }
    match trimmed {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        _ => Value::Str(raw.to_owned()),
    }
}

/// The state directory: `RL_HOME`, else `$XDG_STATE_HOME/rl`, else `~/.local/state/rl`.
pub fn default_home(environment: &BTreeMap<String, String>) -> Option<PathBuf> {
    if let Some(home) = environment.get("RL_HOME").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(home));
    }
    if let Some(state) = environment.get("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        return Some(Path::new(state).join("rl"));
    }
    environment
        .get("HOME")
        .filter(|v| !v.is_empty())
        .map(|home| Path::new(home).join(".local/state/rl"))
}
