//! The run config: one YAML file that the Atropos environment (`--config`) and the Tinker
//! trainer both read, written in the run's own folder of the state directory.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::files::{read_text, write_atomically};
use crate::trainer::{self, Key, Trainer};
use crate::{SettingsError, Value};

/// Where a run's own API, trainer and engine listen (loopback), replacing the locked addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RunEndpoints {
    pub api_port: u16,
    pub trainer_port: u16,
    /// The local engine's port, for a run that starts one.
    pub engine_port: Option<u16>,
}

impl RunEndpoints {
    pub fn rollout_server_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.api_port)
    }

    /// Always with `/v1` spelled out: the Tinker trainer strips it with `rstrip`, a character
    /// set, so anything else could lose letters.
    pub fn inference_base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.trainer_port)
    }

    /// The Tinker API of the run's own engine (the SDK's `base_url`).
    pub fn engine_url(&self) -> Option<String> {
        self.engine_port
            .map(|port| format!("http://127.0.0.1:{port}"))
    }
}

/// The sections atroposlib's environment CLI reads (`env`, `openai`, `slurm`, `testing`) and
/// the trainer's `tinker` section, which the environment ignores.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    pub env: BTreeMap<String, Value>,
    pub openai: Vec<BTreeMap<String, Value>>,
    pub tinker: BTreeMap<String, Value>,
    pub slurm: bool,
    pub testing: bool,
}

impl RunConfig {
    /// Reads back a run's `config.yaml`.
    pub fn read(path: &Path) -> Result<Self, SettingsError> {
        Self::parse(&read_text(path)?, path)
    }

    fn parse(text: &str, path: &Path) -> Result<Self, SettingsError> {
        serde_norway::from_str(text).map_err(|error| SettingsError::InvalidInput {
            what: format!("run config {}", path.display()),
            reason: error.to_string(),
        })
    }

    /// Points the run config at `path` to `host` (see `place_on`), keeping the comment it was
    /// written with; replaced atomically.
    pub fn place_file_on(path: &Path, host: &str) -> Result<(), SettingsError> {
        let text = read_text(path)?;
        let mut config = Self::parse(&text, path)?;
        config.place_on(host);
        let header: String = text
            .lines()
            .take_while(|line| line.starts_with('#'))
            .flat_map(|line| [line, "\n"])
            .collect();
        write_atomically(path, (header + &config.to_yaml()?).as_bytes())
    }

    /// The trainer's settings of this run, read through the trainer's contract.
    pub fn trainer(&self) -> Result<Trainer, SettingsError> {
        Trainer::read(&self.env, &self.tinker)
    }

    /// Writes `value` as `key` of the trainer's contract into its section.
    pub fn set(&mut self, key: &Key, value: Value) {
        trainer::set(&mut self.env, &mut self.tinker, key, value);
    }

    /// How the run's trainer and env name their WandB runs.
    pub fn wandb(&self) -> RunWandb {
        let text = |key: &Key| match key.given(&self.env, &self.tinker) {
            Some(Value::Str(text)) if !text.is_empty() => Some(text.clone()),
            _ => None,
        };
        RunWandb {
            project: text(&trainer::WANDB_PROJECT),
            group: text(&trainer::WANDB_GROUP),
            run_name: text(&trainer::WANDB_RUN_NAME),
            env_name: text(&trainer::WANDB_NAME),
            env_uses_wandb: !matches!(
                trainer::USE_WANDB.given(&self.env, &self.tinker),
                Some(Value::Bool(false))
            ),
        }
    }

    /// Points the run's own addresses (the API, and the trainer as first inference server) at
    /// `host` instead of loopback: the node the components run on, as a cluster names it, so
    /// that workers on other nodes of the allocation reach them too.
    fn place_on(&mut self, host: &str) {
        let moved = |value: &mut Value| {
            if let Value::Str(url) = value
                && let Some(rest) = url.strip_prefix("http://127.0.0.1:")
            {
                *url = format!("http://{host}:{rest}");
            }
        };
        if let Some(url) = self.env.get_mut("rollout_server_url") {
            moved(url);
        }
        if let Some(url) = self.openai.first_mut().and_then(|s| s.get_mut("base_url")) {
            moved(url);
        }
        if let Some(url) = self.tinker.get_mut(trainer::BASE_URL.name) {
            moved(url);
        }
    }

    pub fn to_yaml(&self) -> Result<String, SettingsError> {
        serde_norway::to_string(self).map_err(|error| SettingsError::InvalidInput {
            what: "run config".to_owned(),
            reason: error.to_string(),
        })
    }
}

/// The WandB names in a run's config (`None` where the config has none).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunWandb {
    pub project: Option<String>,
    pub group: Option<String>,
    /// The trainer's `wandb_run_name`; its WandB run is `{run_name}-trainer-{suffix}`.
    pub run_name: Option<String>,
    /// The env's `wandb_name`; its WandB run is `{env_name}-{date}-{random}`.
    pub env_name: Option<String>,
    pub env_uses_wandb: bool,
}
