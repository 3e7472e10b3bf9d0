//! What every run is given unless the operator says otherwise: the components' command
//! templates and the locked values (the original tool's).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{Value, trainer};

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

fn map(entries: &[(&str, Value)]) -> BTreeMap<String, Value> {
    entries
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

/// The trainer's settings every run gets unless the operator locks others: the original tool's
/// (its defaults from the trainer's contract), and its `max_token_trainer_length`, above the
/// contract's fallback on `env.max_token_length`.
fn locked_tinker() -> BTreeMap<String, Value> {
    let mut tinker = BTreeMap::new();
    for key in [
        trainer::LORA_RANK,
        trainer::LEARNING_RATE,
        trainer::CHECKPOINT_DIR,
        trainer::SAVE_CHECKPOINT_INTERVAL,
        trainer::SAVE_EVERY,
        trainer::KEEP_ROLLOUTS,
    ] {
        tinker.insert(key.name.to_owned(), key.default_value());
    }
    tinker.insert(
        trainer::MAX_TOKEN_TRAINER_LENGTH.name.to_owned(),
        9000.into(),
    );
    tinker
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
            tinker: locked_tinker(),
            slurm: false,
            testing: false,
        }
    }
}
