//! The tables of `config.toml` below the top level: the engine, the backend and its SLURM job,
//! the pre-flight's endpoint, a run's timing and log limit, checkpoints, the held-out slice,
//! what agents may install.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::Value;

/// 64 MiB per component: hours of a normal run's output, a few seconds of a runaway one's.
pub const DEFAULT_LOG_LIMIT_BYTES: u64 = 64 * 1024 * 1024;

/// Groups without signal before a run warns: a few batches of a usual group size, minutes of a
/// run; a model that gets some right makes a group with signal long before.
pub(crate) const DEFAULT_NO_SIGNAL_WARN_GROUPS: u64 = 32;
/// Groups without signal before a run fails: many batches, still minutes, never hours.
pub(crate) const DEFAULT_NO_SIGNAL_FAIL_GROUPS: u64 = 120;

/// The share of an environment's items a run never trains on, chosen by their content with
/// `seed` (the same items for every run of the same fraction and seed): what `rl compare`
/// asks the base and the trained model. 0 keeps nothing out. An environment with an eval
/// split of its own (`get_next_eval_item`) trains on every training item whatever this says.
///
/// The operator's `[held_out]` table, and also the slice a run records at its start (its
/// launch record) and rl's environment runner is told: one type, so what a run kept out is
/// always said in the terms the operator set it in.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HeldOut {
    pub fraction: f64,
    pub seed: u64,
}

/// The Tinker cookbook's and most fine-tuning guides' share of a dataset kept for evaluation.
pub(crate) const DEFAULT_HELD_OUT_FRACTION: f64 = 0.1;

impl Default for HeldOut {
    fn default() -> Self {
        Self {
            fraction: DEFAULT_HELD_OUT_FRACTION,
            seed: 0,
        }
    }
}

impl HeldOut {
    /// Whether the slice keeps any item out of training.
    pub fn keeps_out(&self) -> bool {
        self.fraction > 0.0
    }
}

/// The operator's `[verifiers]` table: a Python for every verifiers environment of one kind,
/// used when an environment has none of its own (`rl setup --env NAME` makes one in
/// `<home>/venvs/environments/NAME/`). It must hold that kind's verifiers and the
/// environment's dependencies; the environment's package folder is put first on its path.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct VerifiersSettings {
    /// For environments written against verifiers' v1 API (verifiers 0.4).
    pub python_v1: Option<PathBuf>,
    /// For environments written against verifiers' legacy API (verifiers 0.3 and before).
    pub python_v0: Option<PathBuf>,
}

impl VerifiersSettings {
    /// The operator's shared Python for `kind`, if any (never for Atropos: `python` is its).
    pub fn python_for(&self, kind: crate::EnvironmentKind) -> Option<&Path> {
        match kind {
            crate::EnvironmentKind::Atropos => None,
            crate::EnvironmentKind::VerifiersV1 => self.python_v1.as_deref(),
            crate::EnvironmentKind::VerifiersV0 => self.python_v0.as_deref(),
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

/// Where the Tinker SDK sends everything when nothing names another service (tinker 0.38.0,
/// `tinker/lib/base_url.py`, `DEFAULT_BASE_URL`): the hosted Tinker. Given to rl's trainer in
/// its contract (`constants.hosted_tinker_url`).
pub const HOSTED_TINKER_URL: &str = "https://tinker.thinkingmachines.dev/services/tinker-prod";

impl InferenceSettings {
    /// Where the checkpoints of a run trained against `service` (its `tinker.base_url`; `None`:
    /// the hosted Tinker) are sampled: the operator's endpoint if set, else that service's own
    /// OpenAI-compatible route (it samples any `tinker://…/sampler_weights/…` path, and base
    /// models by name), so a run's paths and key go only to the service that has them.
    pub fn tinker_openai_url(&self, service: Option<&str>) -> String {
        if let Some(url) = &self.tinker_openai_url {
            return url.clone();
        }
        let service = service.unwrap_or(HOSTED_TINKER_URL);
        format!("{}/oai/api/v1", service.trim_end_matches('/'))
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
    /// A run whose environment made this many groups (counted by `rl_env`) without one whose
    /// scores differ warns that it cannot learn (an event, and a health flag); 0 never warns.
    pub no_signal_warn_groups: u64,
    /// Past this many such groups, none with signal, the run fails naming the cause; 0 never
    /// fails it. Also ends a pre-flight's model (and an evaluation) early with `no signal`.
    pub no_signal_fail_groups: u64,
    /// ... and no sooner than this many seconds after the run warned: an environment that
    /// makes groups in milliseconds passes both group bounds at once.
    pub no_signal_fail_secs: f64,
    /// A running run whose step has not advanced for this many times its recent median step
    /// time is stalled (a health warning naming the component that is busy or waiting).
    pub stall_factor: f64,
    /// Never stalled before this many seconds without a step: the first steps compile and load
    /// models, and a run without a step time yet is judged against this alone.
    pub stall_floor_secs: f64,
}

/// `run.stall_factor`'s default: a step five times its recent median is stalled.
pub(crate) const DEFAULT_STALL_FACTOR: f64 = 5.0;
/// `run.stall_floor_secs`'s default: ten minutes, the first steps' compilation and loading.
pub(crate) const DEFAULT_STALL_FLOOR_SECS: f64 = 600.0;

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
            no_signal_warn_groups: DEFAULT_NO_SIGNAL_WARN_GROUPS,
            no_signal_fail_groups: DEFAULT_NO_SIGNAL_FAIL_GROUPS,
            no_signal_fail_secs: 60.0,
            stall_factor: DEFAULT_STALL_FACTOR,
            stall_floor_secs: DEFAULT_STALL_FLOOR_SECS,
        }
    }
}

/// What agents may do to the operator's machine beyond training (`[agents]`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentSettings {
    /// What `rl_install_environment` may install; `rl setup --env`, the operator's own
    /// command, is never limited by it.
    pub install: AgentInstalls,
}

/// What an agent's install may bring onto the machine, from least to most.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentInstalls {
    /// Nothing: the operator runs `rl setup --env`.
    None,
    /// What an environment of the operator's own folder declares (its requirements as pinned
    /// there, a verifiers package with rl's pins): the default, because the operator chose
    /// that code by putting it there, and a run cannot use it until it is installed.
    #[default]
    Folder,
    /// Also a package of the registry at an exact version (`name==version`): code nobody on
    /// this machine has read, so only when the operator says so.
    Published,
}

impl AgentInstalls {
    /// Whether what this allows covers `needed` (each allows what the one before it does).
    pub fn allows(self, needed: Self) -> bool {
        self >= needed
    }

    pub const fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Folder => "folder",
            Self::Published => "published",
        }
    }
}
