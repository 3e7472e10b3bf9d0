//! Run ids and where a run's files live in the state directory.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::SettingsError;

/// A run's id: 8 lowercase hex characters from a v4 UUID, as the original tool made them.
/// Ids from outside are parsed before they touch a path.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RunId(String);

impl TryFrom<String> for RunId {
    type Error = SettingsError;
    fn try_from(text: String) -> Result<Self, Self::Error> {
        Self::parse(&text)
    }
}

impl From<RunId> for String {
    fn from(id: RunId) -> Self {
        id.0
    }
}

impl RunId {
    pub fn generate() -> Self {
        let uuid = uuid::Uuid::new_v4().simple().to_string();
        Self(uuid[..8].to_owned())
    }

    pub fn parse(text: &str) -> Result<Self, SettingsError> {
        let valid = text.len() == 8
            && text
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if valid {
            Ok(Self(text.to_owned()))
        } else {
            Err(SettingsError::InvalidInput {
                what: format!("run id '{}'", crate::quoted(text)),
                reason: "run ids are 8 lowercase hexadecimal characters, e.g. 3f9a1c2e".to_owned(),
            })
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A sweep's id: `sw-` and 8 lowercase hex characters, told apart from a run's at a glance.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SweepId(String);

const SWEEP_PREFIX: &str = "sw-";

impl SweepId {
    pub fn generate() -> Self {
        Self(format!("{SWEEP_PREFIX}{}", RunId::generate()))
    }

    pub fn parse(text: &str) -> Result<Self, SettingsError> {
        match text.strip_prefix(SWEEP_PREFIX).map(RunId::parse) {
            Some(Ok(_)) => Ok(Self(text.to_owned())),
            _ => Err(SettingsError::InvalidInput {
                what: format!("sweep id '{}'", crate::quoted(text)),
                reason: "sweep ids are sw- and 8 lowercase hexadecimal characters, e.g. \
                         sw-3f9a1c2e"
                    .to_owned(),
            }),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for SweepId {
    type Error = SettingsError;
    fn try_from(text: String) -> Result<Self, Self::Error> {
        Self::parse(&text)
    }
}

impl From<SweepId> for String {
    fn from(id: SweepId) -> Self {
        id.0
    }
}

impl fmt::Display for SweepId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The folder of a run in the state directory.
pub fn run_dir(home: &Path, run_id: &RunId) -> PathBuf {
    crate::RunFolder::of(home, run_id).dir().to_owned()
}
