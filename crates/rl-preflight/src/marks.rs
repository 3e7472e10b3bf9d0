//! How a test's processes are known wherever they went: every model's process (and the
//! model server's) carries its test's folder and its name in its environment, and whatever it
//! starts inherits them, so a process that left its group (a `setsid` daemon) is still found
//! and ended with its test.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rl_process::StrayOutcome;

/// SIGTERM, then this long, then SIGKILL, for a model's group (or marked process) that is
/// stopped.
pub(crate) const STOP_GRACE: Duration = Duration::from_secs(3);

/// The variable naming a model's test folder in the environment of its processes.
pub const TEST_DIR_VARIABLE: &str = "RL_TEST_DIR";
/// The variable naming the model (its file stem in the test, `01-qwen_qwen3-8b`) in the
/// environment of its processes.
pub const TEST_MODEL_VARIABLE: &str = "RL_TEST_MODEL";

/// How the processes of one model of a test are known, wherever they went: by their
/// environment, which whatever they start inherits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelMarks {
    pub test_dir: PathBuf,
    /// The model's file stem in its test: unique within it.
    pub model: String,
}

impl ModelMarks {
    /// The variables a model's process is started with.
    pub fn environment(&self) -> [(&'static str, OsString); 2] {
        [
            (TEST_DIR_VARIABLE, self.test_dir.clone().into_os_string()),
            (TEST_MODEL_VARIABLE, OsString::from(&self.model)),
        ]
    }

    /// Ends every process carrying these marks (SIGTERM, up to `grace`, SIGKILL), each signal
    /// to the very process found.
    pub(crate) fn end_processes(&self, grace: Duration) -> StrayOutcome {
        let also = [(TEST_MODEL_VARIABLE, self.model.as_str())];
        rl_process::end_strays(
            || rl_process::carrying_dir(TEST_DIR_VARIABLE, &self.test_dir, &also),
            grace,
        )
    }
}

/// Ends every process carrying the test's folder, whichever model's (SIGTERM, up to `grace`,
/// SIGKILL).
pub(crate) fn end_test_processes(dir: &Path, grace: Duration) -> StrayOutcome {
    rl_process::end_strays(
        || rl_process::carrying_dir(TEST_DIR_VARIABLE, dir, &[]),
        grace,
    )
}
