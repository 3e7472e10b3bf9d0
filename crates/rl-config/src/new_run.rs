//! The run config a new run gets: the operator's locked values, the selection's edits, the
//! run's WandB names and its own addresses, written in the run's folder.

use std::path::{Path, PathBuf};

use rl_settings::{
    Caps, RunConfig, RunEndpoints, RunFolder, RunId, Settings, SettingsError, Value,
    create_private_dir, trainer, write_atomically,
};
use serde::{Deserialize, Serialize};

use crate::ConfigError;
use crate::store::{Edit, Section, SelectedEnvironment, Selection};

/// Locked values, then the selection's edits (a locked field keeps its locked value), then
/// the run's WandB names, then the run's own addresses: the API, and the trainer as the first
/// inference server (further servers are the operator's and kept as they are).
pub(crate) fn build(
    settings: &Settings,
    selection: &Selection,
    wandb_project: &str,
    run_id: &RunId,
    endpoints: Option<RunEndpoints>,
) -> RunConfig {
    let locked = &settings.locked;
    let mut env = locked.env.clone();
    env.insert(
        trainer::WANDB_NAME.name.to_owned(),
        selection.wandb_name.as_str().into(),
    );
    for edit in selection.edits.iter().filter(|e| e.section == Section::Env) {
        if !locked.env.contains_key(&edit.field) {
            env.insert(edit.field.clone(), edit.value.clone());
        }
    }
    let run_name = run_name(&selection.environment, run_id);
    let mut config = RunConfig {
        env,
        openai: locked.openai.clone(),
        tinker: locked.tinker.clone(),
        slurm: locked.slurm,
        testing: locked.testing,
    };
    config.set(&trainer::WANDB_PROJECT, wandb_project.into());
    // A run's own trainer settings (a sweep's point): checked against the contract's per-run
    // keys and the operator's locks before they reach here.
    // An operator's lock set after an edit wins, as it does for the environment's fields
    // (rl's own defaults in `locked.tinker` are what an edit replaces).
    for edit in selection.edits.iter().filter(|e| {
        e.section == Section::Tinker
            && trainer::per_run(&e.field).is_some()
            && !settings.operator_tinker_locks.contains(&e.field)
    }) {
        config.tinker.insert(edit.field.clone(), edit.value.clone());
    }
    // The trainer hands its group to run-api, and the env logs into the same group: one
    // group per run is what lets the run's WandB runs be found again. An operator's locked
    // group is kept.
    if trainer::WANDB_GROUP
        .given(&config.env, &config.tinker)
        .is_none()
    {
        config.set(&trainer::WANDB_GROUP, run_name.as_str().into());
    }
    config.set(&trainer::WANDB_RUN_NAME, run_name.as_str().into());
    if let Some(endpoints) = endpoints {
        place(&mut config, endpoints);
    }
    config
}

/// The run's name in WandB: the environment's name and the run's id.
fn run_name(environment: &SelectedEnvironment, run_id: &RunId) -> String {
    format!("{}-{}", environment.name, run_id)
}

/// The run's own addresses: the API, the trainer as the first inference server (further
/// servers are the operator's and kept as they are), and the run's engine.
fn place(config: &mut RunConfig, endpoints: RunEndpoints) {
    config.set(
        &trainer::ROLLOUT_SERVER_URL,
        endpoints.rollout_server_url().as_str().into(),
    );
    if let Some(trainer) = config.openai.first_mut() {
        trainer.insert(
            "base_url".to_owned(),
            endpoints.inference_base_url().as_str().into(),
        );
    }
    if let Some(url) = endpoints.engine_url() {
        config.set(&trainer::BASE_URL, url.as_str().into());
    }
}

/// A resumed run's config: its parent's as it ran (locked values, edits, WandB project and
/// group), with the run's own name and addresses and the state to continue from.
pub(crate) fn resumed(
    parent: RunConfig,
    environment: &SelectedEnvironment,
    run_id: &RunId,
    endpoints: RunEndpoints,
    state_path: &str,
    step: u64,
) -> RunConfig {
    let mut config = parent;
    config.set(
        &trainer::WANDB_RUN_NAME,
        run_name(environment, run_id).as_str().into(),
    );
    config.set(&trainer::RESUME_STATE, state_path.into());
    config.set(
        &trainer::STARTING_STEP,
        Value::Int(i64::try_from(step).unwrap_or(i64::MAX)),
    );
    place(&mut config, endpoints);
    config
}

/// Writes the run's prices (the operator's `[prices]` for its base model as they are now, with
/// the machine's on the local engine) and its `caps` (already merged with the operator's) into
/// its config, replacing any it had (a resumed run's parent's).
pub(crate) fn set_costs(
    settings: &Settings,
    config: &mut RunConfig,
    caps: &Caps,
) -> Result<(), ConfigError> {
    let prices = run_prices(settings, config, caps)?;
    trainer::set_costs(
        &mut config.tinker,
        &settings.prices.currency,
        prices.as_ref(),
        caps,
    );
    Ok(())
}

/// Refuses to continue `parent` (its `config`) on a local engine that now serves another base
/// model: its saved states are LoRA weights of the model it trained, which the engine would
/// fail to load after starting every component.
pub(crate) fn check_same_base_model(
    settings: &Settings,
    parent: &RunId,
    config: &RunConfig,
) -> Result<(), ConfigError> {
    let (Some(now), true) = (&settings.engine.base_model, settings.engine.is_local()) else {
        return Ok(());
    };
    let now = now.to_string_lossy();
    match config.trainer()?.base_model {
        Some(ran) if ran != now => Err(ConfigError::InvalidInput {
            what: format!("continuing run {parent}"),
            reason: format!(
                "it trained base model {ran}, and [engine] base_model in config.toml is now \
                 {now}: its saved states are LoRA weights of {ran}; set [engine] base_model \
                 back to continue it, or start a new run"
            ),
        }),
        _ => Ok(()),
    }
}

/// Refuses a config the local engine would fail on seconds after its start: a LoRA rank above
/// the engine's `max_lora_rank` (skyrl-tx's `--backend-config`); said before anything starts.
/// Every loss rl offers trains there (what skyrl-tx lacks, through the trainer's loss adapter).
pub(crate) fn check_engine_fits(
    settings: &Settings,
    config: &RunConfig,
) -> Result<(), ConfigError> {
    if !settings.engine.is_local() {
        return Ok(());
    }
    let trainer = config.trainer()?;
    let most = settings
        .engine
        .backend_config
        .get("max_lora_rank")
        .and_then(|value| match value {
            rl_settings::Value::Int(most) => Some(*most),
            _ => None,
        });
    let rank = trainer.lora_rank;
    match most {
        Some(most) if i64::from(rank) > most => Err(ConfigError::InvalidInput {
            what: format!("lora_rank {rank}"),
            reason: format!(
                "the local engine holds LoRA adapters of rank {most} at most ([engine] \
                 backend_config max_lora_rank in config.toml): lower lora_rank, or raise \
                 max_lora_rank"
            ),
        }),
        _ => Ok(()),
    }
}

/// The prices a run of `config` pays, refusing `caps` it could not hold to: a cost cap
/// without a price (nothing would ever be counted against it).
pub(crate) fn run_prices(
    settings: &Settings,
    config: &RunConfig,
    caps: &Caps,
) -> Result<Option<rl_settings::RunPrices>, ConfigError> {
    let model = config.trainer()?.base_model.unwrap_or_default();
    let prices = settings.prices.for_run(&model, settings.engine.is_local());
    if let Some(max_cost) = caps.max_cost
        && prices.is_none()
    {
        let machine = if settings.engine.is_local() {
            ", or machine_per_hour"
        } else {
            ""
        };
        return Err(ConfigError::Settings(SettingsError::InvalidInput {
            what: "max_cost".to_owned(),
            reason: format!(
                "{max_cost} needs a price, and none is set for {model:?}: set [prices] \
                 prompt_per_million, sampled_per_million or trained_per_million{machine} in \
                 config.toml (or [prices.models.{model:?}]), or cap tokens or hours instead \
                 (max_tokens, max_hours)"
            ),
        }));
    }
    Ok(prices)
}

/// Which environment a run ran, and its file's digest then: what a resume compares.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct RunEnvironment {
    pub(crate) environment: SelectedEnvironment,
    /// SHA-256 of the environment's file, hex.
    pub(crate) sha256: String,
    /// The selection's edits the run started with (none recorded by runs before them): what
    /// a test of the run's checkpoints passes on, as a pre-flight passes the selection's.
    #[serde(default)]
    pub(crate) edits: Vec<Edit>,
    /// How the environment's file runs when it is a module of its package (it imports its
    /// siblings relatively or through its top package), as discovery read its source: what
    /// rl's environment runner (`rl_env`) reads. Absent: it runs as a script.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) package: Option<RunPackage>,
}

/// The module a package-style environment runs as, and the folder holding its top package.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RunPackage {
    pub(crate) root: PathBuf,
    pub(crate) module: String,
}

impl RunEnvironment {
    /// The environment as its file is now, with the edits a run of it starts with.
    pub(crate) fn of(
        environment: &SelectedEnvironment,
        edits: &[Edit],
    ) -> Result<Self, ConfigError> {
        let file = environment.environments_dir.join(&environment.file);
        let bytes = std::fs::read(&file).map_err(|source| ConfigError::Io {
            action: "read",
            path: file.clone(),
            source,
        })?;
        let package = rl_discovery::run_module(environment.kind, &file).map(|package| RunPackage {
            root: package.root,
            module: package.name,
        });
        Ok(Self {
            environment: environment.clone(),
            sha256: sha256_hex(&bytes),
            edits: edits.to_vec(),
            package,
        })
    }

    /// What run `run_id` (whose folder is `folder`) recorded.
    pub(crate) fn read(folder: &RunFolder, run_id: &str) -> Result<Self, ConfigError> {
        let path = folder.environment();
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Err(ConfigError::UnknownRunEnvironment {
                    run_id: run_id.to_owned(),
                    missing: path,
                });
            }
            Err(source) => {
                return Err(ConfigError::Io {
                    action: "read",
                    path,
                    source,
                });
            }
        };
        serde_json::from_str(&text).map_err(|error| ConfigError::CorruptState {
            path,
            reason: error.to_string(),
        })
    }

    fn write(&self, folder: &RunFolder) -> Result<(), ConfigError> {
        let text = serde_json::to_vec_pretty(self).map_err(|error| ConfigError::CorruptState {
            path: folder.environment(),
            reason: error.to_string(),
        })?;
        write_atomically(&folder.environment(), &text)?;
        Ok(())
    }
}

/// What run `run_id` ran, as its folder records it: the environment and the selection's edits
/// (its WandB name and time are not kept).
pub fn run_selection(home: &Path, run_id: &RunId) -> Result<Selection, ConfigError> {
    let ran = RunEnvironment::read(&RunFolder::of(home, run_id), run_id.as_str())?;
    Ok(Selection {
        environment: ran.environment,
        wandb_name: String::new(),
        selected_at: String::new(),
        edits: ran.edits,
    })
}

/// The kind of environment the run whose folder is `folder` ran, as its `environment.json`
/// records it (a run recorded before verifiers: Atropos); `None` when it holds none readable.
pub fn run_environment_kind(folder: &RunFolder) -> Option<rl_settings::EnvironmentKind> {
    // Never blocks: what is no regular file there (a FIFO) is refused, not read.
    let text = rl_settings::read_text(&folder.environment()).ok()?;
    serde_json::from_str::<RunEnvironment>(&text)
        .ok()
        .map(|ran| ran.environment.kind)
}

/// SHA-256 of `bytes`, lowercase hex: the digest rl records of files and compares requests by.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    use std::fmt::Write as _;
    let digest = sha2::Sha256::digest(bytes);
    digest
        .iter()
        .fold(String::with_capacity(64), |mut hex, byte| {
            let _ = write!(hex, "{byte:02x}");
            hex
        })
}

/// Writes the run's `config.yaml` and `environment.json` in its folder; returns the config's
/// path.
pub(crate) fn write(
    home: &Path,
    run_id: &RunId,
    environment: &RunEnvironment,
    config: &RunConfig,
) -> Result<PathBuf, ConfigError> {
    let folder = RunFolder::of(home, run_id);
    create_private_dir(folder.dir())?;
    let path = folder.config();
    let header = format!(
        "# Run {run_id} of {} ({}), written by rl. Holds no secret: keys reach the processes \
         through their environment.\n",
        environment.environment.key, environment.environment.class_name
    );
    let text = header + &config.to_yaml()?;
    write_atomically(&path, text.as_bytes())?;
    environment.write(&folder)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local_engine(model: &str, most_rank: i64) -> Settings {
        let mut settings = Settings::default();
        settings.engine.kind = rl_settings::EngineKind::Local;
        settings.engine.base_model = Some(PathBuf::from(model));
        settings
            .engine
            .backend_config
            .insert("max_lora_rank".to_owned(), Value::Int(most_rank));
        settings
    }

    fn config(model: &str, rank: i64) -> RunConfig {
        let mut config = RunConfig {
            env: std::collections::BTreeMap::new(),
            openai: Vec::new(),
            tinker: std::collections::BTreeMap::new(),
            slurm: false,
            testing: false,
        };
        config.tinker.insert("base_model".to_owned(), model.into());
        config
            .tinker
            .insert("lora_rank".to_owned(), Value::Int(rank));
        config
    }

    #[test]
    fn a_lora_rank_above_the_engines_most_is_refused_before_the_start() {
        let settings = local_engine("/models/a", 8);
        assert!(check_engine_fits(&settings, &config("/models/a", 8)).is_ok());
        let refused = check_engine_fits(&settings, &config("/models/a", 32))
            .unwrap_err()
            .to_string();
        assert!(
            refused.contains("lora_rank 32") && refused.contains("max_lora_rank"),
            "{refused}"
        );
        // A hosted service's limits are its own to say.
        assert!(check_engine_fits(&Settings::default(), &config("m", 512)).is_ok());
    }

    #[test]
    fn every_loss_and_clip_bound_trains_on_the_local_engine() {
        let settings = local_engine("/models/a", 8);
        for (loss, bounds) in [
            ("ppo", None),
            ("ppo", Some(("clip_high", 1.28))),
            ("cispo", None),
            ("cispo", Some(("clip_low", 0.5))),
            ("dro", None),
        ] {
            let mut asking = config("/models/a", 8);
            asking.tinker.insert("loss".to_owned(), loss.into());
            if let Some((key, value)) = bounds {
                asking.tinker.insert(key.to_owned(), Value::Float(value));
            }
            assert!(
                check_engine_fits(&settings, &asking).is_ok(),
                "{loss} {bounds:?}"
            );
            assert!(check_engine_fits(&Settings::default(), &asking).is_ok());
        }
    }

    #[test]
    fn a_run_is_continued_only_on_the_base_model_it_trained() {
        let parent = RunId::parse("0badc0de").unwrap();
        let settings = local_engine("/models/b", 8);
        assert!(check_same_base_model(&settings, &parent, &config("/models/b", 8)).is_ok());
        let refused = check_same_base_model(&settings, &parent, &config("/models/a", 8))
            .unwrap_err()
            .to_string();
        assert!(
            refused.contains("base model /models/a") && refused.contains("now /models/b"),
            "{refused}"
        );
    }
}
