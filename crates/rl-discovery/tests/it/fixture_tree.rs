use rl_discovery::{ScanOptions, scan};

use crate::fixture_environments;

fn scan_fixture(recursive: bool) -> rl_discovery::Scan {
    scan(
        &fixture_environments(),
        &ScanOptions {
            recursive,
            ..Default::default()
        },
    )
    .unwrap()
}

/// `scan` with its root, a path of this machine, replaced.
fn without_root(mut scan: rl_discovery::Scan) -> rl_discovery::Scan {
    scan.root = "[fixture environments]".into();
    scan
}

#[test]
fn top_level_scan_of_the_fixture_tree() {
    let scan = scan_fixture(false);
    insta::assert_debug_snapshot!(without_root(scan));
}

#[test]
fn recursive_scan_of_the_fixture_tree() {
    let scan = scan_fixture(true);
    insta::assert_debug_snapshot!(without_root(scan));
}

#[test]
fn nested_environments_only_when_recursive() {
    let has_tool_use =
        |scan: &rl_discovery::Scan| scan.environments.iter().any(|e| e.name == "tool_use");
    assert!(!has_tool_use(&scan_fixture(false)));
    assert!(has_tool_use(&scan_fixture(true)));
}

#[test]
fn underscore_files_are_not_listed() {
    let scan = scan_fixture(true);
    assert!(
        scan.environments
            .iter()
            .all(|e| !e.file.rsplit('/').next().unwrap().starts_with('_'))
    );
    assert!(!scan.environments.iter().any(|e| e.name == "hidden"));
}

/// One snapshot per fixture file, scanned alone: what discovery makes of each shape on its own,
/// without help from sibling files.
#[test]
fn each_fixture_file_alone() {
    insta::glob!(
        "../../../../fixtures/tinker-atropos/tinker_atropos/environments",
        "**/*.py",
        |path| {
            let dir = tempfile::tempdir().unwrap();
            std::fs::copy(path, dir.path().join(path.file_name().unwrap())).unwrap();
            let scan = scan(dir.path(), &ScanOptions::default()).unwrap();
            insta::assert_debug_snapshot!((&scan.environments, &scan.skipped));
        }
    );
}
