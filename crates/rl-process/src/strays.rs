//! What a run's components leave outside their process groups. A descendant that calls `setsid`
//! (a daemon, a service a library starts for itself) is in a group of its own, and a stop of
//! the components' groups misses it. The supervisor is the child subreaper of everything below
//! it, so such a process stays its descendant however its parents end, and is found by walking
//! down from the supervisor. Once the supervisor itself is gone, a run's processes are found by
//! the run folder they carry in their environment. A pre-flight's models are marked and found
//! the same way, by their test's folder.

use std::path::Path;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;

use crate::groups::KILL_WAIT;
use crate::identity::{ProcessIdentity, processes};

/// The variable every component gets with its run's folder; its descendants inherit it.
pub const RUN_DIR_VARIABLE: &str = "RL_RUN_DIR";
const POLL: Duration = Duration::from_millis(25);
/// Processes named one by one in an event; the rest are counted.
const NAMED_AT_MOST: usize = 10;

/// A process of the run found outside its components' groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stray {
    pub identity: ProcessIdentity,
    /// Its command name (`/proc/<pid>/comm`): never its arguments, which may hold anything.
    pub name: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StrayOutcome {
    /// Every process found and signalled.
    pub ended: Vec<Stray>,
    /// They were all gone within the grace period after SIGTERM.
    pub graceful: bool,
    /// Processes still there after SIGKILL (should be none; reported, never hidden).
    pub survivors: Vec<u32>,
}

impl StrayOutcome {
    /// What was found and how it ended, for the run's events; `None` when nothing was found.
    pub fn describe(&self) -> Option<String> {
        self.summary().map(|summary| {
            format!("processes the components left outside their process groups: {summary}")
        })
    }

    /// The processes found, by pid and command name (the rest counted), and how they ended;
    /// `None` when nothing was found.
    pub fn summary(&self) -> Option<String> {
        if self.ended.is_empty() {
            return None;
        }
        let mut named: Vec<String> = self
            .ended
            .iter()
            .take(NAMED_AT_MOST)
            .map(|stray| format!("{} ({})", stray.identity.pid, stray.name))
            .collect();
        if self.ended.len() > NAMED_AT_MOST {
            named.push(format!("and {} more", self.ended.len() - NAMED_AT_MOST));
        }
        let how = if self.graceful {
            "ended on SIGTERM".to_owned()
        } else if self.survivors.is_empty() {
            "killed (SIGKILL) after the grace period".to_owned()
        } else {
            format!("processes {:?} survived SIGKILL", self.survivors)
        };
        Some(format!("{}; {how}", named.join(", ")))
    }
}

/// The live processes below `ancestor`: its children, theirs, and so on.
pub fn descendants_of(ancestor: u32) -> Vec<Stray> {
    let all = processes();
    let mut found = Vec::new();
    let mut parents = vec![ancestor];
    while let Some(parent) = parents.pop() {
        for (pid, stat) in &all {
            if stat.ppid == parent && *pid != ancestor {
                parents.push(*pid);
                if stat.state != 'Z' {
                    found.push(stray(*pid, stat.start_ticks));
                }
            }
        }
    }
    found
}

/// The live processes (but this one) whose environment names `run_dir` as the run's folder:
/// the components and whatever they started that kept its environment.
pub fn carrying_run_dir(run_dir: &Path) -> Vec<Stray> {
    carrying_dir(RUN_DIR_VARIABLE, run_dir, &[])
}

/// The live processes (but this one) whose environment names the folder `dir` (however
/// written) in `variable`, and sets each variable of `also` to its value: the processes a
/// folder's owner (a run, a pre-flight test) marked, and whatever they started that kept their
/// environment.
pub fn carrying_dir(variable: &str, dir: &Path, also: &[(&str, &str)]) -> Vec<Stray> {
    let Ok(wanted) = std::fs::canonicalize(dir) else {
        // Without its folder, nothing was started in it.
        return Vec::new();
    };
    let me = std::process::id();
    processes()
        .into_iter()
        .filter(|(pid, stat)| *pid != me && stat.state != 'Z')
        .filter(|(pid, _)| {
            let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            let value_of = |name: &str| {
                environ
                    .split(|byte| *byte == 0)
                    .find_map(|entry| entry.strip_prefix(name.as_bytes())?.strip_prefix(b"="))
            };
            let names_dir = value_of(variable)
                .and_then(|dir| std::str::from_utf8(dir).ok())
                .and_then(|dir| std::fs::canonicalize(dir).ok())
                .is_some_and(|dir| dir == wanted);
            names_dir
                && also
                    .iter()
                    .all(|(name, value)| value_of(name) == Some(value.as_bytes()))
        })
        .map(|(pid, stat)| stray(pid, stat.start_ticks))
        .collect()
}

fn stray(pid: u32, start_ticks: u64) -> Stray {
    let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    Stray {
        identity: ProcessIdentity { pid, start_ticks },
        name: name.trim().to_owned(),
    }
}

/// SIGTERM to every process `find` names, up to `grace` for them to go, then SIGKILL. `find` is
/// asked again as they go, so what they start meanwhile is ended too. Each signal goes to the
/// very process found (its pid and start time), never to a pid the kernel has handed on.
pub fn end_strays(find: impl Fn() -> Vec<Stray>, grace: Duration) -> StrayOutcome {
    let mut outcome = StrayOutcome {
        graceful: true,
        ..StrayOutcome::default()
    };
    let started = Instant::now();
    let mut signal = Signal::SIGTERM;
    loop {
        let left = find();
        if left.is_empty() {
            return outcome;
        }
        for stray in left {
            // A process that has exec'd since has another name: it is known by its identity.
            if !outcome
                .ended
                .iter()
                .any(|seen| seen.identity == stray.identity)
            {
                outcome.ended.push(stray.clone());
            } else if signal == Signal::SIGTERM {
                // Told once already; it has the grace period to act.
                continue;
            }
            signal_if_same(stray.identity, signal);
        }
        let elapsed = started.elapsed();
        if elapsed >= grace + KILL_WAIT {
            break;
        }
        if elapsed >= grace && signal == Signal::SIGTERM {
            signal = Signal::SIGKILL;
            outcome.graceful = false;
            continue;
        }
        std::thread::sleep(POLL);
    }
    outcome.survivors = find().into_iter().map(|stray| stray.identity.pid).collect();
    outcome
}

fn signal_if_same(identity: ProcessIdentity, signal: Signal) {
    let Ok(raw) = i32::try_from(identity.pid) else {
        return;
    };
    if raw > 1 && identity.is_alive() {
        let _ = kill(Pid::from_raw(raw), signal);
    }
}

/// Collects the exit of every ended child of this process that is not one of `launched` and
/// not in this process's own group: the orphans it adopted as subreaper. Its own children (the
/// components, which their waiting tasks reap, and commands it runs, which stay in its group)
/// are left to whoever waits for them.
pub(crate) fn reap_adopted(launched: &[u32]) {
    let me = std::process::id();
    let own_group = nix::unistd::getpgrp().as_raw();
    for (pid, stat) in processes() {
        let adopted = stat.ppid == me && stat.pgid != own_group && !launched.contains(&pid);
        if adopted
            && stat.state == 'Z'
            && let Ok(raw) = i32::try_from(pid)
        {
            let _ = waitpid(Pid::from_raw(raw), Some(WaitPidFlag::WNOHANG));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stray(pid: u32, name: &str) -> Stray {
        Stray {
            identity: ProcessIdentity {
                pid,
                start_ticks: 1,
            },
            name: name.to_owned(),
        }
    }

    #[test]
    fn an_outcome_names_each_process_by_pid_and_command_and_counts_the_rest() {
        assert_eq!(StrayOutcome::default().describe(), None);
        let outcome = StrayOutcome {
            ended: (0..12).map(|n| stray(100 + n, "sleep")).collect(),
            graceful: false,
            survivors: Vec::new(),
        };
        let text = outcome.describe().unwrap();
        assert!(
            text.starts_with("processes the components left outside their process groups: 100 (sleep), 101 (sleep)"),
            "{text}"
        );
        assert!(
            text.ends_with("and 2 more; killed (SIGKILL) after the grace period"),
            "{text}"
        );
    }

    #[test]
    fn nothing_to_find_is_nothing_ended() {
        let outcome = end_strays(Vec::new, Duration::from_secs(1));
        assert_eq!(
            outcome,
            StrayOutcome {
                graceful: true,
                ..StrayOutcome::default()
            }
        );
    }
}
