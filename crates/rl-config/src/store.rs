//! The selection and its edits, persisted in the state directory so that separate processes
//! (two CLI calls, an MCP server and a CLI) see the same state.
//!
//! `selection.json` is replaced atomically (write a temporary file, then rename), and every
//! read-modify-write holds an exclusive `flock` on `selection.lock`, so concurrent writers
//! never lose each other's updates and readers never see half a file.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use rl_settings::{
    Value, create_private_dir, lock_exclusive, refuse_special_file, write_atomically,
};

use crate::ConfigError;

const SELECTION_FILE: &str = "selection.json";
const LOCK_FILE: &str = "selection.lock";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Selection {
    pub environment: SelectedEnvironment,
    /// `{env}-{YYYYmmdd-HHMMSS}`, set at selection as the original tool did.
    pub wandb_name: String,
    pub selected_at: String,
    /// The latest edit of each field, in the order fields were first edited.
    pub edits: Vec<Edit>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SelectedEnvironment {
    pub key: String,
    pub name: String,
    pub class_name: String,
    /// Relative to `environments_dir`.
    pub file: String,
    pub environments_dir: PathBuf,
    /// Which API it is written against (selections made before verifiers: Atropos).
    #[serde(default)]
    pub kind: rl_settings::EnvironmentKind,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Edit {
    pub field: String,
    pub section: Section,
    pub value: Value,
    pub edited_at: String,
}

/// Which section of the run config an edit goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Section {
    Env,
    Tinker,
}

pub(crate) struct Store {
    home: PathBuf,
}

impl Store {
    /// Opens (creating, owner-only) the state directory.
    pub(crate) fn open(home: &Path) -> Result<Self, ConfigError> {
        create_private_dir(home)?;
        Ok(Self {
            home: home.to_owned(),
        })
    }

    pub(crate) fn home(&self) -> &Path {
        &self.home
    }

    pub(crate) fn selection(&self) -> Result<Option<Selection>, ConfigError> {
        read_selection(&self.home.join(SELECTION_FILE))
    }

    /// Runs `change` on the current selection under the lock; what it returns as `Some` is
    /// written. An error leaves the stored state exactly as it was.
    pub(crate) fn update<T>(
        &self,
        change: impl FnOnce(Option<Selection>) -> Result<(Option<Selection>, T), ConfigError>,
    ) -> Result<T, ConfigError> {
        let _lock = lock_exclusive(&self.home.join(LOCK_FILE))?;
        let path = self.home.join(SELECTION_FILE);
        let (next, result) = change(read_selection(&path)?)?;
        if let Some(next) = next {
            let text =
                serde_json::to_vec_pretty(&next).map_err(|error| ConfigError::CorruptState {
                    path: path.clone(),
                    reason: error.to_string(),
                })?;
            write_atomically(&path, &text)?;
        }
        Ok(result)
    }
}

fn read_selection(path: &Path) -> Result<Option<Selection>, ConfigError> {
    refuse_special_file(path)?;
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(ConfigError::Io {
                action: "cannot read",
                path: path.to_owned(),
                source,
            });
        }
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|error| ConfigError::CorruptState {
            path: path.to_owned(),
            reason: error.to_string(),
        })
}
