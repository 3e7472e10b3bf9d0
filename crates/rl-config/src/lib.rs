//! An environment's configuration without running environment code: its fields read from
//! source, the operator's locks checked against what atroposlib accepts, the persisted selection
//! and edits, and the run config a new run gets.

mod changes;
mod error;
mod extract;
mod introspect;
mod locked;
mod lookup;
mod new_run;
mod rules;
mod run_setting;
mod schema;
mod service;
mod store;
mod trainer_settings;
mod validate;

pub use error::ConfigError;
pub(crate) use error::{LOCKED_ENV, LOCKED_TINKER};
pub use extract::{BASE_ENV_CONFIG, config_schema};
pub use introspect::{Disagreement, Introspected, IntrospectedField, compare, introspect};
pub use locked::load_settings;
pub use lookup::{FoundEnvironment, find_environment, installed_scans, unlisted_in_subfolders};
pub use new_run::{run_environment_kind, run_selection, sha256_hex};
/// How an environment's file runs (a script, or a module of its package): discovery's answer,
/// which a run's record and a pre-flight's command both use.
pub use rl_discovery::{EnvironmentKind, PackageModule, package_module, run_module};
pub use run_setting::RunSetting;
pub use schema::{ConfigSchema, Constraints, DefaultValue, EnumMember, FieldSpec, FieldType};
pub use service::{
    ConfigService, CurrentConfig, CurrentField, DiffEntry, EditReport, ResumeFrom, ResumedConfig,
    RunConfigFile, SelectionReport, ValueOrigin, WANDB_PROJECT_FIELD, install_call,
    scan_environments,
};
pub use store::{Edit, Section, SelectedEnvironment, Selection};
pub use trainer_settings::{TrainerOrigin, TrainerSetting};
pub use validate::{Checked, MAX_STRING_CHARS, check_value};
