//! The one trait every metrics source implements, what it is asked about, and the order in
//! which a run's sources are tried.

use std::path::PathBuf;

use rl_settings::RunFolder;

use crate::checkpoints::{CheckpointRecord, read_checkpoints};
use crate::error::MetricsError;
use crate::model::{RunMetrics, SourceKind};
use crate::trainer_log;
use async_trait::async_trait;

/// How the trainer and the env name their WandB runs, as written into the run's config.
///
/// The trainer's run is `{wandb_run_name}-trainer-{suffix}` (a random suffix), the env's is
/// `{wandb_name}-{date}-{random}`, and both are in the trainer's `wandb_group`; nobody's run has
/// the bare configured name, so runs are found by prefix within the group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WandbNames {
    pub project: String,
    pub group: Option<String>,
    /// `{wandb_run_name}-trainer-`.
    pub trainer_name_prefix: String,
    /// `{wandb_name}-`, when the env logs to WandB.
    pub env_name_prefix: Option<String>,
}

impl WandbNames {
    pub fn new(
        project: impl Into<String>,
        group: Option<String>,
        wandb_run_name: &str,
        env_wandb_name: Option<&str>,
    ) -> Self {
        Self {
            project: project.into(),
            group,
            trainer_name_prefix: format!("{wandb_run_name}-trainer-"),
            env_name_prefix: env_wandb_name.map(|name| format!("{name}-")),
        }
    }

    pub fn is_trainer_run(&self, display_name: &str) -> bool {
        display_name.starts_with(&self.trainer_name_prefix)
    }

    pub fn is_env_run(&self, display_name: &str) -> bool {
        !self.is_trainer_run(display_name)
            && self
                .env_name_prefix
                .as_deref()
                .is_some_and(|prefix| display_name.starts_with(prefix))
    }
}

/// The training run whose metrics are wanted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunTarget {
    /// `runs/<id>/`: holds the metrics file and the WandB folder.
    pub run_dir: PathBuf,
    /// The trainer's log, scanned for the checkpoints and final weights it prints: its files in
    /// the order written (a capped log's head, then its tail files); none when unknown.
    pub trainer_log: Vec<PathBuf>,
    pub wandb: Option<WandbNames>,
    /// Set by [`collect`] for the sources after one that found the trainer's run: they are
    /// asked for the env's run only (the API then reads no trainer history it would discard).
    pub env_only: bool,
}

impl RunTarget {
    pub fn new(run_dir: PathBuf, trainer_log: Vec<PathBuf>, wandb: Option<WandbNames>) -> Self {
        Self {
            run_dir,
            trainer_log,
            wandb,
            env_only: false,
        }
    }

    pub fn metrics_file(&self) -> PathBuf {
        RunFolder::at(&self.run_dir).metrics()
    }

    pub fn wandb_dir(&self) -> PathBuf {
        RunFolder::at(&self.run_dir).wandb()
    }

    pub fn checkpoints_file(&self) -> PathBuf {
        RunFolder::at(&self.run_dir).checkpoints()
    }
}

/// A place a run's metrics can be read from.
#[cfg_attr(test, mockall::automock)]
#[async_trait]
pub trait MetricsSource: Send + Sync {
    fn kind(&self) -> SourceKind;

    /// `Ok(None)` when this source has nothing for the run (no file yet, no WandB run yet).
    async fn fetch(&self, target: &RunTarget) -> Result<Option<RunMetrics>, MetricsError>;
}

/// Runs a source's file reading off the async threads. A reader that panicked is reported as a
/// failure to read `path`, never passed on as a panic.
pub(crate) async fn read_off_thread<T: Send + 'static>(
    path: PathBuf,
    read: impl FnOnce() -> Result<T, MetricsError> + Send + 'static,
) -> Result<T, MetricsError> {
    tokio::task::spawn_blocking(read)
        .await
        .map_err(|error| MetricsError::Io {
            action: "read",
            path,
            source: std::io::Error::other(error.to_string()),
        })?
}

/// A source that failed, kept beside whatever another source found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFailure {
    pub source: SourceKind,
    pub error: String,
}

/// The outcome of asking a run's sources in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Collected {
    pub metrics: Option<RunMetrics>,
    pub failures: Vec<SourceFailure>,
}

/// Asks each source in turn and keeps the first that has the run's trainer metrics; the env's
/// metrics are taken from a later source when the first has none. Checkpoints and final
/// weights come from the run's `checkpoints.jsonl` when it has one (nothing else is believed
/// then); else what the sources lack comes from the trainer's log.
pub async fn collect(target: &RunTarget, sources: &[&dyn MetricsSource]) -> Collected {
    let mut found: Option<RunMetrics> = None;
    let mut failures = Vec::new();
    // An env that does not log to WandB has no run to look for.
    let env_expected = target
        .wandb
        .as_ref()
        .is_some_and(|names| names.env_name_prefix.is_some());
    let mut asked = target.clone();
    for source in sources {
        if let Some(metrics) = &found
            && metrics.trainer.is_some()
        {
            if metrics.env.is_some() || !env_expected {
                break;
            }
            asked.env_only = true;
        }
        match source.fetch(&asked).await {
            Ok(Some(metrics)) => {
                found = Some(match found {
                    None => metrics,
                    Some(mut first) => {
                        fill_missing(&mut first, metrics);
                        first
                    }
                });
            }
            Ok(None) => {}
            Err(error) => failures.push(SourceFailure {
                source: source.kind(),
                error: error.to_string(),
            }),
        }
    }
    let file = target.checkpoints_file();
    match read_off_thread(file.clone(), move || read_checkpoints(&file)).await {
        Ok(Some(record)) => use_checkpoint_record(&mut found, record),
        Ok(None) => {
            if let Some(first) = target.trainer_log.first().cloned() {
                // A trainer log of a long run is large: read it where it cannot stall the
                // runtime.
                let files = target.trainer_log.clone();
                let report = read_off_thread(first, move || trainer_log::scan(&files)).await;
                add_from_trainer_log(&mut found, report);
            }
        }
        Err(error) => failures.push(SourceFailure {
            source: SourceKind::CheckpointsFile,
            error: error.to_string(),
        }),
    }
    Collected {
        metrics: found,
        failures,
    }
}

/// A later source only fills what the first left empty: mixing two sources' views of the same
/// run would make steps disagree.
fn fill_missing(first: &mut RunMetrics, later: RunMetrics) {
    if first.trainer.is_none() && later.trainer.is_some() {
        first.trainer = later.trainer;
        first.source = later.source;
    }
    if first.env.is_none() {
        first.env = later.env;
    }
    if first.final_weights.is_none() {
        first.final_weights = later.final_weights;
    }
    if first.checkpoints.is_empty() {
        first.checkpoints = later.checkpoints;
    }
    first.warnings.extend(later.warnings);
}

/// The trainer's own record of what it saved replaces whatever else claimed to know.
fn use_checkpoint_record(found: &mut Option<RunMetrics>, record: CheckpointRecord) {
    if record.checkpoints.is_empty() && found.is_none() {
        return;
    }
    let metrics = found.get_or_insert_with(|| RunMetrics::empty(SourceKind::CheckpointsFile));
    metrics.checkpoints = record.checkpoints;
    metrics.final_weights = record.final_weights;
    metrics.warnings.extend(record.warnings);
}

fn add_from_trainer_log(
    found: &mut Option<RunMetrics>,
    report: Result<trainer_log::WeightsReport, MetricsError>,
) {
    let Ok(report) = report else {
        // No log yet (the trainer has not started) is the common case; nothing to add.
        return;
    };
    if report.final_weights.is_none() && report.checkpoints.is_empty() {
        return;
    }
    // No source has the run, yet the weights it saved are worth reporting on their own (the
    // last weights are what a finished run is for).
    let metrics = found.get_or_insert_with(|| RunMetrics::empty(SourceKind::TrainerLog));
    if metrics.final_weights.is_none() {
        metrics.final_weights = report.final_weights;
    }
    if metrics.checkpoints.is_empty() {
        metrics.checkpoints = report.checkpoints;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::LoggedRun;

    fn target() -> RunTarget {
        RunTarget::new(PathBuf::from("/nonexistent/run"), Vec::new(), None)
    }

    fn source(kind: SourceKind, answer: Option<RunMetrics>) -> MockMetricsSource {
        let mut source = MockMetricsSource::new();
        source.expect_kind().return_const(kind);
        source.expect_fetch().return_once(move |_| Ok(answer));
        source
    }

    fn with_runs(kind: SourceKind, trainer: bool, env: bool) -> RunMetrics {
        let mut metrics = RunMetrics::empty(kind);
        metrics.trainer = trainer.then(LoggedRun::default);
        metrics.env = env.then(LoggedRun::default);
        metrics
    }

    #[tokio::test]
    async fn the_first_source_with_the_trainer_wins_and_later_ones_are_not_asked() {
        let file = source(
            SourceKind::MetricsFile,
            Some(with_runs(SourceKind::MetricsFile, true, true)),
        );
        let mut api = MockMetricsSource::new();
        api.expect_fetch().never();
        let collected = collect(&target(), &[&file, &api]).await;
        let metrics = collected.metrics.expect("metrics");
        assert_eq!(metrics.source, SourceKind::MetricsFile);
        assert!(collected.failures.is_empty());
    }

    #[tokio::test]
    async fn a_failing_source_is_reported_and_the_next_one_answers() {
        let mut files = MockMetricsSource::new();
        files.expect_kind().return_const(SourceKind::WandbFiles);
        files.expect_fetch().return_once(|_| {
            Err(MetricsError::NotAWandbFile {
                path: PathBuf::from("x.wandb"),
                reason: "bad header".to_owned(),
            })
        });
        let api = source(
            SourceKind::WandbApi,
            Some(with_runs(SourceKind::WandbApi, true, false)),
        );
        let collected = collect(&target(), &[&files, &api]).await;
        assert_eq!(
            collected.metrics.expect("metrics").source,
            SourceKind::WandbApi
        );
        assert_eq!(collected.failures.len(), 1);
        assert_eq!(collected.failures[0].source, SourceKind::WandbFiles);
        assert!(collected.failures[0].error.contains("bad header"));
    }

    fn with_env_names() -> RunTarget {
        RunTarget {
            wandb: Some(WandbNames::new(
                "p",
                None,
                "env-1a2b3c4d",
                Some("env-20261121"),
            )),
            ..target()
        }
    }

    #[tokio::test]
    async fn the_env_run_is_filled_from_a_later_source_without_replacing_the_trainer() {
        let file = source(
            SourceKind::MetricsFile,
            Some(with_runs(SourceKind::MetricsFile, true, false)),
        );
        let mut api = MockMetricsSource::new();
        api.expect_kind().return_const(SourceKind::WandbApi);
        // Asked for the env's run only: no trainer history to fetch and discard.
        api.expect_fetch()
            .withf(|target| target.env_only)
            .return_once(|_| Ok(Some(with_runs(SourceKind::WandbApi, false, true))));
        let metrics = collect(&with_env_names(), &[&file, &api])
            .await
            .metrics
            .expect("metrics");
        assert_eq!(metrics.source, SourceKind::MetricsFile);
        assert!(metrics.env.is_some());
    }

    #[tokio::test]
    async fn an_env_that_does_not_log_to_wandb_is_not_looked_for() {
        let file = source(
            SourceKind::MetricsFile,
            Some(with_runs(SourceKind::MetricsFile, true, false)),
        );
        let mut api = MockMetricsSource::new();
        api.expect_fetch().never();
        let collected = collect(&target(), &[&file, &api]).await;
        assert_eq!(
            collected.metrics.expect("metrics").source,
            SourceKind::MetricsFile
        );
    }

    #[tokio::test]
    async fn weights_in_the_trainer_log_are_reported_when_no_source_has_numbers() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let log = dir.path().join("trainer.log");
        std::fs::write(
            &log,
            "Sampling client updated: tinker://m/sampler_weights/step_1\n\
             Final weights are available here: tinker://m/sampler_weights/final\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let target = RunTarget {
            trainer_log: vec![log],
            ..target()
        };
        let file = source(SourceKind::MetricsFile, None);
        let metrics = collect(&target, &[&file]).await.metrics.expect("metrics");
        assert_eq!(metrics.source, SourceKind::TrainerLog);
        assert_eq!(metrics.trainer, None);
        assert_eq!(
            metrics.final_weights.as_deref(),
            Some("tinker://m/sampler_weights/step_1"),
            "the last weights the log shows saved, not the final path it prints"
        );
        assert_eq!(metrics.checkpoints.len(), 1);
    }

    #[tokio::test]
    async fn a_checkpoints_file_is_the_only_word_on_weights() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let log = dir.path().join("trainer.log");
        std::fs::write(
            &log,
            "Sampling client updated: tinker://m/step_9\n\
             Final weights are available here: tinker://m/final\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(
            RunFolder::at(dir.path()).checkpoints(),
            "{\"step\": 0, \"name\": \"step_0\", \"sampler_path\": \"tinker://m/step_0\", \"state_path\": \"tinker://m/weights/step_0\", \"time\": \"2026-11-23T16:00:00Z\"}\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let target = RunTarget::new(dir.path().to_path_buf(), vec![log], None);
        let mut with_final = RunMetrics::empty(SourceKind::MetricsFile);
        with_final.final_weights = Some("tinker://m/final".to_owned());
        let file = source(SourceKind::MetricsFile, Some(with_final));
        let metrics = collect(&target, &[&file]).await.metrics.expect("metrics");
        assert_eq!(
            metrics.final_weights, None,
            "no final row: the run never saved final weights, whatever its log says"
        );
        assert_eq!(metrics.checkpoints.len(), 1);
        assert_eq!(
            metrics.checkpoints[0].state_path.as_deref(),
            Some("tinker://m/weights/step_0")
        );
    }

    #[tokio::test]
    async fn nothing_anywhere_is_no_metrics_and_no_failure() {
        let file = source(SourceKind::MetricsFile, None);
        let collected = collect(&target(), &[&file]).await;
        assert_eq!(collected.metrics, None);
        assert!(collected.failures.is_empty());
    }
}
