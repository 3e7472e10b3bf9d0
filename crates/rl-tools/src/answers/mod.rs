//! Every tool's answer, success and error, as an explicit type: each key an agent reads is
//! named here and built from the typed results of the lower crates, whose serde attributes
//! only shape the files they write. The snapshots in `tests/it/answers.rs` show them all.

mod algorithm;
mod checkpoints;
mod compare;
mod config;
mod environments;
mod error;
mod evaluation;
mod fields;
mod health_check;
mod long_calls;
mod metrics;
mod page;
mod preflight;
mod preflight_store;
mod runs;
mod scan;
mod serving;
mod sweeps;

pub use algorithm::{AlgorithmView, LossRow, LossTable};
pub use checkpoints::{
    CheckpointEntry, CheckpointList, Exported, Handover, Kept, MergedExport, Pruned, RunCheckpoints,
};
pub use compare::{ComparedModel, ComparisonAnswer, EstimateView, TrainedCheckpoint};
pub use config::{DisagreementView, EditEntry, IntrospectedConfig};
pub(crate) use environments::unlisted_note;
pub use environments::{
    ConfigClassSourceView, ConfigView, DependenciesView, Edited, EnvironmentDetail,
    EnvironmentEntry, EnvironmentInstalled, EnvironmentList, FieldView, NameSourceView, Selected,
    TrainerSettingView,
};
pub(crate) use error::KnownNames;
pub use error::{ErrorAnswer, error_answer};
pub use evaluation::{EVAL_MEAN_SCORE, EVAL_PERCENT_CORRECT, Evaluated};
pub use fields::{ConstraintsView, DefaultView, EnumMemberView, FieldSpecView, FieldTypeView};
pub use health_check::{Check, HealthReport};
pub(crate) use long_calls::ServerStart;
pub use long_calls::{Estimate, LongCallProgress, LongCallStarted};
pub use metrics::{
    AccountingView, CheckpointView, CostLine, CostReport, CostView, FlagView, GroupsView,
    HealthView, LoggedRunView, LoggedValue, MetricsView, NO_PRICE_NOTE, ResultsPart, ShareView,
    SourceFailureView, ThroughputView, TokensView, UsageView, WindowView,
};
pub use page::{
    Anatomy, MessageView, RolloutView, RolloutsView, RunPage, RunRow, RunRows, SeriesLabel,
    StepAnatomy, ToolCallView,
};
pub use preflight::{ModelAnswer, ModelTested, OriginalSummary, PreflightAnswer, PreflightConfig};
pub use preflight_store::{
    InterruptionView, ModelProgressView, PreflightListingView, PreflightProgressView,
    PreflightShown, PreflightStopView, PreflightWaited,
};
pub use runs::{
    ComponentLog, ComponentView, EventView, EventsView, ProcessView, RateLimited, ResultsAnswer,
    ResultsView, ResumedFrom, RunEntry, RunList, RunView, Started, StatusAnswer, StatusView,
    Stopped, WaitAnswer, WaitView, WaitedView,
};
pub(crate) use runs::{environment_kind_of, process_label};
pub use scan::{DuplicateNameView, FileWarningView, SkipReasonView, SkippedFileView, WarningView};
pub(crate) use serving::ServingAnswer;
pub use serving::{
    HostedEndpoint, HostedModel, ServedList, ServedView, ServingStarted, StoppedServer,
};
pub use sweeps::{
    GridAxis, HeldOutScore, MetricView, SweepCurve, SweepEntry, SweepList, SweepPage,
    SweepRateLimited, SweepRow, SweepStarted, SweepStopped, SweepView,
};

use crate::ToolsError;

/// An answer as JSON.
pub(crate) fn to_json<T: serde::Serialize>(answer: &T) -> Result<serde_json::Value, ToolsError> {
    serde_json::to_value(answer)
        .map_err(|error| ToolsError::Internal(format!("cannot encode the answer: {error}")))
}

/// `rl_test_inference`'s answer as JSON.
pub fn report_json(
    report: &rl_preflight::PreflightReport,
) -> Result<serde_json::Value, ToolsError> {
    to_json(&PreflightAnswer::from(report))
}
