/// What rl-process can fail at.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error("run store: {0}")]
    Store(String),
    #[error("no run with id '{0}'; list runs to see the ids")]
    UnknownRun(String),
    #[error("a run with id '{0}' exists already")]
    DuplicateRun(String),
    #[error("{action} {path}: {source}")]
    Io {
        action: &'static str,
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("no free loopback port: {0}")]
    NoFreePort(std::io::Error),
    #[error("cannot watch for signals: {0}")]
    Signal(std::io::Error),
    #[error("readiness probe: {0}")]
    Probe(String),
    #[error(transparent)]
    Settings(#[from] rl_settings::SettingsError),
    #[error(transparent)]
    Programs(#[from] rl_python::PythonError),
    #[error(
        "TINKER_API_KEY is not set: put it in the environment or in {dotenv}; to train without a Tinker account, run the local engine ([engine] kind = \"local\" and base_model in config.toml); a trainer that needs no key (the fixture stack) is declared with trainer_needs_tinker_key = false"
    )]
    MissingTinkerKey { dotenv: std::path::PathBuf },
    #[error("{problem}; correct it in the environment or in {dotenv} (nothing was started)")]
    MalformedTinkerKey {
        problem: String,
        dotenv: std::path::PathBuf,
    },
    #[error(
        "no environments folder is configured (runs start from it): set environments_dir (or tinker_atropos_root, a tinker-atropos tree) in config.toml, RL_ENVIRONMENTS_DIR, or pass --envs-dir"
    )]
    NoRoot,
    #[error(
        "the trainer's port {port} (trainer_port in config.toml) is in use, by another run's trainer or another program; stop that first, or leave trainer_port unset for a trainer that reads its port from the run config"
    )]
    FixedPortInUse { port: u16 },
    #[error(
        "{active} runs are unfinished and max_active_runs is {max}: stop one (rl runs stop) or \
         raise max_active_runs in config.toml"
    )]
    TooManyRuns { active: u32, max: u32 },
    #[error(
        "{going} sweeps are going and max_active_sweeps is {max}: stop one (rl sweep stop, \
         rl_stop_sweep) or raise max_active_sweeps in config.toml"
    )]
    TooManySweeps { going: u32, max: u32 },
    #[error(
        "run {parent} is being resumed already, as run {child}: follow that one, or stop it \
         first"
    )]
    AlreadyResumed { parent: String, child: String },
    #[error("cannot start the supervisor of run {run_id}: {reason}")]
    Supervisor { run_id: String, reason: String },
    #[error("the supervisor cannot run: {0}")]
    SupervisorSetup(String),
    #[error("cannot start an async runtime: {0}")]
    Runtime(std::io::Error),
    #[error("SLURM: {0}")]
    Slurm(String),
    /// The cluster ended the run's job before the run could start in it.
    #[error("{}", .0.message)]
    SlurmEnded(crate::launcher::ClusterEnd),
    #[error("cannot start {component}: {reason}")]
    Launch {
        component: crate::Component,
        reason: String,
    },
}

impl From<rusqlite::Error> for ProcessError {
    fn from(error: rusqlite::Error) -> Self {
        if error.sqlite_error_code() == Some(rusqlite::ErrorCode::ReadOnly) {
            return ProcessError::Store(
                "the state directory is read-only for this user: runs can be listed and \
                 watched here, not started, stopped or changed (ask its owner, or set RL_HOME \
                 to a folder of your own)"
                    .to_owned(),
            );
        }
        ProcessError::Store(error.to_string())
    }
}
