//! What a failure is and what the caller can do about it, for every error of every layer: one
//! walk, exhaustive at each level (no catch-all), so a new error variant cannot compile until
//! someone decides its kind and its advice. The registry's answers, the HTTP status, MCP's
//! `isError` and the CLI's `--json` errors and exit codes all read it.

use rl_config::ConfigError;
use rl_discovery::DiscoveryError;
use rl_metrics::MetricsError;
use rl_preflight::PreflightError;
use rl_process::ProcessError;
use rl_settings::{SettingsError, Value};

use crate::error::{FailureKind, ToolsError};

/// An error's kind and the advice for it.
#[derive(Debug)]
pub(crate) struct Diagnosis<'a> {
    pub(crate) kind: FailureKind,
    pub(crate) advice: Advice<'a>,
}

/// What to tell the caller, with the facts the answer lists beside the hint.
#[derive(Debug)]
pub(crate) enum Advice<'a> {
    /// The request says what is wrong; correct it.
    CorrectRequest,
    /// The machine or a service failed; the health check says whether it is ready.
    RetryWhenReady,
    /// A file of rl's state is broken.
    CheckStateDirectory,
    /// The operator must point rl at a tinker-atropos tree.
    ConfigureTree,
    /// The operator's settings cannot be read.
    FixSettings,
    /// Call one of the tools that exist.
    KnownTools,
    /// Pass arguments that match this tool's schema.
    ToolParameters {
        tool: &'a str,
    },
    UnknownRun {
        active: &'a [String],
        known: &'a [String],
    },
    UnknownSweep {
        known: &'a [String],
    },
    /// The operator must provide this key.
    MissingKey {
        variable: &'a str,
    },
    SelectFirst,
    UnknownField {
        closest: &'a [String],
    },
    LockedField {
        value: &'a Value,
    },
    WrongType {
        expected: &'a str,
    },
    NotAllowed {
        allowed: &'a [Value],
    },
    OutOfRange {
        range: &'a str,
    },
    UnknownEnvironment {
        suggestions: &'a [String],
    },
    AmbiguousEnvironment {
        candidates: &'a [String],
    },
}

impl ToolsError {
    /// What kind of failure this is: decides the HTTP status, MCP's `isError` and the exit code.
    pub fn kind(&self) -> FailureKind {
        diagnose(self).kind
    }
}

pub(crate) fn diagnose(error: &ToolsError) -> Diagnosis<'_> {
    use Advice as A;
    use FailureKind as K;
    let (kind, advice) = match error {
        ToolsError::Invalid { .. } | ToolsError::Exists { .. } => {
            (K::BadRequest, A::CorrectRequest)
        }
        ToolsError::BadArguments { tool, .. } => (K::BadRequest, A::ToolParameters { tool }),
        ToolsError::UnknownTool { .. } => (K::NotFound, A::KnownTools),
        ToolsError::UnknownRun { active, known, .. } => {
            (K::NotFound, A::UnknownRun { active, known })
        }
        ToolsError::UnknownSweep { known, .. } => (K::NotFound, A::UnknownSweep { known }),
        ToolsError::NotResumable { .. }
        | ToolsError::NotForkable { .. }
        | ToolsError::NotStartable { .. }
        | ToolsError::TestNotStartable { .. } => (K::Precondition, A::CorrectRequest),
        ToolsError::MissingDependencies { .. } | ToolsError::OperatorForbids { .. } => {
            (K::Precondition, A::CorrectRequest)
        }
        ToolsError::RunFilesMissing { .. } => (K::Precondition, A::CheckStateDirectory),
        ToolsError::Io { .. } | ToolsError::Internal(_) => (K::Internal, A::RetryWhenReady),
        ToolsError::Settings(error) => return settings(error),
        ToolsError::Config(error) => return config(error),
        ToolsError::Discovery(error) => return discovery(error),
        ToolsError::Process(error) => return process(error),
        ToolsError::Metrics(error) => return metrics(error),
        ToolsError::Preflight(error) => return preflight(error),
    };
    Diagnosis { kind, advice }
}

fn process(error: &ProcessError) -> Diagnosis<'_> {
    use Advice as A;
    use FailureKind as K;
    let (kind, advice) = match error {
        ProcessError::Settings(error) => return settings(error),
        ProcessError::UnknownRun(_) => (K::NotFound, A::RetryWhenReady),
        ProcessError::MissingTinkerKey { .. } => (
            K::Precondition,
            A::MissingKey {
                variable: "TINKER_API_KEY",
            },
        ),
        ProcessError::MalformedTinkerKey { .. } | ProcessError::AlreadyResumed { .. } => {
            (K::Precondition, A::CorrectRequest)
        }
        ProcessError::NoRoot
        | ProcessError::FixedPortInUse { .. }
        | ProcessError::TooManyRuns { .. }
        | ProcessError::TooManySweeps { .. } => (K::Precondition, A::RetryWhenReady),
        ProcessError::Store(_)
        | ProcessError::DuplicateRun(_)
        | ProcessError::Io { .. }
        | ProcessError::NoFreePort(_)
        | ProcessError::Signal(_)
        | ProcessError::Probe(_)
        | ProcessError::Programs(_)
        | ProcessError::Supervisor { .. }
        | ProcessError::SupervisorSetup(_)
        | ProcessError::Runtime(_)
        | ProcessError::Slurm(_)
        | ProcessError::SlurmEnded(_)
        | ProcessError::Launch { .. } => (K::Internal, A::RetryWhenReady),
    };
    Diagnosis { kind, advice }
}

fn metrics(error: &MetricsError) -> Diagnosis<'_> {
    use Advice as A;
    use FailureKind as K;
    let (kind, advice) = match error {
        MetricsError::MissingApiKey => (
            K::Precondition,
            A::MissingKey {
                variable: "WANDB_API_KEY",
            },
        ),
        MetricsError::Unauthorized { .. } => (K::Precondition, A::RetryWhenReady),
        MetricsError::NotFound { .. } => (K::NotFound, A::RetryWhenReady),
        MetricsError::Io { .. }
        | MetricsError::NotAWandbFile { .. }
        | MetricsError::Http { .. }
        | MetricsError::Timeout { .. }
        | MetricsError::Deadline { .. }
        | MetricsError::Transport { .. }
        | MetricsError::Malformed(_)
        | MetricsError::GraphQl(_) => (K::Internal, A::RetryWhenReady),
    };
    Diagnosis { kind, advice }
}

fn preflight(error: &PreflightError) -> Diagnosis<'_> {
    use Advice as A;
    use FailureKind as K;
    let (kind, advice) = match error {
        PreflightError::Config(error) => return config(error),
        PreflightError::Settings(error) => return settings(error),
        PreflightError::Invalid { .. } | PreflightError::OutOfRange { .. } => {
            (K::BadRequest, A::CorrectRequest)
        }
        PreflightError::MissingKey { variable }
        | PreflightError::MissingServiceKey { variable } => {
            (K::Precondition, A::MissingKey { variable })
        }
        PreflightError::UnknownTest(_) => (K::NotFound, A::CorrectRequest),
        PreflightError::Io { .. } => (K::Internal, A::RetryWhenReady),
        PreflightError::CorruptReport { .. } => (K::Internal, A::CheckStateDirectory),
    };
    Diagnosis { kind, advice }
}

fn config(error: &ConfigError) -> Diagnosis<'_> {
    use Advice as A;
    use FailureKind as K;
    let (kind, advice) = match error {
        ConfigError::Discovery(error) => return discovery(error),
        ConfigError::NothingSelected => (K::Precondition, A::SelectFirst),
        ConfigError::Settings(error) => return settings(error),
        ConfigError::UnknownField { closest, .. } => (K::BadRequest, A::UnknownField { closest }),
        ConfigError::LockedField { value, .. } => (K::BadRequest, A::LockedField { value }),
        ConfigError::WrongType { expected, .. } => (K::BadRequest, A::WrongType { expected }),
        ConfigError::NotAllowed { allowed, .. } => (K::BadRequest, A::NotAllowed { allowed }),
        ConfigError::OutOfRange { range, .. } => (K::BadRequest, A::OutOfRange { range }),
        ConfigError::InvalidInput { .. } => (K::BadRequest, A::CorrectRequest),
        ConfigError::EnvironmentChanged { .. } | ConfigError::UnknownRunEnvironment { .. } => {
            (K::Precondition, A::CorrectRequest)
        }
        ConfigError::Source { .. }
        | ConfigError::CorruptState { .. }
        | ConfigError::Io { .. }
        | ConfigError::Introspection(_) => (K::Internal, A::CheckStateDirectory),
    };
    Diagnosis { kind, advice }
}

fn settings(error: &SettingsError) -> Diagnosis<'_> {
    use Advice as A;
    use FailureKind as K;
    let (kind, advice) = match error {
        SettingsError::Invalid(_) => (K::Precondition, A::FixSettings),
        SettingsError::InvalidInput { .. } => (K::BadRequest, A::CorrectRequest),
        SettingsError::NotAFile { .. } | SettingsError::Io { .. } => {
            (K::Internal, A::CheckStateDirectory)
        }
    };
    Diagnosis { kind, advice }
}

fn discovery(error: &DiscoveryError) -> Diagnosis<'_> {
    use Advice as A;
    use FailureKind as K;
    let (kind, advice) = match error {
        DiscoveryError::UnknownEnvironment { suggestions, .. } => {
            (K::NotFound, A::UnknownEnvironment { suggestions })
        }
        DiscoveryError::AmbiguousEnvironment { candidates, .. } => {
            (K::BadRequest, A::AmbiguousEnvironment { candidates })
        }
        DiscoveryError::RootNotFound { .. }
        | DiscoveryError::RootNotADirectory { .. }
        | DiscoveryError::RootUnreadable { .. } => (K::Precondition, A::ConfigureTree),
    };
    Diagnosis { kind, advice }
}
