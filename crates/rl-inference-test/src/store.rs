//! Tests kept in the state directory, one folder each: `preflight/<test_id>/` with `plan.json`
//! (written at the start), every model's log and groups file, and `report.json` (at the end).

use std::path::{Path, PathBuf};

use rl_config::RunId;
use serde::{Deserialize, Serialize};

use crate::error::InferenceTestError;
use crate::report::TestReport;
use crate::verdict::Verdict;

const PLAN_FILE: &str = "plan.json";
const REPORT_FILE: &str = "report.json";

/// What is known of a test from its start: enough to list one that never finished.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestStarted {
    pub test_id: String,
    pub environment: String,
    pub models: Vec<String>,
    pub base_url: String,
    pub started_at: String,
}

/// One line of a listing.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TestListing {
    pub test_id: String,
    pub environment: String,
    pub models: Vec<String>,
    pub started_at: String,
    /// `None` while it runs, or when it was interrupted before its report.
    pub verdict: Option<Verdict>,
    pub models_succeeded: Option<usize>,
    pub output_dir: PathBuf,
}

pub struct TestStore {
    dir: PathBuf,
}

impl TestStore {
    pub fn new(home: &Path) -> Self {
        Self {
            dir: home.join("preflight"),
        }
    }

    /// Where the tests are (`<home>/preflight`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn test_dir(&self, id: &str) -> Result<PathBuf, InferenceTestError> {
        // Ids come from callers: checked before they become a path.
        let id = RunId::parse(id)?;
        Ok(self.dir.join(id.as_str()))
    }

    /// A new, empty folder (mode 700: logs may hold prompts and model output).
    pub fn create(
        &self,
        started: impl Fn(&str) -> TestStarted,
    ) -> Result<(TestStarted, PathBuf), InferenceTestError> {
        create_private_dir(&self.dir)?;
        loop {
            let id = RunId::generate();
            let dir = self.dir.join(id.as_str());
            match std::fs::create_dir(&dir) {
                Ok(()) => {
                    set_private(&dir)?;
                    let started = started(id.as_str());
                    write_json(&dir.join(PLAN_FILE), &started)?;
                    return Ok((started, dir));
                }
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(source) => {
                    return Err(InferenceTestError::Io {
                        action: "create",
                        path: dir,
                        source,
                    });
                }
            }
        }
    }

    pub fn save(&self, report: &TestReport) -> Result<PathBuf, InferenceTestError> {
        let path = self.test_dir(&report.test_id)?.join(REPORT_FILE);
        write_json(&path, report)?;
        Ok(path)
    }

    pub fn read(&self, id: &str) -> Result<TestReport, InferenceTestError> {
        let dir = self.test_dir(id)?;
        if !dir.is_dir() {
            return Err(InferenceTestError::UnknownTest(id.to_owned()));
        }
        let path = dir.join(REPORT_FILE);
        if !path.exists() {
            return Err(InferenceTestError::Invalid {
                what: format!("test {id}"),
                reason: "it has no report yet: it is still running, or was interrupted".to_owned(),
            });
        }
        read_json(&path)
    }

    /// Newest first.
    pub fn list(&self) -> Result<Vec<TestListing>, InferenceTestError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => {
                return Err(InferenceTestError::Io {
                    action: "list",
                    path: self.dir.clone(),
                    source,
                });
            }
        };
        let mut tests = Vec::new();
        for entry in entries.flatten() {
            let dir = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if RunId::parse(&name).is_err() {
                continue;
            }
            // A folder without a readable plan is not one of ours, or was cut at creation.
            let Ok(started) = read_json::<TestStarted>(&dir.join(PLAN_FILE)) else {
                continue;
            };
            let report = read_json::<TestReport>(&dir.join(REPORT_FILE)).ok();
            tests.push(TestListing {
                test_id: started.test_id,
                environment: started.environment,
                models: started.models,
                started_at: started.started_at,
                verdict: report.as_ref().map(|r| r.summary.verdict),
                models_succeeded: report.as_ref().map(|r| r.summary.models_succeeded),
                output_dir: dir,
            });
        }
        tests.sort_by(|a, b| b.started_at.cmp(&a.started_at));
        Ok(tests)
    }
}

fn create_private_dir(dir: &Path) -> Result<(), InferenceTestError> {
    std::fs::create_dir_all(dir).map_err(|source| InferenceTestError::Io {
        action: "create",
        path: dir.to_owned(),
        source,
    })?;
    set_private(dir)
}

fn set_private(dir: &Path) -> Result<(), InferenceTestError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(|source| {
        InferenceTestError::Io {
            action: "restrict",
            path: dir.to_owned(),
            source,
        }
    })
}

/// Temporary file + rename: a reader sees the old file or the new one, never half.
fn write_json(path: &Path, value: &impl Serialize) -> Result<(), InferenceTestError> {
    let io = |action| {
        move |source| InferenceTestError::Io {
            action,
            path: path.to_owned(),
            source,
        }
    };
    let text = serde_json::to_vec_pretty(value)
        .map_err(|error| io("serialise")(std::io::Error::other(error)))?;
    let temporary = path.with_extension("json.tmp");
    std::fs::write(&temporary, text).map_err(io("write"))?;
    std::fs::rename(&temporary, path).map_err(io("replace"))
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, InferenceTestError> {
    let text = std::fs::read(path).map_err(|source| InferenceTestError::Io {
        action: "read",
        path: path.to_owned(),
        source,
    })?;
    serde_json::from_slice(&text).map_err(|error| InferenceTestError::CorruptReport {
        path: path.to_owned(),
        reason: error.to_string(),
    })
}
