//! The agents' status-check limit: one check of a run per interval. Kept in the state
//! directory because each `rl tool call` is a process of its own.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::ToolsError;

const FILE: &str = "status-checks.json";
/// Held while a check is decided and recorded, so two agents checking at once cannot both be
/// let through, nor lose each other's records.
const LOCK_FILE: &str = "status-checks.lock";

pub(crate) struct StatusChecks {
    home: PathBuf,
    path: PathBuf,
}

impl StatusChecks {
    pub(crate) fn new(home: &Path) -> Self {
        Self {
            home: home.to_owned(),
            path: home.join(FILE),
        }
    }

    /// Records a check of `run_id` at `now` and returns `None`, or, when the last check was
    /// less than `interval` seconds ago, records nothing and returns the seconds left.
    pub(crate) fn admit(
        &self,
        run_id: &str,
        interval: f64,
        now: f64,
    ) -> Result<Option<f64>, ToolsError> {
        let _lock = rl_settings::lock_exclusive(&self.home.join(LOCK_FILE))?;
        let mut checks = self.read();
        if let Some(last) = checks.get(run_id) {
            let left = interval - (now - last);
            // A clock set back must not lock an agent out for longer than the interval.
            if left > 0.0 && left <= interval {
                return Ok(Some(left));
            }
        }
        checks.retain(|_, last| now - *last < interval);
        checks.insert(run_id.to_owned(), now);
        self.write(&checks)?;
        Ok(None)
    }

    /// An unreadable file only forgets earlier checks: it is advisory, and rewritten whole.
    fn read(&self) -> BTreeMap<String, f64> {
        if rl_settings::refuse_special_file(&self.path).is_err() {
            // A FIFO would block the read; the atomic write replaces it.
            return BTreeMap::new();
        }
        std::fs::read(&self.path)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default()
    }

    fn write(&self, checks: &BTreeMap<String, f64>) -> Result<(), ToolsError> {
        let bytes = serde_json::to_vec(checks)
            .map_err(|error| ToolsError::Internal(format!("status checks: {error}")))?;
        Ok(rl_settings::write_atomically(&self.path, &bytes)?)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn one_check_per_interval_per_run_kept_across_readers() {
        let home = tempfile::tempdir().unwrap();
        let checks = StatusChecks::new(home.path());
        assert_eq!(checks.admit("aaaa0000", 100.0, 1000.0).unwrap(), None);
        assert_eq!(checks.admit("aaaa0000", 100.0, 1030.0).unwrap(), Some(70.0));
        // Another run has a check of its own, and another reader sees the first one's.
        assert_eq!(checks.admit("bbbb0000", 100.0, 1030.0).unwrap(), None);
        let other = StatusChecks::new(home.path());
        assert_eq!(other.admit("aaaa0000", 100.0, 1099.0).unwrap(), Some(1.0));
        assert_eq!(other.admit("aaaa0000", 100.0, 1100.0).unwrap(), None);
    }

    #[test]
    fn concurrent_checks_of_one_run_let_exactly_one_through() {
        let home = tempfile::tempdir().unwrap();
        let admitted: usize = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..16)
                .map(|_| {
                    scope.spawn(|| {
                        let checks = StatusChecks::new(home.path());
                        checks.admit("aaaa0000", 100.0, 1000.0).unwrap().is_none()
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|worker| usize::from(worker.join().unwrap()))
                .sum()
        });
        assert_eq!(admitted, 1);
        // Checks of different runs at once keep each other's records.
        std::thread::scope(|scope| {
            for run in ["b0000000", "c0000000", "d0000000", "e0000000"] {
                let home = home.path();
                scope.spawn(move || StatusChecks::new(home).admit(run, 100.0, 1000.0).unwrap());
            }
        });
        let kept = StatusChecks::new(home.path()).read();
        assert_eq!(kept.len(), 5, "{kept:?}");
    }

    #[test]
    fn a_clock_set_back_or_a_damaged_file_never_locks_an_agent_out() {
        let home = tempfile::tempdir().unwrap();
        let checks = StatusChecks::new(home.path());
        assert_eq!(checks.admit("aaaa0000", 100.0, 5000.0).unwrap(), None);
        assert_eq!(checks.admit("aaaa0000", 100.0, 10.0).unwrap(), None);
        std::fs::write(home.path().join(FILE), "{half").unwrap();
        assert_eq!(checks.admit("aaaa0000", 100.0, 20.0).unwrap(), None);
        assert_eq!(checks.admit("aaaa0000", 100.0, 30.0).unwrap(), Some(90.0));
    }
}
