//! A process known by its pid together with its start time, so a pid the kernel has handed to
//! another process since is never mistaken for ours.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessIdentity {
    pub pid: u32,
    /// Clock ticks since boot at which the process started (`/proc/<pid>/stat`, field 22).
    pub start_ticks: u64,
}

impl ProcessIdentity {
    /// The identity of a live process, or `None` when there is no such process.
    pub fn of(pid: u32) -> Option<Self> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        Some(Self {
            pid,
            start_ticks: parse_stat(&stat)?.start_ticks,
        })
    }

    /// Whether this very process still exists (and is not a zombie waiting to be reaped).
    pub fn is_alive(&self) -> bool {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)) else {
            return false;
        };
        parse_stat(&stat).is_some_and(|s| s.start_ticks == self.start_ticks && s.state != 'Z')
    }

    /// Sends SIGTERM to this very process (not to a process that took its pid since); whether
    /// it was sent.
    pub fn terminate(&self) -> bool {
        let Ok(pid) = i32::try_from(self.pid) else {
            return false;
        };
        self.is_alive()
            && nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            )
            .is_ok()
    }
}

/// This boot's id (`/proc/sys/kernel/random/boot_id`): pids and start times mean nothing across
/// a restart, so identities are only compared within the boot they were recorded in.
pub fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|id| id.trim().to_owned())
        .filter(|id| !id.is_empty())
}

/// Whether `recorded` (a `boot_id()` kept with some identities) names another boot than this
/// one: then none of those processes can exist, and their pids name others. Unknown on either
/// side counts as this boot.
pub fn is_another_boot(recorded: Option<&str>) -> bool {
    match (recorded, boot_id()) {
        (Some(then), Some(now)) => then != now,
        _ => false,
    }
}

pub(crate) struct Stat {
    pub state: char,
    pub ppid: u32,
    pub pgid: i32,
    pub start_ticks: u64,
}

/// `pid (comm) state ppid pgrp …`: the command name may hold spaces and parentheses, so
/// fields are counted from the last `)`.
pub(crate) fn parse_stat(stat: &str) -> Option<Stat> {
    let after = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // After `)`: [0]=state (field 3), [1]=ppid (4), [2]=pgrp (5), [19]=starttime (22).
    Some(Stat {
        state: fields.first()?.chars().next()?,
        ppid: fields.get(1)?.parse().ok()?,
        pgid: fields.get(2)?.parse().ok()?,
        start_ticks: fields.get(19)?.parse().ok()?,
    })
}

/// Every process of this machine (as this pid namespace sees it) with what its `stat` says;
/// processes that end while being read are left out.
pub(crate) fn processes() -> Vec<(u32, Stat)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            Some((pid, parse_stat(&stat)?))
        })
        .collect()
}

/// Live (non-zombie) processes whose process group is `pgid`.
pub fn members_of_group(pgid: i32) -> Vec<u32> {
    processes()
        .into_iter()
        .filter(|(_, stat)| stat.pgid == pgid && stat.state != 'Z')
        .map(|(pid, _)| pid)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_is_alive_and_a_changed_start_time_is_not() {
        let me = ProcessIdentity::of(std::process::id()).unwrap();
        assert!(me.is_alive());
        let impostor = ProcessIdentity {
            start_ticks: me.start_ticks + 1,
            ..me
        };
        assert!(!impostor.is_alive());
    }

    #[test]
    fn command_names_with_spaces_and_parentheses_parse() {
        let stat =
            "1234 (my (odd) name) S 1 1234 1234 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 98765 0 0";
        let parsed = parse_stat(stat).unwrap();
        assert_eq!(
            (parsed.state, parsed.ppid, parsed.pgid, parsed.start_ticks),
            ('S', 1, 1234, 98765)
        );
    }

    #[test]
    fn nonexistent_pid_has_no_identity() {
        assert!(ProcessIdentity::of(u32::MAX - 1).is_none());
    }
}
