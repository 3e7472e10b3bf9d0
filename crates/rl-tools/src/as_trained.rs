//! A run as it trained, what a test of its checkpoints runs: its config, the environment and
//! edits it recorded at its start, the operator's settings with its own `env` fields locked
//! (`AsTrained`), and the slice of its environment's items it kept out of training
//! (`held_out_of`). `rl compare` and the evaluations during training both start from it.

use rl_settings::{RunConfig, RunFolder, RunId};

use crate::{Tools, ToolsError};

/// A run as it trained: what a test of its checkpoints runs.
pub(crate) struct AsTrained {
    pub(crate) config: RunConfig,
    /// The environment and edits the run recorded at its start, not the selection's: another
    /// may be selected meanwhile.
    pub(crate) selection: rl_config::Selection,
    /// The operator's settings with the run's own `env` fields locked.
    pub(crate) settings: rl_settings::Settings,
}

impl Tools {
    /// Run `id` as it trained, from what its folder recorded.
    pub(crate) fn as_trained(&self, id: &RunId) -> Result<AsTrained, ToolsError> {
        let config = RunConfig::read(&RunFolder::of(self.home(), id).config())?;
        let selection = rl_config::run_selection(self.home(), id)?;
        let mut settings = rl_settings::Settings::clone(&*self.settings()?);
        settings.locked.env.clone_from(&config.env);
        Ok(AsTrained {
            config,
            selection,
            settings,
        })
    }

    /// The slice of its environment's items run `id` kept out of training, if any.
    pub(crate) fn held_out_of(&self, id: &RunId) -> Option<rl_settings::HeldOut> {
        rl_process::LaunchRecord::load(self.home(), id)
            .ok()?
            .held_out()
    }
}
