//! Training runs: start, status with metrics, stop, results, list, events, wait, logs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rl_config::{ConfigService, SelectedEnvironment};
use rl_metrics::{Collected, HealthDigest, LoggedRun, Results, StatusMetrics};
use rl_process::{
    Lineage, LogTail, ProcessError, RunRecord, RunStatus, StopReport, WaitOutcome, WaitUntil,
    WrittenConfig,
};
use rl_settings::{Caps, RunConfig, RunEndpoints, RunId, RunWandb, Settings};

use crate::answers::{
    AlgorithmView, ComponentLog, EventView, EventsView, GroupsView, HealthView, MetricsView,
    ResultsPart, ResultsView, RunEntry, RunList, RunView, SourceFailureView, Started, StatusAnswer,
    StatusView, Stopped, process_label,
};
use crate::metrics::{self, Patience, SourceChoice};
use crate::{Tools, ToolsError};

impl Tools {
    /// A run id as given, checked for shape.
    pub fn run_id(&self, text: &str) -> Result<RunId, ToolsError> {
        Ok(RunId::parse(text)?)
    }

    /// Maps the store's "no such run" to an error that lists the ids that exist.
    fn known_run<T>(&self, id: &RunId, result: Result<T, ProcessError>) -> Result<T, ToolsError> {
        match result {
            Err(ProcessError::UnknownRun(_)) => {
                let runs = self
                    .runs()
                    .and_then(|mut runs| Ok(runs.list()?))
                    .unwrap_or_default();
                let ids = |runs: &mut dyn Iterator<Item = &rl_process::RunRecord>| {
                    runs.take(crate::KNOWN_RUNS_SHOWN)
                        .map(|run| run.id.clone())
                        .collect()
                };
                Err(ToolsError::UnknownRun {
                    run_id: id.to_string(),
                    active: ids(&mut runs.iter().filter(|run| !run.state.is_finished())),
                    known: ids(&mut runs.iter()),
                })
            }
            other => Ok(other?),
        }
    }

    /// A run with the operator's caps only (`[caps]`).
    pub fn start_training(&self) -> Result<Started, ToolsError> {
        self.start_training_with(&Caps::default())
    }

    /// A run with its own caps `asked` (`rl runs start --max-cost/--max-tokens/--max-hours`,
    /// `rl_start_training`'s `max_*`) under the operator's: one above the operator's is
    /// refused, as is a cost cap without a price, before anything starts.
    pub fn start_training_with(&self, asked: &Caps) -> Result<Started, ToolsError> {
        self.start_run(asked, &RunPlan::default())
    }

    /// A run with its own caps, of `plan`'s selection (else the one selected now) with its
    /// settings (checked already: `check_run_settings`) on top.
    pub(crate) fn start_run(&self, asked: &Caps, plan: &RunPlan) -> Result<Started, ToolsError> {
        let service = self.service()?;
        let caps = service.settings().caps.for_run(asked)?;
        let selection = match &plan.selection {
            Some(selection) => Some(selection.clone()),
            None => service.selection().ok(),
        };
        // An environment that cannot import is refused before any component starts.
        if let Some(selection) = &selection {
            self.importable(&selection.environment)?;
        }
        let status = self.launch(&service, |run_id, endpoints| {
            let written = match &selection {
                Some(selection) => service.write_run_config_of(
                    selection,
                    run_id,
                    Some(endpoints),
                    &caps,
                    &plan.settings,
                )?,
                None => service.write_run_config(run_id, Some(endpoints), &caps, &plan.settings)?,
            };
            let mut written = written_config(
                written.path,
                &written.selection.environment,
                self.environment_python(&written.selection.environment)?,
                None,
            );
            written.sweep.clone_from(&plan.sweep);
            Ok(written)
        })?;
        Ok(started(
            &status,
            format!(
                "Training run {} is starting. Follow it with rl_wait_training(run_id), which \
                 answers at each step and at its end (with a shell: `rl runs wait {}`).",
                status.run.id, status.run.id
            ),
        ))
    }

    /// The run's record and events, without metrics (quick: no WandB).
    pub fn run_status(&self, id: &RunId, since: i64) -> Result<RunStatus, ToolsError> {
        let result = self.runs()?.status(id, since);
        self.known_run(id, result)
    }

    pub async fn check_status(
        &self,
        id: &RunId,
        since: i64,
        source: SourceChoice,
    ) -> Result<StatusView, ToolsError> {
        let owned = id.clone();
        let status = self
            .blocking(move |tools| tools.run_status(&owned, since))
            .await?;
        self.with_metrics(status, source).await
    }

    /// A status read already, with the run's latest metrics and health.
    pub async fn with_metrics(
        &self,
        status: RunStatus,
        source: SourceChoice,
    ) -> Result<StatusView, ToolsError> {
        Ok(self
            .with_metrics_and_accounting(status, source)
            .await?
            .status)
    }

    /// A status read already, with the run's latest metrics, health and accounting, from one
    /// collection of its metrics.
    pub async fn with_metrics_and_accounting(
        &self,
        status: RunStatus,
        source: SourceChoice,
    ) -> Result<StatusAnswer, ToolsError> {
        let wandb = wandb_of(&status.run);
        let collected = metrics::collect(
            &status.run,
            &wandb,
            source,
            Patience::Status,
            self.secrets(),
            &self.context().environment,
            &self.child_environment(),
        )
        .await?;
        let accounting = collected
            .metrics
            .as_ref()
            .and_then(|metrics| metrics.trainer.as_ref())
            .and_then(|trainer| {
                crate::accounting::accounting_from(&trainer.history, &status.run.config_path)
            });
        Ok(StatusAnswer {
            status: status_view(&status, &collected, wandb.ok()),
            accounting,
        })
    }

    pub fn stop_training(&self, id: &RunId) -> Result<Stopped, ToolsError> {
        let result = self.runs()?.stop(id);
        let StopReport {
            message,
            stopped,
            status,
        } = self.known_run(id, result)?;
        Ok(Stopped {
            message,
            run_id: status.run.id.clone(),
            status: status.run.state.name(),
            stopped,
            run: RunView::from(&status),
        })
    }

    pub async fn results(
        &self,
        id: &RunId,
        source: SourceChoice,
    ) -> Result<ResultsView, ToolsError> {
        let owned = id.clone();
        let status = self
            .blocking(move |tools| tools.run_status(&owned, i64::MAX))
            .await?;
        let run = status.run;
        let wandb = wandb_of(&run);
        let collected = metrics::collect(
            &run,
            &wandb,
            source,
            Patience::Results,
            self.secrets(),
            &self.context().environment,
            &self.child_environment(),
        )
        .await?;
        let results = collected
            .metrics
            .as_ref()
            .map(|found| Results::of(found, &metrics::activity_of(&run), &metrics::policy(&run)));
        let wandb = wandb.ok();
        let environment_kind = crate::answers::environment_kind_of(&run);
        Ok(ResultsView {
            environment_kind,
            wandb_url: results
                .as_ref()
                .and_then(|r| r.trainer_run.as_ref())
                .and_then(|r| r.url.clone()),
            run_id: run.id,
            status: run.state.name(),
            environment: run.environment,
            error: run.error,
            wandb_project: wandb.as_ref().and_then(|w| w.project.clone()),
            wandb_group: wandb.as_ref().and_then(|w| w.group.clone()),
            wandb_run_name: wandb.and_then(|w| w.run_name),
            results: results.as_ref().map(ResultsPart::from),
            metrics_errors: failures_of(&collected),
        })
    }

    pub fn list_runs(&self) -> Result<RunList, ToolsError> {
        let runs: Vec<RunEntry> = self
            .runs()?
            .list()?
            .into_iter()
            .map(|run| {
                let wandb_run_name = wandb_of(&run).ok().and_then(|w| w.run_name);
                RunEntry::new(run, wandb_run_name)
            })
            .collect();
        Ok(RunList {
            count: runs.len(),
            runs,
        })
    }

    pub fn events(&self, id: &RunId, since: i64, limit: usize) -> Result<EventsView, ToolsError> {
        let result = self.runs()?.events(id, since, limit);
        let events = self.known_run(id, result)?;
        Ok(EventsView {
            run_id: id.to_string(),
            next_since: events.last().map_or(since, |event| event.seq),
            events: events.iter().map(EventView::from).collect(),
        })
    }

    pub fn wait(
        &self,
        id: &RunId,
        until: WaitUntil,
        timeout: Duration,
        since: i64,
    ) -> Result<WaitOutcome, ToolsError> {
        let result = self.runs()?.wait(id, until, timeout, since);
        self.known_run(id, result)
    }

    /// The last `lines` lines of each chosen component's log (all components when `component`
    /// is `None`).
    pub fn logs(
        &self,
        id: &RunId,
        component: Option<&str>,
        lines: usize,
    ) -> Result<Vec<ComponentLog>, ToolsError> {
        let status = self.run_status(id, i64::MAX)?;
        let mut chosen: Vec<(String, PathBuf)> = status
            .run
            .components
            .iter()
            .map(|c| (c.component.to_string(), c.log_path.clone()))
            .collect();
        chosen.push(("supervisor".to_owned(), status.supervisor_log));
        if let Some(wanted) = component {
            let names: Vec<String> = chosen.iter().map(|(name, _)| name.clone()).collect();
            chosen.retain(|(name, _)| name == wanted);
            if chosen.is_empty() {
                return Err(ToolsError::invalid(
                    format!("component '{wanted}'"),
                    format!("a run's logs are {}", names.join(", ")),
                ));
            }
        }
        chosen
            .into_iter()
            .map(|(name, path)| {
                let tail = tail(&path, lines)?;
                Ok(ComponentLog {
                    component: name,
                    lines: tail
                        .lines
                        .into_iter()
                        .map(|line| self.secrets().redact(&line))
                        .collect(),
                    truncated: tail.earlier,
                    capped: rl_process::is_capped(&path),
                    path,
                })
            })
            .collect()
    }
}

/// The last `count` lines of a file; a file not written yet has none.
fn tail(path: &Path, count: usize) -> Result<LogTail, ToolsError> {
    match rl_process::read_log_tail(path, count) {
        Ok(tail) => Ok(tail),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(LogTail::default()),
        Err(source) => Err(ToolsError::Io {
            action: "cannot read log",
            path: path.to_owned(),
            source,
        }),
    }
}

impl Tools {
    /// Starts a run under the operator's settings, its config written by `write_config`.
    pub(crate) fn launch(
        &self,
        service: &ConfigService,
        write_config: impl FnOnce(&RunId, RunEndpoints) -> Result<WrittenConfig, ToolsError>,
    ) -> Result<RunStatus, ToolsError> {
        self.launch_with(service.settings(), write_config)
    }

    /// A start with `settings` in place of the operator's as they are now.
    pub(crate) fn launch_with(
        &self,
        settings: &Settings,
        write_config: impl FnOnce(&RunId, RunEndpoints) -> Result<WrittenConfig, ToolsError>,
    ) -> Result<RunStatus, ToolsError> {
        // An evaluation the operator's settings would make fail is refused now, not steps in.
        let room = crate::checkpoint_test_size::check_locked(&settings.locked)?;
        // The environment may end before the trainer's last evaluation: the trainer is given
        // the time that evaluation may take, beyond the operator's grace.
        let mut settings = settings.clone();
        settings.run.completion_grace_secs += room.as_secs_f64();
        let rls_trainer = crate::health_check::uses_rls_trainer(&settings);
        self.runs()?.start(
            &settings,
            // After the key's checks, before the config is written: a service the trainer could
            // not reach, or a tokenizer it could not load, fails now, not minutes in.
            |run_id, endpoints| {
                crate::hosted_checks::before_start(&settings, rls_trainer)
                    .map_err(|reason| ToolsError::NotStartable { reason })?;
                let written = write_config(run_id, endpoints)?;
                // Asked of the config as written; refused, the run leaves nothing behind.
                if let Err(refused) =
                    crate::env_tools::before_start(self.home(), &settings, &written)
                {
                    let folder = rl_settings::RunFolder::of(self.home(), run_id);
                    let _ = std::fs::remove_dir_all(folder.dir());
                    return Err(refused);
                }
                Ok(written)
            },
            self.secrets(),
            &self.context().supervisor,
            &self.context().evaluate,
        )
    }
}

/// What a new run is made of beyond the operator's settings: a selection recorded earlier (a
/// sweep's), its own settings, the sweep point it is.
#[derive(Debug, Clone, Default)]
pub(crate) struct RunPlan {
    pub(crate) selection: Option<rl_config::Selection>,
    pub(crate) settings: Vec<rl_config::RunSetting>,
    pub(crate) sweep: Option<rl_process::SweepMember>,
}

/// What starting a run needs to know of the config written for it to run `environment`.
pub(crate) fn written_config(
    path: PathBuf,
    environment: &SelectedEnvironment,
    env_python: PathBuf,
    resumed_from: Option<Lineage>,
) -> WrittenConfig {
    WrittenConfig {
        path,
        environment: environment.key.clone(),
        env_file: environment.environments_dir.join(&environment.file),
        environment_kind: environment.kind,
        env_python,
        resumed_from,
        sweep: None,
    }
}

/// The answer to a start (or a resume): the run as it starts, its config and where it logs.
pub(crate) fn started(status: &RunStatus, message: String) -> Started {
    let config = RunConfig::read(&status.run.config_path).ok();
    let wandb = config.as_ref().map(RunConfig::wandb);
    // Read back as the trainer reads them: what the answer shows is what the run has.
    let (caps, prices) = Started::costs(
        config
            .as_ref()
            .and_then(|config| config.trainer().ok())
            .as_ref(),
    );
    let config = config.map(|config| config.env).unwrap_or_default();
    Started {
        caps,
        prices,
        run_id: status.run.id.clone(),
        status: status.run.state.name(),
        config,
        wandb_project: wandb.as_ref().and_then(|w| w.project.clone()),
        wandb_group: wandb.as_ref().and_then(|w| w.group.clone()),
        wandb_run_name: wandb.as_ref().and_then(|w| w.run_name.clone()),
        logs: logs_of(&status.run),
        message,
        run: RunView::from(status),
    }
}

/// The run's WandB names from its config, or why they are unknown.
fn wandb_of(run: &RunRecord) -> Result<RunWandb, String> {
    RunConfig::read(&run.config_path)
        .map(|config| config.wandb())
        .map_err(|error| error.to_string())
}

pub(crate) fn logs_of(run: &RunRecord) -> BTreeMap<String, PathBuf> {
    run.components
        .iter()
        .map(|c| (c.component.to_string(), c.log_path.clone()))
        .collect()
}

fn status_view(status: &RunStatus, collected: &Collected, wandb: Option<RunWandb>) -> StatusView {
    let found = collected.metrics.as_ref();
    let run = &status.run;
    let trainer = found.and_then(|metrics| metrics.trainer.as_ref());
    let config = RunConfig::read(&run.config_path).ok();
    let total_steps = config.as_ref().and_then(crate::resume_point::total_steps);
    let algorithm = config
        .and_then(|config| config.trainer().ok())
        .map(|trainer| AlgorithmView::from(&trainer.algorithm));
    let groups = run
        .config_path
        .parent()
        .and_then(rl_process::RunGroups::read);
    let eta_secs = trainer
        .filter(|_| !run.state.is_finished())
        .and_then(|trainer| eta_secs(&trainer.history, total_steps?));
    StatusView {
        run_id: run.id.clone(),
        status: run.state.name(),
        running_time_minutes: status.elapsed_secs / 60.0,
        processes: run
            .components
            .iter()
            .map(|c| (c.component.to_string(), process_label(c.status)))
            .collect(),
        wandb_project: wandb.as_ref().and_then(|w| w.project.clone()),
        wandb_group: wandb.as_ref().and_then(|w| w.group.clone()),
        wandb_run_name: wandb.and_then(|w| w.run_name),
        wandb_url: found
            .and_then(|m| m.trainer.as_ref())
            .and_then(|t| t.url.clone()),
        logs: logs_of(run),
        metrics: found
            .map(|metrics| MetricsView::from(&StatusMetrics::of(metrics)))
            .unwrap_or_default(),
        health: with_no_signal(
            if let Some(trainer) = found.and_then(|metrics| metrics.trainer.as_ref()) {
                Some(HealthView::from(&HealthDigest::assess(
                    trainer,
                    &metrics::activity_of(run),
                    &metrics::policy(run),
                )))
            } else {
                // Before its first logged step a run can stall too (an environment that never
                // sends): judged on no rows, shown only once it is flagged.
                let digest = HealthDigest::assess(
                    &LoggedRun::default(),
                    &metrics::activity_of(run),
                    &metrics::policy(run),
                );
                (!digest.flags.is_empty()).then(|| HealthView::from(&digest))
            },
            groups.as_ref(),
        ),
        groups: groups.as_ref().map(GroupsView::from),
        algorithm,
        metrics_source: found.map(|metrics| metrics.source.as_str()),
        metrics_warnings: found.map(|m| m.warnings.clone()).unwrap_or_default(),
        metrics_errors: failures_of(collected),
        run: RunView::from(status),
        total_steps,
        eta_secs,
        history: trainer
            .map(|trainer| {
                trainer
                    .history
                    .iter()
                    .map(|row| MetricsView::from(&StatusMetrics::of_row(row)))
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// The health digest with the `no_signal` flag of a run whose environment's groups all lacked
/// signal past its warning bound: such a run logs no step, so there is a digest for it alone.
fn with_no_signal(
    health: Option<HealthView>,
    groups: Option<&rl_process::RunGroups>,
) -> Option<HealthView> {
    let Some(flag) = groups.and_then(|groups| GroupsView::from(groups).flag(groups)) else {
        return health;
    };
    let mut health = health.unwrap_or(HealthView {
        healthy: true,
        window: None,
        flags: Vec::new(),
    });
    health.healthy = false;
    health.flags.insert(0, flag);
    Some(health)
}

/// Steps whose pace sets the ETA: the latest ones, so a slow start (compiling, loading) fades.
const ETA_STEPS: usize = 10;

/// Seconds until step `total`, at the mean pace of the latest steps that carry a time; `None`
/// until two such steps exist.
pub(crate) fn eta_secs(history: &[rl_metrics::HistoryRow], total: u64) -> Option<f64> {
    let timed: Vec<(i64, f64)> = history
        .iter()
        .filter_map(|row| Some((row.step, row.timestamp?)))
        .collect();
    let recent = &timed[timed.len().saturating_sub(ETA_STEPS + 1)..];
    let (&(first_step, first_time), &(last_step, last_time)) = (recent.first()?, recent.last()?);
    let steps = last_step - first_step;
    if steps <= 0 || last_time < first_time {
        return None;
    }
    let per_step = (last_time - first_time) / steps as f64;
    let left = i64::try_from(total).ok()?.saturating_sub(last_step).max(0);
    Some(per_step * left as f64)
}

fn failures_of(collected: &Collected) -> Vec<SourceFailureView> {
    collected
        .failures
        .iter()
        .map(SourceFailureView::from)
        .collect()
}

/// The body of a detached supervisor (`rl supervise <id>`): runs the run in `home` to its end.
pub fn supervise(home: &Path, run_id: &str) -> Result<rl_process::RunState, ToolsError> {
    let id = RunId::parse(run_id)?;
    Ok(rl_process::supervise(home, &id)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(step: i64, timestamp: Option<f64>) -> rl_metrics::HistoryRow {
        rl_metrics::HistoryRow {
            step,
            timestamp,
            values: BTreeMap::new(),
        }
    }

    #[test]
    fn the_eta_is_the_latest_pace_times_the_steps_left() {
        // A slow first step (compiling) is outside the last ten's pace.
        let mut history = vec![row(1, Some(0.0))];
        history.extend((2..=13).map(|step| row(step, Some(100.0 + 2.0 * f64::from(step as i32)))));
        assert_eq!(eta_secs(&history, 20), Some(14.0));
        assert_eq!(eta_secs(&history, 13), Some(0.0));
        assert_eq!(
            eta_secs(&history, 5),
            Some(0.0),
            "past its total: nothing left"
        );
        assert_eq!(eta_secs(&history[..1], 20), None, "one step has no pace");
        assert_eq!(eta_secs(&[row(1, None), row(2, None)], 20), None);
        assert_eq!(eta_secs(&[row(2, Some(5.0)), row(1, Some(9.0))], 20), None);
    }
}
