//! An environment's configuration without running environment code: its fields read from
//! source, the operator's locked settings, the persisted selection and edits, and the run
//! config YAML that the Atropos environment and the Tinker trainer both read.

mod error;
mod extract;
mod schema;
mod value;

pub use error::ConfigError;
pub use extract::config_schema;
pub use schema::{ConfigSchema, Constraints, DefaultValue, EnumMember, FieldSpec, FieldType};
pub use value::Value;
