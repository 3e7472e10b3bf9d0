//! Training runs as supervised groups of processes: the run state machine, the embedded store
//! that every caller shares, process identities that survive pid reuse, process groups that
//! stop as a whole, and free loopback ports per run.
//!
//! The `Launcher` trait starts components (locally: one process group each, output to a log).
//! What outlives a process group — output copied into a log with keys redacted, processes that
//! left for a session of their own — is handled here for every owner of processes, a run's
//! supervisor and a pre-flight alike.
//! The supervisor and the readiness gates build on these (see the run lifecycle issue;
//! docs/ARCHITECTURE.md says what exists).

mod capped_log;
mod engine_database;
mod env_groups;
mod error;
mod groups;
mod identity;
mod launcher;
mod log_tail;
mod output;
mod plan;
mod ports;
mod probe;
mod resume;
mod runs;
mod slurm;
mod state;
mod store;
mod strays;
mod supervisor;
mod template;

pub use capped_log::{DEFAULT_LOG_LIMIT, LogLimit, is_capped, log_end, log_files, tail_path};
pub use engine_database::{CHECKPOINTS_TABLE, EngineState, engine_database_of, engine_state};
pub use env_groups::{EnvGroups, GROUPS_FILE_VARIABLE, HandlerErrors, LastSent, RunGroups};
pub use error::ProcessError;
pub use groups::{StopOutcome, describe_stops, group_is_ours, stop_group, stop_recorded_group};
pub use identity::{ProcessIdentity, boot_id, is_another_boot, members_of_group};
pub use launcher::{
    AllocationNote, ClusterEnd, LaunchSpec, Launcher, LocalLauncher, Placement, RunningComponent,
};
pub use log_tail::{LogTail, read_log_tail};
pub use output::{OutputCopy, redacted_output};
pub use plan::{LaunchPlan, LaunchRecord};
pub use ports::{free_loopback_ports, is_listening};
pub use probe::{HttpProbe, Probe, Readiness};
pub use resume::{carry_over, copy_engine};
pub use runs::{
    DEFAULT_EVENT_LIMIT, EvaluateCommand, RunStatus, Runs, StopReport, SupervisorCommand,
    WaitOutcome, WaitUntil, WrittenConfig,
};
pub use state::{Component, ComponentStatus, Phase, RunState, outcome_of_exit};
pub use store::{
    ComponentRecord, Event, Lineage, LineageKind, NewRun, NewSweep, PointOutcome, RunRecord,
    RunStore, SweepCreated, SweepMember, SweepPoint, SweepPointState, SweepRecord, SweepState,
    has_store,
};
pub use strays::{
    RUN_DIR_VARIABLE, Stray, StrayOutcome, carrying_dir, carrying_run_dir, descendants_of,
    end_strays,
};
pub use supervisor::{Supervisor, supervise};
pub use template::{TemplateValues, render};

/// The single-threaded runtime the synchronous entry points (the supervisor, a stop without
/// it) run their async work on.
pub(crate) fn current_thread_runtime() -> Result<tokio::runtime::Runtime, ProcessError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ProcessError::Runtime)
}
