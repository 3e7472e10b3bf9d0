//! A fork's `--set` pairs checked against the run it forks (`check_fork_settings`): environment
//! fields of the parent's environment as `rl config set` checks them, the trainer keys a run
//! chooses, and the refusals of what the saved state fixes or the operator locked.

use rl_config::{ConfigError, ConfigService, Section};
use rl_settings::{Caps, RunConfig, RunId, Value};

use crate::fixture_tree;

/// A run of word_ladder written as `Runs::start` would, with `settings` as its operator's.
fn parent_with(settings: rl_settings::Settings) -> (tempfile::TempDir, ConfigService, RunId) {
    let home = tempfile::tempdir().unwrap();
    let service = ConfigService::open(home.path(), settings).unwrap();
    service.select("word_ladder").unwrap();
    let parent = RunId::parse("0a1b2c3d").unwrap();
    service
        .write_run_config(&parent, None, &Caps::default(), &[])
        .unwrap();
    // A later selection is not what a fork of the run checks against.
    service.select("gsm8k_tinker").unwrap();
    (home, service, parent)
}

fn settings() -> rl_settings::Settings {
    rl_settings::Settings {
        tinker_atropos_root: Some(fixture_tree()),
        recursive_discovery: true,
        ..Default::default()
    }
}

fn asked(pairs: &[(&str, &str)]) -> Vec<(String, Value)> {
    pairs
        .iter()
        .map(|(field, value)| ((*field).to_owned(), Value::from(*value)))
        .collect()
}

#[test]
fn a_forks_settings_are_read_as_their_fields_types_in_their_sections() {
    let (home, service, parent) = parent_with(settings());
    let config = RunConfig::read(&home.path().join("runs/0a1b2c3d/config.yaml")).unwrap();
    let checked = service
        .check_fork_settings(
            &parent,
            &config,
            &asked(&[
                ("learning_rate", "1e-5"),
                ("tinker.save_every", "3"),
                ("max_rungs", "4"),
            ]),
        )
        .unwrap();
    let read: Vec<(Section, &str, &Value)> = checked
        .iter()
        .map(|setting| (setting.section, setting.field.as_str(), &setting.value))
        .collect();
    assert_eq!(
        read,
        [
            (Section::Tinker, "learning_rate", &Value::Float(1e-5)),
            (Section::Tinker, "save_every", &Value::Int(3)),
            // A field of the parent's environment (word_ladder), not of the selection now.
            (Section::Env, "max_rungs", &Value::Int(4)),
        ]
    );
    assert_eq!(checked[0].spelled(), "learning_rate=0.00001");
}

#[test]
fn what_the_saved_state_fixes_the_operator_locked_or_nobody_knows_is_refused() {
    let mut locked = settings();
    locked
        .locked
        .tinker
        .insert("learning_rate".to_owned(), Value::Float(4e-5));
    locked
        .operator_tinker_locks
        .insert("learning_rate".to_owned());
    for (operator, pairs, expected) in [
        (
            settings(),
            vec![("lora_rank", "8")],
            "LoRA adapter of the parent's rank",
        ),
        (
            settings(),
            vec![("tinker.lora_rank", "8")],
            "another rank cannot load it",
        ),
        (
            settings(),
            vec![("base_model", "Qwen/Qwen3-8B")],
            "parent's base model",
        ),
        (
            settings(),
            vec![("tokenizer_name", "gpt2")],
            "parent's base model",
        ),
        (
            settings(),
            vec![("learning_rat", "1e-5")],
            "unknown field 'learning_rat'",
        ),
        (settings(), vec![("learning_rate", "fast")], "learning_rate"),
        (settings(), vec![("learning_rate", "0")], "learning_rate"),
        (
            settings(),
            vec![("learning_rate", "1e-5"), ("tinker.learning_rate", "2e-5")],
            "given twice",
        ),
        // The original tool's locked values: total_steps is the operator's.
        (
            settings(),
            vec![("total_steps", "9")],
            "locked by the operator",
        ),
        (
            locked,
            vec![("learning_rate", "1e-5")],
            "locked by the operator",
        ),
    ] {
        let home = tempfile::tempdir().unwrap();
        let service = ConfigService::open(home.path(), operator).unwrap();
        service.select("word_ladder").unwrap();
        let parent = RunId::parse("0a1b2c3d").unwrap();
        service
            .write_run_config(&parent, None, &Caps::default(), &[])
            .unwrap();
        let config = RunConfig::read(&home.path().join("runs/0a1b2c3d/config.yaml")).unwrap();
        let error: ConfigError = service
            .check_fork_settings(&parent, &config, &asked(&pairs))
            .unwrap_err();
        assert!(
            error.to_string().contains(expected),
            "{pairs:?}: {error} (expected {expected:?})"
        );
    }
}

#[test]
fn a_fork_of_a_run_rl_has_no_record_of_is_refused() {
    let (home, service, _) = parent_with(settings());
    let config = RunConfig::read(&home.path().join("runs/0a1b2c3d/config.yaml")).unwrap();
    let unknown = RunId::parse("0badc0de").unwrap();
    assert!(
        service
            .check_fork_settings(&unknown, &config, &asked(&[("learning_rate", "1e-5")]))
            .is_err()
    );
}
