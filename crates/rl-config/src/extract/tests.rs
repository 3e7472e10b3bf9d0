use rl_settings::trainer::{self, Section};

/// The trainer falls back on atroposlib's defaults for the `env` keys a run config leaves
/// out; the contract's copy must be the class's, which this crate restates.
#[test]
fn the_trainer_contracts_env_defaults_are_atroposlibs() {
    let fields = super::builtin_env_fields().unwrap();
    // Deliberately none: a run that names no model must not train atroposlib's example one.
    let deviations = [trainer::TOKENIZER_NAME.name];
    for key in trainer::KEYS
        .iter()
        .filter(|key| key.section == Section::Env && !deviations.contains(&key.name))
    {
        let field = fields
            .iter()
            .find(|field| field.name == key.name)
            .unwrap_or_else(|| panic!("{} is no BaseEnvConfig field", key.dotted()));
        let class_default = field.class_default.value().cloned();
        let contract = Some(key.default_value()).filter(|v| *v != rl_settings::Value::Null);
        assert_eq!(
            contract.or(Some(rl_settings::Value::Null)),
            class_default.or(Some(rl_settings::Value::Null)),
            "{}",
            key.dotted()
        );
    }
}
