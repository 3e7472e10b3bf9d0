//! The minutes-long tool calls (a pre-flight, a comparison) as work of their own. Many agent
//! clients give up on a call after tens of seconds, and a model that retries would start the
//! whole test again; so a call may start its test in a detached worker (`rl work`, its own
//! process group, outliving whoever asked) and answer at once with the test's id, what it
//! will do and how long it may take; the same tool given that id answers its progress and,
//! once it has ended, the full answer a waiting caller gets. An identical request while one
//! is going gets that one's id.
//!
//! A test's folder records which call it answers (`call.json`), so its answer can be rebuilt
//! by any process; `preflight/calls/<fingerprint>` names the test of each call started
//! detached, read and written under `preflight/calls.lock`.

use std::io::{BufRead as _, Write as _};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use rl_preflight::{
    Measure, PreflightFolder, PreflightPlan, PreflightReport, PreflightView, Progress, ProgressSink,
};
use rl_settings::RunId;
use serde::{Deserialize, Serialize};

use crate::answers::{
    Estimate, LongCallProgress, LongCallStarted, ServerStart, TrainedCheckpoint, report_json,
    to_json,
};
use crate::compare::CompareOptions;
use crate::preflight::InferenceOptions;
use crate::tool_specs::ToolName;
use crate::{Tools, ToolsError};

/// In a test's folder: the call it answers.
/// Under the pre-flights' folder: the test of each call started detached, by fingerprint.
const CALLS_DIR: &str = "calls";
const CALLS_LOCK: &str = "calls.lock";
/// How long a worker may take to plan its test and create its folder.
const WORKER_START_LIMIT: Duration = Duration::from_secs(120);
/// The most a worker's order may weigh (it is a few arguments).
const ORDER_LIMIT_BYTES: u64 = 1 << 20;

/// The tools whose calls are long calls.
pub const LONG_TOOLS: [&str; 2] = [
    ToolName::TestInference.name(),
    ToolName::CompareTraining.name(),
];

/// A long call, as its tool was given it (the keys, like every secret, are never part of it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "tool")]
pub enum LongCall {
    #[serde(rename = "rl_test_inference")]
    Inference {
        #[serde(default)]
        models: Vec<String>,
        num_steps: Option<u32>,
        group_size: Option<u32>,
        /// An OpenAI-compatible endpoint the caller named, asked with no key.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        base_url: Option<String>,
    },
    #[serde(rename = "rl_compare_training")]
    Compare {
        run_id: String,
        step: Option<String>,
        num_steps: Option<u32>,
        group_size: Option<u32>,
        /// What the verdict rests on (the mean score when absent, as in calls recorded before
        /// there was a choice).
        #[serde(default)]
        measure: Option<Measure>,
    },
}

impl LongCall {
    pub fn tool(&self) -> &'static str {
        match self {
            Self::Inference { .. } => ToolName::TestInference.name(),
            Self::Compare { .. } => ToolName::CompareTraining.name(),
        }
    }
}

/// What a worker reads on its standard input: the call, and the environments tree of the
/// caller's settings (a face started with `--root` or `--envs-dir` passes its choice on).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkOrder {
    pub call: LongCall,
    /// How long the caller told its client the test may take, kept with the test.
    #[serde(default)]
    pub estimate: Option<Estimate>,
    pub tinker_atropos_root: Option<PathBuf>,
    pub environments_dir: Option<PathBuf>,
}

impl WorkOrder {
    /// Reads an order from `input`, bounded.
    pub fn read(input: impl std::io::Read) -> Result<Self, ToolsError> {
        use std::io::Read as _;
        let mut text = String::new();
        input
            .take(ORDER_LIMIT_BYTES)
            .read_to_string(&mut text)
            .map_err(|error| {
                ToolsError::Internal(format!("cannot read the work order: {error}"))
            })?;
        serde_json::from_str(&text)
            .map_err(|error| ToolsError::Internal(format!("the work order is not valid: {error}")))
    }
}

/// What a test's folder records of the call it answers.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct CallRecord {
    call: LongCall,
    fingerprint: String,
    /// A comparison's trained side, chosen once before the test.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    trained_step: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    best_by: Option<String>,
    /// The estimate the caller was given at the start: what every progress answer repeats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    estimate: Option<Estimate>,
}

/// A long call's test, planned, and the trained side of a comparison.
pub struct Planned {
    pub test: PreflightPlan,
    pub compared: Option<(RunId, TrainedCheckpoint)>,
}

/// Where a long call stands, for the tool given its test's id.
pub enum LongCallState {
    Running(Box<LongCallProgress>),
    /// The answer a waiting caller gets.
    Finished(serde_json::Value),
}

impl Tools {
    /// The call's test, planned as it would run now: every refusal (no selection, a missing
    /// key, an unknown run) comes here, before anything starts.
    pub fn long_call_plan(&self, call: &LongCall) -> Result<Planned, ToolsError> {
        match call {
            LongCall::Inference {
                models,
                num_steps,
                group_size,
                base_url,
            } => Ok(Planned {
                test: self.inference_plan(&InferenceOptions {
                    models: models.clone(),
                    num_steps: *num_steps,
                    group_size: *group_size,
                    keyless_endpoint: base_url.clone(),
                    ..InferenceOptions::default()
                })?,
                compared: None,
            }),
            LongCall::Compare {
                run_id,
                step,
                num_steps,
                group_size,
                measure,
            } => {
                let id = self.run_id(run_id)?;
                let defaults = CompareOptions::default();
                let plan = self.compare_plan(
                    &id,
                    &CompareOptions {
                        step: step.clone(),
                        prompts: num_steps.unwrap_or(defaults.prompts),
                        group_size: group_size.unwrap_or(defaults.group_size),
                        measure: measure.unwrap_or_default(),
                        ..defaults
                    },
                )?;
                Ok(Planned {
                    test: plan.test,
                    compared: Some((id, plan.trained)),
                })
            }
        }
    }

    /// Runs the planned call here to its end and answers as its tool does. `progress` hears
    /// the test's events; the test's folder records the call as soon as it exists.
    pub async fn run_long_call(
        &self,
        call: &LongCall,
        planned: Planned,
        estimate: Option<Estimate>,
        progress: ProgressSink,
    ) -> Result<serde_json::Value, ToolsError> {
        let record = CallRecord {
            call: call.clone(),
            fingerprint: fingerprint(call, &planned.test),
            trained_step: planned.compared.as_ref().map(|(_, trained)| trained.step),
            best_by: planned
                .compared
                .as_ref()
                .and_then(|(_, trained)| trained.best_by)
                .map(str::to_owned),
            estimate,
        };
        let recording = record.clone();
        let sink: ProgressSink = Arc::new(move |event: Progress| {
            if let Progress::Created { dir, .. } = &event {
                // A record that cannot be written leaves the test answerable only by waiting.
                let _ = write_record(&PreflightFolder::at(dir), &recording);
            }
            progress(event);
        });
        let report = self.test_inference(&planned.test, sink).await?;
        self.long_call_answer(&record, &report)
    }

    /// Starts the call in a detached worker, or finds the identical call already running,
    /// and answers with its test's id at once.
    pub fn start_long_call(&self, call: &LongCall) -> Result<LongCallStarted, ToolsError> {
        let planned = self.long_call_plan(call)?;
        let key = fingerprint(call, &planned.test);
        let store_dir = self.preflight_dir();
        rl_settings::create_private_dir(&store_dir)?;
        rl_settings::create_private_dir(&store_dir.join(CALLS_DIR))?;
        let _lock = rl_settings::lock_exclusive(&store_dir.join(CALLS_LOCK))?;
        let index = store_dir.join(CALLS_DIR).join(&key);
        if let Some(test_id) = std::fs::read_to_string(&index)
            .ok()
            .map(|text| text.trim().to_owned())
            && matches!(self.preflight(&test_id), Ok(PreflightView::Unfinished(ref progress)) if progress.status == rl_preflight::PreflightStatus::Running)
        {
            let estimate = self
                .preflight_store()
                .folder(&test_id)
                .ok()
                .and_then(|folder| read_record(&folder))
                .and_then(|record| record.estimate)
                .unwrap_or_else(|| self.estimate(&planned.test));
            return Ok(LongCallStarted::new(
                call.tool(),
                &planned.test,
                test_id,
                false,
                estimate,
            ));
        }
        let estimate = self.estimate(&planned.test);
        let test_id = self.spawn_worker(call, &estimate)?;
        rl_settings::write_atomically(&index, test_id.as_bytes())?;
        Ok(LongCallStarted::new(
            call.tool(),
            &planned.test,
            test_id,
            true,
            estimate,
        ))
    }

    /// The answer of a call started earlier, by its test's id: its progress while it runs,
    /// else what a waiting caller got. `tool` is the tool asked, which must be the test's.
    pub fn long_call_state(&self, tool: &str, test_id: &str) -> Result<LongCallState, ToolsError> {
        if RunId::parse(test_id).is_err() {
            return Err(ToolsError::invalid(
                "test_id",
                format!(
                    "'{}' is no test's id: ids are 8 lowercase hexadecimal characters, as the \
                     call that started the test answered",
                    rl_settings::quoted(test_id)
                ),
            ));
        }
        let view = self.preflight(test_id)?;
        let record = read_record(&self.preflight_store().folder(test_id)?);
        if let Some(record) = &record
            && record.call.tool() != tool
        {
            return Err(ToolsError::invalid(
                "test_id",
                format!(
                    "test {test_id} answers {}, not {tool}: ask that tool for it",
                    record.call.tool()
                ),
            ));
        }
        match view {
            PreflightView::Reported(report) => match &record {
                Some(record) => Ok(LongCallState::Finished(
                    self.long_call_answer(record, &report)?,
                )),
                // A pre-flight started by `rl preflight` records no call.
                None if tool == "rl_test_inference" => {
                    Ok(LongCallState::Finished(report_json(&report)?))
                }
                None => Err(ToolsError::invalid(
                    "test_id",
                    format!(
                        "test {test_id} is a pre-flight, not a comparison: ask \
                         rl_test_inference for it"
                    ),
                )),
            },
            PreflightView::Unfinished(progress) => {
                if let Some(interruption) = &progress.interruption {
                    return Err(ToolsError::invalid(
                        format!("test {test_id}"),
                        format!(
                            "it was interrupted before its end: {}; {}. Call {tool} again \
                             without test_id to start it anew",
                            interruption.reason, interruption.ended
                        ),
                    ));
                }
                // A test started without a record (`rl preflight`, an older rl) gets the
                // default; none looks at earlier tests again on every poll.
                let estimate = record
                    .and_then(|record| record.estimate)
                    .unwrap_or_else(|| {
                        let groups = progress
                            .models
                            .iter()
                            .map(|model| model.total_groups.unwrap_or(0))
                            .sum();
                        Estimate::of(groups, None, ServerStart::NotServed)
                    });
                Ok(LongCallState::Running(Box::new(LongCallProgress::new(
                    tool, &progress, &estimate,
                ))))
            }
        }
    }

    /// The answer of a finished test of `record`'s call.
    fn long_call_answer(
        &self,
        record: &CallRecord,
        report: &PreflightReport,
    ) -> Result<serde_json::Value, ToolsError> {
        match &record.call {
            LongCall::Inference { .. } => report_json(report),
            LongCall::Compare {
                run_id, measure, ..
            } => {
                let id = self.run_id(run_id)?;
                let step = record.trained_step.ok_or_else(|| {
                    ToolsError::Internal(format!(
                        "test {} recorded no trained step",
                        report.test_id
                    ))
                })?;
                let checkpoint = TrainedCheckpoint {
                    step,
                    best_by: record
                        .best_by
                        .as_deref()
                        .and_then(crate::saved_states::best_by_named),
                };
                to_json(&self.comparison(&id, checkpoint, report, measure.unwrap_or_default())?)
            }
        }
    }

    /// Starts `rl work` on `call`, detached, and reads its test's id.
    fn spawn_worker(&self, call: &LongCall, estimate: &Estimate) -> Result<String, ToolsError> {
        let settings = self.settings()?;
        let order = WorkOrder {
            call: call.clone(),
            estimate: Some(estimate.clone()),
            tinker_atropos_root: settings
                .tinker_atropos_root
                .as_deref()
                .map(absolute)
                .transpose()?,
            environments_dir: settings
                .environments_dir
                .as_deref()
                .map(absolute)
                .transpose()?,
        };
        let order =
            serde_json::to_vec(&order).map_err(|error| ToolsError::Internal(error.to_string()))?;
        let supervisor = &self.context().supervisor;
        let log_path = self.preflight_dir().join("workers.log");
        let log = crate::tools::append_log(&log_path)?;
        let mut command = Command::new(&supervisor.program);
        // rl itself, reading the keys it needs on its own; rl's own secrets stay here.
        rl_settings::withhold(&mut command, &rl_settings::SECRET_NAMES);
        let mut child = command
            .arg("work")
            .envs(supervisor.env.iter().map(|(name, value)| (name, value)))
            .env("RL_HOME", self.home())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            // Its own process group: a signal aimed at the caller's group (a client ending its
            // server) misses it.
            .process_group(0)
            .spawn()
            .map_err(|source| ToolsError::Io {
                action: "cannot start the worker",
                path: supervisor.program.clone(),
                source,
            })?;
        let fail = |reason: String| {
            ToolsError::Internal(format!(
                "the test's worker did not start: {reason} (its messages: {})",
                log_path.display()
            ))
        };
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(&order)
                .map_err(|error| fail(format!("cannot give it the call: {error}")))?;
        }
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| fail("no pipe to read its answer from".to_owned()))?;
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let read = std::io::BufReader::new(stdout).read_line(&mut line);
            let _ = sender.send(read.map(|_| line));
        });
        let answer = receiver.recv_timeout(WORKER_START_LIMIT);
        // A long-lived caller (the MCP server) must not collect zombies.
        let reaped = std::thread::spawn(move || child.wait());
        let line = match answer {
            Ok(Ok(line)) if !line.trim().is_empty() => line,
            Ok(_) => {
                let ended = reaped.join().ok().and_then(Result::ok);
                return Err(fail(format!(
                    "it ended ({}) before naming its test",
                    ended.map_or_else(|| "?".to_owned(), |status| status.to_string())
                )));
            }
            Err(_) => {
                return Err(fail(format!(
                    "it named no test within {} s",
                    WORKER_START_LIMIT.as_secs()
                )));
            }
        };
        let said: serde_json::Value = serde_json::from_str(line.trim())
            .map_err(|error| fail(format!("its answer is not JSON: {error}")))?;
        if let Some(error) = said.get("error").and_then(|error| error.as_str()) {
            return Err(fail(error.to_owned()));
        }
        said.get("test_id")
            .and_then(|id| id.as_str())
            .map(str::to_owned)
            .ok_or_else(|| fail(format!("its answer names no test: {said}")))
    }

    /// How long `plan` may take, from the latest tests of its environment and endpoint, and,
    /// when rl serves its models, from the latest starts of rl's server (any environment's).
    fn estimate(&self, plan: &PreflightPlan) -> Estimate {
        let groups = plan
            .steps
            .saturating_mul(u32::try_from(plan.models.len()).unwrap_or(u32::MAX));
        // Newest first; a report is read only when its listing could count, and once for both
        // passes.
        let listed = self.preflights().unwrap_or_default();
        let store = self.preflight_store();
        let reports: Vec<std::cell::OnceCell<Option<rl_preflight::PreflightReport>>> =
            listed.iter().map(|_| std::cell::OnceCell::new()).collect();
        let report = |index: usize| {
            reports[index]
                .get_or_init(|| store.read(&listed[index].test_id).ok())
                .as_ref()
        };
        let per_group = mean_of(
            listed
                .iter()
                .enumerate()
                .filter(|(_, test)| test.environment == plan.environment)
                .filter_map(|(index, _)| report(index))
                .filter(|report| {
                    same_endpoint(&report.base_url, &plan.endpoint.base_url) && report.steps > 0
                })
                .take(5)
                .map(|report| {
                    let groups = f64::from(report.steps) * report.models.len().max(1) as f64;
                    (report.duration_secs - report.server_ready_secs.unwrap_or(0.0)).max(0.0)
                        / groups
                }),
        );
        let server = if plan.server.is_none() {
            ServerStart::NotServed
        } else {
            let starts = (0..listed.len().min(SERVER_STARTS_LOOKED_AT))
                .filter_map(|index| report(index)?.server_ready_secs)
                .take(5);
            match mean_of(starts) {
                None => ServerStart::Unknown,
                Some((seconds, tests)) => ServerStart::Measured { seconds, tests },
            }
        };
        Estimate::of(groups, per_group, server)
    }
}

/// How many of the latest tests are read for the starts of rl's server: a home of many tests
/// that rl never served is not read whole for each new one.
const SERVER_STARTS_LOOKED_AT: usize = 20;

/// The mean of `values` and how many there were; `None` for none.
fn mean_of(values: impl Iterator<Item = f64>) -> Option<(f64, usize)> {
    let values: Vec<f64> = values.collect();
    (!values.is_empty()).then(|| {
        (
            values.iter().sum::<f64>() / values.len() as f64,
            values.len(),
        )
    })
}

/// Loopback endpoints (a checkpoint server's) differ by port from test to test: they count as
/// one.
fn same_endpoint(a: &str, b: &str) -> bool {
    let loopback = |url: &str| url.contains("://127.0.0.1:") || url.contains("://localhost:");
    a == b || (loopback(a) && loopback(b))
}

/// What makes two calls the same: the tool, and the test each would run (environment and its
/// file, edits, models, endpoint, sizes), not how the arguments were spelled.
fn fingerprint(call: &LongCall, plan: &PreflightPlan) -> String {
    let endpoint = if plan.server.is_some() {
        "served by rl"
    } else {
        plan.endpoint.base_url.as_str()
    };
    let content = serde_json::json!({
        "tool": call.tool(),
        "call": call,
        "environment": plan.environment,
        "file": plan.env_file,
        "env_args": plan.env_args,
        "models": plan.models,
        "endpoint": endpoint,
        "steps": plan.steps,
        "group_size": plan.group_size,
    });
    rl_config::sha256_hex(content.to_string().as_bytes())
}

fn write_record(folder: &PreflightFolder, record: &CallRecord) -> Result<(), ToolsError> {
    let text =
        serde_json::to_string(record).map_err(|error| ToolsError::Internal(error.to_string()))?;
    Ok(rl_settings::write_atomically(
        &folder.call(),
        text.as_bytes(),
    )?)
}

fn read_record(folder: &PreflightFolder) -> Option<CallRecord> {
    let text = rl_settings::read_text(&folder.call()).ok()?;
    serde_json::from_str(&text).ok()
}

fn absolute(path: &Path) -> Result<PathBuf, ToolsError> {
    std::path::absolute(path).map_err(|source| ToolsError::Io {
        action: "cannot resolve",
        path: path.to_owned(),
        source,
    })
}
