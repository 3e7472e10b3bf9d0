//! A run's launch plan: the rendered command lines, the ports and the timing, written by
//! whoever starts the run and read by its supervisor. It records exactly what ran, and holds no
//! secret.

use std::path::{Path, PathBuf};

use rl_settings::{HeldOut, RunFolder, RunId, RunTiming, SlurmSettings};
use serde::{Deserialize, Serialize};

use crate::ProcessError;
use crate::launcher::LaunchSpec;
use crate::state::Component;

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
        RunFolder::of(home, run_id).launch_plan()
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

    /// The slice of its environment's items the run kept out of training, if it kept one, as
    /// its environment's command was told: what a run started before its launch record held
    /// the slice says of it ([`LaunchRecord::held_out`] is the way).
    pub(crate) fn held_out(&self) -> Option<HeldOut> {
        let env = self.spec(Component::Env)?;
        rl_python::held_out_in_command(&env.args, &env.env)
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
        write(&Self::path(home, &self.run_id), self)
    }

    pub fn load(home: &Path, run_id: &RunId) -> Result<Self, ProcessError> {
        read(&Self::path(home, run_id))
    }
}

/// `launch.json` as a run's start writes it: the launch plan its supervisor follows, and what
/// else the run started with that its readers need (`rl compare`, an evaluation, a resume).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaunchRecord {
    #[serde(flatten)]
    pub plan: LaunchPlan,
    /// The slice of its environment's items the run keeps out of training; a fraction of 0
    /// when it keeps none (also when its environment's command does not run rl's runner,
    /// which alone keeps a slice out). Runs started before rl recorded it have none here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_out: Option<HeldOut>,
}

impl LaunchRecord {
    /// The record of a run about to start with `plan`, keeping out what its environment's
    /// command keeps out of `slice` (the operator's, or the parent's of a resumed run).
    pub fn new(plan: LaunchPlan, slice: HeldOut) -> Self {
        let runs_the_runner = plan
            .spec(Component::Env)
            .is_some_and(|env| rl_python::runs_env_runner(&env.args));
        let held_out = if runs_the_runner {
            slice
        } else {
            HeldOut {
                fraction: 0.0,
                ..slice
            }
        };
        Self {
            plan,
            held_out: Some(held_out),
        }
    }

    /// The slice of its environment's items the run kept out of training, if it kept one:
    /// as recorded, or for a run started before rl recorded it, as its environment's command
    /// was told.
    pub fn held_out(&self) -> Option<HeldOut> {
        match self.held_out {
            Some(slice) => slice.keeps_out().then_some(slice),
            None => self.plan.held_out(),
        }
    }

    pub fn save(&self, home: &Path) -> Result<(), ProcessError> {
        write(&LaunchPlan::path(home, &self.plan.run_id), self)
    }

    pub fn load(home: &Path, run_id: &RunId) -> Result<Self, ProcessError> {
        read(&LaunchPlan::path(home, run_id))
    }
}

fn write(path: &Path, value: &impl Serialize) -> Result<(), ProcessError> {
    let text = serde_json::to_vec_pretty(value)
        .map_err(|error| ProcessError::Store(format!("launch plan: {error}")))?;
    std::fs::write(path, text).map_err(|source| ProcessError::Io {
        action: "write",
        path: path.to_path_buf(),
        source,
    })
}

fn read<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, ProcessError> {
    let text = std::fs::read(path).map_err(|source| ProcessError::Io {
        action: "read",
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_slice(&text).map_err(|error| {
        ProcessError::Store(format!("{} is not a launch plan: {error}", path.display()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SLICE: HeldOut = HeldOut {
        fraction: 0.25,
        seed: 7,
    };

    fn plan(run_id: &RunId, env_args: &[&str]) -> LaunchPlan {
        let spec = |component, args: &[&str], env| LaunchSpec {
            component,
            program: "/venv/bin/python".into(),
            args: args.iter().map(|arg| (*arg).to_owned()).collect(),
            cwd: "/tree".into(),
            env,
            env_remove: Vec::new(),
            log_path: format!("/runs/{component}.log").into(),
        };
        LaunchPlan {
            run_id: run_id.clone(),
            api_port: 8000,
            trainer_port: 8001,
            engine_port: None,
            components: vec![
                spec(
                    Component::Api,
                    &["-m", "atroposlib.cli.run_api"],
                    Vec::new(),
                ),
                spec(
                    Component::Env,
                    env_args,
                    rl_python::items_variables(rl_python::Items::Training, SLICE),
                ),
            ],
            timing: RunTiming::default(),
            slurm: None,
        }
    }

    #[test]
    fn a_run_records_the_slice_it_keeps_out_beside_the_plan_its_supervisor_reads() {
        let home = tempfile::tempdir().unwrap();
        let id = RunId::parse("0123abcd").unwrap();
        std::fs::create_dir_all(RunFolder::of(home.path(), &id).dir()).unwrap();
        let record = LaunchRecord::new(plan(&id, &["-m", "rl_env", "env.py", "serve"]), SLICE);
        record.save(home.path()).unwrap();
        let read = LaunchRecord::load(home.path(), &id).unwrap();
        assert_eq!(read, record);
        assert_eq!(read.held_out(), Some(SLICE));
        assert_eq!(LaunchPlan::load(home.path(), &id).unwrap(), record.plan);
    }

    #[test]
    fn an_environment_not_run_through_rls_runner_keeps_nothing_out() {
        let id = RunId::parse("0123abcd").unwrap();
        let record = LaunchRecord::new(plan(&id, &["env.py", "serve"]), SLICE);
        assert_eq!(record.held_out.map(|slice| slice.fraction), Some(0.0));
        assert_eq!(record.held_out(), None);
    }

    #[test]
    fn the_slice_of_a_run_started_before_it_was_recorded_is_read_from_its_command() {
        let home = tempfile::tempdir().unwrap();
        let id = RunId::parse("0123abcd").unwrap();
        std::fs::create_dir_all(RunFolder::of(home.path(), &id).dir()).unwrap();
        plan(&id, &["-m", "rl_env", "env.py", "serve"])
            .save(home.path())
            .unwrap();
        let read = LaunchRecord::load(home.path(), &id).unwrap();
        assert_eq!(read.held_out, None);
        assert_eq!(read.held_out(), Some(SLICE));
    }
}
