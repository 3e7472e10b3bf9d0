//! What one model's run in a test left: how its process ended, and its figures. Part of the
//! test's `report.json`; the verdict is drawn from these.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::analysis::Figures;
use crate::error::PreflightError;
use crate::files::read_json;
use crate::folder::PreflightFolder;

/// How a model's `process` run ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ModelOutcome {
    Succeeded,
    /// Exited non-zero or by a signal.
    Failed {
        code: Option<i32>,
        signal: Option<i32>,
    },
    /// Cut at the test's timeout; its whole process group was stopped.
    TimedOut {
        after_secs: f64,
    },
    /// Ended by a stop of the test asked by another process (`rl preflight stop`).
    Stopped,
    /// Could not be started at all.
    NotStarted {
        reason: String,
    },
    /// Ended early: its environment made `run.no_signal_warn_groups` groups, none with scores
    /// that differ (counted by rl's environment runner); `cause` says how they scored.
    NoSignal {
        cause: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelReport {
    pub model: String,
    #[serde(flatten)]
    pub outcome: ModelOutcome,
    pub duration_secs: f64,
    #[serde(flatten)]
    pub figures: Figures,
    /// The exception (or our note) that explains a failure, from its log.
    pub error: Option<String>,
    /// The last lines of its log when it did not succeed (keys redacted).
    pub error_tail: Vec<String>,
    pub log_path: PathBuf,
    pub output_path: PathBuf,
}

/// What rl's environment runner drew for a model asked the held-out items.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct DrawnItems {
    /// `held-out slice` or `eval split` (the environment's own).
    pub source: String,
    pub fraction: f64,
    pub seed: u64,
    /// Distinct items asked.
    pub drawn: u32,
    /// Items passed over: outside the slice, or asked already.
    pub skipped: u32,
    /// The source had no more items before the test's steps were done.
    pub exhausted: bool,
}

impl ModelReport {
    /// What the runner drew, when the model ran through it (`None` for an ordinary test).
    pub fn drawn_items(&self) -> Result<Option<DrawnItems>, PreflightError> {
        let path = PreflightFolder::items_beside(&self.output_path);
        if !path.is_file() {
            return Ok(None);
        }
        read_json(&path).map(Some)
    }
}
