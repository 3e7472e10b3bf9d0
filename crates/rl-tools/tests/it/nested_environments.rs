//! Issue 40, parts 4, 5 and 8, on `fixtures/nested-envs` (an environments folder whose
//! environments sit in sub-folders, as Atropos' own does): every command finds what the
//! recursive list shows while the top-level list says how many more there are; an import
//! inside a `try` is named (required when the environment refuses to go on without it,
//! optional when it only warns); and the first-run advice on the local engine names the
//! settings set for a cluster with the values to try.

use std::path::{Path, PathBuf};

use rl_settings::{EngineKind, EngineSettings, Secrets, Settings, Value};
use rl_tools::{ToolContext, Tools};

fn environments() -> PathBuf {
    rl_test_support::workspace_root().join("fixtures/nested-envs/environments")
}

fn tools_with(home: &Path, settings: Settings) -> Tools {
    Tools::new(ToolContext {
        home: home.to_owned(),
        settings: Ok(settings),
        secrets: Secrets::load(home, &std::collections::BTreeMap::new()),
        environment: std::collections::BTreeMap::new(),
        supervisor: rl_process::SupervisorCommand {
            program: PathBuf::from("/bin/false"),
            args: Vec::new(),
            env: Vec::new(),
        },
        evaluate: rl_process::EvaluateCommand {
            program: PathBuf::from("/bin/false"),
            args: Vec::new(),
        },
        reread: None,
    })
}

fn top_level_settings() -> Settings {
    Settings {
        environments_dir: Some(environments()),
        recursive_discovery: false,
        ..Settings::default()
    }
}

#[test]
fn every_environment_the_recursive_list_shows_is_found_by_show_and_select_and_the_top_list_counts_them()
 {
    let home = tempfile::tempdir().unwrap();
    let tools = tools_with(home.path(), top_level_settings());

    let top = tools.list_environments(false).unwrap();
    let whole = tools.list_environments(true).unwrap();
    let names = |list: &rl_tools::EnvironmentList| -> Vec<String> {
        list.environments.iter().map(|e| e.name.clone()).collect()
    };
    assert_eq!(names(&top), ["top_env"]);
    assert_eq!(names(&whole), ["maze_env", "riddle_env", "top_env"]);
    // The top-level list says how many more `recursive` lists, and how.
    assert_eq!(top.unlisted_in_subfolders, 2);
    assert_eq!(whole.unlisted_in_subfolders, 0);
    let note = top.unlisted_note().unwrap();
    assert!(
        note.starts_with("2 more environments in sub-folders")
            && note.contains(r#"rl_list_environments {"recursive": true}"#),
        "{note}"
    );
    assert_eq!(top.tips[0], note);
    let json = serde_json::to_value(&whole).unwrap();
    assert!(json.get("unlisted_in_subfolders").is_none(), "{json:#}");

    // One lookup: `rl envs show` (without --recursive) and `rl select` find each by name and
    // by key, and agree on which it is.
    for env in &whole.environments {
        for query in [&env.name, &env.key] {
            let shown = tools.environment(query, false).unwrap();
            assert_eq!(shown.key, env.key, "{query}");
            let selected = tools.select_environment(query).unwrap();
            assert_eq!(selected.key, env.key, "{query}");
        }
    }

    // `rl doctor` counts the same way.
    let report = rl_tools::health_check(
        home.path(),
        Ok(&top_level_settings()),
        &Secrets::load(home.path(), &std::collections::BTreeMap::new()),
        &rl_tools::Probes::default(),
    );
    let check = report
        .checks
        .iter()
        .find(|check| check.name == "environments")
        .unwrap();
    assert!(check.ok, "{check:#?}");
    assert!(
        check.detail.starts_with("1 in ") && check.detail.contains(&note),
        "{check:#?}"
    );
}

/// A Python that holds an empty `atroposlib` (so it counts as a run's Python) and nothing of
/// what the fixture's environments import.
fn python_with_atroposlib(dir: &Path) -> PathBuf {
    let site = dir.join("site");
    std::fs::create_dir_all(site.join("atroposlib")).unwrap();
    std::fs::write(site.join("atroposlib/__init__.py"), "").unwrap();
    let python = dir.join("python");
    std::fs::write(
        &python,
        format!(
            "#!/bin/sh\nPYTHONPATH='{}' exec python3 \"$@\"\n",
            site.display()
        ),
    )
    .unwrap();
    let mut permissions = std::fs::metadata(&python).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&python, permissions).unwrap();
    python
}

#[test]
fn a_library_imported_inside_a_try_is_named_required_or_optional() {
    let home = tempfile::tempdir().unwrap();
    let python = python_with_atroposlib(home.path());
    let tools = tools_with(
        home.path(),
        Settings {
            python,
            ..top_level_settings()
        },
    );
    let shown = tools.environment("riddle_env", false).unwrap();
    let deps = shown.dependencies.expect("the riddle library is missing");
    // `riddlelib` is left `None` by a handler that only prints, and `setup` raises an
    // ImportError when it is: the run cannot go on without it.
    assert_eq!(deps.missing_imports, ["riddlelib"]);
    // `prettyanswers` only warns: named, but the run may start.
    assert_eq!(deps.missing_optional_imports, ["prettyanswers"]);
    assert_eq!(
        deps.fix.as_deref(),
        Some(r#"rl_install_environment {"name": "riddle_env"}"#)
    );
    let selected = tools.select_environment("riddle_env").unwrap();
    assert_eq!(selected.dependencies.as_ref(), Some(&deps));
}

fn local_engine_settings(home: &Path) -> Settings {
    let model = home.join("model");
    std::fs::create_dir_all(&model).unwrap();
    std::fs::write(model.join("config.json"), "{}").unwrap();
    Settings {
        engine: EngineSettings {
            kind: EngineKind::Local,
            base_model: Some(model),
            ..EngineSettings::default()
        },
        ..top_level_settings()
    }
}

#[test]
fn first_run_advice_on_the_local_engine_names_the_cluster_settings_with_values_to_try() {
    let home = tempfile::tempdir().unwrap();
    let mut settings = local_engine_settings(home.path());
    settings.locked.env.remove("total_steps");
    settings.locked.env.remove("max_token_length");
    let tools = tools_with(home.path(), settings);
    let selected = tools.select_environment("riddle_env").unwrap();
    let advice: Vec<(&str, i64, i64)> = selected
        .first_run_advice
        .iter()
        .map(|a| (a.field.as_str(), a.value, a.try_value))
        .collect();
    assert_eq!(
        advice,
        [
            ("batch_size", 1024, 32),
            ("total_steps", 500, 10),
            ("max_token_length", 4096, 1024)
        ]
    );
    let batch = &selected.first_run_advice[0];
    assert!(
        batch.why.contains("128 groups of 8")
            && batch.how == "rl config set batch_size 32 (agents: rl_edit_config)",
        "{batch:#?}"
    );
    // `rl config show` says the same.
    let shown = tools.current_config().unwrap();
    assert_eq!(shown.first_run_advice, selected.first_run_advice);

    // Once lowered, nothing to say of batch_size.
    tools.edit_config("batch_size", &Value::Int(32)).unwrap();
    let fields: Vec<String> = tools
        .current_config()
        .unwrap()
        .first_run_advice
        .iter()
        .map(|a| a.field.clone())
        .collect();
    assert_eq!(fields, ["total_steps", "max_token_length"]);
}

#[test]
fn too_few_tokens_for_a_thinking_prompt_is_named_and_where_to_set_a_locked_value() {
    let home = tempfile::tempdir().unwrap();
    let mut settings = local_engine_settings(home.path());
    settings
        .locked
        .env
        .insert("max_token_length".to_owned(), Value::Int(256));
    settings
        .locked
        .env
        .insert("total_steps".to_owned(), Value::Int(12));
    let tools = tools_with(home.path(), settings.clone());
    tools.select_environment("riddle_env").unwrap();
    let advice = tools.current_config().unwrap().first_run_advice;
    let tokens = advice
        .iter()
        .find(|a| a.field == "max_token_length")
        .unwrap_or_else(|| panic!("{advice:#?}"));
    assert_eq!((tokens.value, tokens.try_value), (256, 1024));
    assert!(
        tokens.why.contains("<think>") && tokens.why.contains("skip"),
        "{tokens:#?}"
    );
    assert!(tokens.how.contains("[locked.env]"), "{tokens:#?}");
    assert!(
        !advice.iter().any(|a| a.field == "total_steps"),
        "{advice:#?}"
    );

    // The hosted engine: no advice (its batch runs on Tinker's machines).
    let hosted = tools_with(home.path(), top_level_settings());
    assert!(hosted.current_config().unwrap().first_run_advice.is_empty());
    // An environment without a thinking prompt, within bounds: nothing either.
    let local = tools_with(home.path(), settings);
    local.select_environment("top_env").unwrap();
    assert_eq!(local.current_config().unwrap().first_run_advice, []);
}
