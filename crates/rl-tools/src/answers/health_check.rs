//! `rl_health_check`'s answer: each thing checked, whether it is ok and, when not, the fix. The
//! checks themselves are `health_check.rs`'s.

use serde::Serialize;

use super::algorithm::LossTable;

/// One thing checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    pub name: String,
    pub ok: bool,
    /// What was found (a version, a path, a count).
    pub detail: String,
    /// What to do when it is not ok.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
    /// A missing optional thing (a key only some tools use) does not make the machine unfit.
    pub required: bool,
}

/// `rl_health_check`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HealthReport {
    /// Every required check is ok.
    pub healthy: bool,
    pub checks: Vec<Check>,
    /// The losses the configured engine takes; `null` when the settings cannot be read.
    pub losses: Option<LossTable>,
}
