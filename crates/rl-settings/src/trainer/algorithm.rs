//! The RL algorithm a run chooses (issue 43): the loss passed to the engine as Tinker's
//! `loss_fn` with its `loss_fn_config`, how advantages are normalised in a group, and what
//! becomes of a truncated completion, the KL penalty to the base model. And what each engine
//! takes of it.

use super::Kind::{Boolean, Integer, Number, Text};
use super::Section::Tinker;
use super::{D, Key, Sections, key};
use crate::{SettingsError, Value};

pub const LOSS: Key = key(Tinker, "loss", Text, D::Text("importance_sampling"))
    .one_of(&["importance_sampling", "ppo", "cispo", "dro"])
    .doc("Tinker's loss_fn: importance_sampling (REINFORCE with importance weights), ppo or cispo (clipped ratio, clip_low/clip_high), dro (dro_beta)");
pub const CLIP_LOW: Key = key(Tinker, "clip_low", Number, D::Absent)
    .at_least(0.0)
    .at_most(1.0)
    .doc("ppo/cispo: the lowest importance ratio (Tinker's loss_fn_config clip_low_threshold); absent: the engine's own (on the local engine: ppo 0.8, skyrl-tx's; cispo 0.0, rl's adapter's)");
pub const CLIP_HIGH: Key = key(Tinker, "clip_high", Number, D::Absent)
    .at_least(1.0)
    .doc("ppo/cispo: the highest importance ratio (clip_high_threshold; DAPO raises it alone); absent: the engine's own (on the local engine: ppo 1.2, skyrl-tx's; cispo 4.0, rl's adapter's)");
pub const DRO_BETA: Key = key(Tinker, "dro_beta", Number, D::Absent)
    .above(0.0)
    .doc("dro: its beta (Tinker's loss_fn_config beta); absent: the engine's own (on the local engine: 0.05, rl's adapter's)");
pub const ADVANTAGE_NORM: Key = key(Tinker, "advantage_norm", Text, D::Text("std_floor"))
    .one_of(&["std_floor", "std", "mean_only"])
    .doc("a group's advantages: std_floor (score - mean) / max(std, 1); std (score - mean) / std, GRPO; mean_only score - mean, Dr. GRPO and the cookbook");
pub const TRUNCATED: Key = key(Tinker, "truncated", Text, D::Text("train"))
    .one_of(&["train", "mask", "zero_reward", "penalty"])
    .doc("a completion cut by the sampler's max tokens or the trainer's length: train it as it is; mask (not trained); zero_reward (its score 0); penalty (DAPO's overlong punishment, see overlong_band)");
pub const OVERLONG_BAND: Key = key(Tinker, "overlong_band", Integer, D::Integer(0))
    .at_least(0.0)
    .doc("truncated = penalty: the tokens before the trainer's length where the penalty ramps from 0 to -1 (a cut completion gets -1); 0: only cut ones are penalised");

pub const KL_COEF: Key = key(Tinker, "kl_coef", Number, D::Number(0.0))
    .at_least(0.0)
    .doc("the KL penalty to the base model (the cookbook's kl_penalty_coef): each completion token's advantage loses kl_coef * (logp - logp_base), centred on the batch's mean; one logprob request of the base weights per completion and step; 0: none");
pub const LOG_KL_BASE: Key = key(Tinker, "log_kl_base", Boolean, D::Boolean(false))
    .doc("log train/kl_base (the mean per completion token of logp - logp_base) every step also when kl_coef is 0 (the same extra logprob request)");
pub const MAX_STEPS_OFF_POLICY: Key = key(Tinker, "max_steps_off_policy", Integer, D::Absent)
    .at_least(0.0)
    .doc("drop a group one of whose completions the trainer's sampler is known to have drawn more than this many optimizer steps before the weights it would train (matched by its tokens; a completion not matched is kept and counted); absent: no bound");

/// The losses of `LOSS` the local engine (skyrl-tx 0.3.0, its JAX backend) computes itself:
/// its `tx/tinker/loss_fns.py` has `cross_entropy`, `importance_sampling` and `ppo` only.
pub const LOSSES_OF_THE_LOCAL_ENGINE: &[&str] = &["importance_sampling", "ppo"];

/// The losses of `LOSS` rl's loss adapter (the trainer's `rl_trainer/losses.py`) trains on the
/// local engine, exactly, through skyrl-tx's `importance_sampling` with one extra forward pass
/// per step: `cispo` and `dro` always, `ppo` when the run sets `clip_low` or `clip_high`.
pub const LOSSES_THROUGH_THE_ADAPTER: &[&str] = &["ppo", "cispo", "dro"];

/// The ratio bounds skyrl-tx 0.3.0's `ppo` clips at, whatever `loss_fn_config` says (its JAX
/// backend never reads that config); on the local engine also rl's adapter's bound for ppo
/// where the run sets only the other.
pub const LOCAL_ENGINE_PPO_CLIP: (f64, f64) = (0.8, 1.2);

/// rl's adapter's cispo bounds where the run sets none (Tinker's CISPO page states these as
/// the service's default; not verified against the service).
pub const LOCAL_ADAPTER_CISPO_CLIP: (f64, f64) = (0.0, 4.0);

/// rl's adapter's dro beta where the run sets none (the value of Tinker's DRO page's example;
/// the service's default is not documented, nor verified).
pub const LOCAL_ADAPTER_DRO_BETA: f64 = 0.05;

/// A run's algorithm, read through the contract (shown as the keys' names: `rl runs status`).
/// `None`: the key is absent, and the engine's own value holds.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Algorithm {
    pub loss: String,
    pub clip_low: Option<f64>,
    pub clip_high: Option<f64>,
    pub dro_beta: Option<f64>,
    pub advantage_norm: String,
    pub truncated: String,
    pub overlong_band: u32,
    pub kl_coef: f64,
    pub log_kl_base: bool,
    /// `None`: no bound (the environment's `max_batches_offpolicy` alone limits the queue).
    pub max_steps_off_policy: Option<u32>,
}

impl Sections<'_> {
    pub(super) fn algorithm(&self) -> Result<Algorithm, SettingsError> {
        let band = self.integer(&OVERLONG_BAND)?.unwrap_or(0);
        let off_policy = self.integer(&MAX_STEPS_OFF_POLICY)?;
        Ok(Algorithm {
            loss: self.text(&LOSS)?.unwrap_or_default(),
            clip_low: self.number(&CLIP_LOW)?,
            clip_high: self.number(&CLIP_HIGH)?,
            dro_beta: self.number(&DRO_BETA)?,
            advantage_norm: self.text(&ADVANTAGE_NORM)?.unwrap_or_default(),
            truncated: self.text(&TRUNCATED)?.unwrap_or_default(),
            overlong_band: u32::try_from(band).unwrap_or(u32::MAX),
            kl_coef: self.number(&KL_COEF)?.unwrap_or(0.0),
            log_kl_base: self.boolean(&LOG_KL_BASE)?.unwrap_or(false),
            max_steps_off_policy: off_policy.map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
        })
    }

    /// A Boolean key: true or false, as the trainer's `config.py` reads one (also yes/no,
    /// on/off, 1/0).
    pub(super) fn boolean(&self, key: &Key) -> Result<Option<bool>, SettingsError> {
        let Some(value) = self.given(key) else {
            return Ok(match key.default {
                D::Boolean(b) => Some(b),
                _ => None,
            });
        };
        let read = match value {
            Value::Bool(b) => Some(*b),
            Value::Int(1) => Some(true),
            Value::Int(0) => Some(false),
            Value::Str(text) => match text.trim().to_ascii_lowercase().as_str() {
                "true" | "yes" | "on" | "1" => Some(true),
                "false" | "no" | "off" | "0" => Some(false),
                _ => None,
            },
            _ => None,
        };
        read.map(Some).ok_or_else(|| SettingsError::InvalidInput {
            what: key.dotted(),
            reason: format!("must be true or false, got {}", value.kind()),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::{Trainer, coerce};
    use super::*;

    fn read(entries: &[(&str, Value)]) -> Result<Algorithm, SettingsError> {
        let tinker = entries
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect();
        Trainer::read(&BTreeMap::new(), &tinker).map(|trainer| trainer.algorithm)
    }

    #[test]
    fn the_defaults_are_todays_algorithm() {
        let algorithm = read(&[]).unwrap();
        assert_eq!(algorithm.loss, "importance_sampling");
        assert_eq!(algorithm.advantage_norm, "std_floor");
        assert_eq!(algorithm.truncated, "train");
        assert_eq!(
            (algorithm.clip_low, algorithm.clip_high, algorithm.dro_beta),
            (None, None, None)
        );
        assert_eq!(algorithm.overlong_band, 0);
        assert_eq!((algorithm.kl_coef, algorithm.log_kl_base), (0.0, false));
        assert_eq!(algorithm.max_steps_off_policy, None);
    }

    #[test]
    fn the_off_policy_bound_is_checked_and_read() {
        assert!(read(&[("max_steps_off_policy", (-1).into())]).is_err());
        assert!(read(&[("max_steps_off_policy", Value::Float(1.5))]).is_err());
        let error = read(&[("max_steps_off_policy", "many".into())])
            .unwrap_err()
            .to_string();
        assert!(error.contains("tinker.max_steps_off_policy"), "{error}");
        for (given, read_as) in [(Value::Int(0), 0), ("2".into(), 2)] {
            let algorithm = read(&[("max_steps_off_policy", given)]).unwrap();
            assert_eq!(algorithm.max_steps_off_policy, Some(read_as));
        }
        // A sweep's or a fork's value is checked by the same rules.
        assert_eq!(
            coerce(&MAX_STEPS_OFF_POLICY, &"1".into()).unwrap(),
            Value::Int(1)
        );
        assert!(coerce(&MAX_STEPS_OFF_POLICY, &"-2".into()).is_err());
    }

    #[test]
    fn the_kl_penalty_is_checked_and_read() {
        assert!(read(&[("kl_coef", Value::Float(-0.01))]).is_err());
        assert!(read(&[("kl_coef", "much".into())]).is_err());
        let error = read(&[("log_kl_base", "maybe".into())])
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("tinker.log_kl_base") && error.contains("true or false"),
            "{error}"
        );
        let algorithm = read(&[
            ("kl_coef", Value::Float(0.05)),
            ("log_kl_base", "yes".into()),
        ])
        .unwrap();
        assert_eq!((algorithm.kl_coef, algorithm.log_kl_base), (0.05, true));
        assert!(
            !read(&[("log_kl_base", Value::Bool(false))])
                .unwrap()
                .log_kl_base
        );
        // A sweep's or a fork's value is checked by the same rules.
        assert_eq!(
            coerce(&LOG_KL_BASE, &"true".into()).unwrap(),
            Value::Bool(true)
        );
        assert!(coerce(&LOG_KL_BASE, &Value::Float(0.5)).is_err());
        assert!(coerce(&KL_COEF, &"-1".into()).is_err());
        assert_eq!(coerce(&KL_COEF, &"0.1".into()).unwrap(), Value::Float(0.1));
    }

    #[test]
    fn a_choice_outside_its_list_is_refused_naming_the_list() {
        let error = read(&[("loss", "grpo".into())]).unwrap_err().to_string();
        assert!(
            error.contains("tinker.loss")
                && error.contains("importance_sampling, ppo, cispo, dro")
                && error.contains("\"grpo\""),
            "{error}"
        );
        assert!(read(&[("advantage_norm", "none".into())]).is_err());
        assert!(read(&[("truncated", "drop".into())]).is_err());
        let algorithm = read(&[
            ("loss", " cispo ".into()),
            ("advantage_norm", "mean_only".into()),
            ("truncated", "penalty".into()),
            ("overlong_band", 64.into()),
        ])
        .unwrap();
        assert_eq!(
            (
                algorithm.loss.as_str(),
                algorithm.advantage_norm.as_str(),
                algorithm.truncated.as_str(),
                algorithm.overlong_band
            ),
            ("cispo", "mean_only", "penalty", 64)
        );
        // A sweep's or a fork's value is checked by the same rule.
        assert!(coerce(&LOSS, &"ppo".into()).is_ok());
        assert!(coerce(&LOSS, &"sgd".into()).is_err());
    }

    #[test]
    fn clip_bounds_and_beta_are_checked() {
        assert!(read(&[("clip_low", Value::Float(1.2))]).is_err());
        assert!(read(&[("clip_low", Value::Float(-0.1))]).is_err());
        assert!(read(&[("clip_high", Value::Float(0.9))]).is_err());
        assert!(read(&[("dro_beta", 0.into())]).is_err());
        assert!(read(&[("overlong_band", (-1).into())]).is_err());
        let algorithm = read(&[
            ("clip_low", Value::Float(0.8)),
            ("clip_high", "1.28".into()),
            ("dro_beta", Value::Float(0.05)),
        ])
        .unwrap();
        assert_eq!(
            (algorithm.clip_low, algorithm.clip_high, algorithm.dro_beta),
            (Some(0.8), Some(1.28), Some(0.05))
        );
    }
}
