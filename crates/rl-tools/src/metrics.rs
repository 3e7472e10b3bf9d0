//! A run's metrics: where to look for them (the run folder first, WandB's API last) and under
//! which names, from the run's record and its config.

use std::collections::BTreeMap;
use std::time::Duration;

use std::path::Path;

use rl_metrics::{
    Activity, Collected, GroupsSeen, HealthPolicy, MetricsFile, MetricsSource, Phase, RunTarget,
    SourceFailure, SourceKind, WandbApi, WandbApiConfig, WandbFiles, WandbNames,
};
use rl_process::{Component, EnvGroups, LaunchPlan, RunRecord, RunState};
use rl_settings::{RunFolder, RunTiming, RunWandb, Secrets};

use crate::ToolsError;

/// Where `status` and `results` read metrics from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceChoice {
    /// The run folder's metrics file, then its WandB files, then the WandB API (with a key).
    Auto,
    /// Only the metrics file the trainer wrote into the run folder.
    File,
    /// Only WandB's local run files in the run folder.
    WandbFiles,
    /// Only WandB's API (needs WANDB_API_KEY).
    WandbApi,
}

impl SourceChoice {
    pub const NAMES: [&'static str; 4] = ["auto", "file", "wandb-files", "wandb-api"];
}

impl std::str::FromStr for SourceChoice {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "auto" => Ok(Self::Auto),
            "file" => Ok(Self::File),
            "wandb-files" => Ok(Self::WandbFiles),
            "wandb-api" => Ok(Self::WandbApi),
            other => Err(format!(
                "'{other}' is not a metrics source; one of {}",
                Self::NAMES.join(", ")
            )),
        }
    }
}

/// How long a WandB request may take: a status is polled and must answer quickly; results
/// are asked for once and may wait out a busy server.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Patience {
    Status,
    Results,
}

/// The run's metrics from the chosen sources.
pub(crate) async fn collect(
    run: &RunRecord,
    wandb: &Result<RunWandb, String>,
    choice: SourceChoice,
    patience: Patience,
    secrets: &Secrets,
    environment: &BTreeMap<String, String>,
    child_environment: &BTreeMap<String, String>,
) -> Result<Collected, ToolsError> {
    let (target, config_problem) = target_of(run, wandb)?;
    let unlogged = not_on_wandb_servers(wandb, child_environment);
    let api = match (choice, &unlogged) {
        (SourceChoice::Auto, None) => wandb_api(secrets, environment, patience).ok(),
        (SourceChoice::WandbApi, None) => Some(wandb_api(secrets, environment, patience)?),
        (SourceChoice::WandbApi, Some(why)) => {
            return Err(ToolsError::invalid(
                "source wandb-api",
                format!(
                    "WandB's servers have nothing of run {} ({why}); its metrics are in the run \
                     folder (source `file` or `auto`)",
                    run.id
                ),
            ));
        }
        _ => None,
    };
    let file = MetricsFile;
    let files = WandbFiles;
    let mut sources: Vec<&dyn MetricsSource> = Vec::new();
    if matches!(choice, SourceChoice::Auto | SourceChoice::File) {
        sources.push(&file);
    }
    if matches!(choice, SourceChoice::Auto | SourceChoice::WandbFiles) {
        sources.push(&files);
    }
    if let Some(api) = &api {
        sources.push(api);
    }
    let mut collected = rl_metrics::collect(&target, &sources).await;
    // WandB is looked up by the names in the run's config: without them, say why not.
    if let Some(problem) = config_problem
        && choice != SourceChoice::File
    {
        collected.failures.push(SourceFailure {
            source: if choice == SourceChoice::WandbFiles {
                SourceKind::WandbFiles
            } else {
                SourceKind::WandbApi
            },
            error: format!("the run's WandB names are unknown: {problem}"),
        });
    }
    Ok(collected)
}

/// Why the run has nothing on WandB's servers, when it has not: then nobody asks them (an
/// endpoint that never answers, or no network, must not slow a status down for nothing).
/// `child_environment` is the environment the operator's settings give the components.
fn not_on_wandb_servers(
    wandb: &Result<RunWandb, String>,
    child_environment: &BTreeMap<String, String>,
) -> Option<String> {
    if let Ok(wandb) = wandb
        && !wandb.env_uses_wandb
    {
        return Some("its config sets use_wandb = false".to_owned());
    }
    let mode = child_environment.get("WANDB_MODE")?;
    matches!(mode.as_str(), "offline" | "disabled" | "dryrun")
        .then(|| format!("its components run with WANDB_MODE = {mode}"))
}

/// The run's target, and why its WandB names are missing when they are.
fn target_of(
    run: &RunRecord,
    wandb: &Result<RunWandb, String>,
) -> Result<(RunTarget, Option<String>), ToolsError> {
    let run_dir = run
        .config_path
        .parent()
        .ok_or_else(|| ToolsError::Internal(format!("run {} has no folder", run.id)))?
        .to_owned();
    let trainer_log = run
        .components
        .iter()
        .find(|component| component.component == Component::Trainer)
        .map(|component| rl_process::log_files(&component.log_path))
        .unwrap_or_default();
    // A run whose config is gone still has its metrics file; only WandB lookups need names.
    let (wandb, problem) = match wandb {
        Ok(wandb) => match wandb_names(wandb) {
            Some(names) => (Some(names), None),
            None => (
                None,
                Some("its config names no WandB project or run".to_owned()),
            ),
        },
        Err(error) => (None, Some(error.clone())),
    };
    Ok((RunTarget::new(run_dir, trainer_log, wandb), problem))
}

fn wandb_names(wandb: &RunWandb) -> Option<WandbNames> {
    Some(WandbNames::new(
        wandb.project.clone()?,
        wandb.group.clone(),
        wandb.run_name.as_deref()?,
        wandb.env_name.as_deref().filter(|_| wandb.env_uses_wandb),
    ))
}

fn wandb_api(
    secrets: &Secrets,
    environment: &BTreeMap<String, String>,
    patience: Patience,
) -> Result<WandbApi, ToolsError> {
    let mut config = WandbApiConfig::from_lookup(|name| match name {
        "WANDB_API_KEY" => secrets.get(name).map(str::to_owned),
        _ => environment.get(name).cloned(),
    })?;
    if matches!(patience, Patience::Status) {
        config.request_timeout = Duration::from_secs(5);
        config.deadline = Duration::from_secs(10);
        config.max_attempts = 2;
    }
    Ok(WandbApi::new(config)?)
}

/// What the processes say, for the health digest's stall check: the run's state, where its
/// trainer says it is, and what its environment's groups file says.
pub(crate) fn activity_of(run: &RunRecord) -> Activity {
    let running = matches!(run.state, RunState::Running);
    let folder = run.config_path.parent().map(RunFolder::at);
    Activity {
        running,
        running_since: running.then(|| unix_seconds(&run.updated_at)).flatten(),
        now: jiff::Timestamp::now().as_millisecond() as f64 / 1000.0,
        phase: folder
            .as_ref()
            .and_then(|folder| trainer_phase(&folder.trainer_phase())),
        groups: folder
            .as_ref()
            .and_then(|folder| groups_seen(&folder.env_groups())),
    }
}

/// The environment's groups as its counts file tells them, for the stall check: when it last
/// sent the trainer a group, apart from when a group last ended (groups that fail or time out
/// refresh the file, and are no environment at work).
fn groups_seen(path: &Path) -> Option<GroupsSeen> {
    let groups = EnvGroups::read(path)?;
    Some(GroupsSeen {
        last_sent: groups.last_sent_at(),
        last_ended: groups.updated,
        so_far: groups.describe(),
    })
}

/// Where rl's trainer says it is (`trainer-phase.json`): the phase and since when; `None` when
/// it says nothing, or nothing readable.
fn trainer_phase(path: &Path) -> Option<(Phase, f64)> {
    rl_settings::trainer::TrainerPhase::read(path)
        .map(|read| (Phase::parse(&read.phase), read.since))
}

fn unix_seconds(timestamp: &str) -> Option<f64> {
    let parsed: jiff::Timestamp = timestamp.parse().ok()?;
    Some(parsed.as_millisecond() as f64 / 1000.0)
}

/// The health policy of a run: the stall limits the operator's settings gave it as it started
/// (`[run] stall_factor`, `stall_floor_secs`, as its launch plan records them, as the
/// no-signal bounds are read), the defaults for the rest.
pub(crate) fn policy(run: &RunRecord) -> HealthPolicy {
    let timing = run
        .config_path
        .parent()
        .and_then(|dir| launch_timing(&RunFolder::at(dir).launch_plan()))
        .unwrap_or_default();
    HealthPolicy {
        stall_factor: timing.stall_factor,
        stall_floor_secs: timing.stall_floor_secs,
        ..HealthPolicy::default()
    }
}

fn launch_timing(path: &Path) -> Option<RunTiming> {
    let text = std::fs::read(path).ok()?;
    serde_json::from_slice::<LaunchPlan>(&text)
        .ok()
        .map(|plan| plan.timing)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[expect(
        clippy::unnecessary_wraps,
        reason = "the shape of a run's WandB names as read"
    )]
    fn logged(env_uses_wandb: bool) -> Result<RunWandb, String> {
        Ok(RunWandb {
            project: Some("p".to_owned()),
            group: None,
            run_name: Some("r".to_owned()),
            env_name: None,
            env_uses_wandb,
        })
    }

    #[test]
    fn only_a_run_logging_to_wandb_servers_is_looked_up_there() {
        let none = BTreeMap::new();
        let mode = |value: &str| BTreeMap::from([("WANDB_MODE".to_owned(), value.to_owned())]);
        assert_eq!(not_on_wandb_servers(&logged(true), &none), None);
        assert_eq!(not_on_wandb_servers(&logged(true), &mode("online")), None);
        assert_eq!(
            not_on_wandb_servers(&Err("no config".to_owned()), &none),
            None
        );
        assert!(
            not_on_wandb_servers(&logged(false), &none)
                .is_some_and(|why| why.contains("use_wandb = false"))
        );
        for offline in ["offline", "disabled", "dryrun"] {
            assert!(
                not_on_wandb_servers(&logged(true), &mode(offline))
                    .is_some_and(|why| why.contains(offline)),
                "{offline}"
            );
        }
    }

    /// The stall flag of a trainer waiting since 1010 for the batch after step 1 (at 1005), at
    /// 1620, the environment's groups file being `fixtures/env-groups/<fixture>`.
    fn stall_while_waiting(fixture: &str) -> rl_metrics::HealthFlag {
        let path = rl_test_support::workspace_root()
            .join("fixtures/env-groups")
            .join(fixture);
        let trainer = rl_metrics::LoggedRun {
            history: vec![rl_metrics::HistoryRow {
                step: 1,
                timestamp: Some(1005.0),
                values: BTreeMap::new(),
            }],
            ..rl_metrics::LoggedRun::default()
        };
        let activity = Activity {
            running: true,
            running_since: Some(900.0),
            now: 1620.0,
            phase: Some((Phase::Wait, 1010.0)),
            groups: groups_seen(&path),
        };
        assert!(activity.groups.is_some(), "{} unread", path.display());
        let policy = HealthPolicy {
            stall_floor_secs: 60.0,
            ..HealthPolicy::default()
        };
        rl_metrics::HealthDigest::assess(&trainer, &activity, &policy)
            .flags
            .into_iter()
            .find(|flag| flag.kind == rl_metrics::FlagKind::Stalled)
            .expect("stalled")
    }

    /// Groups abandoned after `worker_timeout` (counted as failed) refresh the groups file:
    /// the stall is the environment's, said as what the file shows, never "making groups".
    #[test]
    fn groups_timing_out_are_no_environment_at_work() {
        let flag = stall_while_waiting("timing-out.json");
        assert_eq!(
            flag.component,
            Some(rl_metrics::StallComponent::Environment),
            "{}",
            flag.detail
        );
        assert!(
            flag.detail.starts_with(
                "the environment's groups end without one sent to the trainer (none sent for \
                 10 min, the last ended 30 s ago; so far: 2 of 4 ended without a group to send, \
                 2 errors in its rollouts, the first: `the group took longer than worker_timeout \
                 (300 s)`, 2 with scores that differ; the trainer is waiting for a batch)"
            ),
            "{}",
            flag.detail
        );
        for untrue in ["run-api", "making groups", "sending groups"] {
            assert!(
                !flag.detail.contains(untrue),
                "{untrue:?} in {}",
                flag.detail
            );
        }
    }

    /// Groups sent while the trainer waits are run-api's to batch; a file from before
    /// `last_sent` was recorded is read as before (its last count is its last group).
    #[test]
    fn groups_sent_while_the_trainer_waits_name_run_api_and_old_files_read_as_before() {
        for fixture in ["sending.json", "before-last-sent.json"] {
            let flag = stall_while_waiting(fixture);
            assert_eq!(
                flag.component,
                Some(rl_metrics::StallComponent::Api),
                "{fixture}: {}",
                flag.detail
            );
            assert!(
                flag.detail.starts_with(
                    "the trainer is waiting for a batch from run-api (the environment is sending \
                     groups, the last 30 s ago; waiting for 10 min)"
                ),
                "{fixture}: {}",
                flag.detail
            );
        }
    }

    #[test]
    fn the_trainers_phase_is_read_and_a_broken_file_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trainer-phase.json");
        assert_eq!(trainer_phase(&path), None);
        std::fs::write(
            &path,
            r#"{"phase": "wait", "step": 3, "since": 1700000000.5}"#,
        )
        .unwrap();
        assert_eq!(trainer_phase(&path), Some((Phase::Wait, 1_700_000_000.5)));
        std::fs::write(&path, r#"{"phase": "optim", "st"#).unwrap();
        assert_eq!(trainer_phase(&path), None);
        std::fs::write(&path, r#"{"phase": "juggling", "step": 1, "since": 5}"#).unwrap();
        assert_eq!(trainer_phase(&path), Some((Phase::Other, 5.0)));
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        assert_eq!(trainer_phase(&path), None);
    }
}
