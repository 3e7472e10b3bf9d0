//! A hosted run's checkpoints at the Tinker service, through the official SDK
//! (`rl_trainer.hosted`, in the trainer's Python): kept past their expiry (`rl checkpoints
//! keep`), and their archives fetched for `rl checkpoints export`. The key reaches the helper
//! only through its environment; what it says is redacted before it is shown.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use rl_process::{Component, LaunchPlan, RunRecord};
use rl_settings::{RunConfig, RunFolder, RunId, Value};
use wait_timeout::ChildExt as _;

use crate::answers::Kept;
use crate::{Tools, ToolsError};

const MODULE: &str = "rl_trainer.hosted";
/// The hosted Tinker's key, which its OpenAI-compatible endpoint takes too.
pub(crate) const TINKER_KEY_VARIABLE: &str = "TINKER_API_KEY";
/// The helper's whole run: the service answers in seconds; an archive of a large LoRA may take
/// minutes to download.
const KEEP_LIMIT: Duration = Duration::from_secs(300);
const ARCHIVE_LIMIT: Duration = Duration::from_secs(1900);
/// What of the helper's error output is quoted.
const QUOTED_CHARS: usize = 600;
/// Longest expiry one may set: ten years (the service refuses nothing shorter than a second).
pub const MAX_KEEP_DAYS: u32 = 3650;

/// Where a run trained, as the record it left at its start says: the only ground on which rl
/// sends TINKER_API_KEY anywhere for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TrainedOn {
    /// The local engine its launch started; its checkpoints are files in its engine folder.
    LocalEngine,
    /// A Tinker service, which keeps its checkpoints.
    Service(HostedService),
}

/// The Tinker service a hosted run trained against: the only address its key is sent to.
/// Made only by [`Tools::trained_on`], so no caller can hand the key to an address of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HostedService {
    /// The run config's `tinker.base_url`; `None`: the hosted Tinker (the SDK's default).
    base_url: Option<String>,
}

impl HostedService {
    pub(crate) fn base_url(&self) -> Option<&str> {
        self.base_url.as_deref()
    }
}

/// How long a kept checkpoint lives from now on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeepFor {
    Days(u32),
    Forever,
}

impl Tools {
    /// Where `run` trained, from its launch record (`launch.json`, written before anything
    /// started): a run whose launch started an engine trained locally, whatever its folder
    /// holds now. Its config's `tinker.base_url` is then its own engine's loopback port, which
    /// any process may own once the run has ended, so a local run is never taken for a hosted
    /// one: a missing engine folder, or an unreadable record, is refused, and nothing is sent.
    pub(crate) fn trained_on(&self, run: &RunRecord) -> Result<TrainedOn, ToolsError> {
        let id = RunId::parse(&run.id)?;
        let plan =
            LaunchPlan::load(self.home(), &id).map_err(|error| ToolsError::RunFilesMissing {
                run_id: id.to_string(),
                reason: format!(
                    "its launch record cannot be read ({error}), so rl cannot tell whether it \
                     trained on the local engine or at a Tinker service; it asks neither and \
                     sends no key"
                ),
            })?;
        if plan.spec(Component::Engine).is_none() {
            return Ok(TrainedOn::Service(HostedService {
                base_url: service_of(run),
            }));
        }
        let engine = RunFolder::of(self.home(), &id).engine();
        if !engine.is_dir() {
            return Err(ToolsError::RunFilesMissing {
                run_id: id.to_string(),
                reason: format!(
                    "this run's engine folder is missing ({}): it trained on the local engine \
                     (its launch.json records one), and its checkpoints are files in that \
                     folder; put the folder back. Nothing was asked of any Tinker service",
                    engine.display()
                ),
            });
        }
        Ok(TrainedOn::LocalEngine)
    }

    /// Sets the expiry of run `id`'s checkpoint at `step` (its sampler weights and its saved
    /// state) at the hosted Tinker.
    pub fn keep_checkpoint(
        &self,
        id: &RunId,
        step: i64,
        keep_for: KeepFor,
    ) -> Result<Kept, ToolsError> {
        if let KeepFor::Days(days) = keep_for
            && !(1..=MAX_KEEP_DAYS).contains(&days)
        {
            return Err(ToolsError::invalid(
                "days",
                format!("{days} is out of range: from 1 to {MAX_KEEP_DAYS}, or --forever"),
            ));
        }
        let run = self.run_status(id, i64::MAX)?.run;
        let TrainedOn::Service(service) = self.trained_on(&run)? else {
            return Err(ToolsError::invalid(
                format!("run {id}"),
                "it trained on the local engine: its checkpoints are files in its folder and \
                 never expire (`rl checkpoints prune` deletes what the operator's policy does \
                 not keep)",
            ));
        };
        let checkpoint = self.checkpoint_at(&run, step)?;
        let mut paths = vec![checkpoint.path.clone()];
        paths.extend(checkpoint.state_path.clone());
        let mut args = vec!["keep".to_owned()];
        args.extend(paths.iter().cloned());
        let ttl_seconds = match keep_for {
            KeepFor::Days(days) => {
                let seconds = u64::from(days) * 86_400;
                args.extend(["--ttl-seconds".to_owned(), seconds.to_string()]);
                Some(seconds)
            }
            KeepFor::Forever => {
                args.push("--forever".to_owned());
                None
            }
        };
        self.run_hosted(&service, &args, KEEP_LIMIT)?;
        let message = match keep_for {
            KeepFor::Days(days) => format!(
                "run {id}'s checkpoint at step {step} ({}) expires {days} days from now",
                paths.join(", ")
            ),
            KeepFor::Forever => format!(
                "run {id}'s checkpoint at step {step} ({}) no longer expires",
                paths.join(", ")
            ),
        };
        Ok(Kept {
            run_id: id.to_string(),
            step,
            paths,
            ttl_seconds,
            message,
        })
    }

    /// What `service` says of a hosted run's checkpoints (`record`), by `tinker://` path.
    pub(crate) fn hosted_listing(
        &self,
        service: &HostedService,
        record: &rl_metrics::CheckpointRecord,
    ) -> Result<BTreeMap<String, Listed>, ToolsError> {
        let mut models: Vec<String> = record
            .checkpoints
            .iter()
            .flat_map(|checkpoint| [Some(&checkpoint.path), checkpoint.state_path.as_ref()])
            .flatten()
            .filter_map(|path| training_run_of(path))
            .collect();
        models.sort();
        models.dedup();
        if models.is_empty() {
            return Ok(BTreeMap::new());
        }
        let mut args = vec!["list".to_owned()];
        args.extend(models);
        let printed = self.run_hosted(service, &args, KEEP_LIMIT)?;
        let answer: ListAnswer = serde_json::from_str(printed.trim()).map_err(|error| {
            ToolsError::Internal(format!(
                "the Tinker service's listing was not read: {error}"
            ))
        })?;
        Ok(answer
            .checkpoints
            .into_iter()
            .map(|listed| (listed.tinker_path.clone(), listed))
            .collect())
    }

    /// Exports the saved state `state_path` of a hosted run at `service` as a tar of the files the
    /// service gives (the SDK's only export since 0.3x: a training state loaded and saved as
    /// external weights, the temporary copy deleted after) into `out`.
    pub(crate) fn fetch_export(
        &self,
        service: &HostedService,
        state_path: &str,
        out: &Path,
    ) -> Result<(), ToolsError> {
        let args = [
            "export".to_owned(),
            state_path.to_owned(),
            "--out".to_owned(),
            out.to_string_lossy().into_owned(),
        ];
        self.run_hosted(service, &args, ARCHIVE_LIMIT).map(drop)
    }

    /// Runs the helper against `service` and returns what it printed; its failure is an error
    /// quoting it, keys redacted.
    fn run_hosted(
        &self,
        service: &HostedService,
        args: &[String],
        limit: Duration,
    ) -> Result<String, ToolsError> {
        let key = self.tinker_key()?;
        let settings = self.settings()?;
        let programs = rl_python::install(self.home()).map_err(|error| {
            ToolsError::Internal(format!("cannot write rl's Python programs: {error}"))
        })?;
        let launch = rl_python::PythonLauncher::new(&programs, &settings.child_environment).module(
            &settings.python,
            MODULE,
            args.iter().cloned(),
            rl_python::Imports::WithOperators,
        );
        let mut command = Command::new(&launch.program);
        command
            .args(&launch.args)
            .envs(launch.env.iter().map(|(name, value)| (name, value)))
            .env(TINKER_KEY_VARIABLE, key)
            .env_remove("TINKER_BASE_URL")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        rl_settings::withhold(&mut command, &[TINKER_KEY_VARIABLE]);
        if let Some(url) = service.base_url() {
            command.env("TINKER_BASE_URL", url);
        }
        let mut child = command.spawn().map_err(|source| ToolsError::Io {
            action: "cannot start",
            path: settings.python.clone(),
            source,
        })?;
        let reader = |stream: Option<Box<dyn std::io::Read + Send>>| {
            std::thread::spawn(move || {
                let mut text = String::new();
                if let Some(stream) = stream {
                    let _ = stream.take(1 << 20).read_to_string(&mut text);
                }
                text
            })
        };
        let stdout = reader(child.stdout.take().map(|s| Box::new(s) as _));
        let stderr = reader(child.stderr.take().map(|s| Box::new(s) as _));
        let Ok(Some(status)) = child.wait_timeout(limit) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(ToolsError::Internal(format!(
                "the Tinker service did not answer within {} s",
                limit.as_secs()
            )));
        };
        let printed = stdout.join().unwrap_or_default();
        let said = self.secrets().redact(&stderr.join().unwrap_or_default());
        if status.success() {
            return Ok(printed);
        }
        let last = said
            .lines()
            .rev()
            .find(|line| !line.trim().is_empty())
            .unwrap_or("it said nothing");
        let quoted: String = last.chars().take(QUOTED_CHARS).collect();
        Err(ToolsError::Internal(format!(
            "the Tinker service refused or failed: {quoted}"
        )))
    }
}

/// One checkpoint as the service lists it.
#[derive(Debug, Clone, serde::Deserialize)]
pub(crate) struct Listed {
    tinker_path: String,
    pub(crate) size_bytes: Option<u64>,
    /// RFC 3339; `None` when it never expires.
    pub(crate) expires_at: Option<String>,
}

#[derive(Debug, serde::Deserialize)]
struct ListAnswer {
    checkpoints: Vec<Listed>,
}

/// The training run (the service's model id) of a `tinker://RUN/…` path.
fn training_run_of(path: &str) -> Option<String> {
    let run = path.strip_prefix("tinker://")?.split('/').next()?;
    let plain = !run.is_empty()
        && run.len() <= 200
        && run
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'));
    plain.then(|| run.to_owned())
}

/// The Tinker API run `run` trained against, when its config names one (else the hosted
/// service, the SDK's default). Read only for a run that started no engine: a local run's
/// config names its engine here.
fn service_of(run: &RunRecord) -> Option<String> {
    match RunConfig::read(&run.config_path)
        .ok()?
        .tinker
        .get("base_url")?
    {
        Value::Str(url) if !url.is_empty() => Some(url.clone()),
        _ => None,
    }
}
