use rl_config::{ConfigError, Section, ValueOrigin};
use rl_settings::{Caps, RunId, Value};

use crate::service;

#[test]
fn select_shows_fields_with_env_defaults_and_locked_values() {
    let (_home, service) = service();
    let report = service.select("gsm8k_tinker").unwrap();
    assert_eq!(report.environment.key, "gsm8k_tinker@gsm8k_tinker.py");
    assert!(
        report.wandb_name.starts_with("gsm8k_tinker-"),
        "{}",
        report.wandb_name
    );
    let current = service.current().unwrap();
    let field = |name: &str| current.fields.iter().find(|f| f.spec.name == name).unwrap();
    assert_eq!(field("group_size").origin, ValueOrigin::EnvironmentDefault);
    assert_eq!(field("group_size").current.value(), Some(&Value::Int(16)));
    assert!(field("max_token_length").locked);
    assert_eq!(
        field("max_token_length").current.value(),
        Some(&Value::Int(8192))
    );
    assert_eq!(field("wandb_name").origin, ValueOrigin::Selection);
    assert_eq!(current.wandb_project, "atropos-tinker");
}

#[test]
fn edits_are_validated_coerced_persisted_and_listed_as_a_diff() {
    let (home, service) = service();
    service.select("word_ladder").unwrap();
    let edit = service.edit("group_size", &Value::from("12")).unwrap();
    assert_eq!(edit.value, Value::Int(12));
    assert_eq!(edit.coerced_from, Some(Value::from("12")));
    assert_eq!(edit.previous.value(), Some(&Value::Int(8)));
    service.edit("difficulty", &Value::from("EASY")).unwrap();
    service.edit("answer_format", &Value::from("json")).unwrap();
    service
        .edit("wandb_project", &Value::from("ladders"))
        .unwrap();
    let edit = service.edit("group_size", &Value::Int(24)).unwrap();
    assert_eq!(edit.previous.value(), Some(&Value::Int(12)));

    // A second service on the same state directory — another process — sees it all.
    let settings = service.settings().clone();
    let other = rl_config::ConfigService::open(home.path(), settings).unwrap();
    let diff = other.diff().unwrap();
    let summary: Vec<(String, Section, String, String)> = diff
        .iter()
        .map(|d| {
            (
                d.field.clone(),
                d.section,
                d.default.to_string(),
                d.value.to_string(),
            )
        })
        .collect();
    insta::assert_yaml_snapshot!(summary);
    let current = other.current().unwrap();
    assert_eq!(current.wandb_project, "ladders");
    let difficulty = current
        .fields
        .iter()
        .find(|f| f.spec.name == "difficulty")
        .unwrap();
    assert_eq!(
        (difficulty.origin, difficulty.current.value()),
        (ValueOrigin::Edited, Some(&Value::from("easy")))
    );
}

#[test]
fn selecting_again_clears_edits() {
    let (_home, service) = service();
    service.select("word_ladder").unwrap();
    service.edit("seed", &Value::Int(1)).unwrap();
    service.select("word_ladder").unwrap();
    assert!(service.diff().unwrap().is_empty());
}

#[test]
fn run_config_yaml_has_the_original_structure_and_no_secret() {
    let (home, service) = service();
    service.select("gsm8k_tinker").unwrap();
    service.edit("group_size", &Value::Int(12)).unwrap();
    service
        .edit("wandb_project", &Value::from("math-rl"))
        .unwrap();
    let run_id = RunId::parse("0badc0de").unwrap();
    let written = service
        .write_run_config(&run_id, None, &Caps::default(), &[])
        .unwrap();
    assert_eq!(written.path, home.path().join("runs/0badc0de/config.yaml"));
    let text = std::fs::read_to_string(&written.path).unwrap();
    let wandb_name = service.selection().unwrap().wandb_name;
    let text = text.replace(&wandb_name, "[wandb_name]");
    insta::assert_snapshot!(text);
    let parsed: serde_json::Value = serde_norway::from_str(&text).unwrap();
    assert_eq!(parsed["tinker"]["wandb_run_name"], "gsm8k_tinker-0badc0de");
    // One WandB group per run, shared by the trainer's and the env's WandB runs.
    assert_eq!(parsed["tinker"]["wandb_group"], "gsm8k_tinker-0badc0de");
    assert_eq!(parsed["env"]["group_size"], 12);
    let read_back = rl_settings::RunConfig::read(&written.path).unwrap();
    assert_eq!(read_back, written.config);
    let wandb = read_back.wandb();
    assert_eq!(wandb.project.as_deref(), Some("math-rl"));
    assert_eq!(wandb.env_name.as_deref(), Some(wandb_name.as_str()));
    for secret in rl_settings::SECRET_NAMES {
        assert!(!text.contains(secret));
    }
}

#[test]
fn a_run_keeps_the_selection_it_started_with() {
    let (home, service) = service();
    service.select("gsm8k_tinker").unwrap();
    service.edit("group_size", &Value::Int(12)).unwrap();
    let run_id = RunId::parse("0badc0de").unwrap();
    service
        .write_run_config(&run_id, None, &Caps::default(), &[])
        .unwrap();
    // Another selection meanwhile changes nothing of what the run ran.
    service.select("word_ladder").unwrap();
    let ran = rl_config::run_selection(home.path(), &run_id).unwrap();
    assert_eq!(ran.environment.name, "gsm8k_tinker");
    let edits: Vec<(&str, &Value)> = ran
        .edits
        .iter()
        .map(|edit| (edit.field.as_str(), &edit.value))
        .collect();
    assert_eq!(edits, [("group_size", &Value::Int(12))]);
    // A run from before edits were recorded ran with none that rl can name.
    let file = home.path().join("runs/0badc0de/environment.json");
    let mut recorded: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    recorded.as_object_mut().unwrap().remove("edits");
    std::fs::write(&file, recorded.to_string()).unwrap();
    let ran = rl_config::run_selection(home.path(), &run_id).unwrap();
    assert!(ran.edits.is_empty());
    assert!(rl_config::run_selection(home.path(), &RunId::parse("00000000").unwrap()).is_err());
}

#[test]
fn run_ids_are_checked_before_they_touch_a_path() {
    for bad in [
        "",
        "../../etc",
        "0BADC0DE",
        "0badc0d",
        "0badc0de0",
        "0badc0dé",
        "zzzzzzzz",
        "0bad/c0d",
    ] {
        let error = RunId::parse(bad).unwrap_err();
        assert!(
            matches!(error, rl_settings::SettingsError::InvalidInput { .. }),
            "{bad}: {error}"
        );
    }
    let id = RunId::generate();
    assert_eq!(RunId::parse(id.as_str()).unwrap(), id);
}

#[test]
fn concurrent_editors_lose_no_update() {
    let (home, service) = service();
    service.select("word_ladder").unwrap();
    let settings = service.settings().clone();
    let fields = [
        "group_size",
        "seed",
        "max_rungs",
        "batch_size",
        "max_eval_workers",
        "num_rollouts_to_keep",
    ];
    std::thread::scope(|scope| {
        for (i, field) in fields.iter().enumerate() {
            let settings = settings.clone();
            let home = home.path().to_owned();
            scope.spawn(move || {
                let editor = rl_config::ConfigService::open(&home, settings).unwrap();
                for round in 0..5 {
                    editor
                        .edit(field, &Value::Int(2 + i as i64 * 2 + round))
                        .unwrap();
                }
            });
        }
    });
    let diff = service.diff().unwrap();
    let edited: Vec<&str> = diff.iter().map(|d| d.field.as_str()).collect();
    for field in fields {
        assert!(edited.contains(&field), "{field} lost: {edited:?}");
    }
    let seed = diff.iter().find(|d| d.field == "seed").unwrap();
    assert_eq!(seed.value, Value::Int(8));
}

#[test]
fn nothing_selected_is_a_clear_error() {
    let (_home, service) = service();
    let error = service.current().unwrap_err();
    assert!(matches!(error, ConfigError::NothingSelected));
    assert!(service.edit("group_size", &Value::Int(1)).is_err());
}

#[test]
fn corrupt_state_is_reported_not_overwritten() {
    let (home, service) = service();
    let state = home.path().join("selection.json");
    std::fs::write(&state, b"{ half a file").unwrap();
    let error = service.current().unwrap_err();
    assert!(matches!(error, ConfigError::CorruptState { .. }), "{error}");
    assert!(
        error.to_string().contains("fix or remove the file"),
        "{error}"
    );
    assert!(service.edit("group_size", &Value::Int(3)).is_err());
    assert_eq!(std::fs::read(&state).unwrap(), b"{ half a file");
}

#[test]
fn a_runs_own_ports_replace_the_locked_addresses() {
    let (_home, service) = service();
    service.select("gsm8k_tinker").unwrap();
    let endpoints = rl_settings::RunEndpoints {
        api_port: 41001,
        trainer_port: 41002,
        engine_port: None,
    };
    let written = service
        .write_run_config(
            &RunId::parse("0badc0de").unwrap(),
            Some(endpoints),
            &Caps::default(),
            &[],
        )
        .unwrap();
    let text = std::fs::read_to_string(&written.path).unwrap();
    let parsed: serde_json::Value = serde_norway::from_str(&text).unwrap();
    assert_eq!(
        parsed["env"]["rollout_server_url"],
        "http://127.0.0.1:41001"
    );
    assert_eq!(parsed["openai"][0]["base_url"], "http://127.0.0.1:41002/v1");
    assert_eq!(written.selection.environment.file, "gsm8k_tinker.py");
    assert!(
        parsed["tinker"].get("base_url").is_none(),
        "no engine: the trainer uses the hosted Tinker"
    );
}

#[test]
fn a_local_engine_is_the_trainers_tinker_and_its_model_everyones_tokenizer() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "tinker_atropos_root = {:?}\nrecursive_discovery = true\n[engine]\nkind = \"local\"\n\
             base_model = \"/models/tiny-qwen3\"\n",
            crate::fixture_tree()
        ),
    )
    .unwrap();
    let settings = rl_settings::Settings::load(home.path(), Vec::new()).unwrap();
    let service = rl_config::ConfigService::open(home.path(), settings).unwrap();
    service.select("gsm8k_tinker").unwrap();
    let endpoints = rl_settings::RunEndpoints {
        api_port: 41001,
        trainer_port: 41002,
        engine_port: Some(41003),
    };
    let written = service
        .write_run_config(
            &RunId::parse("0badc0de").unwrap(),
            Some(endpoints),
            &Caps::default(),
            &[],
        )
        .unwrap();
    let parsed: serde_json::Value =
        serde_norway::from_str(&std::fs::read_to_string(&written.path).unwrap()).unwrap();
    assert_eq!(parsed["tinker"]["base_url"], "http://127.0.0.1:41003");
    assert_eq!(parsed["tinker"]["base_model"], "/models/tiny-qwen3");
    assert_eq!(parsed["env"]["tokenizer_name"], "/models/tiny-qwen3");
    assert_eq!(parsed["openai"][0]["tokenizer_name"], "/models/tiny-qwen3");
    let current = service.current().unwrap();
    let tokenizer = current
        .fields
        .iter()
        .find(|field| field.spec.name == "tokenizer_name")
        .unwrap();
    assert!(tokenizer.locked, "shown as runs get it");
    assert_eq!(
        tokenizer.current.value(),
        Some(&Value::from("/models/tiny-qwen3"))
    );
}

#[test]
fn a_local_engine_without_a_model_is_refused_by_name() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "[engine]\nkind = \"local\"\n",
    )
    .unwrap();
    let error = rl_settings::Settings::load(home.path(), Vec::new()).unwrap_err();
    assert!(error.to_string().contains("engine.base_model"), "{error}");
}

/// What atroposlib or the trainer would refuse seconds after a start is refused at the edit,
/// naming the rule, and nothing is stored.
#[test]
fn values_atroposlib_would_refuse_are_refused_naming_the_rule() {
    let (_home, service) = service();
    service.select("word_ladder").unwrap();
    for bad in [0, -5] {
        let error = service.edit("group_size", &Value::Int(bad)).unwrap_err();
        assert!(
            matches!(&error, ConfigError::OutOfRange { field, .. } if field == "group_size"),
            "{error:?}"
        );
        assert!(error.to_string().contains(">= 1"), "{error}");
    }
    let error = service
        .edit("max_eval_workers", &Value::Int(0))
        .unwrap_err();
    assert!(error.to_string().contains("at least one worker"), "{error}");
    service.edit("batch_size", &Value::Int(16)).unwrap();
    let error = service.edit("group_size", &Value::Int(24)).unwrap_err();
    assert!(
        error.to_string().contains("group_size <= batch_size"),
        "{error}"
    );
    let error = service.edit("batch_size", &Value::Int(4)).unwrap_err();
    assert!(
        error.to_string().contains("group_size <= batch_size"),
        "{error}"
    );
    service.edit("batch_size", &Value::Int(-1)).unwrap();
    service.edit("group_size", &Value::Int(24)).unwrap();
    let diff = service.diff().unwrap();
    let edited: Vec<(&str, String)> = diff
        .iter()
        .map(|d| (d.field.as_str(), d.value.to_string()))
        .collect();
    assert_eq!(
        edited,
        [
            ("batch_size", "-1".to_owned()),
            ("group_size", "24".to_owned())
        ]
    );
}

/// A conflict no single edit made (the operator's lock against the environment's own default)
/// is refused before a run starts, and no run folder is written.
#[test]
fn a_run_config_atroposlib_would_refuse_is_not_written() {
    let (home, service) = service();
    let mut settings = service.settings().clone();
    settings
        .locked
        .env
        .insert("batch_size".to_owned(), Value::Int(4));
    let locked = rl_config::ConfigService::open(home.path(), settings).unwrap();
    locked.select("word_ladder").unwrap();
    let run_id = RunId::parse("0badc0de").unwrap();
    let error = locked
        .write_run_config(&run_id, None, &Caps::default(), &[])
        .unwrap_err();
    assert!(
        error.to_string().contains("group_size <= batch_size"),
        "{error}"
    );
    assert!(!home.path().join("runs/0badc0de").exists());
}

/// Two editors at once, each making half of a conflict (a small batch, a large group): one of
/// them is refused, whichever comes second, and the stored config never holds the conflict.
#[test]
fn two_editors_cannot_each_make_half_a_conflict() {
    let (home, service) = service();
    let settings = service.settings().clone();
    for _round in 0..5 {
        service.select("word_ladder").unwrap();
        let start = std::sync::Barrier::new(2);
        let outcomes: Vec<bool> = std::thread::scope(|scope| {
            let editors: Vec<_> = [("batch_size", 8), ("group_size", 16)]
                .into_iter()
                .map(|(field, value)| {
                    let (settings, home, start) = (settings.clone(), home.path(), &start);
                    scope.spawn(move || {
                        let editor = rl_config::ConfigService::open(home, settings).unwrap();
                        start.wait();
                        editor.edit(field, &Value::Int(value)).is_ok()
                    })
                })
                .collect();
            editors.into_iter().map(|e| e.join().unwrap()).collect()
        });
        assert_eq!(outcomes.iter().filter(|ok| **ok).count(), 1, "{outcomes:?}");
        let current = service.current().unwrap();
        let group = current.value_of("group_size").and_then(Value::as_f64);
        let batch = current.value_of("batch_size").and_then(Value::as_f64);
        assert!(
            !(group == Some(16.0) && batch == Some(8.0)),
            "the conflict was stored"
        );
    }
}

/// A run's config holds the prices of its model as they are now and its caps; a cost cap
/// without any price is refused before anything is written.
#[test]
fn a_runs_prices_and_caps_are_written_and_a_cost_cap_needs_a_price() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "tinker_atropos_root = {:?}\nrecursive_discovery = true\n[engine]\nkind = \"local\"\n\
             base_model = \"/models/tiny-qwen3\"\n[prices]\ncurrency = \"EUR\"\n\
             sampled_per_million = 2.0\nmachine_per_hour = 1.5\n\
             [prices.models.\"/models/tiny-qwen3\"]\ntrained_per_million = 3.0\n",
            crate::fixture_tree()
        ),
    )
    .unwrap();
    let settings = rl_settings::Settings::load(home.path(), Vec::new()).unwrap();
    let priced = rl_config::ConfigService::open(home.path(), settings).unwrap();
    priced.select("gsm8k_tinker").unwrap();
    let caps = Caps {
        max_cost: Some(4.0),
        max_tokens: Some(1000),
        ..Caps::default()
    };
    let written = priced
        .write_run_config(&RunId::parse("0badc0de").unwrap(), None, &caps, &[])
        .unwrap();
    let trainer = written.config.trainer().unwrap();
    assert_eq!(trainer.caps, caps);
    assert_eq!(trainer.currency, "EUR");
    let prices = trainer.prices.unwrap();
    assert_eq!(prices.tokens.trained_per_million, Some(3.0));
    assert_eq!(
        prices.tokens.sampled_per_million, None,
        "the model's own table replaces the defaults"
    );
    assert_eq!(prices.machine_per_hour, Some(1.5));

    let (_home, unpriced) = service();
    unpriced.select("gsm8k_tinker").unwrap();
    let run_id = RunId::parse("0badc0df").unwrap();
    let error = unpriced
        .write_run_config(&run_id, None, &caps, &[])
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("max_cost is not valid: 4 needs a price") && error.contains("[prices]"),
        "{error}"
    );
    let tokens_only = Caps {
        max_tokens: Some(1000),
        ..Caps::default()
    };
    let written = unpriced
        .write_run_config(&run_id, None, &tokens_only, &[])
        .unwrap();
    let trainer = written.config.trainer().unwrap();
    assert_eq!(trainer.prices, None);
    assert_eq!(trainer.caps, tokens_only);
}

/// A selection made in a folder given for the occasion (`--envs-dir`) is found again where it
/// was made, not in the folder configured now: a run of it can be shown, forked and resumed
/// without the option.
#[test]
fn a_selection_is_found_again_in_the_folder_it_was_made_in() {
    let home = tempfile::tempdir().unwrap();
    let given = rl_settings::Settings {
        environments_dir: Some(crate::fixture_tree().join("tinker_atropos/environments")),
        ..Default::default()
    };
    let service = rl_config::ConfigService::open(home.path(), given).unwrap();
    service.select("gsm8k_tinker").unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let configured = rl_settings::Settings {
        environments_dir: Some(elsewhere.path().to_owned()),
        ..Default::default()
    };
    let later = rl_config::ConfigService::open(home.path(), configured).unwrap();
    let shown = later.current().unwrap();
    assert_eq!(
        shown.environment.key,
        service.current().unwrap().environment.key
    );
    let run_id = RunId::parse("0badc0de").unwrap();
    later
        .write_run_config(&run_id, None, &Caps::default(), &[])
        .unwrap();
}
