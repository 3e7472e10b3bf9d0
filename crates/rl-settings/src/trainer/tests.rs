use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use super::*;

fn section(entries: &[(&str, Value)]) -> BTreeMap<String, Value> {
    entries
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

/// The trainer reads this file; it must say what this table says. A stale file is rewritten
/// and the test fails, so a local run fixes it and CI catches a change not committed.
#[test]
fn contract_file_is_current() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../rl-python/python/contract.json");
    let expected = serde_json::to_string_pretty(&contract_document()).unwrap() + "\n";
    let found = std::fs::read_to_string(&path).unwrap_or_default();
    if found != expected {
        std::fs::write(&path, &expected).unwrap();
        panic!(
            "{} was stale and has been rewritten from trainer.rs; commit it",
            path.display()
        );
    }
}

#[test]
fn every_key_is_named_once() {
    let mut names: Vec<String> = KEYS.iter().map(Key::dotted).collect();
    let count = names.len();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), count);
    for key in KEYS {
        if let Fallback::Key { key: other, .. } = key.default {
            assert!(
                KEYS.iter().any(|k| k.dotted() == other),
                "{} falls back on {other}, which is not in the contract",
                key.dotted()
            );
        }
    }
}

#[test]
fn an_empty_config_reads_as_the_defaults() {
    let trainer = Trainer::read(&BTreeMap::new(), &BTreeMap::new()).unwrap();
    assert_eq!(trainer.base_model, None);
    assert_eq!(trainer.lora_rank, 32);
    assert_eq!(trainer.max_token_length, 2048);
    assert_eq!(trainer.max_token_trainer_length, 2048);
    assert_eq!(trainer.keep_rollouts, 100);
    assert_eq!(trainer.eval_every, 0);
    assert_eq!(trainer.evaluation_hold(), Duration::ZERO);
    assert_eq!((trainer.eval_prompts, trainer.eval_group_size), (16, 8));
    assert_eq!(trainer.starting_step, 0);
}

#[test]
fn the_base_model_falls_back_on_the_tokenizer() {
    let env = section(&[("tokenizer_name", "org/tiny".into())]);
    let trainer = Trainer::read(&env, &BTreeMap::new()).unwrap();
    assert_eq!(trainer.base_model.as_deref(), Some("org/tiny"));
    let tinker = section(&[("base_model", "org/other".into())]);
    let trainer = Trainer::read(&env, &tinker).unwrap();
    assert_eq!(trainer.base_model.as_deref(), Some("org/other"));
}

#[test]
fn values_are_read_as_the_trainer_reads_them() {
    let tinker = section(&[
        ("lora_rank", "8".into()),
        ("max_token_trainer_length", Value::Float(512.0)),
        ("eval_every", 2.into()),
        ("eval_timeout_secs", 30.into()),
    ]);
    let trainer = Trainer::read(&BTreeMap::new(), &tinker).unwrap();
    assert_eq!(trainer.lora_rank, 8);
    assert_eq!(trainer.max_token_trainer_length, 512);
    assert_eq!(
        trainer.evaluation_hold(),
        Duration::from_secs(30) + EVALUATE_MARGIN
    );
}

#[test]
fn a_wrong_kind_or_bound_names_the_key() {
    let refused = |entries: &[(&str, Value)]| {
        Trainer::read(&BTreeMap::new(), &section(entries))
            .unwrap_err()
            .to_string()
    };
    let error = refused(&[("lora_rank", true.into())]);
    assert!(
        error.contains("tinker.lora_rank") && error.contains("integer"),
        "{error}"
    );
    let error = refused(&[("lora_rank", 0.into())]);
    assert!(error.contains("must be >= 1"), "{error}");
    let error = refused(&[("learning_rate", 0.into())]);
    assert!(error.contains("must be > 0"), "{error}");
    let error = refused(&[("eval_timeout_secs", Value::Float(f64::INFINITY))]);
    assert!(error.contains("finite"), "{error}");
    let error = refused(&[("eval_timeout_secs", 1_000_000.into())]);
    assert!(error.contains("must be <= 604800"), "{error}");
    let error = refused(&[("base_model", Value::List(vec![]))]);
    assert!(
        error.contains("tinker.base_model") && error.contains("string"),
        "{error}"
    );
}
