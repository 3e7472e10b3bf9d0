//! The settings' shape, checked once they are loaded: what figment's types cannot say (ranges,
//! one-line SLURM values, keys kept out of `config.toml`, combinations not supported).

use super::Settings;
use super::tables::Backend;
use crate::SettingsError;

/// Below this a capped log's head and tail would hold too little to read (a traceback is 5 KB).
const MIN_LOG_LIMIT_BYTES: u64 = 64 * 1024;
/// A terabyte: beyond it the limit no longer protects the disk.
const MAX_LOG_LIMIT_BYTES: u64 = 1 << 40;
/// More kept out would leave training too little of a small dataset.
pub(crate) const MAX_HELD_OUT_FRACTION: f64 = 0.5;

impl Settings {
    pub(super) fn check(&self) -> Result<(), SettingsError> {
        self.prices.check()?;
        self.caps.check("caps")?;
        if let Some(name) = self
            .child_environment
            .keys()
            .find(|name| crate::SECRET_NAMES.contains(&name.as_str()))
        {
            return Err(SettingsError::Invalid(format!(
                "child_environment sets {name}; keys are never kept in config.toml: put it in the \
                 environment or in <home>/.env"
            )));
        }
        if let Some(name) = self
            .environment_keys
            .iter()
            .find(|name| !crate::SECRET_NAMES.contains(&name.as_str()))
        {
            return Err(SettingsError::Invalid(format!(
                "environment_keys names {name:?}, which is no key rl knows; name some of {}",
                crate::SECRET_NAMES.join(", ")
            )));
        }
        // Each goes into a line of a batch script: one line, no control characters.
        let slurm = &self.slurm;
        let one_liners = [
            ("slurm.partition", slurm.partition.as_deref()),
            ("slurm.account", slurm.account.as_deref()),
            ("slurm.time_limit", slurm.time_limit.as_deref()),
            ("slurm.host", slurm.host.as_deref()),
        ]
        .into_iter()
        .chain(
            slurm
                .extra_sbatch
                .iter()
                .map(|line| ("slurm.extra_sbatch", Some(line.as_str()))),
        );
        for (name, value) in one_liners {
            if let Some(value) = value
                && (value.is_empty() || value.chars().any(char::is_control))
            {
                return Err(SettingsError::Invalid(format!(
                    "{name} is {value:?}; it must be one line of text without control characters"
                )));
            }
        }
        if slurm.env_uses_allocation
            && slurm.nodes.unwrap_or(1) > 1
            && !self.child_environment.contains_key("NUM_TRAINING_NODES")
        {
            return Err(SettingsError::Invalid(
                "slurm.env_uses_allocation on several nodes needs NUM_TRAINING_NODES in \
                 [child_environment]: atroposlib reads it to tell training nodes from inference \
                 nodes"
                    .to_owned(),
            ));
        }
        // rl ends each run's holding script with SIGUSR1; a job signal of the same kind would
        // end it early.
        if let Some(line) = slurm
            .extra_sbatch
            .iter()
            .find(|line| line.contains("--signal") && line.contains("USR1"))
        {
            return Err(SettingsError::Invalid(format!(
                "slurm.extra_sbatch has {line:?}: rl ends each run's job with SIGUSR1 to its \
                 script; ask for another signal"
            )));
        }
        if self.engine.is_local() && self.backend == Backend::Slurm {
            return Err(SettingsError::Invalid(
                "engine.kind = \"local\" with backend = \"slurm\" is not supported yet: the \
                 local engine listens on its node's loopback, where the login node's readiness \
                 checks cannot reach it; train on the hosted Tinker on SLURM"
                    .to_owned(),
            ));
        }
        if self.engine.is_local() && self.engine.base_model.is_none() {
            return Err(SettingsError::Invalid(
                "engine.kind is \"local\" but engine.base_model is not set: name a model folder \
                 on disk (a Hugging Face Qwen3 or Llama checkpoint) for the engine to train"
                    .to_owned(),
            ));
        }
        let fraction = self.held_out.fraction;
        if !(fraction.is_finite() && (0.0..=MAX_HELD_OUT_FRACTION).contains(&fraction)) {
            return Err(SettingsError::Invalid(format!(
                "held_out.fraction is {fraction}; it must be between 0 (keep nothing out) and \
                 {MAX_HELD_OUT_FRACTION}"
            )));
        }
        if self.max_active_runs == 0 {
            return Err(SettingsError::Invalid(
                "max_active_runs is 0: no run could start; set at least 1".to_owned(),
            ));
        }
        if self.max_active_sweeps == 0 {
            return Err(SettingsError::Invalid(
                "max_active_sweeps is 0: no sweep could start; set at least 1".to_owned(),
            ));
        }
        let timing = &self.run;
        let log_limit = timing.log_limit_bytes;
        if !(MIN_LOG_LIMIT_BYTES..=MAX_LOG_LIMIT_BYTES).contains(&log_limit) {
            return Err(SettingsError::Invalid(format!(
                "run.log_limit_bytes is {log_limit}; it must be between {MIN_LOG_LIMIT_BYTES} \
                 (64 KiB) and {MAX_LOG_LIMIT_BYTES} (1 TiB)"
            )));
        }
        let (warn, fail) = (timing.no_signal_warn_groups, timing.no_signal_fail_groups);
        if warn > 0 && fail > 0 && warn > fail {
            return Err(SettingsError::Invalid(format!(
                "run.no_signal_warn_groups ({warn}) is more than run.no_signal_fail_groups \
                 ({fail}): a run would fail before it is warned of; set the warning lower (0 \
                 turns either off)"
            )));
        }
        if !(timing.stall_factor.is_finite() && (1.0..=1000.0).contains(&timing.stall_factor)) {
            return Err(SettingsError::Invalid(format!(
                "run.stall_factor is {}; it must be between 1 and 1000 (a step this many times \
                 its recent median is stalled)",
                timing.stall_factor
            )));
        }
        if !(timing.stall_floor_secs.is_finite() && timing.stall_floor_secs > 0.0) {
            return Err(SettingsError::Invalid(format!(
                "run.stall_floor_secs is {}; it must be more than 0 seconds",
                timing.stall_floor_secs
            )));
        }
        for (name, value) in [
            ("run.stall_floor_secs", timing.stall_floor_secs),
            (
                "run.engine_ready_timeout_secs",
                timing.engine_ready_timeout_secs,
            ),
            ("run.api_ready_timeout_secs", timing.api_ready_timeout_secs),
            (
                "run.trainer_ready_timeout_secs",
                timing.trainer_ready_timeout_secs,
            ),
            ("run.env_settle_secs", timing.env_settle_secs),
            ("run.stop_grace_secs", timing.stop_grace_secs),
            ("run.completion_grace_secs", timing.completion_grace_secs),
            ("run.no_signal_fail_secs", timing.no_signal_fail_secs),
            (
                "status_check_interval_secs",
                self.status_check_interval_secs,
            ),
        ] {
            if !(value.is_finite() && (0.0..=86_400.0).contains(&value)) {
                return Err(SettingsError::Invalid(format!(
                    "{name} is {value}; it must be between 0 and 86400 seconds"
                )));
            }
        }
        Ok(())
    }
}
