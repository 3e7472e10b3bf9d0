//! A run's folder in the state directory, and the one place the names of what is in it are
//! spelled: rl's crates ask `RunFolder` for a path, and the trainer reads the names it writes
//! from the contract file (`trainer::contract_document`).

use std::path::{Path, PathBuf};

use crate::RunId;

/// `runs/<run_id>/` of a state directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunFolder {
    dir: PathBuf,
}

impl RunFolder {
    /// The config both the environment and the trainer read.
    pub const CONFIG: &str = "config.yaml";
    /// The environment the run runs, its file's digest and edits (rl-config's `RunEnvironment`).
    pub const ENVIRONMENT: &str = "environment.json";
    /// The rendered commands, ports and timing the starter wrote for the supervisor.
    pub const LAUNCH_PLAN: &str = "launch.json";
    /// The groups the environment made, counted by rl's environment runner.
    pub const ENV_GROUPS: &str = "env-groups.json";
    /// Where rl's trainer is in its step, rewritten whole at each change of phase.
    pub const TRAINER_PHASE: &str = "trainer-phase.json";
    /// Written by the supervisor when the environment, started first for its setup, may
    /// register with run-api (the others are ready).
    pub const ENV_GO: &str = "env-go";
    /// The local engine's database and checkpoints.
    pub const ENGINE: &str = "engine";
    /// Below `ENGINE`: the checkpoints the local engine wrote.
    pub const ENGINE_CHECKPOINTS: &str = "checkpoints";
    /// rl's trainer: one row per step.
    pub const METRICS: &str = "metrics.jsonl";
    /// rl's trainer: one row per checkpoint.
    pub const CHECKPOINTS: &str = "checkpoints.jsonl";
    /// rl's trainer: the batches of the last steps, `step_NNNNNN.jsonl`.
    pub const ROLLOUTS: &str = "rollouts";
    /// Evaluations during training and `rl runs evaluate`'s tests.
    pub const EVALUATIONS: &str = "evaluations";
    /// The saved states rl pruned.
    pub const PRUNED: &str = "pruned.json";
    /// The run's `WANDB_DIR`.
    pub const WANDB: &str = "wandb";
    /// The SLURM backend's batch script.
    pub const SLURM_SCRIPT: &str = "slurm.sbatch";

    pub fn of(home: &Path, run_id: &RunId) -> Self {
        Self {
            dir: home.join("runs").join(run_id.as_str()),
        }
    }

    /// A run folder given by its path (a run's record, a test's temporary folder).
    pub fn at(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn config(&self) -> PathBuf {
        self.dir.join(Self::CONFIG)
    }

    pub fn environment(&self) -> PathBuf {
        self.dir.join(Self::ENVIRONMENT)
    }

    pub fn launch_plan(&self) -> PathBuf {
        self.dir.join(Self::LAUNCH_PLAN)
    }

    /// The log of a component (`engine`, `api`, `trainer`, `env`) or of the supervisor.
    pub fn log(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.log"))
    }

    pub fn env_groups(&self) -> PathBuf {
        self.dir.join(Self::ENV_GROUPS)
    }

    /// The environment's signal to register (`RL_ENV_GO_FILE`): its setup ran while the
    /// other components started.
    pub fn env_go(&self) -> PathBuf {
        self.dir.join(Self::ENV_GO)
    }

    /// Where rl's trainer is in its step (`{"phase", "step", "since"}`), written whole at each
    /// change of phase: what a stalled run's health flag names.
    pub fn trainer_phase(&self) -> PathBuf {
        self.dir.join(Self::TRAINER_PHASE)
    }

    pub fn engine(&self) -> PathBuf {
        self.dir.join(Self::ENGINE)
    }

    pub fn engine_checkpoints(&self) -> PathBuf {
        self.engine().join(Self::ENGINE_CHECKPOINTS)
    }

    pub fn metrics(&self) -> PathBuf {
        self.dir.join(Self::METRICS)
    }

    pub fn checkpoints(&self) -> PathBuf {
        self.dir.join(Self::CHECKPOINTS)
    }

    pub fn rollouts(&self) -> PathBuf {
        self.dir.join(Self::ROLLOUTS)
    }

    pub fn evaluations(&self) -> PathBuf {
        self.dir.join(Self::EVALUATIONS)
    }

    pub fn pruned(&self) -> PathBuf {
        self.dir.join(Self::PRUNED)
    }

    pub fn wandb(&self) -> PathBuf {
        self.dir.join(Self::WANDB)
    }

    pub fn slurm_script(&self) -> PathBuf {
        self.dir.join(Self::SLURM_SCRIPT)
    }

    /// What SLURM writes of job `job` (its batch script's own output).
    pub fn slurm_output(&self, job: &str) -> PathBuf {
        self.dir.join(format!("slurm-{job}.out"))
    }
}

/// The names the trainer and the environment runner write or read in a run folder, as the
/// contract file gives them to them.
pub(crate) fn names_for_python() -> serde_json::Value {
    serde_json::json!({
        "environment": RunFolder::ENVIRONMENT,
        "metrics": RunFolder::METRICS,
        "checkpoints": RunFolder::CHECKPOINTS,
        "rollouts": RunFolder::ROLLOUTS,
        "trainer_phase": RunFolder::TRAINER_PHASE,
    })
}
