//! What `rl preflight list|show|wait|stop --json` print of the tests the pre-flight store
//! keeps: a listing, a test without a report (running or interrupted), a stop. A test with a
//! report is `rl_test_inference`'s answer (`preflight.rs`).

use std::path::PathBuf;

use rl_preflight::{
    Interruption, ModelProgress, PreflightListing, PreflightProgress, PreflightStopReport,
    PreflightView, Verdict,
};
use serde::Serialize;

use super::preflight::PreflightAnswer;

/// One test of `rl preflight list`.
#[derive(Debug, Clone, Serialize)]
pub struct PreflightListingView {
    pub test_id: String,
    pub environment: String,
    pub models: Vec<String>,
    pub started_at: String,
    /// running, finished, stopped or interrupted.
    pub status: &'static str,
    /// `null` while it runs, or when it was interrupted before its report.
    pub verdict: Option<Verdict>,
    pub models_succeeded: Option<usize>,
    pub output_dir: PathBuf,
}

impl From<&PreflightListing> for PreflightListingView {
    fn from(listing: &PreflightListing) -> Self {
        Self {
            test_id: listing.test_id.clone(),
            environment: listing.environment.clone(),
            models: listing.models.clone(),
            started_at: listing.started_at.clone(),
            status: listing.status.label(),
            verdict: listing.verdict,
            models_succeeded: listing.models_succeeded,
            output_dir: listing.output_dir.clone(),
        }
    }
}

/// A test as `rl preflight show` gives it: its report, or how far it got.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum PreflightShown {
    Reported(Box<PreflightAnswer>),
    Unfinished(Box<PreflightProgressView>),
}

impl From<&PreflightView> for PreflightShown {
    fn from(view: &PreflightView) -> Self {
        match view {
            PreflightView::Reported(report) => {
                Self::Reported(Box::new(PreflightAnswer::from(&**report)))
            }
            PreflightView::Unfinished(progress) => {
                Self::Unfinished(Box::new(PreflightProgressView::from(&**progress)))
            }
        }
    }
}

/// `rl preflight wait --json`: the test, and whether it was still running when the wait ended.
#[derive(Debug, Clone, Serialize)]
pub struct PreflightWaited {
    pub timed_out: bool,
    pub test: PreflightShown,
}

/// A test without a report: running, or interrupted.
#[derive(Debug, Clone, Serialize)]
pub struct PreflightProgressView {
    pub test_id: String,
    /// running or interrupted.
    pub status: &'static str,
    pub environment: String,
    pub base_url: String,
    pub started_at: String,
    pub output_dir: PathBuf,
    /// The process running it (`rl preflight`, `rl mcp`, `rl serve`, …).
    pub owner_pid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_requested_at: Option<String>,
    /// Why it is interrupted, and what became of its model processes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interruption: Option<InterruptionView>,
    pub models: Vec<ModelProgressView>,
}

impl From<&PreflightProgress> for PreflightProgressView {
    fn from(progress: &PreflightProgress) -> Self {
        Self {
            test_id: progress.test_id.clone(),
            status: progress.status.label(),
            environment: progress.environment.clone(),
            base_url: progress.base_url.clone(),
            started_at: progress.started_at.clone(),
            output_dir: progress.output_dir.clone(),
            owner_pid: progress.owner_pid,
            stop_requested_at: progress.stop_requested_at.clone(),
            interruption: progress.interruption.as_ref().map(InterruptionView::from),
            models: progress
                .models
                .iter()
                .map(ModelProgressView::from)
                .collect(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct InterruptionView {
    pub found_at: String,
    pub reason: String,
    /// What became of its model processes.
    pub ended: String,
}

impl From<&Interruption> for InterruptionView {
    fn from(interruption: &Interruption) -> Self {
        Self {
            found_at: interruption.found_at.clone(),
            reason: interruption.reason.clone(),
            ended: interruption.ended.clone(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ModelProgressView {
    pub model: String,
    /// Groups written so far.
    pub groups_done: u32,
    pub total_groups: Option<u32>,
    /// Whether its process group has a process now.
    pub running: bool,
    pub log_path: PathBuf,
    /// Its log reached the size limit (`run.log_limit_bytes`): `log_path` keeps the head, the
    /// latest output is in `log_tail_path`. Both only when so.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub log_capped: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_tail_path: Option<PathBuf>,
}

impl From<&ModelProgress> for ModelProgressView {
    fn from(model: &ModelProgress) -> Self {
        let log_capped = rl_process::is_capped(&model.log_path);
        Self {
            model: model.model.clone(),
            groups_done: model.groups_done,
            total_groups: model.total_groups,
            running: model.running,
            log_path: model.log_path.clone(),
            log_capped,
            log_tail_path: log_capped.then(|| rl_process::tail_path(&model.log_path)),
        }
    }
}

/// `rl preflight stop --json`.
#[derive(Debug, Clone, Serialize)]
pub struct PreflightStopView {
    pub test_id: String,
    /// Whether anything was stopped.
    pub stopped: bool,
    /// The test's status afterwards.
    pub status: &'static str,
    pub message: String,
}

impl From<&PreflightStopReport> for PreflightStopView {
    fn from(report: &PreflightStopReport) -> Self {
        Self {
            test_id: report.test_id.clone(),
            stopped: report.stopped,
            status: report.status.label(),
            message: report.message.clone(),
        }
    }
}
