//! A run's launch plan: the rendered command lines, the ports and the timing, written by
//! whoever starts the run and read by its supervisor. It records exactly what ran, and holds no
//! secret.

use std::path::{Path, PathBuf};

use rl_settings::{RunId, RunTiming, SlurmSettings, run_dir};
use serde::{Deserialize, Serialize};

use crate::ProcessError;
use crate::launcher::LaunchSpec;
use crate::state::Component;

pub(crate) const PLAN_FILE: &str = "launch.json";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaunchPlan {
    pub run_id: RunId,
    pub api_port: u16,
    pub trainer_port: u16,
    /// The local engine's port, for a run that starts one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_port: Option<u16>,
    /// In start order: the engine (when the run has one), api, trainer, env.
    pub components: Vec<LaunchSpec>,
    pub timing: RunTiming,
    /// The SLURM job's settings as they were when the run started, for a run on SLURM; a run
    /// without them (and every plan of earlier versions) runs on this machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm: Option<SlurmSettings>,
}

impl LaunchPlan {
    pub fn path(home: &Path, run_id: &RunId) -> PathBuf {
        run_dir(home, run_id).join(PLAN_FILE)
    }

    pub fn spec(&self, component: Component) -> Option<&LaunchSpec> {
        self.components.iter().find(|s| s.component == component)
    }

    /// The run's components in start order: the optional engine only when it has one.
    pub fn start_order(&self) -> Vec<Component> {
        Component::START_ORDER
            .into_iter()
            .filter(|component| self.spec(*component).is_some())
            .collect()
    }

    /// Every port the run's components listen on.
    pub(crate) fn ports(&self) -> Vec<u16> {
        Component::START_ORDER
            .into_iter()
            .filter_map(|component| self.port(component))
            .collect()
    }

    /// The slice of its environment's items the run kept out of training, if it kept one.
    pub fn held_out(&self) -> Option<rl_settings::HeldOut> {
        let env = self.spec(Component::Env)?;
        rl_python::kept_out(&env.args, &env.env)
    }

    /// The port `component` listens on, for those that listen.
    pub fn port(&self, component: Component) -> Option<u16> {
        match component {
            Component::Engine => self.engine_port,
            Component::Api => Some(self.api_port),
            Component::Trainer => Some(self.trainer_port),
            Component::Env => None,
        }
    }

    pub fn save(&self, home: &Path) -> Result<(), ProcessError> {
        let path = Self::path(home, &self.run_id);
        let text = serde_json::to_vec_pretty(self)
            .map_err(|error| ProcessError::Store(format!("launch plan: {error}")))?;
        std::fs::write(&path, text).map_err(|source| ProcessError::Io {
            action: "write",
            path,
            source,
        })
    }

    pub fn load(home: &Path, run_id: &RunId) -> Result<Self, ProcessError> {
        let path = Self::path(home, run_id);
        let text = std::fs::read(&path).map_err(|source| ProcessError::Io {
            action: "read",
            path: path.clone(),
            source,
        })?;
        serde_json::from_slice(&text).map_err(|error| {
            ProcessError::Store(format!("{} is not a launch plan: {error}", path.display()))
        })
    }
}
