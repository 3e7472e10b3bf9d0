//! `rl_resume_training`: a stopped, failed, lost or capped run continues from its last saved state
//! (weights and optimizer) as a new run that records its parent, with the parent's config, in
//! its WandB group, its steps and checkpoints numbered on from the parent's. Given extra steps,
//! it is an extension: a completed run continues from its final state with a higher
//! `total_steps`. What every continuation shares (a fork's too) is `start_continuation`.

use std::collections::BTreeMap;

use rl_config::RunSetting;
use rl_process::{EngineState, Lineage, LineageKind, RunRecord, RunState, RunStatus};
use rl_settings::{Caps, HeldOut, RunConfig, RunId, Value, run_dir};

use crate::answers::Started;
use crate::resume_point::{ResumePoint, resume_point, total_steps};
use crate::runs::{started, written_config};
use crate::{Tools, ToolsError};

use crate::limits::MAX_EXTRA_STEPS;

/// A new run continuing `parent` from a saved state: what `start_continuation` needs.
pub(crate) struct Continuation<'a> {
    pub(crate) parent: &'a RunId,
    pub(crate) step: u64,
    pub(crate) state_path: &'a str,
    /// Checked settings over the parent's config (a fork's changes).
    pub(crate) settings: &'a [RunSetting],
    /// The child's `env.total_steps` when it differs from the parent's (an extension).
    pub(crate) total_steps: Option<u64>,
    pub(crate) kind: LineageKind,
    pub(crate) changes: BTreeMap<String, Value>,
    pub(crate) allow_changes: bool,
    /// The child's own caps, asked (merged with the operator's here).
    pub(crate) caps: &'a Caps,
}

impl Tools {
    /// Starts a run that continues `parent`, with the operator's caps only. With
    /// `allow_changes`, also when the parent's environment file has changed since it ran.
    pub fn resume_training(
        &self,
        parent: &RunId,
        allow_changes: bool,
    ) -> Result<Started, ToolsError> {
        self.resume_training_with(parent, allow_changes, &Caps::default(), None)
    }

    /// As `resume_training`, with the continuation's own caps `asked` under the operator's, and
    /// `extra_steps` more than the parent's `total_steps` (an extension; a completed run
    /// continues only so, from its final state). The parent's caps are not inherited: a capped
    /// parent stopped at its cap, and carrying it over would cap the child at once; the
    /// child's prices are the operator's now.
    pub fn resume_training_with(
        &self,
        parent: &RunId,
        allow_changes: bool,
        asked: &Caps,
        extra_steps: Option<u64>,
    ) -> Result<Started, ToolsError> {
        if let Some(extra) = extra_steps {
            check_extra_steps(extra)?;
        }
        let status = self.run_status(parent, i64::MAX)?;
        let refuse = |reason: String| ToolsError::NotResumable {
            run_id: parent.to_string(),
            reason,
        };
        match (status.run.state, extra_steps) {
            (RunState::Stopped | RunState::Failed | RunState::Lost | RunState::Capped, _)
            | (RunState::Completed, Some(_)) => {}
            (RunState::Completed, None) => {
                return Err(refuse(format!(
                    "it completed all its steps; give it more with rl_resume_training \
                     {{\"run_id\": \"{parent}\", \"steps\": \"+N\"}}, fork it from a saved step \
                     with other settings (rl_fork_training {{\"run_id\": \"{parent}\"}} and a \
                     step), or start a new run"
                )));
            }
            (RunState::Stopping, _) => {
                return Err(refuse(
                    "it is stopping; once it has stopped (rl_check_status(run_id) says so), \
                     resume it"
                        .to_owned(),
                ));
            }
            (going, _) => {
                return Err(refuse(format!(
                    "it is {}; stop it first (rl_stop_training), then resume it, or fork it \
                     from a step it saved (rl_fork_training)",
                    going.label()
                )));
            }
        }
        let parent_dir = run_dir(self.home(), parent);
        let Some(parent_total) = total_steps(&RunConfig::read(&status.run.config_path)?) else {
            return Err(refuse(
                "its config's trainer settings cannot be read (see rl_check_status)".to_owned(),
            ));
        };
        self.check_continuable(&status.run, &refuse)?;
        // A completed run's final state is where its extension continues: it is the end of a
        // run only as long as the run has no more steps.
        let point = if status.run.state == RunState::Completed {
            resume_point(&parent_dir, None)
        } else {
            resume_point(&parent_dir, Some(parent_total))
        }
        .map_err(refuse)?;
        let new_total = extra_steps.map(|extra| parent_total.saturating_add(extra));
        let (kind, changes) = match new_total {
            Some(total) => (
                LineageKind::Extension,
                BTreeMap::from([(
                    rl_settings::trainer::TOTAL_STEPS.name.to_owned(),
                    Value::Int(i64::try_from(total).unwrap_or(i64::MAX)),
                )]),
            ),
            None => (LineageKind::Resume, BTreeMap::new()),
        };
        let status = self.start_continuation(&Continuation {
            parent,
            step: point.step,
            state_path: &point.state_path,
            settings: &[],
            total_steps: new_total,
            kind,
            changes,
            allow_changes,
            caps: asked,
        })?;
        let message = match new_total {
            Some(total) => format!(
                "Run {} extends run {parent} to {total} steps, after its step {} from {}.{} Its \
                 trainer checks that the state loaded as it was saved before it trains. Follow \
                 it with rl_check_status(run_id).",
                status.run.id,
                point.step,
                point.state_path,
                passed_over(&point)
            ),
            None => format!(
                "Run {} continues run {parent} after its step {} from {}.{} Its trainer checks \
                 that the state loaded as it was saved before it trains. Follow it with \
                 rl_check_status(run_id).",
                status.run.id,
                point.step,
                point.state_path,
                passed_over(&point)
            ),
        };
        Ok(started(&status, message))
    }

    /// What every continuation of `parent` (a resume, an extension, a fork) needs of it: the
    /// environment it ran still imports, and rl still trains where it trained.
    pub(crate) fn check_continuable(
        &self,
        parent: &RunRecord,
        refuse: &dyn Fn(String) -> ToolsError,
    ) -> Result<(), ToolsError> {
        let id = RunId::parse(&parent.id)?;
        // The environment it ran must still import, as for a new run.
        if let Ok(ran) = rl_config::run_selection(self.home(), &id) {
            self.importable(&ran.environment)?;
        }
        // Where the parent trained, from its launch record (a missing engine folder is refused
        // there): a child that trains elsewhere would send its key to the parent's old address
        // or load states that are not there.
        let local_now = self.service()?.settings().engine.is_local();
        match (self.trained_on(parent)?, local_now) {
            (crate::hosted::TrainedOn::LocalEngine, false) => Err(refuse(
                "it trained on the local engine, and config.toml now trains at a Tinker \
                 service: continue it where it trained ([engine] kind = \"local\")"
                    .to_owned(),
            )),
            (crate::hosted::TrainedOn::Service(_), true) => Err(refuse(
                "it trained at a Tinker service, and config.toml now trains on the local \
                 engine, which has none of its states: continue it where it trained"
                    .to_owned(),
            )),
            _ => Ok(()),
        }
    }

    /// Starts the run `continuation` describes: the parent's config with the child's own
    /// name, addresses, state to load, settings and caps; the parent's record rows up to the
    /// step and its engine folder carried over; its lineage recorded. The parent's slice of
    /// held-out items is kept, whatever `[held_out]` says now: one line of runs never trains on
    /// items another of its steps kept out.
    pub(crate) fn start_continuation(
        &self,
        continuation: &Continuation<'_>,
    ) -> Result<RunStatus, ToolsError> {
        let service = self.service()?;
        let caps = service.settings().caps.for_run(continuation.caps)?;
        let parent = continuation.parent;
        // A lost parent may have left its run-api, environment or engine running, holding
        // ports and the engine folder the child copies: they end first, as `rl runs stop`
        // ends them (and its events say what it found).
        let mut runs = self.runs()?;
        let parent_run = runs.status(parent, i64::MAX)?.run;
        self.check_engine_has_state(&parent_run, continuation)?;
        if parent_run.state == RunState::Lost {
            runs.stop(parent)?;
        }
        let parent_dir = run_dir(self.home(), parent);
        let home = self.home().to_owned();
        let mut settings = service.settings().clone();
        settings.held_out = self.held_out_of(parent).unwrap_or(HeldOut {
            fraction: 0.0,
            ..settings.held_out
        });
        self.launch_with(&settings, |run_id, endpoints| {
            let written = service.write_resumed_config(
                parent,
                run_id,
                endpoints,
                &rl_config::ResumeFrom {
                    state_path: continuation.state_path,
                    step: continuation.step,
                    settings: continuation.settings,
                    total_steps: continuation.total_steps,
                },
                continuation.allow_changes,
                &caps,
            )?;
            rl_process::carry_over(&parent_dir, &run_dir(&home, run_id), continuation.step)?;
            let lineage = Lineage {
                parent: parent.clone(),
                step: continuation.step,
                kind: continuation.kind,
                changes: continuation.changes.clone(),
            };
            Ok(written_config(
                written.path,
                &written.environment,
                self.environment_python(&written.environment)?,
                Some(lineage),
            ))
        })
    }
}

impl Tools {
    /// Refuses, before anything starts, a continuation of a run that trained on the local
    /// engine whose engine database does not record the state it loads as saved: the engine
    /// would answer `404 Checkpoint not found` only once every component had started. Names
    /// the database, what it lacks, and a step whose state it has to fork from instead.
    fn check_engine_has_state(
        &self,
        parent: &RunRecord,
        continuation: &Continuation<'_>,
    ) -> Result<(), ToolsError> {
        if self.trained_on(parent)? != crate::hosted::TrainedOn::LocalEngine {
            return Ok(());
        }
        let id = RunId::parse(&parent.id)?;
        // The database its engine was started with (launch.json), when it is a file in the
        // engine folder a continuation copies; another place or kind of database rl cannot
        // read for it (the trainer still checks what it loads).
        let engine_dir = rl_settings::RunFolder::of(self.home(), &id).engine();
        let Some(database) = rl_process::LaunchPlan::load(self.home(), &id)
            .ok()
            .and_then(|plan| {
                plan.spec(rl_process::Component::Engine)
                    .and_then(|spec| rl_process::engine_database_of(&spec.args))
            })
            .filter(|database| database.starts_with(&engine_dir))
        else {
            return Ok(());
        };
        let (step, state) = (continuation.step, continuation.state_path);
        let problem = match rl_process::engine_state(&database, state) {
            EngineState::Completed | EngineState::NotAnEngineState => return Ok(()),
            EngineState::NoDatabase { database } => format!(
                "its engine database {} is missing, so the local engine would know none of its \
                 saved states and refuse to load step {step}'s ({state}) once every component \
                 had started; put the file back in the run's engine folder, or start a new run",
                database.display()
            ),
            EngineState::Unreadable { database, reason } => format!(
                "its engine database {} cannot be read ({reason}), so the local engine could \
                 not load step {step}'s state ({state}); put back a good copy of the file, or \
                 start a new run",
                database.display()
            ),
            EngineState::NotRecorded { database } => format!(
                "its engine database {} has no saved state {state} (step {step}), so the local \
                 engine would refuse to load it once every component had started; {}",
                database.display(),
                self.states_in_engine(&database, &id, step)
            ),
            EngineState::NotCompleted { database, status } => format!(
                "its engine database {} records the save of {state} (step {step}) as {}, not \
                 completed, so the local engine would refuse to load it; {}",
                database.display(),
                status.to_lowercase(),
                self.states_in_engine(&database, &id, step)
            ),
        };
        let reason = format!("{problem} (nothing was started)");
        Err(match continuation.kind {
            LineageKind::Fork => ToolsError::NotForkable {
                run_id: parent.id.clone(),
                reason: problem,
            },
            _ => ToolsError::NotResumable {
                run_id: parent.id.clone(),
                reason,
            },
        })
    }

    /// The fix when the engine's `database` lacks the state of `missing`: a fork from the
    /// latest other step of run `id` whose state it has, or, without one, a new run.
    fn states_in_engine(&self, database: &std::path::Path, id: &RunId, missing: u64) -> String {
        let loadable: Vec<u64> = crate::resume_point::forkable_states(&run_dir(self.home(), id))
            .unwrap_or_default()
            .into_iter()
            .filter(|(step, state)| {
                *step != missing
                    && rl_process::engine_state(database, state) == EngineState::Completed
            })
            .map(|(step, _)| step)
            .collect();
        match loadable.last() {
            Some(latest) => format!(
                "fork it from a step whose state the database has: rl_fork_training \
                 {{\"run_id\": \"{id}\", \"step\": {latest}}} (steps {}; rl_list_checkpoints \
                 {{\"run_id\": \"{id}\"}} lists its checkpoints)",
                loadable
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None => format!(
                "the database has none of its saved states (rl_list_checkpoints \
                 {{\"run_id\": \"{id}\"}} lists what it recorded); start a new run"
            ),
        }
    }
}

/// `extra` as an extension's steps: at least one, at most `MAX_EXTRA_STEPS`.
fn check_extra_steps(extra: u64) -> Result<(), ToolsError> {
    if (1..=MAX_EXTRA_STEPS).contains(&extra) {
        return Ok(());
    }
    Err(ToolsError::Invalid {
        what: format!("{extra} more steps"),
        reason: format!(
            "an extension adds from 1 to {MAX_EXTRA_STEPS} steps (nothing was started)"
        ),
    })
}

/// The sentence naming the saved states a resume passed over, their files gone.
fn passed_over(point: &ResumePoint) -> String {
    if point.missing.is_empty() {
        return String::new();
    }
    let steps: Vec<String> = point.missing.iter().map(u64::to_string).collect();
    format!(
        " The saved state of step {} is missing from the run's engine folder: it continues \
         from the last state that is there.",
        steps.join(", ")
    )
}
