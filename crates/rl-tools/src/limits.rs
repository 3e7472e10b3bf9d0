//! The bounds of what a caller may ask, in one place both the tools' schemas (`tool_specs`) and
//! the operations that enforce them read, so that neither depends on the other.

/// The most settings one fork changes: enough for any real change, few enough to read back.
pub(crate) const MAX_FORK_SETTINGS: usize = 32;

/// The most steps one extension adds: a typo (an extra zero or three) must not start a run of
/// months; a longer one is a few extensions.
pub(crate) const MAX_EXTRA_STEPS: u64 = 100_000;

/// The most points one sweep may have: each is a run of several processes.
pub const MAX_SWEEP_POINTS: usize = 64;
/// The most values one setting may take in a sweep.
pub(crate) const MAX_SWEEP_VALUES: usize = 32;
/// The most settings one sweep may vary.
pub(crate) const MAX_SWEEP_SETTINGS: usize = 8;

/// The shortest wait `rl_wait_training` takes: below it, a wait is a poll, and polling is what
/// `rl_check_status`'s interval limits.
pub(crate) const MIN_WAIT_SECONDS: f64 = 10.0;
/// The longest: one call should not outlive what any client keeps a request open for.
pub(crate) const MAX_WAIT_SECONDS: f64 = 600.0;
