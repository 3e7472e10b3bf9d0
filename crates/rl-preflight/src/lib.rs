//! Pre-flight of an environment against several models before training.
//!
//! For each model, atroposlib's `process` mode runs the selected environment for a few steps
//! against an OpenAI-compatible endpoint (OpenRouter by default), every model at once (bounded),
//! each in its own process group with a timeout. What each wrote is read back into figures —
//! accuracy under one notion of "correct" shared by the test, groups that give GRPO no signal —
//! and a verdict: ready, too easy, too hard, no signal, or broken. Tests are kept in the state
//! directory, listed and readable later, and known beyond the process running them: each
//! records that process and every model's process group, so another process can follow a
//! test, stop it, or end what a killed one left (`tracking`).

mod analysis;
mod command;
mod compare;
mod error;
mod files;
mod folder;
mod marks;
mod measures;
mod model;
mod plan;
mod preflight;
mod report;
mod runner;
mod server;
mod store;
mod tracking;
mod verdict;

pub use analysis::{
    CorrectRule, Figures, Groups, ScoreStats, figures, parse_groups, read_groups, threshold,
};
pub use command::{CHILD_KEY_VARIABLE, MODULE_VARIABLE, ModelJob, ROOT_VARIABLE, model_job};
pub use compare::{Comparison, Direction, Estimate, MIN_PROMPTS, ModelEstimate, compare, evaluate};
pub use error::PreflightError;
pub use folder::{ModelFiles, PreflightFolder, file_stem};
pub use marks::{ModelMarks, TEST_DIR_VARIABLE, TEST_MODEL_VARIABLE};
pub use measures::{Measure, best_of, pass_at};
pub use model::{DrawnItems, ModelOutcome, ModelReport};
pub use plan::{
    DEFAULT_CONCURRENCY, DEFAULT_GROUP_SIZE, DEFAULT_MODELS, DEFAULT_STEPS, DEFAULT_TIMEOUT,
    Endpoint, HeldOutItems, Key, LOCKED_FIELDS, MAX_GROUP_SIZE, MAX_MODELS, MAX_STEPS,
    OPENROUTER_BASE_URL, OPENROUTER_KEY_VARIABLE, PreflightPlan, PreflightRequest, check_models,
    check_size,
};
pub use preflight::run_test;
pub use report::PreflightReport;
pub use runner::{LocalModelRunner, ModelRun, ModelRunner, Progress, ProgressSink};
pub use server::{ModelServer, ServedProcess};
pub use store::{
    ModelProgress, PreflightListing, PreflightProgress, PreflightStore, PreflightView,
};
pub use tracking::{
    Interruption, PreflightOwner, PreflightStarted, PreflightStatus, PreflightStopReport,
    StopRequest,
};
pub use verdict::{
    Grading, ModelVerdict, Summary, Verdict, VerdictBasis, VerdictPolicy, label, summarise,
};
