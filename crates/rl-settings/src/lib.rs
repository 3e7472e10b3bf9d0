//! The state directory's own files, below everything that reads Python: the operator's settings
//! (`config.toml` and `RL_*` variables), the secrets (`.env` and the environment), run ids and
//! folders, a run's config file (the YAML the environment and the trainer read), and how rl
//! writes and locks files so that several processes share them safely.

mod environment_python;
mod error;
mod files;
mod kind;
mod quoted;
mod run_config;
mod run_folder;
mod run_id;
mod secrets;
mod settings;
mod settings_file;
pub mod trainer;
mod value;
mod withheld;

pub use environment_python::{
    ENVIRONMENTS_DIR, INSTALLED_SUFFIX, InstalledPackage, VENVS_DIR, environment_file_name,
    environment_python, installed_packages, own_environment_venv,
};
pub use error::SettingsError;
pub use files::{
    create_private_dir, file_kind, lock_exclusive, lock_exclusive_or_wait, read_text,
    refuse_special_file, write_atomically,
};
pub use kind::{EnvironmentKind, KIND_VARIABLE};
pub use quoted::{QUOTED_CHARS, quoted, with_quotes_bounded};
pub use run_config::{RunConfig, RunEndpoints, RunWandb};
pub use run_folder::RunFolder;
pub use run_id::{RunId, SweepId, run_dir};
pub use secrets::{SECRET_NAMES, Secrets, tinker_key_problem};
pub use settings::{
    AgentInstalls, AgentSettings, Backend, Caps, CheckpointPolicy, Commands, ComponentGpus,
    DEFAULT_LOG_LIMIT_BYTES, DEFAULT_STATUS_CHECK_INTERVAL_SECS, EngineKind, EngineSettings,
    HOSTED_TINKER_URL, HeldOut, InferenceSettings, Locked, Prices, RunPrices, RunTiming,
    SETTINGS_FILE, Settings, SlurmSettings, TokenPrices, VerifiersSettings, default_home,
};
pub use settings_file::{SettingEdit, read_setting, write_settings};
pub use trainer::Trainer;
pub use value::Value;
pub use withheld::{register_own_secret, withheld_from_child, withhold};
