use rl_python::install;

#[test]
fn programs_are_installed_whole_once_and_importable_by_folder() {
    let home = tempfile::tempdir().unwrap();
    let first = install(home.path()).unwrap();
    assert!(first.join("rl_trainer/__init__.py").is_file());
    assert!(first.join("rl_engine/__main__.py").is_file());
    assert!(
        !first.join("tests").exists(),
        "only the programs are installed, not their tests"
    );
    let modified = std::fs::metadata(first.join("rl_trainer/__init__.py"))
        .unwrap()
        .modified()
        .unwrap();
    let second = install(home.path()).unwrap();
    assert_eq!(
        first, second,
        "the same programs install into the same folder"
    );
    assert_eq!(
        std::fs::metadata(second.join("rl_trainer/__init__.py"))
            .unwrap()
            .modified()
            .unwrap(),
        modified,
        "an installed folder is never rewritten"
    );
    let leftovers: Vec<_> = std::fs::read_dir(home.path().join("python"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .filter(|name| name.to_string_lossy().starts_with('.'))
        .collect();
    assert!(
        leftovers.is_empty(),
        "no staging folder is left: {leftovers:?}"
    );
}

#[test]
fn concurrent_installs_agree() {
    let home = tempfile::tempdir().unwrap();
    let folders: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|_| scope.spawn(|| install(home.path()).unwrap()))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(folders.windows(2).all(|pair| pair[0] == pair[1]));
    assert!(folders[0].join("rl_engine/__main__.py").is_file());
}

/// What is installed is whole: every package imports from the installed folder alone, the
/// files they read beside them included (the trainer's contract).
#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn installed_programs_import_from_their_folder_alone() {
    let home = tempfile::tempdir().unwrap();
    let folder = install(home.path()).unwrap();
    assert!(folder.join("contract.json").is_file());
    let output = std::process::Command::new(rl_test_support::test_python())
        .args([
            "-c",
            "import rl_trainer.config, rl_trainer.loop, rl_env.__main__; \
             print(rl_trainer.config.CONTRACT['run_folder']['metrics'])",
        ])
        .current_dir(home.path())
        .env("PYTHONPATH", &folder)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "metrics.jsonl"
    );
}
