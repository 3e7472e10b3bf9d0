//! The run config a new run gets: the operator's locked values, the selection's edits, the
//! run's WandB names and its own addresses, written in the run's folder.

use std::path::{Path, PathBuf};

use rl_settings::{
    RUN_CONFIG_FILE, RunConfig, RunEndpoints, RunId, Settings, create_private_dir, run_dir,
    write_atomically,
};

use crate::ConfigError;
use crate::store::{Section, Selection};

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

    RunConfig {
        env,
        openai,
        tinker,
        slurm: locked.slurm,
        testing: locked.testing,
    }
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
