//! What training costs and how much a run may spend: the operator's `[prices]` and `[caps]`
//! tables, none set by default. A run is given its prices and caps at its start, in its
//! config (`trainer::PRICE_*`, `trainer::MAX_*`), and its trainer adds each step's cost.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::SettingsError;

/// Per million tokens, in the operator's currency; a price left out is no price.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct TokenPrices {
    pub prompt_per_million: Option<f64>,
    pub sampled_per_million: Option<f64>,
    pub trained_per_million: Option<f64>,
}

impl TokenPrices {
    fn is_set(&self) -> bool {
        self.prompt_per_million.is_some()
            || self.sampled_per_million.is_some()
            || self.trained_per_million.is_some()
    }

    fn each(&self) -> [(&'static str, Option<f64>); 3] {
        [
            ("prompt_per_million", self.prompt_per_million),
            ("sampled_per_million", self.sampled_per_million),
            ("trained_per_million", self.trained_per_million),
        ]
    }
}

/// `[prices]`: token prices for every model (the top-level keys) or one model
/// (`[prices.models."Qwen/Qwen3-8B"]`, which replaces the defaults for it), and for a run on
/// the local engine this machine's price per hour.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Prices {
    /// A label shown beside every figure; rl converts nothing.
    pub currency: String,
    pub prompt_per_million: Option<f64>,
    pub sampled_per_million: Option<f64>,
    pub trained_per_million: Option<f64>,
    pub machine_per_hour: Option<f64>,
    pub models: BTreeMap<String, TokenPrices>,
}

impl Default for Prices {
    fn default() -> Self {
        Self {
            currency: "USD".to_owned(),
            prompt_per_million: None,
            sampled_per_million: None,
            trained_per_million: None,
            machine_per_hour: None,
            models: BTreeMap::new(),
        }
    }
}

/// The prices a run of `model` pays; `None` when none applies (it then counts tokens only).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RunPrices {
    pub tokens: TokenPrices,
    /// Only for a run on the local engine: the hosted service's price is its tokens'.
    pub machine_per_hour: Option<f64>,
}

impl Prices {
    /// The token prices of every model without its own table.
    fn defaults(&self) -> TokenPrices {
        TokenPrices {
            prompt_per_million: self.prompt_per_million,
            sampled_per_million: self.sampled_per_million,
            trained_per_million: self.trained_per_million,
        }
    }

    pub fn for_run(&self, model: &str, local_engine: bool) -> Option<RunPrices> {
        let tokens = self
            .models
            .get(model)
            .copied()
            .unwrap_or_else(|| self.defaults());
        let machine_per_hour = self.machine_per_hour.filter(|_| local_engine);
        (tokens.is_set() || machine_per_hour.is_some()).then_some(RunPrices {
            tokens,
            machine_per_hour,
        })
    }

    pub(super) fn check(&self) -> Result<(), SettingsError> {
        let defaults = self.defaults();
        let tables = std::iter::once(("prices".to_owned(), &defaults)).chain(
            self.models
                .iter()
                .map(|(model, prices)| (format!("prices.models.{model:?}"), prices)),
        );
        for (table, prices) in tables {
            for (key, value) in prices.each() {
                non_negative(&format!("{table}.{key}"), value)?;
            }
        }
        non_negative("prices.machine_per_hour", self.machine_per_hour)?;
        if self.currency.trim().is_empty() || self.currency.chars().count() > 12 {
            return Err(SettingsError::Invalid(
                "prices.currency must be a short label such as \"USD\"".to_owned(),
            ));
        }
        Ok(())
    }
}

/// `[caps]`, and a run's own (`rl runs start --max-cost/--max-tokens/--max-hours`): before a
/// step that would pass one, the trainer saves its state and the run ends `capped`.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Caps {
    /// In the prices' currency; needs a price.
    pub max_cost: Option<f64>,
    /// Prompt, sampled and trained tokens together.
    pub max_tokens: Option<u64>,
    /// Hours of training, from the trainer's start.
    pub max_hours: Option<f64>,
}

impl Caps {
    /// What is wrong with these caps, if anything: the key and why.
    fn problem(&self) -> Option<(&'static str, String)> {
        for (key, value) in [("max_cost", self.max_cost), ("max_hours", self.max_hours)] {
            if let Some(value) = value
                && !(value.is_finite() && value > 0.0)
            {
                return Some((key, format!("must be a number above 0, got {value}")));
            }
        }
        (self.max_tokens == Some(0)).then(|| ("max_tokens", "must be above 0".to_owned()))
    }

    pub(super) fn check(&self, what: &str) -> Result<(), SettingsError> {
        match self.problem() {
            Some((key, reason)) => Err(SettingsError::Invalid(format!("{what}.{key} {reason}"))),
            None => Ok(()),
        }
    }

    /// A run's caps: the operator's, each replaced by the run's own where it asks for one, and
    /// never above the operator's (the operator's cap is the most anyone may spend). A run's
    /// own cap that is wrong is the caller's mistake, named by its argument.
    pub fn for_run(&self, asked: &Caps) -> Result<Caps, SettingsError> {
        if let Some((key, reason)) = asked.problem() {
            return Err(SettingsError::InvalidInput {
                what: key.to_owned(),
                reason,
            });
        }
        let above = |key: &str, asked: Option<f64>, set: Option<f64>| match (asked, set) {
            (Some(asked), Some(set)) if asked > set => Err(SettingsError::InvalidInput {
                what: key.to_owned(),
                reason: format!(
                    "{asked} is above the operator's cap ({set}, [caps] {key} in config.toml)"
                ),
            }),
            _ => Ok(asked.or(set)),
        };
        Ok(Caps {
            max_cost: above("max_cost", asked.max_cost, self.max_cost)?,
            max_tokens: above(
                "max_tokens",
                asked.max_tokens.map(|n| n as f64),
                self.max_tokens.map(|n| n as f64),
            )?
            .map(|n| n as u64),
            max_hours: above("max_hours", asked.max_hours, self.max_hours)?,
        })
    }

    pub fn is_set(&self) -> bool {
        self.max_cost.is_some() || self.max_tokens.is_some() || self.max_hours.is_some()
    }
}

fn non_negative(key: &str, value: Option<f64>) -> Result<(), SettingsError> {
    match value {
        Some(value) if !(value.is_finite() && value >= 0.0) => Err(SettingsError::Invalid(
            format!("{key} must be a number from 0, got {value}"),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_models_prices_replace_the_defaults_and_the_machine_is_the_local_engines() {
        let mut prices = Prices {
            sampled_per_million: Some(1.0),
            machine_per_hour: Some(2.0),
            ..Prices::default()
        };
        prices.models.insert(
            "m".to_owned(),
            TokenPrices {
                trained_per_million: Some(3.0),
                ..TokenPrices::default()
            },
        );
        let hosted = prices.for_run("m", false).unwrap();
        assert_eq!(hosted.tokens.trained_per_million, Some(3.0));
        assert_eq!(hosted.tokens.sampled_per_million, None);
        assert_eq!(hosted.machine_per_hour, None);
        let local = prices.for_run("other", true).unwrap();
        assert_eq!(local.tokens.sampled_per_million, Some(1.0));
        assert_eq!(local.machine_per_hour, Some(2.0));
        assert_eq!(Prices::default().for_run("m", true), None);
    }

    #[test]
    fn a_runs_cap_may_not_pass_the_operators() {
        let operator = Caps {
            max_cost: Some(10.0),
            ..Caps::default()
        };
        let asked = Caps {
            max_cost: Some(5.0),
            max_hours: Some(1.0),
            ..Caps::default()
        };
        let caps = operator.for_run(&asked).unwrap();
        assert_eq!((caps.max_cost, caps.max_hours), (Some(5.0), Some(1.0)));
        assert_eq!(operator.for_run(&Caps::default()).unwrap(), operator);
        let error = operator
            .for_run(&Caps {
                max_cost: Some(11.0),
                ..Caps::default()
            })
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("max_cost is not valid: 11 is above the operator's cap"),
            "{error}"
        );
        assert!(
            operator
                .for_run(&Caps {
                    max_hours: Some(-1.0),
                    ..Caps::default()
                })
                .is_err()
        );
    }

    #[test]
    fn negative_or_endless_prices_are_refused() {
        let prices = Prices {
            machine_per_hour: Some(f64::INFINITY),
            ..Prices::default()
        };
        assert!(prices.check().is_err());
        let mut prices = Prices::default();
        prices.models.insert(
            "m".to_owned(),
            TokenPrices {
                prompt_per_million: Some(-1.0),
                ..TokenPrices::default()
            },
        );
        let error = prices.check().unwrap_err().to_string();
        assert!(
            error.contains("prices.models.\"m\".prompt_per_million"),
            "{error}"
        );
    }
}
