//! The run config: one YAML file that the Atropos environment (`--config`) and the Tinker
//! trainer both read, written in the run's own folder of the state directory.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::settings::Settings;
use crate::store::{Section, Selection, create_private_dir, write_atomically};
use crate::{ConfigError, Value};

/// A run's id: 8 lowercase hex characters from a v4 UUID, as the original tool made them.
/// Ids from outside are parsed before they touch a path.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RunId(String);

impl TryFrom<String> for RunId {
    type Error = ConfigError;
    fn try_from(text: String) -> Result<Self, Self::Error> {
        Self::parse(&text)
    }
}

impl From<RunId> for String {
    fn from(id: RunId) -> Self {
        id.0
    }
}

impl RunId {
    pub fn generate() -> Self {
        let uuid = uuid::Uuid::new_v4().simple().to_string();
        Self(uuid[..8].to_owned())
    }

    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        let valid = text.len() == 8
            && text
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if valid {
            Ok(Self(text.to_owned()))
        } else {
            Err(ConfigError::InvalidInput {
                what: format!("run id '{}'", text.chars().take(40).collect::<String>()),
                reason: "run ids are 8 lowercase hexadecimal characters, e.g. 3f9a1c2e".to_owned(),
            })
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

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
    /// Locked values, then the selection's edits (a locked field keeps its locked value), then
    /// the run's WandB names, then the run's own addresses: the API, and the trainer as the first
    /// inference server (further servers are the operator's and kept as they are).
    pub fn build(
        settings: &Settings,
        selection: &Selection,
        wandb_project: &str,
        run_id: &RunId,
        endpoints: Option<RunEndpoints>,
    ) -> Self {
        let locked = &settings.locked;
        let mut env = locked.env.clone();
        env.insert(
            "wandb_name".to_owned(),
            selection.wandb_name.as_str().into(),
        );
        for edit in selection.edits.iter().filter(|e| e.section == Section::Env) {
            if !locked.env.contains_key(&edit.field) {
                env.insert(edit.field.clone(), edit.value.clone());
            }
        }
        let mut tinker = locked.tinker.clone();
        let run_name = format!("{}-{}", selection.environment.name, run_id);
        tinker.insert("wandb_project".to_owned(), wandb_project.into());
        tinker.insert("wandb_run_name".to_owned(), run_name.as_str().into());
        // The trainer hands its group to run-api, and the env logs into the same group: one
        // group per run is what lets the run's WandB runs be found again (the trainer's own
        // default is a random id). An operator's locked group is kept.
        tinker
            .entry("wandb_group".to_owned())
            .or_insert_with(|| run_name.as_str().into());
        let mut openai = locked.openai.clone();
        if let Some(endpoints) = endpoints {
            env.insert(
                "rollout_server_url".to_owned(),
                endpoints.rollout_server_url().as_str().into(),
            );
            if let Some(trainer) = openai.first_mut() {
                trainer.insert(
                    "base_url".to_owned(),
                    endpoints.inference_base_url().as_str().into(),
                );
            }
            if let Some(url) = endpoints.engine_url() {
                tinker.insert("base_url".to_owned(), url.as_str().into());
            }
        }

        Self {
            env,
            openai,
            tinker,
            slurm: locked.slurm,
            testing: locked.testing,
        }
    }

    /// Reads back a run's `config.yaml`.
    pub fn read(path: &Path) -> Result<Self, ConfigError> {
        Self::parse(&read_text(path)?, path)
    }

    fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        serde_norway::from_str(text).map_err(|error| ConfigError::InvalidInput {
            what: format!("run config {}", path.display()),
            reason: error.to_string(),
        })
    }

    /// Points the run config at `path` to `host` (see `place_on`), keeping the comment it was
    /// written with; replaced atomically.
    pub fn place_file_on(path: &Path, host: &str) -> Result<(), ConfigError> {
        let text = read_text(path)?;
        let mut config = Self::parse(&text, path)?;
        config.place_on(host);
        let header: String = text
            .lines()
            .take_while(|line| line.starts_with('#'))
            .map(|line| format!("{line}\n"))
            .collect();
        crate::store::write_atomically(path, (header + &config.to_yaml()?).as_bytes())
    }

    /// How the run's trainer and env name their WandB runs.
    pub fn wandb(&self) -> RunWandb {
        let text = |section: &BTreeMap<String, Value>, key: &str| match section.get(key) {
            Some(Value::Str(text)) if !text.is_empty() => Some(text.clone()),
            _ => None,
        };
        RunWandb {
            project: text(&self.tinker, "wandb_project"),
            group: text(&self.tinker, "wandb_group"),
            run_name: text(&self.tinker, "wandb_run_name"),
            env_name: text(&self.env, "wandb_name"),
            env_uses_wandb: !matches!(self.env.get("use_wandb"), Some(Value::Bool(false))),
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
        if let Some(url) = self.tinker.get_mut("base_url") {
            moved(url);
        }
    }

    pub fn to_yaml(&self) -> Result<String, ConfigError> {
        serde_norway::to_string(self).map_err(|error| ConfigError::InvalidInput {
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

fn read_text(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
        action: "read",
        path: path.to_owned(),
        source,
    })
}

/// A run's config file in its folder.
pub const RUN_CONFIG_FILE: &str = "config.yaml";

/// The folder of a run in the state directory.
pub fn run_dir(home: &Path, run_id: &RunId) -> PathBuf {
    home.join("runs").join(run_id.as_str())
}

pub(crate) fn write(
    home: &Path,
    run_id: &RunId,
    selection: &Selection,
    config: &RunConfig,
) -> Result<PathBuf, ConfigError> {
    let dir = run_dir(home, run_id);
    create_private_dir(&dir)?;
    let path = dir.join(RUN_CONFIG_FILE);
    let header = format!(
        "# Run {run_id} of {} ({}), written by rl. Holds no secret: keys reach the processes \
         through their environment.\n",
        selection.environment.key, selection.environment.class_name
    );
    let text = header + &config.to_yaml()?;
    write_atomically(&path, text.as_bytes())?;
    Ok(path)
}
