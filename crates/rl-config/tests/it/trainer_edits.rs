//! `rl config set` / `rl_edit_config` of a trainer key a run chooses (issue 43: the algorithm,
//! the learning rate, ...): checked as a sweep's point is, kept in the selection's `tinker`
//! edits, listed by the diff beside its default, and taken by the next run's config.

use rl_config::{ConfigError, ConfigService, DefaultValue, Section};
use rl_settings::{Caps, RunConfig, RunId, Value};

use crate::service;

#[test]
fn a_trainer_key_is_edited_checked_listed_and_taken_by_the_next_run() {
    let (home, service) = service();
    service.select("word_ladder").unwrap();

    let edit = service.edit("loss", &Value::from("ppo")).unwrap();
    assert_eq!(
        (edit.section, edit.value.clone(), edit.previous.value()),
        (
            Section::Tinker,
            Value::from("ppo"),
            Some(&Value::from("importance_sampling"))
        )
    );
    let edit = service
        .edit("tinker.learning_rate", &Value::from("1e-5"))
        .unwrap();
    assert_eq!(edit.field, "learning_rate");
    assert_eq!(edit.value, Value::Float(1e-5));
    assert_eq!(edit.coerced_from, Some(Value::from("1e-5")));
    service.edit("clip_high", &Value::Float(1.28)).unwrap();

    // Refused as a sweep's point would be, and nothing stored.
    for (field, value, expected) in [
        ("loss", "nosuch", "importance_sampling"),
        ("clip_low", "5", "clip_low"),
        ("advantage_norm", "STD", "std_floor"),
        ("overlong_band", "-3", "overlong_band"),
    ] {
        let error = service
            .edit(field, &Value::from(value))
            .unwrap_err()
            .to_string();
        assert!(error.contains(expected), "{field}={value}: {error}");
    }

    let diff = service.diff().unwrap();
    let listed: Vec<(&str, Section, String, String)> = diff
        .iter()
        .map(|entry| {
            (
                entry.field.as_str(),
                entry.section,
                entry.default.to_string(),
                entry.value.to_string(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [
            (
                "loss",
                Section::Tinker,
                "\"importance_sampling\"".to_owned(),
                "\"ppo\"".to_owned()
            ),
            (
                "learning_rate",
                Section::Tinker,
                "0.00004".to_owned(),
                "0.00001".to_owned()
            ),
            (
                "clip_high",
                Section::Tinker,
                "null".to_owned(),
                "1.28".to_owned()
            ),
        ],
        "{diff:#?}"
    );
    assert!(matches!(
        &diff[2].default,
        DefaultValue::Value { value: Value::Null }
    ));

    let run = RunId::parse("0a1b2c3d").unwrap();
    service
        .write_run_config(&run, None, &Caps::default(), &[])
        .unwrap();
    let config = RunConfig::read(&home.path().join("runs/0a1b2c3d/config.yaml")).unwrap();
    assert_eq!(config.tinker["loss"], Value::from("ppo"));
    assert_eq!(config.tinker["learning_rate"], Value::Float(1e-5));
    assert_eq!(config.tinker["clip_high"], Value::Float(1.28));
}

/// The service again, with the operator's `[locked.tinker]` now holding `key = value`.
fn locking(
    home: &tempfile::TempDir,
    service: &ConfigService,
    key: &str,
    value: Value,
) -> ConfigService {
    let mut settings = service.settings().clone();
    settings.locked.tinker.insert(key.to_owned(), value);
    settings.operator_tinker_locks.insert(key.to_owned());
    ConfigService::open(home.path(), settings).unwrap()
}

#[test]
fn a_trainer_key_the_operator_locked_is_refused_naming_its_table() {
    let (home, service) = service();
    let service = locking(&home, &service, "learning_rate", Value::Float(4e-5));
    service.select("word_ladder").unwrap();
    let error = service
        .edit("learning_rate", &Value::from("1e-3"))
        .unwrap_err();
    assert!(
        matches!(&error, ConfigError::LockedField { field, .. } if field == "learning_rate"),
        "{error}"
    );
    assert!(error.to_string().contains("[locked.tinker]"), "{error}");
    assert!(service.diff().unwrap().is_empty());
}

#[test]
fn an_unknown_field_is_offered_the_trainer_keys_too() {
    let (_home, service) = service();
    service.select("word_ladder").unwrap();
    let error = service
        .edit("learning_rat", &Value::Float(1e-5))
        .unwrap_err();
    match error {
        ConfigError::UnknownField { closest, .. } => {
            assert!(
                closest.iter().any(|name| name == "learning_rate"),
                "{closest:?}"
            );
        }
        other => panic!("{other}"),
    }
}

/// Issue 55: the trainer's side of the next run is read back (`rl_get_current_config`'s
/// `trainer_settings`), every per-run key with its value and origin; a lock the operator writes
/// after an edit wins, in the read-back and in the run's config alike.
#[test]
fn the_next_runs_trainer_settings_are_read_back_and_a_later_lock_wins() {
    let (home, service) = service();
    service.select("word_ladder").unwrap();
    service.edit("learning_rate", &Value::from("1e-5")).unwrap();
    service.edit("loss", &Value::from("ppo")).unwrap();
    let read = |service: &ConfigService| -> std::collections::BTreeMap<String, (Value, &str)> {
        service
            .next_run_trainer()
            .unwrap()
            .into_iter()
            .map(|setting| (setting.name, (setting.value, setting.origin.name())))
            .collect()
    };
    let before = read(&service);
    for entry in rl_settings::trainer::PER_RUN {
        assert!(before.contains_key(entry.key.name), "{before:?}");
    }
    assert_eq!(before["learning_rate"], (Value::Float(1e-5), "edited"));
    assert_eq!(before["loss"], (Value::from("ppo"), "edited"));
    assert_eq!(before["clip_high"], (Value::Null, "engine_default"));

    let service = locking(&home, &service, "learning_rate", Value::Float(3e-5));
    let after = read(&service);
    assert_eq!(after["learning_rate"], (Value::Float(3e-5), "locked"));
    assert_eq!(after["loss"], (Value::from("ppo"), "edited"));

    let run = RunId::parse("0a1b2c3e").unwrap();
    service
        .write_run_config(&run, None, &Caps::default(), &[])
        .unwrap();
    let config = RunConfig::read(&home.path().join("runs/0a1b2c3e/config.yaml")).unwrap();
    assert_eq!(config.tinker["learning_rate"], Value::Float(3e-5));
    assert_eq!(config.tinker["loss"], Value::from("ppo"));
}
