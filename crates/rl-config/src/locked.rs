//! The operator's locked settings checked against what atroposlib accepts: read from its own
//! config classes' source, which rl-settings cannot parse (it has no Python parser, on purpose).

use std::path::Path;

use rl_settings::{Settings, SettingsError};

use crate::ConfigError;
use crate::validate::check_value;

/// The operator's settings as every face reads them: [`Settings::load`], then the locked values
/// checked, so a lock atroposlib would refuse is an error at start rather than at a run's.
pub fn load_settings(
    home: &Path,
    environment: impl IntoIterator<Item = (String, String)>,
) -> Result<Settings, ConfigError> {
    let settings = Settings::load(home, environment)?;
    check_locked(&settings)?;
    Ok(settings)
}

fn invalid(message: String) -> ConfigError {
    ConfigError::Settings(SettingsError::Invalid(message))
}

/// The operator's locked values, checked as an agent's edits are (type, range, the rules
/// atroposlib and the trainer impose): `[locked.env]` against atroposlib's `BaseEnvConfig`
/// (a field only some environment declares is checked when that one is selected), each
/// `[[locked.openai]]` entry against its `APIServerConfig`, whose keys are all known.
pub(crate) fn check_locked(settings: &Settings) -> Result<(), ConfigError> {
    let refused =
        |table: &str, error: ConfigError| invalid(format!("[{table}] is refused: {error}"));
    let env_fields = crate::extract::builtin_env_fields()?;
    for (name, value) in &settings.locked.env {
        if let Some(spec) = env_fields.iter().find(|spec| &spec.name == name) {
            check_value(spec, value).map_err(|error| refused("locked.env", error))?;
        }
    }
    let server_fields = crate::extract::builtin_server_fields()?;
    for server in &settings.locked.openai {
        for (name, value) in server {
            let Some(spec) = server_fields.iter().find(|spec| &spec.name == name) else {
                let known: Vec<&str> = server_fields
                    .iter()
                    .map(|spec| spec.name.as_str())
                    .collect();
                return Err(invalid(format!(
                    "[[locked.openai]] sets `{name}`, which atroposlib's server config does \
                     not have; its fields: {}",
                    known.join(", ")
                )));
            };
            check_value(spec, value).map_err(|error| refused("locked.openai", error))?;
        }
    }
    Ok(())
}
