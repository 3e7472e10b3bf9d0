//! The RL algorithm (issue 43) as rl shows it: a run's own (`rl_check_status`, `rl runs
//! status`, the run page) and the losses the configured engine takes (`rl doctor`,
//! `rl_health_check`, `rl config show`, `rl_get_current_config`).

use rl_settings::Settings;
use rl_settings::trainer::{
    Algorithm, LOCAL_ADAPTER_CISPO_CLIP, LOCAL_ADAPTER_DRO_BETA, LOCAL_ENGINE_PPO_CLIP, LOSS,
    LOSSES_THROUGH_THE_ADAPTER,
};
use serde::Serialize;

/// A run's algorithm as its recorded config sets it (the trainer reads the same keys; each
/// key's meaning is its contract entry's), and the same in one line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AlgorithmView {
    #[serde(flatten)]
    pub algorithm: Algorithm,
    /// Only what the chosen loss and `truncated` use.
    pub summary: String,
}

impl From<&Algorithm> for AlgorithmView {
    fn from(algorithm: &Algorithm) -> Self {
        Self {
            algorithm: algorithm.clone(),
            summary: summary(algorithm),
        }
    }
}

/// "loss cispo (clip 0.75..1.28), advantages std_floor, truncated penalty (band 64 tokens)",
/// then the KL penalty and the off-policy bound when there are: a setting the loss does not
/// send is left out (the trainer names those at its start).
fn summary(algorithm: &Algorithm) -> String {
    let own = "the engine's";
    let bound = |value: Option<f64>| value.map_or_else(|| own.to_owned(), |x| x.to_string());
    let loss = match algorithm.loss.as_str() {
        "ppo" | "cispo" if algorithm.clip_low.is_none() && algorithm.clip_high.is_none() => {
            format!("{} (clip: {own})", algorithm.loss)
        }
        "ppo" | "cispo" => format!(
            "{} (clip {}..{})",
            algorithm.loss,
            bound(algorithm.clip_low),
            bound(algorithm.clip_high)
        ),
        "dro" => format!("dro (beta {})", bound(algorithm.dro_beta)),
        other => other.to_owned(),
    };
    let truncated = if algorithm.truncated == "penalty" {
        format!("penalty (band {} tokens)", algorithm.overlong_band)
    } else {
        algorithm.truncated.clone()
    };
    let kl = if algorithm.kl_coef > 0.0 {
        format!(", KL to the base model x {}", algorithm.kl_coef)
    } else if algorithm.log_kl_base {
        ", KL to the base model logged (no penalty)".to_owned()
    } else {
        String::new()
    };
    let off_policy = algorithm
        .max_steps_off_policy
        .map_or_else(String::new, |steps| {
            format!(", stale groups dropped (max_steps_off_policy {steps})")
        });
    format!(
        "loss {loss}, advantages {}, truncated {truncated}{kl}{off_policy}",
        algorithm.advantage_norm
    )
}

/// The run's settings `loss` reads.
fn loss_settings(loss: &str) -> Vec<&'static str> {
    match loss {
        "ppo" | "cispo" => vec!["clip_low", "clip_high"],
        "dro" => vec!["dro_beta"],
        _ => Vec::new(),
    }
}

/// The losses the configured engine takes: one row per loss rl offers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LossTable {
    /// `local` (skyrl-tx on this machine) or `hosted` (the Tinker service).
    pub engine: &'static str,
    /// Where the table comes from.
    pub source: String,
    /// Whether rl knows it from the engine's own code (`false`: declared by the SDK's types,
    /// not checked against the service).
    pub verified: bool,
    pub losses: Vec<LossRow>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LossRow {
    pub loss: &'static str,
    /// A run asking for it trains with it; `false`: refused before it starts.
    pub taken: bool,
    /// rl's loss adapter computes it (on the local engine, through skyrl-tx's
    /// `importance_sampling`, one extra forward pass per step; the note says when).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub adapter: bool,
    /// The run's settings the loss reads: sent in its `loss_fn_config` to the hosted service,
    /// applied by rl's adapter on the local engine.
    pub settings: Vec<&'static str>,
    /// What else holds (a fixed clip, why it is refused).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl LossTable {
    /// The table for `settings`' engine: the one rule `rl doctor` and `rl config show` show.
    pub fn of(settings: &Settings) -> Self {
        if settings.engine.is_local() {
            Self::local()
        } else {
            Self::hosted()
        }
    }

    fn local() -> Self {
        let (ppo_low, ppo_high) = LOCAL_ENGINE_PPO_CLIP;
        let (cispo_low, cispo_high) = LOCAL_ADAPTER_CISPO_CLIP;
        let engine = format!(
            "{} {}",
            rl_python::ENGINE_PACKAGE.name,
            rl_python::ENGINE_PACKAGE.version
        );
        let adapter = "rl's loss adapter (one extra forward pass per step)";
        let losses = LOSS
            .choices
            .iter()
            .map(|&loss| {
                let note = match loss {
                    "ppo" => Some(format!(
                        "without clip_low and clip_high: {engine}'s own, clipped at                          {ppo_low}..{ppo_high}; with either: {adapter}, the other bound                          {ppo_low} or {ppo_high}"
                    )),
                    "cispo" => Some(format!(
                        "{adapter}; bounds not set: {cispo_low}..{cispo_high} (rl's adapter's)"
                    )),
                    "dro" => Some(format!(
                        "{adapter}; dro_beta not set: {LOCAL_ADAPTER_DRO_BETA} (rl's adapter's)"
                    )),
                    _ => None,
                };
                LossRow {
                    loss,
                    taken: true,
                    adapter: LOSSES_THROUGH_THE_ADAPTER.contains(&loss),
                    settings: loss_settings(loss),
                    note,
                }
            })
            .collect();
        Self {
            engine: "local",
            source: format!(
                "{engine}'s loss functions (tx/tinker/loss_fns.py) and rl's loss adapter                  (rl_trainer/losses.py)"
            ),
            verified: true,
            losses,
        }
    }

    fn hosted() -> Self {
        let losses = LOSS
            .choices
            .iter()
            .map(|&loss| LossRow {
                loss,
                taken: true,
                adapter: false,
                settings: loss_settings(loss),
                note: None,
            })
            .collect();
        Self {
            engine: "hosted",
            source: format!(
                "declared by the {} SDK {}'s LossFnType; not verified against the service",
                rl_python::SDK.name,
                rl_python::SDK.version
            ),
            verified: false,
            losses,
        }
    }

    /// The heading people read above the rows.
    pub fn heading(&self) -> String {
        let engine = if self.engine == "local" {
            "the local engine"
        } else {
            "the hosted Tinker service"
        };
        format!("losses {engine} takes ({})", self.source)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use rl_settings::EngineKind;

    use super::*;

    /// The defaults' algorithm with `loss` and `truncated` (and a band of 64 tokens).
    fn algorithm(loss: &str, truncated: &str) -> Algorithm {
        let mut algorithm = rl_settings::Trainer::read(&BTreeMap::new(), &BTreeMap::new())
            .unwrap()
            .algorithm;
        algorithm.loss = loss.to_owned();
        algorithm.truncated = truncated.to_owned();
        algorithm.overlong_band = 64;
        algorithm
    }

    #[test]
    fn the_summary_names_only_what_the_loss_sends() {
        let mut cispo = algorithm("cispo", "penalty");
        cispo.clip_low = Some(0.75);
        cispo.clip_high = Some(1.28);
        cispo.dro_beta = Some(0.5);
        assert_eq!(
            AlgorithmView::from(&cispo).summary,
            "loss cispo (clip 0.75..1.28), advantages std_floor, truncated penalty (band 64 tokens)"
        );
        let mut ppo = algorithm("ppo", "mask");
        ppo.clip_high = Some(1.3);
        assert_eq!(
            AlgorithmView::from(&ppo).summary,
            "loss ppo (clip the engine's..1.3), advantages std_floor, truncated mask"
        );
        ppo.kl_coef = 0.05;
        assert!(
            AlgorithmView::from(&ppo)
                .summary
                .ends_with("truncated mask, KL to the base model x 0.05")
        );
        ppo.kl_coef = 0.0;
        ppo.log_kl_base = true;
        assert!(
            AlgorithmView::from(&ppo)
                .summary
                .ends_with(", KL to the base model logged (no penalty)")
        );
        ppo.max_steps_off_policy = Some(2);
        assert!(
            AlgorithmView::from(&ppo).summary.ends_with(
                ", KL to the base model logged (no penalty), stale groups dropped (max_steps_off_policy 2)"
            )
        );
        assert_eq!(
            AlgorithmView::from(&algorithm("ppo", "train")).summary,
            "loss ppo (clip: the engine's), advantages std_floor, truncated train"
        );
        let mut plain = algorithm("importance_sampling", "train");
        plain.clip_low = Some(0.5);
        assert_eq!(
            AlgorithmView::from(&plain).summary,
            "loss importance_sampling, advantages std_floor, truncated train"
        );
        assert_eq!(
            AlgorithmView::from(&algorithm("dro", "zero_reward")).summary,
            "loss dro (beta the engine's), advantages std_floor, truncated zero_reward"
        );
    }

    #[test]
    fn each_engine_has_its_table() {
        let mut settings = Settings::default();
        settings.engine.kind = EngineKind::Local;
        let local = LossTable::of(&settings);
        assert!(local.losses.iter().all(|row| row.taken));
        assert_eq!(local.losses.len(), LOSS.choices.len());
        let adapted: Vec<&str> = local
            .losses
            .iter()
            .filter(|row| row.adapter)
            .map(|row| row.loss)
            .collect();
        assert_eq!(adapted, ["ppo", "cispo", "dro"]);
        assert!(local.verified && local.source.contains("skyrl-tx 0.3.0"));
        assert!(
            local.source.contains("rl's loss adapter"),
            "{}",
            local.source
        );
        let note = |loss: &str| {
            let row = local.losses.iter().find(|row| row.loss == loss).unwrap();
            row.note.clone().unwrap_or_default()
        };
        assert!(
            note("ppo").contains("0.8..1.2")
                && note("ppo").contains("with either: rl's loss adapter"),
            "{}",
            note("ppo")
        );
        assert!(note("cispo").contains("0..4"), "{}", note("cispo"));
        assert!(note("dro").contains("0.05"), "{}", note("dro"));
        assert!(note("importance_sampling").is_empty());
        let json = serde_json::to_value(&local).unwrap();
        assert_eq!(json["losses"][0].get("adapter"), None);
        assert_eq!(json["losses"][2]["adapter"], true);

        settings.engine.kind = EngineKind::Tinker;
        let hosted = LossTable::of(&settings);
        assert_eq!(hosted.losses.len(), LOSS.choices.len());
        assert!(hosted.losses.iter().all(|row| row.taken && !row.adapter));
        assert!(!hosted.verified);
        assert!(
            hosted.heading().contains("declared by the tinker SDK")
                && hosted.heading().contains("not verified"),
            "{}",
            hosted.heading()
        );
    }
}
