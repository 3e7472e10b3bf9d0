//! What a process rl starts must not inherit: the keys rl knows that are not meant for it, and
//! rl's own secrets (the token `rl serve` reads from the variable its operator names), which
//! no child ever gets. Every place rl starts a process asks here: the one rule.

use std::sync::RwLock;

use crate::SECRET_NAMES;

/// The variables holding rl's own secrets in this process, registered once known.
static OWN_SECRETS: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Marks `variable` as holding a secret of rl's own (never a child's): no process started
/// from now on inherits it. `rl serve` registers its token's variable before it starts
/// anything.
pub fn register_own_secret(variable: &str) {
    let mut own = OWN_SECRETS
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !own.iter().any(|name| name == variable) {
        own.push(variable.to_owned());
    }
}

/// The inherited variables a child that needs the keys `kept` (of [`SECRET_NAMES`]) must not
/// get: every other key rl knows, and rl's own secrets, whatever `kept` says.
pub fn withheld_from_child(kept: &[&str]) -> Vec<String> {
    let own = OWN_SECRETS
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    SECRET_NAMES
        .iter()
        .filter(|name| !kept.contains(name))
        .map(|name| (*name).to_owned())
        .chain(own.iter().cloned())
        .collect()
}

/// Removes from `command`'s inherited environment what [`withheld_from_child`] names; what
/// the caller sets on it afterwards (a key handed explicitly) is kept.
pub fn withhold(command: &mut std::process::Command, kept: &[&str]) {
    for name in withheld_from_child(kept) {
        command.env_remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one test that registers: the registry is the process's, shared by every test here.
    #[test]
    fn a_child_gets_only_the_keys_it_keeps_and_never_rls_own_secret() {
        assert_eq!(withheld_from_child(&SECRET_NAMES), Vec::<String>::new());
        assert_eq!(withheld_from_child(&[]), SECRET_NAMES.map(str::to_owned));
        assert_eq!(
            withheld_from_child(&["WANDB_API_KEY", "OPENROUTER_API_KEY"]),
            ["TINKER_API_KEY", "OPENAI_API_KEY"]
        );
        register_own_secret("RL_TEST_OWN_TOKEN");
        register_own_secret("RL_TEST_OWN_TOKEN");
        assert_eq!(withheld_from_child(&SECRET_NAMES), ["RL_TEST_OWN_TOKEN"]);
        assert_eq!(
            withheld_from_child(&["TINKER_API_KEY", "RL_TEST_OWN_TOKEN"]),
            [
                "WANDB_API_KEY",
                "OPENROUTER_API_KEY",
                "OPENAI_API_KEY",
                "RL_TEST_OWN_TOKEN"
            ],
            "rl's own secret is withheld even from a child that asks for it"
        );

        let mut command = std::process::Command::new("env");
        command
            .env("RL_TEST_OWN_TOKEN", "own-secret")
            .env("OPENAI_API_KEY", "sk-openai")
            .env("WANDB_API_KEY", "wandb-key");
        withhold(&mut command, &["WANDB_API_KEY"]);
        command.env("TINKER_API_KEY", "tml-handed");
        let envs: Vec<(String, Option<String>)> = command
            .get_envs()
            .map(|(name, value)| {
                (
                    name.to_string_lossy().into_owned(),
                    value.map(|value| value.to_string_lossy().into_owned()),
                )
            })
            .collect();
        let value = |name: &str| {
            envs.iter()
                .find(|(key, _)| key == name)
                .and_then(|(_, value)| value.clone())
        };
        assert_eq!(value("RL_TEST_OWN_TOKEN"), None);
        assert_eq!(value("OPENAI_API_KEY"), None);
        assert_eq!(value("WANDB_API_KEY").as_deref(), Some("wandb-key"));
        assert_eq!(
            value("TINKER_API_KEY").as_deref(),
            Some("tml-handed"),
            "a key handed after the withholding is kept"
        );
    }
}
