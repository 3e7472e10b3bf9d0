//! How a run continues another (a resume, a fork, an extension), as the store records it:
//! the parent, the step, the kind, and the settings it changed.

use std::collections::BTreeMap;

use rl_settings::{RunId, Value};

use crate::ProcessError;

/// Where a run that continues another comes from: its parent, the parent's step whose saved
/// state it continues after, how it continues, and the settings it changed (a fork's).
#[derive(Debug, Clone, PartialEq)]
pub struct Lineage {
    pub parent: RunId,
    pub step: u64,
    pub kind: LineageKind,
    /// Field (bare name) → the value the child runs with instead of its parent's.
    pub changes: BTreeMap<String, Value>,
}

/// How a run continues its parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineageKind {
    /// From its last saved state, as it was: one parent has at most one going resume.
    Resume,
    /// From a saved state of the caller's choosing, with changed settings: a branch.
    Fork,
    /// A completed (or ended) run given more steps.
    Extension,
}

impl LineageKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Resume => "resume",
            Self::Fork => "fork",
            Self::Extension => "extension",
        }
    }

    fn parse(text: Option<&str>) -> Self {
        match text {
            Some("fork") => Self::Fork,
            Some("extension") => Self::Extension,
            // Runs resumed before schema 5 recorded no kind.
            _ => Self::Resume,
        }
    }

    /// Whether it continues its parent's line (a resume, an extension), of which a parent has
    /// one going at a time; forks branch off and may be many.
    pub fn continues(self) -> bool {
        !matches!(self, Self::Fork)
    }
}

/// A run's lineage from its row (columns 14 to 17), its parent `parent`.
pub(super) fn lineage_from(
    row: &rusqlite::Row<'_>,
    parent: &str,
) -> rusqlite::Result<Result<Lineage, ProcessError>> {
    let step = u64::try_from(row.get::<_, Option<i64>>(15)?.unwrap_or(0)).unwrap_or(0);
    let kind = LineageKind::parse(row.get::<_, Option<String>>(16)?.as_deref());
    let changes = match row.get::<_, Option<String>>(17)? {
        None => BTreeMap::new(),
        Some(text) => match serde_json::from_str(&text) {
            Ok(changes) => changes,
            Err(error) => {
                return Ok(Err(ProcessError::Store(format!(
                    "the changes recorded of a run of {parent}: {error}"
                ))));
            }
        },
    };
    Ok(RunId::parse(parent)
        .map_err(|error| ProcessError::Store(format!("a run's parent: {error}")))
        .map(|parent| Lineage {
            parent,
            step,
            kind,
            changes,
        }))
}
