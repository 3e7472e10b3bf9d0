//! The kinds of environment rl trains, spelled once. Every layer asks an environment's kind
//! what differs (how it is found, what its settings are, which Python runs it, what installs
//! it) through the methods here and the per-kind tables beside each layer, never by comparing
//! names.

use serde::{Deserialize, Serialize};

/// Which API an environment is written against.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "kebab-case")]
pub enum EnvironmentKind {
    /// A class deriving from atroposlib's `BaseEnv`, run by the run's own Python.
    #[default]
    Atropos,
    /// A verifiers 0.4 package exporting a `vf.Taskset` (`import verifiers.v1 as vf`).
    VerifiersV1,
    /// A module with `load_environment(**kwargs)` written against verifiers' legacy API
    /// (verifiers <= 0.3).
    VerifiersV0,
}

/// The variable that tells rl's environment runner (`rl_env`) which kind it runs, read before
/// it imports anything of atroposlib (absent in a verifiers environment's Python).
pub const KIND_VARIABLE: &str = "RL_ENV_KIND";

impl EnvironmentKind {
    pub const ALL: [EnvironmentKind; 3] = [Self::Atropos, Self::VerifiersV1, Self::VerifiersV0];

    /// The word every face shows and `rl_env` reads (`RL_ENV_KIND`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Atropos => "atropos",
            Self::VerifiersV1 => "verifiers-v1",
            Self::VerifiersV0 => "verifiers-v0",
        }
    }

    pub fn parse(word: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == word)
    }

    /// A verifiers environment runs in a Python of its own (`rl setup --env NAME`): verifiers'
    /// two APIs cannot share one, and neither has atroposlib.
    pub fn has_own_python(self) -> bool {
        !matches!(self, Self::Atropos)
    }

    /// rl renders its prompts (verifiers v1's training client as rl configures it, else rl's
    /// trainer's chat template), so rl checks before a run that the tools it gives the model
    /// reach the model (`python -m rl_env ENV_FILE check`); an Atropos environment renders
    /// its own.
    pub fn prompts_rendered_by_rl(self) -> bool {
        !matches!(self, Self::Atropos)
    }

    /// Where its settings come from, as a person reads it.
    pub fn settings_source(self) -> &'static str {
        match self {
            Self::Atropos => "its config class",
            Self::VerifiersV1 => "its taskset's config class",
            Self::VerifiersV0 => "load_environment's keyword arguments",
        }
    }
}

impl std::fmt::Display for EnvironmentKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip_and_match_serde() {
        for kind in EnvironmentKind::ALL {
            assert_eq!(EnvironmentKind::parse(kind.as_str()), Some(kind));
            assert_eq!(
                serde_json::to_value(kind).unwrap(),
                serde_json::Value::String(kind.as_str().to_owned())
            );
        }
        assert_eq!(EnvironmentKind::parse("verifiers"), None);
    }
}
