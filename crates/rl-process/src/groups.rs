//! Stopping a component means stopping its whole process group: children and grandchildren
//! that a component left behind go with it.

use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde::Serialize;

use crate::identity::members_of_group;

/// How long to wait for the group to vanish after SIGKILL before reporting survivors.
const AFTER_KILL: Duration = Duration::from_secs(3);
const POLL: Duration = Duration::from_millis(25);

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StopOutcome {
    /// The group was empty within the grace period after SIGTERM.
    pub graceful: bool,
    /// Processes still in the group after SIGKILL (should be none; reported, never hidden).
    pub survivors: Vec<u32>,
}

/// SIGTERM to every process of group `pgid`, up to `grace` for them to go, then SIGKILL.
/// Returns once the group is empty (zombies waiting for their parent do not count) or
/// SIGKILL's wait ran out.
pub fn stop_group(pgid: u32, grace: Duration) -> StopOutcome {
    let Ok(raw) = i32::try_from(pgid) else {
        return StopOutcome {
            graceful: true,
            survivors: Vec::new(),
        };
    };
    if raw <= 1 {
        // Group 0 is our own and 1 is init's: never signal those.
        return StopOutcome {
            graceful: true,
            survivors: Vec::new(),
        };
    }
    let group = Pid::from_raw(raw);
    let _ = killpg(group, Signal::SIGTERM);
    if wait_until_empty(raw, grace) {
        return StopOutcome {
            graceful: true,
            survivors: Vec::new(),
        };
    }
    let _ = killpg(group, Signal::SIGKILL);
    wait_until_empty(raw, AFTER_KILL);
    StopOutcome {
        graceful: false,
        survivors: members_of_group(raw),
    }
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
