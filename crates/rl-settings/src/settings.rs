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

use crate::{SettingsError, Value};

/// The file in the state directory that holds the operator's settings.
pub const SETTINGS_FILE: &str = "config.toml";
/// The original tool's limit: one status check per run per 30 minutes for an agent.
pub const DEFAULT_STATUS_CHECK_INTERVAL_SECS: f64 = 1800.0;
/// Unfinished runs at once, unless the operator says otherwise.
pub(crate) const DEFAULT_MAX_ACTIVE_RUNS: u32 = 8;
/// 64 MiB per component: hours of a normal run's output, a few seconds of a runaway one's.
pub const DEFAULT_LOG_LIMIT_BYTES: u64 = 64 * 1024 * 1024;
/// Below this a capped log's head and tail would hold too little to read (a traceback is 5 KB).
const MIN_LOG_LIMIT_BYTES: u64 = 64 * 1024;
/// A terabyte: beyond it the limit no longer protects the disk.
const MAX_LOG_LIMIT_BYTES: u64 = 1 << 40;

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
}

/// The share of an environment's items a run never trains on, chosen by their content with
/// `seed` (the same items for every run of the same fraction and seed): what `rl compare`
/// asks the base and the trained model. 0 keeps nothing out. An environment with an eval
/// split of its own (`get_next_eval_item`) trains on every training item whatever this says.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HeldOut {
    pub fraction: f64,
    pub seed: u64,
}

/// The Tinker cookbook's and most fine-tuning guides' share of a dataset kept for evaluation.
pub(crate) const DEFAULT_HELD_OUT_FRACTION: f64 = 0.1;
/// More kept out would leave training too little of a small dataset.
pub(crate) const MAX_HELD_OUT_FRACTION: f64 = 0.5;

impl Default for HeldOut {
    fn default() -> Self {
        Self {
            fraction: DEFAULT_HELD_OUT_FRACTION,
            seed: 0,
        }
    }
}

impl HeldOut {
    pub fn slice(&self) -> rl_python::Slice {
        rl_python::Slice {
            fraction: self.fraction,
            seed: self.seed,
        }
    }
}

/// What pruning keeps of an ended run's checkpoints: the last `keep_last`, the best, the
/// final weights and the state a resume loads. 0 keeps every checkpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CheckpointPolicy {
    pub keep_last: u32,
    /// Prune each run as it ends (its supervisor does), not only on `rl checkpoints prune`.
    pub prune_when_ended: bool,
}

/// Which Tinker API the trainer talks to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EngineKind {
    /// The hosted Tinker service, with `TINKER_API_KEY`.
    #[default]
    Tinker,
    /// skyrl-tx, started by rl as the first component of each run, on this machine's CPU or
    /// GPU, from a model folder on disk.
    Local,
}

/// The local engine: `kind = "local"` and a base model folder train without a Tinker account.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct EngineSettings {
    pub kind: EngineKind,
    /// The Python holding skyrl-tx (its own: its pins clash with atroposlib's); unset: `python`.
    pub python: Option<PathBuf>,
    /// A Hugging Face model folder on disk (Qwen3, Llama): the engine downloads nothing.
    pub base_model: Option<PathBuf>,
    /// skyrl-tx's `--backend-config` (e.g. `max_lora_adapters`, `max_lora_rank`), as a table.
    pub backend_config: BTreeMap<String, Value>,
}

impl EngineSettings {
    pub fn is_local(&self) -> bool {
        self.kind == EngineKind::Local
    }

    /// Why `base_model` cannot be the local engine's model, if it cannot (no folder, no
    /// `config.json`): asked before a run starts and by `rl doctor`.
    pub fn base_model_problem(&self) -> Option<String> {
        match &self.base_model {
            None => Some("engine.base_model is not set".to_owned()),
            Some(model) if model.join("config.json").is_file() => None,
            Some(model) => Some(format!(
                "engine.base_model {} is not a model folder (no config.json)",
                model.display()
            )),
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    /// Child processes of the run's supervisor on this machine.
    #[default]
    Local,
    /// A SLURM job per run that holds the allocation; each component is a job step in it.
    Slurm,
}

/// What the batch script of a run asks SLURM for. Each field left unset is SLURM's default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct SlurmSettings {
    pub partition: Option<String>,
    pub account: Option<String>,
    /// `--time` (e.g. `"04:00:00"`, `"2-00:00:00"`); SLURM enforces it to the minute.
    pub time_limit: Option<String>,
    /// Nodes of the allocation; the components run on its first node.
    pub nodes: Option<u32>,
    /// GPUs of each component's step (`--gpus` of its `srun`); the allocation asks for the sum.
    pub gpus: ComponentGpus,
    /// More `#SBATCH` lines, as written after `#SBATCH ` (e.g. `"--qos=high"`).
    pub extra_sbatch: Vec<String>,
    /// Pass `--slurm true` to the environment. atroposlib then, in an allocation of 2+ nodes,
    /// replaces its inference servers by `http://<node>:9000+i/v1` on the nodes after the first
    /// `NUM_TRAINING_NODES` (a variable of `[child_environment]`, required then): for
    /// inference servers the operator runs on those nodes. On one node it changes nothing.
    pub env_uses_allocation: bool,
    /// Where the supervisor reaches the components for readiness checks; default: the job's
    /// batch host as SLURM names it. The API and trainer commands must listen there.
    pub host: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct ComponentGpus {
    pub engine: u32,
    pub api: u32,
    pub trainer: u32,
    pub env: u32,
}

/// The endpoint and models of `rl_test_inference`: an agent chooses models and sizes, never
/// where requests (and the key) go.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct InferenceSettings {
    /// An OpenAI-compatible endpoint; unset means OpenRouter.
    pub base_url: Option<String>,
    /// The variable holding the endpoint's key: OPENROUTER_API_KEY for OpenRouter when unset;
    /// no key for another endpoint unless named here.
    pub key_variable: Option<String>,
    /// Models tested when the caller names none; empty means the original's three.
    pub models: Vec<String>,
    /// Where a hosted run's checkpoints are sampled: the Tinker service's OpenAI-compatible
    /// endpoint (its key is `TINKER_API_KEY`); unset means the hosted service's.
    pub tinker_openai_url: Option<String>,
}

/// The hosted Tinker service's OpenAI-compatible endpoint: it samples any `tinker://…/
/// sampler_weights/…` path, and base models by name.
pub(crate) const TINKER_OPENAI_BASE_URL: &str =
    "https://tinker.thinkingmachines.dev/services/tinker-prod/oai/api/v1";

impl InferenceSettings {
    /// Where the checkpoints of a run trained against `service` (its `tinker.base_url`; `None`:
    /// the hosted Tinker) are sampled: the operator's endpoint if set, else that service's own
    /// OpenAI-compatible route, so a run's paths and key go only to the service that has them.
    pub fn tinker_openai_url(&self, service: Option<&str>) -> String {
        if let Some(url) = &self.tinker_openai_url {
            return url.clone();
        }
        service.map_or_else(
            || TINKER_OPENAI_BASE_URL.to_owned(),
            |service| format!("{}/oai/api/v1", service.trim_end_matches('/')),
        )
    }
}

/// How long each phase of a run may take, in seconds, and how much each component may log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunTiming {
    /// From launching the local engine until its health route answers.
    pub engine_ready_timeout_secs: f64,
    /// From launching the API until `GET /status` answers as run-api does.
    pub api_ready_timeout_secs: f64,
    /// From launching the trainer until `GET /health` answers; a real Tinker trainer loads its
    /// model remotely first, hence the generous default.
    pub trainer_ready_timeout_secs: f64,
    /// An environment that has sent the API no scored group yet but stays alive this long
    /// counts as running (for environments that register late, or are slow to a first group).
    pub env_settle_secs: f64,
    /// Between SIGTERM and SIGKILL when stopping a component's process group.
    pub stop_grace_secs: f64,
    /// Once the trainer or the environment has finished cleanly, how long the other may take to
    /// finish by itself (saving final weights) before it is stopped.
    pub completion_grace_secs: f64,
    /// The most bytes one component's log keeps (a pre-flight model's too): its first half,
    /// then the latest output in a rotating tail; what lies between is dropped. An environment
    /// printing 2 MB/s would otherwise fill gigabytes an hour.
    pub log_limit_bytes: u64,
}

impl Default for RunTiming {
    fn default() -> Self {
        Self {
            engine_ready_timeout_secs: 300.0,
            api_ready_timeout_secs: 60.0,
            trainer_ready_timeout_secs: 900.0,
            env_settle_secs: 60.0,
            stop_grace_secs: 10.0,
            completion_grace_secs: 60.0,
            log_limit_bytes: DEFAULT_LOG_LIMIT_BYTES,
        }
    }
}

/// Command lines as templates: one argument per item, `{placeholder}`s filled per run
/// (`{python}`, `{config}`, `{env_file}`, `{api_port}`, `{trainer_port}`, `{run_id}`,
/// `{run_dir}`, `{root}`; for the engine also `{engine_python}`, `{engine_port}`,
/// `{base_model}`, `{engine_backend_config}`). No shell is involved, so a value can never
/// become a second argument.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Commands {
    /// Used only when `engine.kind = "local"`.
    pub engine: Vec<String>,
    pub api: Vec<String>,
    pub trainer: Vec<String>,
    pub env: Vec<String>,
}

/// rl's own trainer and engine launcher (programs rl ships, found through `PYTHONPATH`), the
/// original tool's API and environment commands, everything bound to loopback on the run's
/// own ports, and the engine's database and checkpoints kept in the run's folder.
impl Default for Commands {
    fn default() -> Self {
        let args = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect();
        Self {
            engine: args(&[
                "{engine_python}",
                "-m",
                "rl_engine",
                "--base-model",
                "{base_model}",
                "--host",
                "127.0.0.1",
                "--port",
                "{engine_port}",
                "--database-url",
                "sqlite:///{run_dir}/engine/tinker.db",
                "--checkpoints-base",
                "{run_dir}/engine/checkpoints",
                "--backend-config",
                "{engine_backend_config}",
            ]),
            api: args(&[
                "{python}",
                "-m",
                "atroposlib.cli.run_api",
                "--host",
                "127.0.0.1",
                "--port",
                "{api_port}",
            ]),
            trainer: args(&[
                "{python}",
                "-m",
                "rl_trainer",
                "--config",
                "{config}",
                "--run-dir",
                "{run_dir}",
            ]),
            env: args(&[
                "{python}",
                "-m",
                "rl_env",
                "{env_file}",
                "serve",
                "--config",
                "{config}",
            ]),
        }
    }
}

/// Infrastructure settings written into every run config; agents cannot edit them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Locked {
    pub env: BTreeMap<String, Value>,
    pub openai: Vec<BTreeMap<String, Value>>,
    pub tinker: BTreeMap<String, Value>,
    pub slurm: bool,
    pub testing: bool,
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
            commands: Commands::default(),
            trainer_needs_tinker_key: true,
            engine: EngineSettings::default(),
            child_environment: BTreeMap::new(),
            run: RunTiming::default(),
            trainer_port: None,
            status_check_interval_secs: DEFAULT_STATUS_CHECK_INTERVAL_SECS,
            max_active_runs: DEFAULT_MAX_ACTIVE_RUNS,
            inference: InferenceSettings::default(),
            backend: Backend::Local,
            slurm: SlurmSettings::default(),
            checkpoints: CheckpointPolicy::default(),
            held_out: HeldOut::default(),
        }
    }
}

fn map(entries: &[(&str, Value)]) -> BTreeMap<String, Value> {
    entries
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

/// The original tool's values. `weight` is gone from the server entry: atroposlib has no such
/// field and ignored it silently.
impl Default for Locked {
    fn default() -> Self {
        Self {
            env: map(&[
                ("tokenizer_name", "Qwen/Qwen3-8B".into()),
                ("rollout_server_url", "http://localhost:8000".into()),
                ("use_wandb", true.into()),
                ("max_token_length", 8192.into()),
                ("max_num_workers", 2048.into()),
                ("worker_timeout", 3600.into()),
                ("total_steps", 2500.into()),
                ("steps_per_eval", 25.into()),
                ("max_batches_offpolicy", 3.into()),
                ("inference_weight", 1.0.into()),
                ("eval_limit_ratio", 0.1.into()),
            ]),
            openai: vec![map(&[
                ("model_name", "Qwen/Qwen3-8B".into()),
                ("base_url", "http://localhost:8001/v1".into()),
                ("api_key", "x".into()),
                ("num_requests_for_eval", 256.into()),
                ("timeout", 3600.into()),
                ("server_type", "sglang".into()),
            ])],
            tinker: map(&[
                ("lora_rank", 32.into()),
                ("learning_rate", 0.00004.into()),
                ("max_token_trainer_length", 9000.into()),
                ("checkpoint_dir", "./temp/".into()),
                ("save_checkpoint_interval", 25.into()),
                // rl's trainer: weights and optimizer state every 25 steps (and at the end),
                // the batches of the last 100 steps kept as rollouts.
                ("save_every", 25.into()),
                ("keep_rollouts", 100.into()),
            ]),
            slurm: false,
            testing: false,
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
        figment = figment.merge(from_env);
        let mut settings: Settings = figment
            .extract()
            .map_err(|error| SettingsError::Invalid(shortened(&error.to_string())))?;
        refuse_unknown_keys(&home.join(SETTINGS_FILE))?;
        settings.check()?;
        settings.lock_engine_model();
        Ok(settings)
    }

    fn check(&self) -> Result<(), SettingsError> {
        if let Some(name) = self
            .child_environment
            .keys()
            .find(|name| crate::SECRET_NAMES.contains(&name.as_str()))
        {
            return Err(SettingsError::Invalid(format!(
                "child_environment sets {name}; keys are never kept in config.toml: put it in the \
                 environment or in <home>/.env"
            )));
        }
        // Each goes into a line of a batch script: one line, no control characters.
        let slurm = &self.slurm;
        let one_liners = [
            ("slurm.partition", slurm.partition.as_deref()),
            ("slurm.account", slurm.account.as_deref()),
            ("slurm.time_limit", slurm.time_limit.as_deref()),
            ("slurm.host", slurm.host.as_deref()),
        ]
        .into_iter()
        .chain(
            slurm
                .extra_sbatch
                .iter()
                .map(|line| ("slurm.extra_sbatch", Some(line.as_str()))),
        );
        for (name, value) in one_liners {
            if let Some(value) = value
                && (value.is_empty() || value.chars().any(char::is_control))
            {
                return Err(SettingsError::Invalid(format!(
                    "{name} is {value:?}; it must be one line of text without control characters"
                )));
            }
        }
        if slurm.env_uses_allocation
            && slurm.nodes.unwrap_or(1) > 1
            && !self.child_environment.contains_key("NUM_TRAINING_NODES")
        {
            return Err(SettingsError::Invalid(
                "slurm.env_uses_allocation on several nodes needs NUM_TRAINING_NODES in \
                 [child_environment]: atroposlib reads it to tell training nodes from inference \
                 nodes"
                    .to_owned(),
            ));
        }
        // rl ends each run's holding script with SIGUSR1; a job signal of the same kind would
        // end it early.
        if let Some(line) = slurm
            .extra_sbatch
            .iter()
            .find(|line| line.contains("--signal") && line.contains("USR1"))
        {
            return Err(SettingsError::Invalid(format!(
                "slurm.extra_sbatch has {line:?}: rl ends each run's job with SIGUSR1 to its \
                 script; ask for another signal"
            )));
        }
        if self.engine.is_local() && self.backend == Backend::Slurm {
            return Err(SettingsError::Invalid(
                "engine.kind = \"local\" with backend = \"slurm\" is not supported yet: the \
                 local engine listens on its node's loopback, where the login node's readiness \
                 checks cannot reach it; train on the hosted Tinker on SLURM"
                    .to_owned(),
            ));
        }
        if self.engine.is_local() && self.engine.base_model.is_none() {
            return Err(SettingsError::Invalid(
                "engine.kind is \"local\" but engine.base_model is not set: name a model folder \
                 on disk (a Hugging Face Qwen3 or Llama checkpoint) for the engine to train"
                    .to_owned(),
            ));
        }
        let fraction = self.held_out.fraction;
        if !(fraction.is_finite() && (0.0..=MAX_HELD_OUT_FRACTION).contains(&fraction)) {
            return Err(SettingsError::Invalid(format!(
                "held_out.fraction is {fraction}; it must be between 0 (keep nothing out) and \
                 {MAX_HELD_OUT_FRACTION}"
            )));
        }
        if self.max_active_runs == 0 {
            return Err(SettingsError::Invalid(
                "max_active_runs is 0: no run could start; set at least 1".to_owned(),
            ));
        }
        let timing = &self.run;
        let log_limit = timing.log_limit_bytes;
        if !(MIN_LOG_LIMIT_BYTES..=MAX_LOG_LIMIT_BYTES).contains(&log_limit) {
            return Err(SettingsError::Invalid(format!(
                "run.log_limit_bytes is {log_limit}; it must be between {MIN_LOG_LIMIT_BYTES} \
                 (64 KiB) and {MAX_LOG_LIMIT_BYTES} (1 TiB)"
            )));
        }
        for (name, value) in [
            (
                "run.engine_ready_timeout_secs",
                timing.engine_ready_timeout_secs,
            ),
            ("run.api_ready_timeout_secs", timing.api_ready_timeout_secs),
            (
                "run.trainer_ready_timeout_secs",
                timing.trainer_ready_timeout_secs,
            ),
            ("run.env_settle_secs", timing.env_settle_secs),
            ("run.stop_grace_secs", timing.stop_grace_secs),
            ("run.completion_grace_secs", timing.completion_grace_secs),
            (
                "status_check_interval_secs",
                self.status_check_interval_secs,
            ),
        ] {
            if !(value.is_finite() && (0.0..=86_400.0).contains(&value)) {
                return Err(SettingsError::Invalid(format!(
                    "{name} is {value}; it must be between 0 and 86400 seconds"
                )));
            }
        }
        Ok(())
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
        self.locked
            .tinker
            .insert("base_model".to_owned(), model.clone());
        self.locked
            .env
            .insert("tokenizer_name".to_owned(), model.clone());
        if let Some(server) = self.locked.openai.first_mut() {
            server.insert("tokenizer_name".to_owned(), model);
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
}

/// `RL_*` variables that configure something other than these settings.
const NOT_SETTINGS: &[&str] = &["RL_HOME", "RL_TEST_PYTHON"];

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
