use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;

use rl_settings::{Secrets, Settings, Value};
use rl_test_support::variables;

#[test]
fn defaults_are_the_original_tools_locked_values() {
    let home = tempfile::tempdir().unwrap();
    let settings = Settings::load(home.path(), variables(&[])).unwrap();
    insta::assert_yaml_snapshot!(settings.locked);
    assert_eq!(settings.wandb_project, "atropos-tinker");
    assert!(
        settings.environments_dir().is_err(),
        "no tree configured is an error"
    );
}

#[test]
fn file_then_environment_override() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "tinker_atropos_root = \"/srv/tinker-atropos\"\npython = \"/opt/py/bin/python\"\n\
         [locked.env]\nmax_token_length = 4096\nuse_wandb = false\n[locked.tinker]\nlora_rank = 16\n\
         [commands]\ntrainer = [\"/opt/trainer/bin/train\", \"--config\", \"{config}\"]\n",
    )
    .unwrap();
    let settings = Settings::load(
        home.path(),
        variables(&[
            ("RL_LOCKED__ENV__MAX_TOKEN_LENGTH", "2048"),
            ("RL_TINKER_ATROPOS_ROOT", "/data/ta"),
            ("RL_HOME", "/ignored"),
            ("RL_TRAINER_NEEDS_TINKER_KEY", "false"),
            ("PATH", "/usr/bin"),
        ]),
    )
    .unwrap();
    assert_eq!(settings.locked.env["max_token_length"], Value::Int(2048));
    assert_eq!(settings.locked.env["use_wandb"], Value::Bool(false));
    assert_eq!(
        settings.locked.env["tokenizer_name"],
        Value::from("Qwen/Qwen3-8B"),
        "untouched defaults stay"
    );
    assert_eq!(settings.locked.tinker["lora_rank"], Value::Int(16));
    assert_eq!(
        settings.commands.trainer,
        ["/opt/trainer/bin/train", "--config", "{config}"]
    );
    assert_eq!(
        settings.commands.env[0], "{python}",
        "templates not set keep their defaults"
    );
    assert!(!settings.trainer_needs_tinker_key);
    assert_eq!(settings.python.to_str(), Some("/opt/py/bin/python"));
    assert_eq!(
        settings.environments_dir().unwrap().to_str(),
        Some("/data/ta/tinker_atropos/environments")
    );
}

#[test]
fn a_broken_settings_file_is_a_clear_error() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "recursive_discovery = \"often\"\n",
    )
    .unwrap();
    let error = Settings::load(home.path(), variables(&[])).unwrap_err();
    assert!(error.to_string().contains("recursive_discovery"), "{error}");
}

/// A misspelt key, or one outside its table, would be silently without effect: refused, named
/// by its path. Free-form tables (`[child_environment]`, `[locked.env]`) take any key, and
/// unknown `RL_*` variables belong to other programs.
#[test]
fn keys_no_setting_reads_are_refused_by_name() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("config.toml");
    std::fs::write(
        &file,
        "stop_grace_secs = 30
[run]
stop_grace_sec = 30
[child_environment]
ANY_NAME = \"1\"
",
    )
    .unwrap();
    let error = Settings::load(home.path(), variables(&[]))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("`stop_grace_secs`") && error.contains("`run.stop_grace_sec`"),
        "{error}"
    );
    assert!(!error.contains("ANY_NAME"), "{error}");

    std::fs::write(
        &file,
        "[run]
stop_grace_secs = 30
[child_environment]
ANY_NAME = \"1\"
         [locked.env]
max_token_length = 4096
",
    )
    .unwrap();
    let settings = Settings::load(home.path(), variables(&[("RL_SOMETHING_ELSE", "x")])).unwrap();
    assert!((settings.run.stop_grace_secs - 30.0).abs() < f64::EPSILON);
}

#[test]
fn secrets_from_env_file_and_environment_never_shown() {
    let home = tempfile::tempdir().unwrap();
    let dotenv = home.path().join(".env");
    std::fs::write(
        &dotenv,
        "TINKER_API_KEY=tk-from-file-123456\nWANDB_API_KEY=wb-from-file-123456\nOTHER=1\n",
    )
    .unwrap();
    std::fs::set_permissions(&dotenv, std::fs::Permissions::from_mode(0o644)).unwrap();
    let environment: BTreeMap<String, String> =
        [("WANDB_API_KEY".to_owned(), "wb-from-env-123456".to_owned())].into();
    let secrets = Secrets::load(home.path(), &environment);
    assert_eq!(secrets.get("TINKER_API_KEY"), Some("tk-from-file-123456"));
    assert_eq!(
        secrets.get("WANDB_API_KEY"),
        Some("wb-from-env-123456"),
        "the environment wins"
    );
    assert_eq!(secrets.get("OTHER"), None);
    assert!(
        secrets.warnings.iter().any(|w| w.contains("chmod 600")),
        "{:?}",
        secrets.warnings
    );
    assert!(!format!("{secrets:?}").contains("123456"));
    assert!(!secrets.presence()["OPENROUTER_API_KEY"]);
    assert_eq!(
        secrets.redact("key=tk-from-file-123456 done"),
        "key=[REDACTED TINKER_API_KEY] done"
    );

    std::fs::set_permissions(&dotenv, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert!(
        Secrets::load(home.path(), &BTreeMap::new())
            .warnings
            .is_empty()
    );
}

#[test]
fn keys_in_child_environment_and_impossible_timings_are_refused() {
    let cases = [
        (
            "[child_environment]\nTINKER_API_KEY = \"tk-123456\"\n",
            "keys are never kept in config.toml",
        ),
        ("[run]\nstop_grace_secs = -1\n", "run.stop_grace_secs"),
        ("[run]\nenv_settle_secs = nan\n", "run.env_settle_secs"),
        ("[run]\nlog_limit_bytes = 0\n", "run.log_limit_bytes is 0"),
        ("[run]\nlog_limit_bytes = 1000\n", "between 65536"),
        (
            "[run]\nno_signal_warn_groups = 200\nno_signal_fail_groups = 100\n",
            "a run would fail before it is warned of",
        ),
    ];
    for (text, expected) in cases {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("config.toml"), text).unwrap();
        let error = Settings::load(home.path(), variables(&[]))
            .unwrap_err()
            .to_string();
        assert!(error.contains(expected), "{text}: {error}");
        assert!(!error.contains("tk-123456"), "{error}");
    }
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "[child_environment]\nHF_HUB_OFFLINE = \"1\"\n[run]\nenv_settle_secs = 5\n",
    )
    .unwrap();
    let settings = Settings::load(home.path(), variables(&[])).unwrap();
    assert_eq!(settings.child_environment["HF_HUB_OFFLINE"], "1");
    assert!((settings.run.env_settle_secs - 5.0).abs() < f64::EPSILON);
}

/// An environment runs untrusted code: it is handed no provider key unless the operator names
/// it, and only a key rl knows can be named.
#[test]
fn the_keys_an_environment_gets_are_named_by_the_operator_among_rls_keys() {
    let home = tempfile::tempdir().unwrap();
    let settings = Settings::load(home.path(), variables(&[])).unwrap();
    assert!(settings.environment_keys.is_empty(), "none by default");
    std::fs::write(
        home.path().join("config.toml"),
        "environment_keys = [\"OPENROUTER_API_KEY\"]\n",
    )
    .unwrap();
    let settings = Settings::load(home.path(), variables(&[])).unwrap();
    assert_eq!(settings.environment_keys, ["OPENROUTER_API_KEY"]);
    std::fs::write(
        home.path().join("config.toml"),
        "environment_keys = [\"OPENAI_API_KEY\", \"RL_API_TOKEN\"]\n",
    )
    .unwrap();
    let error = Settings::load(home.path(), variables(&[]))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("environment_keys names \"RL_API_TOKEN\", which is no key rl knows")
            && error.contains("OPENROUTER_API_KEY, OPENAI_API_KEY"),
        "{error}"
    );
}

#[test]
fn each_log_is_capped_by_default_and_the_operator_sets_the_cap() {
    let home = tempfile::tempdir().unwrap();
    let defaults = Settings::load(home.path(), variables(&[])).unwrap();
    assert_eq!(
        defaults.run.log_limit_bytes,
        rl_settings::DEFAULT_LOG_LIMIT_BYTES
    );
    std::fs::write(
        home.path().join("config.toml"),
        "[run]\nlog_limit_bytes = 1048576\n",
    )
    .unwrap();
    let settings = Settings::load(home.path(), variables(&[])).unwrap();
    assert_eq!(settings.run.log_limit_bytes, 1_048_576);
}

#[test]
fn the_status_limit_and_the_inference_endpoint_are_settings() {
    let home = tempfile::tempdir().unwrap();
    let defaults = Settings::load(home.path(), variables(&[])).unwrap();
    assert_eq!(defaults.status_check_interval_secs, 1800.0);
    assert_eq!(defaults.inference.base_url, None);
    std::fs::write(
        home.path().join("config.toml"),
        "status_check_interval_secs = 60\n[inference]\nbase_url = \"http://127.0.0.1:9/v1\"\nmodels = [\"m1\"]\n",
    )
    .unwrap();
    let settings = Settings::load(
        home.path(),
        variables(&[("RL_STATUS_CHECK_INTERVAL_SECS", "0")]),
    )
    .unwrap();
    assert_eq!(settings.status_check_interval_secs, 0.0);
    assert_eq!(
        settings.inference.base_url.as_deref(),
        Some("http://127.0.0.1:9/v1")
    );
    assert_eq!(settings.inference.models, ["m1"]);
    let error = Settings::load(
        home.path(),
        variables(&[("RL_STATUS_CHECK_INTERVAL_SECS", "-5")]),
    )
    .unwrap_err()
    .to_string();
    assert!(error.contains("status_check_interval_secs"), "{error}");
}

#[test]
fn slurm_settings_that_cannot_work_are_refused() {
    for (text, expected) in [
        (
            "[slurm]\npartition = \"gpu\\n#SBATCH --x\"\n",
            "slurm.partition",
        ),
        (
            "[slurm]\nextra_sbatch = [\"--signal=B:USR1@60\"]\n",
            "SIGUSR1",
        ),
        (
            "[slurm]\nnodes = 4\nenv_uses_allocation = true\n",
            "NUM_TRAINING_NODES",
        ),
    ] {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("config.toml"), text).unwrap();
        let error = Settings::load(home.path(), variables(&[]))
            .unwrap_err()
            .to_string();
        assert!(error.contains(expected), "{text}: {error}");
    }
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "backend = \"slurm\"\n[child_environment]\nNUM_TRAINING_NODES = \"1\"\n[slurm]\nnodes = 4\nenv_uses_allocation = true\n[slurm.gpus]\ntrainer = 2\n",
    )
    .unwrap();
    let settings = Settings::load(home.path(), variables(&[])).unwrap();
    assert_eq!(settings.backend, rl_settings::Backend::Slurm);
    assert_eq!(settings.slurm.gpus.trainer, 2);
}

/// A hostile config.toml (a value nested 100 000 deep on one 200 KB line) is a short, clear
/// error: no crash, and the message does not quote the whole line.
#[test]
fn a_deeply_nested_settings_value_is_a_short_error() {
    let home = tempfile::tempdir().unwrap();
    let deep = format!(
        "[locked.env]\nx = {}{}\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    std::fs::write(home.path().join("config.toml"), deep).unwrap();
    let error = Settings::load(home.path(), variables(&[]))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("line 2"),
        "{}",
        &error[..error.len().min(500)]
    );
    assert!(error.len() < 2_000, "{} characters", error.len());
}

#[test]
fn a_runs_checkpoints_are_sampled_at_its_own_tinker_unless_the_operator_says() {
    let home = tempfile::tempdir().unwrap();
    let defaults = Settings::load(home.path(), variables(&[])).unwrap();
    assert_eq!(
        defaults.inference.tinker_openai_url(None),
        "https://tinker.thinkingmachines.dev/services/tinker-prod/oai/api/v1"
    );
    // A run trained against another Tinker service is sampled there, not at the hosted one.
    assert_eq!(
        defaults
            .inference
            .tinker_openai_url(Some("https://tinker.example/services/staging/")),
        "https://tinker.example/services/staging/oai/api/v1"
    );
    std::fs::write(
        home.path().join("config.toml"),
        "[inference]\ntinker_openai_url = \"http://127.0.0.1:9/v1\"\n",
    )
    .unwrap();
    let settings = Settings::load(home.path(), variables(&[])).unwrap();
    assert_eq!(
        settings
            .inference
            .tinker_openai_url(Some("https://tinker.example/services/staging")),
        "http://127.0.0.1:9/v1"
    );
}

#[test]
fn prices_and_caps_are_read_per_model_and_misspellings_refused() {
    let home = tempfile::tempdir().unwrap();
    let defaults = Settings::load(home.path(), variables(&[])).unwrap();
    assert_eq!(defaults.prices.for_run("any", true), None);
    assert!(!defaults.caps.is_set());
    std::fs::write(
        home.path().join("config.toml"),
        r#"[prices]
currency = "EUR"
sampled_per_million = 0.5
machine_per_hour = 1.25
[prices.models."org/model"]
trained_per_million = 2.0
[caps]
max_cost = 10.0
max_tokens = 1000000
"#,
    )
    .unwrap();
    let settings = Settings::load(home.path(), variables(&[("RL_CAPS__MAX_HOURS", "4")])).unwrap();
    assert_eq!(settings.prices.currency, "EUR");
    let model = settings.prices.for_run("org/model", false).unwrap();
    assert_eq!(model.tokens.trained_per_million, Some(2.0));
    assert_eq!(model.machine_per_hour, None);
    let other = settings.prices.for_run("other", true).unwrap();
    assert_eq!(other.tokens.sampled_per_million, Some(0.5));
    assert_eq!(other.machine_per_hour, Some(1.25));
    assert_eq!(
        (
            settings.caps.max_cost,
            settings.caps.max_tokens,
            settings.caps.max_hours
        ),
        (Some(10.0), Some(1_000_000), Some(4.0))
    );

    std::fs::write(
        home.path().join("config.toml"),
        "[prices.models.\"m\"]\ntrained_per_milion = 2.0\n",
    )
    .unwrap();
    let error = Settings::load(home.path(), variables(&[]))
        .unwrap_err()
        .to_string();
    assert!(error.contains("trained_per_milion"), "{error}");
    std::fs::write(home.path().join("config.toml"), "[caps]\nmax_cost = -1\n").unwrap();
    let error = Settings::load(home.path(), variables(&[]))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("caps.max_cost must be a number above 0"),
        "{error}"
    );
}

#[test]
fn the_stall_limits_default_to_five_medians_and_ten_minutes_and_are_checked() {
    let home = tempfile::tempdir().unwrap();
    let defaults = Settings::load(home.path(), variables(&[])).unwrap();
    assert!((defaults.run.stall_factor - 5.0).abs() < f64::EPSILON);
    assert!((defaults.run.stall_floor_secs - 600.0).abs() < f64::EPSILON);
    std::fs::write(
        home.path().join("config.toml"),
        "[run]\nstall_factor = 2\nstall_floor_secs = 5\n",
    )
    .unwrap();
    let set = Settings::load(home.path(), variables(&[])).unwrap();
    assert!((set.run.stall_factor - 2.0).abs() < f64::EPSILON);
    assert!((set.run.stall_floor_secs - 5.0).abs() < f64::EPSILON);
    for (text, expected) in [
        ("[run]\nstall_factor = 0.5\n", "run.stall_factor is 0.5"),
        ("[run]\nstall_factor = nan\n", "run.stall_factor"),
        ("[run]\nstall_floor_secs = 0\n", "run.stall_floor_secs is 0"),
        ("[run]\nstall_floor_secs = -3\n", "run.stall_floor_secs"),
    ] {
        std::fs::write(home.path().join("config.toml"), text).unwrap();
        let error = Settings::load(home.path(), variables(&[]))
            .unwrap_err()
            .to_string();
        assert!(error.contains(expected), "{text}: {error}");
    }
}

/// The trainer settings the operator wrote are locks; rl's own defaults in `[locked.tinker]`
/// (the original tool's) are what a run gets unless it chooses (a sweep's, a fork's).
#[test]
fn the_operators_trainer_locks_are_told_from_rls_defaults() {
    let home = tempfile::tempdir().unwrap();
    let defaults = Settings::load(home.path(), variables(&[])).unwrap();
    assert!(defaults.locked.tinker.contains_key("learning_rate"));
    assert_eq!(
        defaults.operator_locked_trainer_value("learning_rate"),
        None
    );
    std::fs::write(
        home.path().join("config.toml"),
        "[locked.tinker]\nlora_rank = 16\n",
    )
    .unwrap();
    let settings = Settings::load(
        home.path(),
        variables(&[("RL_LOCKED__TINKER__LEARNING_RATE", "0.001")]),
    )
    .unwrap();
    assert_eq!(
        settings.operator_locked_trainer_value("lora_rank"),
        Some(&Value::Int(16))
    );
    assert_eq!(
        settings.operator_locked_trainer_value("learning_rate"),
        Some(&Value::Float(0.001))
    );
    assert_eq!(settings.operator_locked_trainer_value("save_every"), None);
}
