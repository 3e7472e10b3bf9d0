//! An environment's configuration without running environment code: its fields read from
//! source, the operator's locked settings, the persisted selection and edits, and the run
//! config YAML that the Atropos environment and the Tinker trainer both read.

mod error;
mod extract;
mod introspect;
mod rules;
mod run_config;
mod schema;
mod secrets;
mod service;
mod settings;
mod store;
mod validate;
mod value;

pub use error::ConfigError;
pub use extract::config_schema;
pub use introspect::{Disagreement, Introspected, IntrospectedField, compare, introspect};
pub use run_config::{RUN_CONFIG_FILE, RunConfig, RunEndpoints, RunId, RunWandb, run_dir};
pub use schema::{ConfigSchema, Constraints, DefaultValue, EnumMember, FieldSpec, FieldType};
pub use secrets::{SECRET_NAMES, Secrets};
pub use service::{
    ConfigService, CurrentConfig, CurrentField, DiffEntry, EditReport, RunConfigFile,
    SelectionReport, ValueOrigin, WANDB_PROJECT_FIELD,
};
pub use settings::{
    Backend, Commands, ComponentGpus, DEFAULT_STATUS_CHECK_INTERVAL_SECS, EngineKind,
    EngineSettings, InferenceSettings, Locked, RunTiming, SETTINGS_FILE, Settings, SlurmSettings,
    default_home,
};
pub use store::{
    Edit, Section, SelectedEnvironment, Selection, lock_exclusive, refuse_special_file,
    write_atomically,
};
pub use validate::{Checked, MAX_STRING_CHARS, check_value};
pub use value::Value;
