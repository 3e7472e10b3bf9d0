//! What `/proc` says of the supervisor and the components' groups: memory, and whether
//! anything is left after a stop.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::Value;

pub(super) fn kb_to_bytes(kb: u64) -> f64 {
    kb as f64 * 1024.0
}

/// VmRSS and VmHWM of a process, in kB as `/proc` gives them.
pub(super) fn supervisor_memory(pid: u64) -> anyhow::Result<(u64, u64)> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).with_context(|| format!("cannot read {path}"))?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|value| value.trim().strip_suffix("kB"))
            .and_then(|kb| kb.trim().parse::<u64>().ok())
            .with_context(|| format!("{path} has no {name}"))
    };
    Ok((field("VmRSS")?, field("VmHWM")?))
}

/// After a stop: the supervisor has exited and no process is left in a component's group.
pub(super) fn assert_nothing_left(supervisor: u64, status: &Value) -> anyhow::Result<()> {
    let groups: Vec<u64> = status["components"]
        .as_array()
        .context("the run's status has no components")?
        .iter()
        .filter_map(|component| component["process"]["pid"].as_u64())
        .collect();
    // The supervisor exits right after recording the end; give it (and any straggler) a moment.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut left: Vec<u64> = groups.iter().flat_map(|&g| group_members(g)).collect();
        if is_alive(supervisor) {
            left.push(supervisor);
        }
        if left.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!("processes left after the stop: {left:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `(state, process group)` of a process, from `/proc/<pid>/stat`.
fn state_and_group(pid: u64) -> Option<(char, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces: fields start after the last `)`.
    let mut fields = stat.get(stat.rfind(')')? + 1..)?.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let group = fields.nth(1)?.parse().ok()?;
    Some((state, group))
}

/// Zombies are dead; their parent has only not collected them yet.
fn is_alive(pid: u64) -> bool {
    state_and_group(pid).is_some_and(|(state, _)| state != 'Z')
}

fn group_members(group: u64) -> Vec<u64> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u64>().ok())
        .filter(|&pid| state_and_group(pid).is_some_and(|(state, g)| g == group && state != 'Z'))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_is_read_from_proc() {
        let (rss, hwm) = supervisor_memory(u64::from(std::process::id())).unwrap();
        assert!(rss > 0 && hwm >= rss);
        assert!(is_alive(u64::from(std::process::id())));
    }
}
