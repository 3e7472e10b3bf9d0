//! Training metrics of a run, right and available online and offline.
//!
//! Three sources sit behind one trait ([`MetricsSource`]): the JSON-lines file a trainer writes
//! into the run folder, WandB's local `run-<id>.wandb` files (the only place an offline run keeps
//! its history), and WandB's public GraphQL API. [`collect`] asks them in order; [`StatusMetrics`]
//! is the normalised view a status shows, [`Results`] what a finished run hands over, and
//! [`HealthDigest`] flags a run that is not learning. None of these types serialise: the crate
//! writes no file, and rl-tools' answers name every key.

mod accounting;
mod checkpoints;
mod error;
mod health;
mod jsonl;
mod model;
mod results;
mod rollouts;
mod source;
mod trainer_log;
mod view;
mod wandb_api;
mod wandb_file;

pub use accounting::{
    Accounting, STEP_PARTS, TAIL_BYTES, Totals, latest_totals, part_key, tail_rows,
};
pub use checkpoints::{CheckpointRecord, archive_bytes, engine_archive, read_checkpoints};
pub use error::MetricsError;
pub use health::{
    Activity, FlagKind, GroupsSeen, HealthDigest, HealthFlag, HealthPolicy, Phase, StallComponent,
    StepWindow,
};
pub use jsonl::{MetricsFile, read_metrics_file};
pub use model::{
    Checkpoint, HistoryRow, LoggedRun, MetricValue, RunMetrics, RunRole, SourceKind,
    non_finite_spelling, parse_python_json, summary_of,
};
pub use results::{Results, RunIdentity};
pub use rollouts::{
    MAX_ROLLOUT_BYTES, MAX_ROLLOUT_MESSAGES, MAX_ROLLOUT_ROWS, MAX_ROLLOUT_TEXT, MAX_TOOL_CALLS,
    RolloutMessage, RolloutRow, StepRollouts, ToolCall, read_rollouts, rollout_steps,
};
pub use source::{Collected, MetricsSource, RunTarget, SourceFailure, WandbNames, collect};
pub use trainer_log::{WeightsReport, scan as scan_trainer_log};
pub use view::{
    EVAL_BEST_OF_N, EVAL_BEST_OF_N_HIGH, EVAL_BEST_OF_N_LOW, EVAL_MEAN_SCORE, EVAL_MEAN_SCORE_HIGH,
    EVAL_MEAN_SCORE_LOW, EVAL_N, EVAL_PASS_AT_1, EVAL_PASS_AT_N, EVAL_PASS_AT_N_HIGH,
    EVAL_PASS_AT_N_LOW, EVAL_PERCENT_CORRECT, REWARD_MEAN, StatusMetrics,
};
pub use wandb_api::{WandbApi, WandbApiConfig};
pub use wandb_file::{WandbFiles, WandbRunFile, read_wandb_file};
