//! What each component of a run finds in its environment: the operator's `child_environment`,
//! rl's own variables (the run, its folder, WandB's), what the component's part needs (the
//! Python paths, the trainer's evaluation command, the environment's counts, held-out slice and
//! go file), and which secrets it is kept from. Secrets themselves travel only in the
//! supervisor's environment, never here.

use rl_python::{Imports, PythonLauncher};
use rl_settings::{RunFolder, RunId, Secrets, Settings};

use super::EvaluateCommand;
use crate::ProcessError;
use crate::state::Component;
use crate::strays::RUN_DIR_VARIABLE;

/// What every component's variables are made from.
pub(super) struct RunVariables<'a> {
    pub(super) settings: &'a Settings,
    pub(super) secrets: &'a Secrets,
    pub(super) run_id: &'a RunId,
    pub(super) dir: &'a std::path::Path,
    pub(super) launcher: &'a PythonLauncher<'a>,
    pub(super) evaluate: &'a EvaluateCommand,
    pub(super) local_engine: bool,
    pub(super) environment_kind: rl_settings::EnvironmentKind,
}

/// A component's environment, as its [`crate::LaunchSpec`] holds it.
pub(super) struct ComponentVariables {
    /// Added to what it inherits.
    pub(super) env: Vec<(String, String)>,
    /// The secrets removed from what it inherits.
    pub(super) env_remove: Vec<String>,
}

/// The variables `component` (run with `args`) gets.
pub(super) fn of_component(
    component: Component,
    args: &[String],
    run: &RunVariables<'_>,
) -> Result<ComponentVariables, ProcessError> {
    let folder = RunFolder::at(run.dir);
    let path = |path: std::path::PathBuf| path.to_string_lossy().into_owned();
    let mut env: Vec<(String, String)> = run
        .settings
        .child_environment
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if let Some(mode) = wandb_mode_without_key(run.settings, run.secrets) {
        env.push(("WANDB_MODE".to_owned(), mode.to_owned()));
    }
    env.push(("RL_RUN_ID".to_owned(), run.run_id.to_string()));
    // Also how the run's processes are found once its supervisor is gone.
    env.push((RUN_DIR_VARIABLE.to_owned(), path(run.dir.to_owned())));
    // WandB keeps each run's `run-<id>.wandb` file (offline or not) under this folder: the
    // run's metrics are then readable without network, and runs never mix.
    env.push(("WANDB_DIR".to_owned(), path(run.dir.to_owned())));
    match component {
        Component::Engine => env.push(run.launcher.python_path(Imports::Alone)),
        Component::Trainer => {
            env.push(run.launcher.python_path(Imports::WithOperators));
            env.push((
                rl_python::EVALUATE_COMMAND_VARIABLE.to_owned(),
                run.evaluate.for_run(run.run_id)?,
            ));
            if run.local_engine {
                env.push((rl_python::LOCAL_ENGINE_VARIABLE.to_owned(), "1".to_owned()));
            }
        }
        // Through `rl_env` (the default command), the environment keeps the held-out slice out
        // of training; `rl compare` asks it.
        Component::Env => {
            env.push(run.launcher.python_path(Imports::WithOperators));
            // Read by `rl_env` before it imports atroposlib (a verifiers Python has none).
            env.push((
                rl_settings::KIND_VARIABLE.to_owned(),
                run.environment_kind.as_str().to_owned(),
            ));
            // `rl_env` counts the groups made there (the supervisor reads them).
            env.push((
                crate::GROUPS_FILE_VARIABLE.to_owned(),
                path(folder.env_groups()),
            ));
            env.extend(rl_python::items_variables(
                rl_python::Items::Training,
                run.settings.held_out,
            ));
            // Through `rl_env` alone: it holds the environment's registration until this file
            // exists, so its setup can run first (the supervisor's turn).
            if rl_python::runs_env_runner(args) {
                env.push((rl_python::ENV_GO_VARIABLE.to_owned(), path(folder.env_go())));
            }
        }
        Component::Api => {}
    }
    let kept = secrets_for(component, run.local_engine, &run.settings.environment_keys);
    let env_remove = rl_settings::withheld_from_child(&kept);
    Ok(ComponentVariables { env, env_remove })
}

/// Which secrets each component receives; the others are removed from its environment. With a
/// local engine the trainer's Tinker is that engine: the hosted one's key has nowhere to go.
/// The environment runs the environment's own code: WandB's key (its logging) and the keys the
/// operator allows environments (`environment_keys`), nothing more.
pub(super) fn secrets_for(
    component: Component,
    local_engine: bool,
    environment_keys: &[String],
) -> Vec<&str> {
    match component {
        Component::Engine | Component::Api => Vec::new(),
        Component::Trainer if local_engine => vec!["WANDB_API_KEY"],
        Component::Trainer => vec!["TINKER_API_KEY", "WANDB_API_KEY"],
        Component::Env => std::iter::once("WANDB_API_KEY")
            .chain(environment_keys.iter().map(String::as_str))
            .collect(),
    }
}

/// WandB's mode for a run's components when the operator set none and there is no WandB key:
/// offline. Online, WandB would refuse to start without a key (no terminal to log in from) and
/// take the component down; offline it writes the run's files into the run folder, where rl
/// reads the metrics.
fn wandb_mode_without_key(settings: &Settings, secrets: &Secrets) -> Option<&'static str> {
    (secrets.get("WANDB_API_KEY").is_none()
        && !settings.child_environment.contains_key("WANDB_MODE"))
    .then_some("offline")
}
