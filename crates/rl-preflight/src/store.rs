//! Tests kept in the state directory, one folder each: `preflight/<test_id>/` with `plan.json`
//! (written at the start, with the process running the test), every model's log, groups file
//! and process group, and `report.json` (at the end); `folder` spells the names. Every read
//! reconciles a test without a report with the processes that exist (see `tracking`).

use std::path::{Path, PathBuf};

use rl_settings::RunId;

use crate::analysis::count_groups;
use crate::error::PreflightError;
use crate::files::{read_json, write_json};
use crate::folder::PreflightFolder;
use crate::report::PreflightReport;
use crate::tracking::{
    self, Interruption, PreflightStarted, PreflightState, PreflightStatus, PreflightStopReport,
};
use crate::verdict::Verdict;

/// Below the state directory: every pre-flight test's folder.
const TESTS_DIR: &str = "preflight";

/// One line of a listing.
#[derive(Debug, Clone, PartialEq)]
pub struct PreflightListing {
    pub test_id: String,
    pub environment: String,
    pub models: Vec<String>,
    pub started_at: String,
    pub status: PreflightStatus,
    /// `None` while it runs, or when it was interrupted before its report.
    pub verdict: Option<Verdict>,
    pub models_succeeded: Option<usize>,
    pub output_dir: PathBuf,
}

/// A test as `show` gives it: its report once written, else how far it got.
#[derive(Debug, Clone, PartialEq)]
pub enum PreflightView {
    Reported(Box<PreflightReport>),
    Unfinished(Box<PreflightProgress>),
}

/// A test without a report: running (read while another process runs it), or interrupted.
#[derive(Debug, Clone, PartialEq)]
pub struct PreflightProgress {
    pub test_id: String,
    pub status: PreflightStatus,
    pub environment: String,
    pub base_url: String,
    pub started_at: String,
    pub output_dir: PathBuf,
    /// The process running it (`rl preflight`, `rl mcp`, `rl serve`, …).
    pub owner_pid: Option<u32>,
    pub stop_requested_at: Option<String>,
    /// Why it is interrupted, and what became of its model processes.
    pub interruption: Option<Interruption>,
    pub models: Vec<ModelProgress>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ModelProgress {
    pub model: String,
    /// Groups written so far (atroposlib writes them when the model's run ends).
    pub groups_done: u32,
    pub total_groups: Option<u32>,
    /// Whether its process group has a process now.
    pub running: bool,
    pub log_path: PathBuf,
}

#[derive(Debug, Clone)]
pub struct PreflightStore {
    dir: PathBuf,
}

impl PreflightStore {
    pub fn new(home: &Path) -> Self {
        Self {
            dir: home.join(TESTS_DIR),
        }
    }

    /// Tests kept in `dir` instead: a run's evaluations during training, in its own folder.
    pub fn in_dir(dir: PathBuf) -> Self {
        Self { dir }
    }

    /// Where the tests are (`<home>/preflight`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn test_dir(&self, id: &str) -> Result<PathBuf, PreflightError> {
        Ok(self.folder(id)?.dir().to_owned())
    }

    /// Test `id`'s folder, whose paths name everything in it.
    pub fn folder(&self, id: &str) -> Result<PreflightFolder, PreflightError> {
        // Ids come from callers: checked before they become a path.
        let id = RunId::parse(id)?;
        Ok(self.folder_of(&id))
    }

    fn folder_of(&self, id: &RunId) -> PreflightFolder {
        PreflightFolder::at(self.dir.join(id.as_str()))
    }

    /// A new, empty folder (mode 700: logs may hold prompts and model output).
    pub fn create(
        &self,
        started: impl Fn(&str) -> PreflightStarted,
    ) -> Result<(PreflightStarted, PathBuf), PreflightError> {
        create_private_dir(&self.dir)?;
        loop {
            let id = RunId::generate();
            let folder = self.folder_of(&id);
            let dir = folder.dir().to_owned();
            match std::fs::create_dir(&dir) {
                Ok(()) => {
                    set_private(&dir)?;
                    let started = started(id.as_str());
                    write_json(&folder.plan(), &started)?;
                    return Ok((started, dir));
                }
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(source) => {
                    return Err(PreflightError::Io {
                        action: "create",
                        path: dir,
                        source,
                    });
                }
            }
        }
    }

    /// A test's report, or, while it has none, how far it got.
    pub fn view(&self, id: &str) -> Result<PreflightView, PreflightError> {
        let (folder, started) = self.started(id)?;
        let interruption = match tracking::reconcile(&folder, &started)? {
            PreflightState::Reported => {
                return Ok(PreflightView::Reported(Box::new(self.read(id)?)));
            }
            PreflightState::Running => None,
            PreflightState::Interrupted(interruption) => Some(interruption),
        };
        let owner = started.owner.as_ref();
        let models = started
            .models
            .iter()
            .enumerate()
            .map(|(index, model)| {
                let files = folder.model(index, model);
                ModelProgress {
                    model: model.clone(),
                    groups_done: std::fs::read(&files.output_path)
                        .map_or(0, |bytes| count_groups(&bytes)),
                    total_groups: started.steps,
                    running: tracking::group_is_running(&files.group_path, owner),
                    log_path: files.log_path,
                }
            })
            .collect();
        Ok(PreflightView::Unfinished(Box::new(PreflightProgress {
            test_id: started.test_id,
            status: if interruption.is_some() {
                PreflightStatus::Interrupted
            } else {
                PreflightStatus::Running
            },
            environment: started.environment,
            base_url: started.base_url,
            started_at: started.started_at,
            owner_pid: owner.map(|owner| owner.process.pid),
            stop_requested_at: tracking::stop_request(&folder.stop())
                .map(|request| request.requested_at),
            interruption,
            models,
            output_dir: folder.dir().to_owned(),
        })))
    }

    /// Stops a test run by any process, this one or another, live or dead.
    pub fn stop(&self, id: &str) -> Result<PreflightStopReport, PreflightError> {
        let (folder, started) = self.started(id)?;
        tracking::stop(&folder, &started)
    }

    fn started(&self, id: &str) -> Result<(PreflightFolder, PreflightStarted), PreflightError> {
        let folder = self.folder(id)?;
        if !folder.dir().is_dir() {
            return Err(PreflightError::UnknownTest(id.to_owned()));
        }
        let started = read_json(&folder.plan())?;
        Ok((folder, started))
    }

    pub fn save(&self, report: &PreflightReport) -> Result<PathBuf, PreflightError> {
        let path = self.folder(&report.test_id)?.report();
        write_json(&path, report)?;
        Ok(path)
    }

    pub fn read(&self, id: &str) -> Result<PreflightReport, PreflightError> {
        let folder = self.folder(id)?;
        if !folder.dir().is_dir() {
            return Err(PreflightError::UnknownTest(id.to_owned()));
        }
        let path = folder.report();
        if !path.exists() {
            return Err(PreflightError::Invalid {
                what: format!("test {id}"),
                reason: "it has no report: it is still running, or was interrupted".to_owned(),
            });
        }
        read_json(&path)
    }

    /// Newest first. Every test without a report is reconciled: one whose owner is gone is
    /// marked interrupted and the model processes it left are ended.
    pub fn list(&self) -> Result<Vec<PreflightListing>, PreflightError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => {
                return Err(PreflightError::Io {
                    action: "list",
                    path: self.dir.clone(),
                    source,
                });
            }
        };
        let mut tests = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Ok(id) = RunId::parse(&name) else {
                continue;
            };
            let folder = self.folder_of(&id);
            // A folder without a readable plan is not one of ours, or was cut at creation.
            let Ok(started) = read_json::<PreflightStarted>(&folder.plan()) else {
                continue;
            };
            let state = tracking::reconcile(&folder, &started)?;
            let report = read_json::<PreflightReport>(&folder.report()).ok();
            tests.push(PreflightListing {
                test_id: started.test_id,
                environment: started.environment,
                models: started.models,
                started_at: started.started_at,
                status: tracking::status_of(&folder, &state),
                verdict: report.as_ref().map(|r| r.summary.verdict),
                models_succeeded: report.as_ref().map(|r| r.summary.models_succeeded),
                output_dir: folder.dir().to_owned(),
            });
        }
        tests.sort_by(|a, b| b.started_at.cmp(&a.started_at));
        Ok(tests)
    }
}

fn create_private_dir(dir: &Path) -> Result<(), PreflightError> {
    std::fs::create_dir_all(dir).map_err(|source| PreflightError::Io {
        action: "create",
        path: dir.to_owned(),
        source,
    })?;
    set_private(dir)
}

fn set_private(dir: &Path) -> Result<(), PreflightError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(|source| {
        PreflightError::Io {
            action: "restrict",
            path: dir.to_owned(),
            source,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two finders of the same interrupted test write its record at once: neither fails, and
    /// what is left is whole.
    #[test]
    fn writers_of_one_file_never_share_a_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = PreflightFolder::at(dir.path()).interrupted();
        std::thread::scope(|scope| {
            for writer in 0..4 {
                let path = &path;
                scope.spawn(move || {
                    for round in 0..200 {
                        write_json(path, &serde_json::json!({"writer": writer, "round": round}))
                            .unwrap();
                    }
                });
            }
        });
        let left: serde_json::Value = read_json(&path).unwrap();
        assert_eq!(left["round"], 199);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
