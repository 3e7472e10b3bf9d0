use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::{Duration, Instant};

use rl_process::{ProcessIdentity, group_is_ours, members_of_group, stop_group};

/// A shell in a group of its own that leaves a grandchild behind, as components do.
fn spawn_group(script: &str) -> std::process::Child {
    Command::new("sh")
        .args(["-c", script])
        .process_group(0)
        .spawn()
        .unwrap()
}

/// Waits (30 s at most: forks are slow on a loaded machine) for `count` members.
fn wait_for_members(pgid: u32, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if members_of_group(pgid as i32).len() >= count {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("group {pgid} never had {count} members");
}

/// A leader that has exited but is not reaped yet (its parent — a supervisor, or init after the
/// supervisor died — has not waited for it) still leads its group: the group is ours to stop.
#[test]
fn a_group_whose_leader_is_a_zombie_is_still_ours() {
    let mut leader = spawn_group("sleep 300 & echo started");
    let pgid = leader.id();
    let identity = ProcessIdentity::of(pgid).unwrap();
    // Not waited for: the leader becomes a zombie once it has started its grandchild.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(format!("/proc/{pgid}/stat")).is_ok_and(|stat| {
        stat.rsplit(") ")
            .next()
            .is_some_and(|rest| rest.starts_with('Z'))
    }) {
        assert!(Instant::now() < deadline, "the leader never exited");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!identity.is_alive());
    assert!(group_is_ours(identity));
    let outcome = stop_group(pgid, Duration::from_secs(5));
    assert!(
        !outcome.was_empty && outcome.survivors.is_empty(),
        "{outcome:?}"
    );
    leader.wait().unwrap();
    // Reaped, the pid is free: still ours, as no one else can lead a group of that id.
    assert!(group_is_ours(identity));
}

#[test]
fn a_cooperative_group_stops_on_sigterm_grandchildren_included() {
    let mut child = spawn_group("sleep 300 & sleep 300 & wait");
    let pgid = child.id();
    wait_for_members(pgid, 3);
    let reaper = std::thread::spawn(move || child.wait());
    let outcome = stop_group(pgid, Duration::from_secs(5));
    assert!(outcome.graceful, "{outcome:?}");
    assert!(outcome.survivors.is_empty());
    assert!(members_of_group(pgid as i32).is_empty());
    reaper.join().unwrap().unwrap();
}

#[test]
fn a_group_ignoring_sigterm_is_killed_after_the_grace_period() {
    let mut child =
        spawn_group("trap '' TERM; sleep 300 & trap '' TERM; while true; do sleep 1; done");
    let pgid = child.id();
    wait_for_members(pgid, 2);
    let reaper = std::thread::spawn(move || child.wait());
    let outcome = stop_group(pgid, Duration::from_millis(300));
    assert!(!outcome.graceful);
    assert!(outcome.survivors.is_empty(), "{outcome:?}");
    reaper.join().unwrap().unwrap();
}

#[test]
fn our_own_and_init_groups_are_never_signalled() {
    assert!(stop_group(0, Duration::from_millis(10)).graceful);
    assert!(stop_group(1, Duration::from_millis(10)).graceful);
}
