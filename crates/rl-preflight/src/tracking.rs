//! A test's processes as its folder records them, so that a test is known beyond the process
//! running it: that process, its owner (pid and start time, in `plan.json`), and each model's
//! process group (`<model>.group.json`, written as soon as the group exists). A test without a
//! report whose owner is gone is `interrupted`: the groups it left are ended as soon as that
//! is found, and the finding kept (`interrupted.json`). A stop asked by another process
//! (`stop.json`) ends the groups, and a live owner then writes the report. Wherever a test's
//! groups are ended, so are the processes its models left outside them (a `setsid` daemon),
//! found by their marks (`marks`). The files' names are `folder`'s.

use std::path::Path;
use std::time::{Duration, Instant};

use rl_process::{ProcessIdentity, StopOutcome, StrayOutcome};
use serde::{Deserialize, Serialize};

use crate::error::PreflightError;
use crate::files::{read_json, write_json};
use crate::folder::PreflightFolder;
use crate::marks::{STOP_GRACE, end_test_processes};

/// What is known of a test from its start: enough to list one that never finished, and to
/// find the processes it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PreflightStarted {
    pub test_id: String,
    pub environment: String,
    pub models: Vec<String>,
    pub base_url: String,
    pub started_at: String,
    /// Groups per model (absent in tests of earlier versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<u32>,
    /// The process running the test (absent in tests of earlier versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<PreflightOwner>,
}

/// How long a stop waits for a live owner to write the report once the models are ended: the
/// runner gives a model's output this long to drain after its group ends, and then some.
const OWNER_REPORT_WAIT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(100);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PreflightStatus {
    /// Its owner is alive and has not written the report yet.
    Running,
    /// The report is written.
    Finished,
    /// The report is written, after a stop was asked (`rl preflight stop`).
    Stopped,
    /// Its owner is gone (killed, or the machine restarted) without writing the report; the
    /// model processes it left were ended when that was found.
    Interrupted,
}

impl PreflightStatus {
    pub fn label(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Finished => "finished",
            Self::Stopped => "stopped",
            Self::Interrupted => "interrupted",
        }
    }
}

/// The process running a test (`rl preflight`, `rl mcp`, `rl serve`, `rl tool call`), and the boot it
/// runs in: pids and start times mean nothing in another.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreflightOwner {
    pub process: ProcessIdentity,
    pub boot_id: Option<String>,
}

impl PreflightOwner {
    /// This process, or `None` where `/proc` cannot tell.
    pub(crate) fn this_process() -> Option<Self> {
        Some(Self {
            process: ProcessIdentity::of(std::process::id())?,
            boot_id: rl_process::boot_id(),
        })
    }

    fn in_another_boot(&self) -> bool {
        rl_process::is_another_boot(self.boot_id.as_deref())
    }

    fn is_alive(&self) -> bool {
        !self.in_another_boot() && self.process.is_alive()
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct GroupRecord {
    model: String,
    leader: ProcessIdentity,
}

/// Records the group `leader` leads for `model`, durably, before the runner does anything else
/// with it.
pub(crate) fn record_group(
    path: &Path,
    model: &str,
    leader: ProcessIdentity,
) -> Result<(), PreflightError> {
    write_json(
        path,
        &GroupRecord {
            model: model.to_owned(),
            leader,
        },
    )
}

/// Every group recorded in the test's folder, with its model.
fn recorded_groups(folder: &PreflightFolder) -> Vec<GroupRecord> {
    let mut groups: Vec<GroupRecord> = folder
        .group_records()
        .iter()
        .filter_map(|path| read_json(path).ok())
        .collect();
    groups.sort_by(|a, b| a.model.cmp(&b.model));
    groups
}

/// Whether the group recorded at `path` still has a process of its own.
pub(crate) fn group_is_running(path: &Path, owner: Option<&PreflightOwner>) -> bool {
    if owner.is_none_or(PreflightOwner::in_another_boot) {
        return false;
    }
    read_json::<GroupRecord>(path).is_ok_and(|group| {
        let leader = group.leader;
        rl_process::group_is_ours(leader)
            && i32::try_from(leader.pid)
                .is_ok_and(|pgid| !rl_process::members_of_group(pgid).is_empty())
    })
}

/// A stop asked by another process (`rl preflight stop`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopRequest {
    pub requested_at: String,
    /// The process that asked.
    pub by_pid: u32,
}

/// The test's stop request, if one was made. The file is written whole (renamed into place),
/// so a file there that cannot be read still is a request.
pub(crate) fn stop_request(path: &Path) -> Option<StopRequest> {
    if !path.exists() {
        return None;
    }
    Some(read_json(path).unwrap_or_else(|_| StopRequest {
        requested_at: format!("unknown ({} is unreadable)", PreflightFolder::STOP),
        by_pid: 0,
    }))
}

/// What was found of a test whose owner vanished without its report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interruption {
    pub found_at: String,
    pub reason: String,
    /// What became of the model processes it left.
    pub ended: String,
}

/// Where a test stands, its folder reconciled with the processes that exist.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum PreflightState {
    /// The report exists.
    Reported,
    Running,
    Interrupted(Interruption),
}

/// Reads where a test stands. A test without a report whose owner is gone is recorded as
/// interrupted, once, and the model groups it left are ended then: no process of a dead owner
/// is left running once anyone looks at its tests.
pub(crate) fn reconcile(
    folder: &PreflightFolder,
    started: &PreflightStarted,
) -> Result<PreflightState, PreflightError> {
    if folder.report().exists() {
        return Ok(PreflightState::Reported);
    }
    if let Ok(interruption) = read_json::<Interruption>(&folder.interrupted()) {
        return Ok(PreflightState::Interrupted(interruption));
    }
    let reason = match &started.owner {
        Some(owner) if owner.is_alive() => return Ok(PreflightState::Running),
        Some(owner) if owner.in_another_boot() => {
            "the machine has restarted since it started".to_owned()
        }
        Some(owner) => format!(
            "the process running it (pid {}) ended without finishing it (killed?)",
            owner.process.pid
        ),
        None => "it was started by an earlier rl, which did not record the process running it"
            .to_owned(),
    };
    // The owner writes its report before it exits: a report written since the first look holds.
    if folder.report().exists() {
        return Ok(PreflightState::Reported);
    }
    let ended = end_groups(folder, started.owner.as_ref());
    folder.remove_engine_copy();
    let interruption = Interruption {
        found_at: jiff::Timestamp::now().to_string(),
        reason,
        ended: ended.describe(),
    };
    write_json(&folder.interrupted(), &interruption)?;
    Ok(PreflightState::Interrupted(interruption))
}

/// The status of a test in `state`: a reported test was stopped when its report says so.
pub(crate) fn status_of(folder: &PreflightFolder, state: &PreflightState) -> PreflightStatus {
    /// The one key of the report read here: a report otherwise unreadable is still finished.
    #[derive(Deserialize)]
    struct StopMark {
        #[serde(default)]
        stopped_at: Option<String>,
    }
    match state {
        PreflightState::Reported => {
            let stopped =
                read_json::<StopMark>(&folder.report()).is_ok_and(|mark| mark.stopped_at.is_some());
            if stopped {
                PreflightStatus::Stopped
            } else {
                PreflightStatus::Finished
            }
        }
        PreflightState::Running => PreflightStatus::Running,
        PreflightState::Interrupted(_) => PreflightStatus::Interrupted,
    }
}

/// What a stop did.
#[derive(Debug, Clone, PartialEq)]
pub struct PreflightStopReport {
    pub test_id: String,
    /// Whether anything was stopped.
    pub stopped: bool,
    /// The test's status afterwards.
    pub status: PreflightStatus,
    pub message: String,
}

/// Stops a test from any process: its model groups are ended (SIGTERM, a grace period,
/// SIGKILL); a live owner is then given time to write the report, which says it was stopped.
pub(crate) fn stop(
    folder: &PreflightFolder,
    started: &PreflightStarted,
) -> Result<PreflightStopReport, PreflightError> {
    let id = &started.test_id;
    let owner = started.owner.as_ref();
    let answer = |stopped, status, message| PreflightStopReport {
        test_id: id.clone(),
        stopped,
        status,
        message,
    };
    match reconcile(folder, started)? {
        state @ PreflightState::Reported => Ok(answer(
            false,
            status_of(folder, &state),
            format!("test {id} has already finished; nothing to stop"),
        )),
        PreflightState::Interrupted(interruption) => {
            // Found (and its groups ended) earlier; a group that survived then is tried again.
            let again = end_groups(folder, owner);
            let ended = if again.is_empty() {
                interruption.ended
            } else {
                again.describe()
            };
            Ok(answer(
                !again.is_empty(),
                PreflightStatus::Interrupted,
                format!(
                    "test {id} was interrupted ({}); {ended}",
                    interruption.reason
                ),
            ))
        }
        PreflightState::Running => {
            // Written before the groups are read: the owner records a group before it looks for
            // this file, so a group started meanwhile is either read here or refused there.
            write_json(
                &folder.stop(),
                &StopRequest {
                    requested_at: jiff::Timestamp::now().to_string(),
                    by_pid: std::process::id(),
                },
            )?;
            let ended = end_groups(folder, owner).describe();
            let started_waiting = Instant::now();
            let state = loop {
                let state = reconcile(folder, started)?;
                if state != PreflightState::Running
                    || started_waiting.elapsed() >= OWNER_REPORT_WAIT
                {
                    break state;
                }
                std::thread::sleep(POLL);
            };
            let status = status_of(folder, &state);
            let after = match state {
                PreflightState::Reported => "its report is written".to_owned(),
                PreflightState::Interrupted(interruption) => interruption.reason,
                PreflightState::Running => format!(
                    "the process running it (pid {}) has not written the report yet",
                    owner.map_or(0, |owner| owner.process.pid)
                ),
            };
            Ok(answer(
                true,
                status,
                format!("test {id} stopped: {ended}; {after}"),
            ))
        }
    }
}

/// What ending a test's processes found.
#[derive(Debug, Default)]
struct Ended {
    /// Each model's group that had processes, and how they ended.
    groups: Vec<(String, StopOutcome)>,
    /// What the models left outside their groups.
    detached: StrayOutcome,
}

impl Ended {
    fn is_empty(&self) -> bool {
        self.groups.is_empty() && self.detached.ended.is_empty()
    }

    fn describe(&self) -> String {
        let models: Vec<(String, StopOutcome)> = self
            .groups
            .iter()
            .map(|(model, outcome)| (format!("model {model}:"), outcome.clone()))
            .collect();
        let groups = rl_process::describe_stops(&models);
        let detached = self
            .detached
            .summary()
            .map(|summary| format!("processes the models left outside their groups: {summary}"));
        match (groups, detached) {
            (None, None) => "no model process was left".to_owned(),
            (Some(groups), None) => groups,
            (None, Some(detached)) => detached,
            (Some(groups), Some(detached)) => format!("{groups}; {detached}"),
        }
    }
}

/// Ends every recorded group of the test that is still its own, side by side (each may take
/// its whole grace period), then every process its models left outside their groups. Pids
/// recorded in another boot name other processes: none is touched then.
fn end_groups(folder: &PreflightFolder, owner: Option<&PreflightOwner>) -> Ended {
    if owner.is_none_or(PreflightOwner::in_another_boot) {
        return Ended::default();
    }
    let groups = recorded_groups(folder);
    let groups = std::thread::scope(|scope| {
        let stopping: Vec<_> = groups
            .into_iter()
            .map(|group| {
                scope.spawn(move || {
                    rl_process::stop_recorded_group(group.leader, STOP_GRACE)
                        .map(|outcome| (group.model, outcome))
                })
            })
            .collect();
        stopping
            .into_iter()
            .filter_map(|stopping| stopping.join().ok().flatten())
            .collect()
    });
    Ended {
        groups,
        detached: end_test_processes(folder.dir(), STOP_GRACE),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn started(owner: Option<PreflightOwner>) -> PreflightStarted {
        PreflightStarted {
            test_id: "0badc0de".to_owned(),
            environment: "arithmetic@arithmetic_env.py".to_owned(),
            models: vec!["m".to_owned()],
            base_url: "http://127.0.0.1:9/v1".to_owned(),
            started_at: "2026-01-01T00:00:00Z".to_owned(),
            steps: Some(3),
            owner,
        }
    }

    /// A process that has ended, reaped: its identity names no live process.
    fn dead_owner() -> PreflightOwner {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let identity = ProcessIdentity::of(child.id()).unwrap();
        child.wait().unwrap();
        PreflightOwner {
            process: identity,
            boot_id: rl_process::boot_id(),
        }
    }

    #[test]
    fn a_live_owner_is_running_and_a_dead_one_interrupted_once() {
        let dir = tempfile::tempdir().unwrap();
        let folder = PreflightFolder::at(dir.path());
        let live = started(PreflightOwner::this_process());
        assert_eq!(reconcile(&folder, &live).unwrap(), PreflightState::Running);

        let dead = started(Some(dead_owner()));
        let PreflightState::Interrupted(first) = reconcile(&folder, &dead).unwrap() else {
            panic!("not interrupted");
        };
        assert!(
            first.reason.contains("ended without finishing"),
            "{first:?}"
        );
        assert_eq!(first.ended, "no model process was left");
        // Kept: a later look reads the finding, even with a live owner now named.
        assert_eq!(
            reconcile(&folder, &live).unwrap(),
            PreflightState::Interrupted(first)
        );
    }

    #[test]
    fn a_report_wins_over_a_dead_owner_and_another_boot_touches_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let folder = PreflightFolder::at(dir.path());
        std::fs::write(folder.report(), "{}").unwrap();
        let dead = started(Some(dead_owner()));
        assert_eq!(reconcile(&folder, &dead).unwrap(), PreflightState::Reported);

        let other_dir = tempfile::tempdir().unwrap();
        let other = PreflightFolder::at(other_dir.path());
        // This very process as a group leader recorded in another boot: never signalled.
        let me = PreflightOwner {
            process: ProcessIdentity::of(std::process::id()).unwrap(),
            boot_id: Some("another-boot".to_owned()),
        };
        record_group(&other.model(0, "m").group_path, "m", me.process).unwrap();
        let PreflightState::Interrupted(found) = reconcile(&other, &started(Some(me))).unwrap()
        else {
            panic!("not interrupted");
        };
        assert!(found.reason.contains("restarted"), "{found:?}");
        assert_eq!(found.ended, "no model process was left");
    }

    #[test]
    fn a_test_of_an_earlier_rl_without_owner_is_interrupted() {
        let dir = tempfile::tempdir().unwrap();
        let PreflightState::Interrupted(found) =
            reconcile(&PreflightFolder::at(dir.path()), &started(None)).unwrap()
        else {
            panic!("not interrupted");
        };
        assert!(found.reason.contains("earlier rl"), "{found:?}");
    }

    #[test]
    fn a_stop_request_is_read_even_when_unreadable() {
        let dir = tempfile::tempdir().unwrap();
        let path = PreflightFolder::at(dir.path()).stop();
        assert_eq!(stop_request(&path), None);
        std::fs::write(&path, "not json").unwrap();
        assert!(stop_request(&path).is_some());
    }
}
