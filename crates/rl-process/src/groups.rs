//! Stopping a component means stopping its whole process group: children and grandchildren
//! that a component left behind go with it.

use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use crate::identity::{ProcessIdentity, members_of_group};

/// How long to wait for the group to vanish after SIGKILL before reporting survivors.
const AFTER_KILL: Duration = Duration::from_secs(3);
const POLL: Duration = Duration::from_millis(25);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopOutcome {
    /// The group had no process left to stop (its leader had ended and taken its children).
    pub was_empty: bool,
    /// The group was empty within the grace period after SIGTERM.
    pub graceful: bool,
    /// Processes still in the group after SIGKILL (should be none; reported, never hidden).
    pub survivors: Vec<u32>,
}

impl StopOutcome {
    /// A group that had nothing left to stop.
    pub fn nothing_to_stop() -> Self {
        Self {
            was_empty: true,
            graceful: true,
            survivors: Vec::new(),
        }
    }

    /// How the group ended, in a few words for a person.
    pub fn how(&self) -> &'static str {
        if self.graceful {
            "ended on SIGTERM"
        } else if self.survivors.is_empty() {
            "killed after the grace period"
        } else {
            "survived SIGKILL"
        }
    }
}

/// What a stopped group is called in a stop's messages, the supervisor's and a caller's alike:
/// the component and its group, or what it left behind when it had ended by itself before the
/// stop (its children kept the group alive).
pub(crate) fn stopped_name(
    component: crate::state::Component,
    pgid: u32,
    had_ended: bool,
) -> String {
    if had_ended {
        format!("what {component} left behind (group {pgid})")
    } else {
        format!("{component} (group {pgid})")
    }
}

/// How each named group ended, for a person: `env ended on SIGTERM, trainer killed after the
/// grace period`; `None` when no group had anything to stop.
pub fn describe_stops<N: std::fmt::Display>(stops: &[(N, StopOutcome)]) -> Option<String> {
    (!stops.is_empty()).then(|| {
        stops
            .iter()
            .map(|(name, outcome)| format!("{name} {}", outcome.how()))
            .collect::<Vec<_>>()
            .join(", ")
    })
}

/// SIGTERM to every process of group `pgid`, up to `grace` for them to go, then SIGKILL.
/// Returns once the group is empty (zombies waiting for their parent do not count) or
/// SIGKILL's wait ran out. Only for a group whose leader is a child not reaped yet (its pid
/// cannot be reused); a group known by a leader's identity is stopped by
/// `stop_recorded_group`.
pub fn stop_group(pgid: u32, grace: Duration) -> StopOutcome {
    stop_group_while(pgid, grace, || true)
}

/// Stops the group `leader` started, when it is still that group (`group_is_ours`) and has
/// members; `None` when there was nothing of it to stop. The group's id is checked again
/// before each signal and while waiting: once the group has emptied, its id may go to a group
/// another process leads, which must not get the SIGKILL. The caller checks the boot first.
pub fn stop_recorded_group(leader: ProcessIdentity, grace: Duration) -> Option<StopOutcome> {
    Some(stop_group_while(leader.pid, grace, || {
        group_is_ours(leader)
    }))
    .filter(|outcome| !outcome.was_empty)
}

/// `stop_group`, the group counting as empty as soon as `is_ours` says it is another's.
fn stop_group_while(pgid: u32, grace: Duration, is_ours: impl Fn() -> bool) -> StopOutcome {
    let empty = StopOutcome::nothing_to_stop();
    // Group 0 is our own and 1 is init's: never signal those.
    let Some(raw) = i32::try_from(pgid).ok().filter(|raw| *raw > 1) else {
        return empty;
    };
    let members = || {
        if is_ours() {
            members_of_group(raw)
        } else {
            Vec::new()
        }
    };
    if members().is_empty() {
        return empty;
    }
    let group = Pid::from_raw(raw);
    let _ = killpg(group, Signal::SIGTERM);
    // Asked again right before the SIGKILL: the group may have emptied since the last look.
    if wait_until_empty(members, grace) || !is_ours() {
        return StopOutcome {
            was_empty: false,
            ..empty
        };
    }
    let _ = killpg(group, Signal::SIGKILL);
    wait_until_empty(members, AFTER_KILL);
    StopOutcome {
        was_empty: false,
        graceful: false,
        survivors: members(),
    }
}

/// The longest `stop_group` can take beyond its grace period.
pub(crate) const KILL_WAIT: Duration = AFTER_KILL;

/// Whether the process group led (once) by `leader` is still the one we started: its leader is
/// that very process — running, or a zombie not yet reaped while the rest of its group lives
/// on — or the leader has ended and no other process has its pid (Linux does not hand out a pid
/// while a group of that id has members). Only valid within the boot the leader was started in;
/// callers check the boot first.
pub fn group_is_ours(leader: ProcessIdentity) -> bool {
    ProcessIdentity::of(leader.pid).is_none_or(|now| now.start_ticks == leader.start_ticks)
}

fn wait_until_empty(members: impl Fn() -> Vec<u32>, limit: Duration) -> bool {
    let started = Instant::now();
    loop {
        if members().is_empty() {
            return true;
        }
        if started.elapsed() >= limit {
            return false;
        }
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::CommandExt;

    use super::*;

    /// Once a stopped group's id is another's (its pid reused by a new group's leader), that
    /// group gets no SIGKILL at the end of the grace period.
    #[test]
    fn a_group_whose_id_became_anothers_is_not_killed() {
        // Ignores SIGTERM: only a SIGKILL ends it.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "trap '' TERM; while true; do sleep 0.1; done"])
            .process_group(0)
            .spawn()
            .unwrap();
        let pgid = child.id();
        let started = Instant::now();
        // Its first `sleep` means the trap is set.
        while members_of_group(i32::try_from(pgid).unwrap()).len() < 2 {
            assert!(started.elapsed() < Duration::from_secs(30), "never looped");
            std::thread::sleep(POLL);
        }
        let looks = std::cell::Cell::new(0);
        // Ours at the first look only, as if its id had gone to another group right after.
        let outcome = stop_group_while(pgid, Duration::from_millis(300), || {
            looks.set(looks.get() + 1);
            looks.get() == 1
        });
        let alive = child.try_wait().unwrap().is_none();
        let _ = child.kill();
        let _ = child.wait();
        assert!(alive, "SIGKILLed: {outcome:?}");
        assert!(outcome.survivors.is_empty(), "{outcome:?}");
    }
}
