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
