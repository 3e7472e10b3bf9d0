//! The `rl_*` tools agents know, over the lower crates: typed operations ([`Tools`]) that every
//! face shares, and the [`Registry`] that exposes them to agents as named tools with JSON
//! schemas and JSON answers (the MCP server, the HTTP API and `rl tool call` adapt it).

mod accounting;
mod agent_install;
mod answers;
mod as_trained;
mod checkpoint_models;
mod checkpoint_test_size;
mod checkpoints;
mod compare;
mod costs;
mod diagnosis;
pub mod env_dependencies;
mod env_tools;
mod environments;
mod error;
mod evaluation;
mod first_run;
mod fork;
mod handover;
mod health_check;
mod hosted;
mod hosted_checks;
mod limits;
mod long_calls;
mod merged_export;
mod metrics;
mod new_env;
pub mod own_python;
mod page;
mod preflight;
mod prompts;
mod python_probe;
mod rate_limit;
mod reach;
mod registry;
pub mod registry_install;
mod resume;
mod resume_point;
mod runs;
mod saved_states;
mod serving;
pub mod setup;
mod sweeps;
mod tool_specs;
mod tools;

pub use answers::{
    AccountingView, Anatomy, CostLine, CostReport, CostView, NO_PRICE_NOTE, ResultsAnswer,
    ShareView, StatusAnswer, StepAnatomy, ThroughputView, TokensView, UsageView,
};
pub use answers::{AlgorithmView, LossRow, LossTable};
pub use answers::{
    Check, CheckpointEntry, CheckpointList, CheckpointView, ComparedModel, ComparisonAnswer,
    ComponentLog, ComponentView, ConfigClassSourceView, ConfigView, ConstraintsView, DefaultView,
    DependenciesView, DisagreementView, DuplicateNameView, EVAL_MEAN_SCORE, EVAL_PERCENT_CORRECT,
    EditEntry, Edited, EnumMemberView, EnvironmentDetail, EnvironmentEntry, EnvironmentInstalled,
    EnvironmentList, ErrorAnswer, Estimate, EstimateView, Evaluated, EventView, EventsView,
    Exported, FieldSpecView, FieldTypeView, FieldView, FileWarningView, FlagView, GroupsView,
    HealthReport, HealthView, InterruptionView, IntrospectedConfig, Kept, LoggedRunView,
    LoggedValue, LongCallProgress, LongCallStarted, MessageView, MetricsView, ModelAnswer,
    ModelProgressView, ModelTested, NameSourceView, OriginalSummary, PreflightAnswer,
    PreflightConfig, PreflightListingView, PreflightProgressView, PreflightShown,
    PreflightStopView, PreflightWaited, ProcessView, Pruned, RateLimited, ResultsPart, ResultsView,
    ResumedFrom, RolloutView, RolloutsView, RunCheckpoints, RunEntry, RunList, RunPage, RunRow,
    RunRows, RunView, Selected, SeriesLabel, SkipReasonView, SkippedFileView, SourceFailureView,
    Started, StatusView, Stopped, ToolCallView, TrainedCheckpoint, TrainerSettingView, WaitAnswer,
    WaitView, WaitedView, WarningView, WindowView, error_answer, report_json,
};
pub use answers::{
    GridAxis, HeldOutScore, MetricView, SweepCurve, SweepEntry, SweepList, SweepPage,
    SweepRateLimited, SweepRow, SweepStarted, SweepStopped, SweepView,
};
pub use answers::{
    Handover, HostedEndpoint, HostedModel, MergedExport, ServedList, ServedView, ServingStarted,
    StoppedServer,
};
pub use checkpoint_models::RUN_PREFIX;
pub use checkpoint_test_size::{DEFAULT_COMPARE_GROUP_SIZE, DEFAULT_COMPARE_PROMPTS};
pub use compare::{CompareOptions, ComparePlan};
pub use error::{FailureKind, ToolsError};
pub use evaluation::EvaluationRequest;
pub use first_run::FirstRunAdvice;
pub use health_check::{MIN_PYTHON, check as health_check};
pub use hosted::{KeepFor, MAX_KEEP_DAYS};
pub use limits::MAX_SWEEP_POINTS;
pub use long_calls::{LONG_TOOLS, LongCall, LongCallState, Planned, WorkOrder};
pub use metrics::SourceChoice;
pub use new_env::{NewEnvironment, new_environment};
pub use preflight::InferenceOptions;
pub use python_probe::{Probes, SdkVersions};
pub use registry::{CallProgress, Caller, Registry, ToolReply};
/// The largest pre-flight anyone may ask for; rl-preflight owns the limits and the check.
pub use rl_preflight::{MAX_GROUP_SIZE, MAX_STEPS};
pub use serving::{LocalServe, SERVED_DIR, ServeEnd, ServePlan};
pub use sweeps::{SweepMetric, SweepRequest};
pub use tool_specs::{TOOL_NAMES, ToolSpec, spec, specs};
pub use tools::{ToolContext, Tools, TreeOverride};
// What a face names when it opens the tools or runs a supervisor; the lower crates own them.
pub use rl_process::{DEFAULT_EVENT_LIMIT, EvaluateCommand, SupervisorCommand, has_store};
pub use rl_settings::default_home;
pub use runs::supervise;

/// How many run ids an answer about an unknown run lists, newest first.
pub const KNOWN_RUNS_SHOWN: usize = 20;
