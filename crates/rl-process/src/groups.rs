//! Stopping a component means stopping its whole process group: children and grandchildren
//! that a component left behind go with it.

use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde::Serialize;

use crate::identity::{ProcessIdentity, members_of_group};

/// How long to wait for the group to vanish after SIGKILL before reporting survivors.
const AFTER_KILL: Duration = Duration::from_secs(3);
const POLL: Duration = Duration::from_millis(25);

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StopOutcome {
    /// The group had no process left to stop (its leader had ended and taken its children).
    pub was_empty: bool,
    /// The group was empty within the grace period after SIGTERM.
    pub graceful: bool,
    /// Processes still in the group after SIGKILL (should be none; reported, never hidden).
    pub survivors: Vec<u32>,
}

/// SIGTERM to every process of group `pgid`, up to `grace` for them to go, then SIGKILL.
/// Returns once the group is empty (zombies waiting for their parent do not count) or
/// SIGKILL's wait ran out.
pub fn stop_group(pgid: u32, grace: Duration) -> StopOutcome {
    let empty = StopOutcome {
        was_empty: true,
        graceful: true,
        survivors: Vec::new(),
    };
    // Group 0 is our own and 1 is init's: never signal those.
    let Some(raw) = i32::try_from(pgid).ok().filter(|raw| *raw > 1) else {
        return empty;
    };
    if members_of_group(raw).is_empty() {
        return empty;
    }
    let group = Pid::from_raw(raw);
    let _ = killpg(group, Signal::SIGTERM);
    if wait_until_empty(raw, grace) {
        return StopOutcome {
            was_empty: false,
            ..empty
        };
    }
    let _ = killpg(group, Signal::SIGKILL);
    wait_until_empty(raw, AFTER_KILL);
    StopOutcome {
        was_empty: false,
        graceful: false,
        survivors: members_of_group(raw),
    }
}

/// The longest `stop_group` can take beyond its grace period.
pub const KILL_WAIT: Duration = AFTER_KILL;

/// Whether the process group led (once) by `leader` is still the one we started: its leader is
/// that very process — running, or a zombie not yet reaped while the rest of its group lives
/// on — or the leader has ended and no other process has its pid (Linux does not hand out a pid
/// while a group of that id has members). Only valid within the boot the leader was started in;
/// callers check the boot first.
pub fn group_is_ours(leader: ProcessIdentity) -> bool {
    ProcessIdentity::of(leader.pid).is_none_or(|now| now.start_ticks == leader.start_ticks)
}

fn wait_until_empty(pgid: i32, limit: Duration) -> bool {
    let started = Instant::now();
    loop {
        if members_of_group(pgid).is_empty() {
            return true;
        }
        if started.elapsed() >= limit {
            return false;
        }
        std::thread::sleep(POLL);
    }
}
