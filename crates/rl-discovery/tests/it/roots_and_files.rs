//! Bad roots are errors; bad files are skip reasons and never stop a scan.

use std::os::unix::fs::{PermissionsExt, symlink};

use rl_discovery::{DiscoveryError, FileWarning, ScanOptions, Shadowed, SkipReason, Warning, scan};

use crate::tree;

const ENV: &[u8] = b"from atroposlib.envs.base import BaseEnv\nclass A(BaseEnv): pass\n";

#[test]
fn missing_root_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-folder");
    let error = scan(&missing, &ScanOptions::default()).unwrap_err();
    assert!(matches!(error, DiscoveryError::RootNotFound { .. }));
    assert!(error.to_string().contains("does not exist"), "{error}");
}

#[test]
fn file_as_root_is_a_clear_error() {
    let dir = tree(&[("a.py", ENV)]);
    let error = scan(&dir.path().join("a.py"), &ScanOptions::default()).unwrap_err();
    assert!(
        matches!(error, DiscoveryError::RootNotADirectory { .. }),
        "{error}"
    );
    assert!(
        error.to_string().contains("is a file, not a folder"),
        "{error}"
    );
}

#[test]
fn dangling_link_is_skipped_with_a_reason() {
    let dir = tree(&[("a.py", ENV)]);
    symlink(
        dir.path().join("gone.py.target"),
        dir.path().join("dangling.py"),
    )
    .unwrap();
    let scan = scan(dir.path(), &ScanOptions::default()).unwrap();
    assert_eq!(scan.environments.len(), 1);
    assert_eq!(scan.skipped.len(), 1, "{:?}", scan.skipped);
    assert_eq!(scan.skipped[0].file, "dangling.py");
    assert!(matches!(
        scan.skipped[0].reason,
        SkipReason::Unreadable { .. }
    ));
}

#[test]
fn unreadable_file_is_skipped_with_a_reason() {
    let dir = tree(&[("a.py", ENV), ("locked.py", ENV)]);
    let locked = dir.path().join("locked.py");
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    let privileged = std::fs::read(&locked).is_ok();
    let scan = scan(dir.path(), &ScanOptions::default()).unwrap();
    if privileged {
        // Root reads a mode-000 file: it is read like any other.
        assert_eq!(scan.environments.len(), 2, "{:?}", scan.skipped);
        assert!(scan.skipped.is_empty());
    } else {
        assert_eq!(scan.environments.len(), 1);
        let skipped = &scan.skipped[0];
        assert_eq!(skipped.file, "locked.py");
        assert!(
            skipped.reason.to_string().contains("ermission denied"),
            "{}",
            skipped.reason
        );
    }
}

/// Scans on another thread, failing (not hanging) if the scan blocks.
fn scan_within_a_minute(root: &std::path::Path, recursive: bool) -> rl_discovery::Scan {
    let root = root.to_owned();
    let (done, scanned) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let options = ScanOptions {
            recursive,
            ..Default::default()
        };
        let _ = done.send(scan(&root, &options).unwrap());
    });
    scanned
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the scan blocked")
}

#[test]
fn entries_named_py_that_are_not_files_are_skipped_unopened() {
    let dir = tree(&[("a.py", ENV), ("folder.py/inner.py", ENV)]);
    nix::unistd::mkfifo(
        &dir.path().join("pipe.py"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    let _socket = std::os::unix::net::UnixListener::bind(dir.path().join("socket.py")).unwrap();
    symlink("/dev/null", dir.path().join("device.py")).unwrap();

    let top = scan_within_a_minute(dir.path(), false);
    let reasons: Vec<(&str, String)> = top
        .skipped
        .iter()
        .map(|s| (s.file.as_str(), s.reason.to_string()))
        .collect();
    assert_eq!(
        reasons,
        [
            (
                "device.py",
                "a character device, not a regular file: not read".to_owned()
            ),
            (
                "folder.py",
                "a folder, not a regular file: not read".to_owned()
            ),
            (
                "pipe.py",
                "a FIFO (named pipe), not a regular file: not read".to_owned()
            ),
            (
                "socket.py",
                "a socket, not a regular file: not read".to_owned()
            ),
        ]
    );
    assert_eq!(top.environments.len(), 1);
    // Recursive: the folder is still said to be no file, and its contents are read.
    let all = scan_within_a_minute(dir.path(), true);
    assert_eq!(all.environments.len(), 2);
    assert_eq!(all.skipped.len(), 4);
}

#[test]
fn reading_a_source_that_became_a_fifo_does_not_block() {
    let dir = tempfile::tempdir().unwrap();
    let pipe = dir.path().join("pipe.py");
    nix::unistd::mkfifo(&pipe, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
    let (done, read) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(rl_discovery::read_python_source(&pipe));
    });
    let outcome = read
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("reading blocked");
    assert!(
        matches!(&outcome, Err(SkipReason::NotAFile { file_type }) if file_type.contains("FIFO")),
        "{outcome:?}"
    );
}

#[test]
fn a_source_read_outside_a_scan_has_the_scans_size_limit() {
    let limit = rl_discovery::MAX_SOURCE_BYTES;
    let big = vec![b'#'; usize::try_from(limit).unwrap() + 1];
    let dir = tree(&[("big.py", &big)]);
    let outcome = rl_discovery::read_python_source(&dir.path().join("big.py"));
    assert_eq!(
        outcome.unwrap_err(),
        SkipReason::TooLarge {
            bytes: limit + 1,
            limit
        }
    );
}

#[test]
fn symlink_loops_are_skipped_not_followed_forever() {
    let dir = tree(&[("pkg/a.py", ENV)]);
    symlink(dir.path(), dir.path().join("pkg/loop")).unwrap();
    symlink(dir.path().join("self.py"), dir.path().join("self.py")).unwrap();
    let scan = crate::scan_recursive(dir.path());
    assert_eq!(scan.environments.len(), 1);
    let reasons: Vec<_> = scan
        .skipped
        .iter()
        .map(|s| (s.file.as_str(), s.reason.to_string()))
        .collect();
    assert!(
        scan.skipped
            .iter()
            .any(|s| s.file == "pkg/loop" && matches!(s.reason, SkipReason::SymlinkLoop { .. })),
        "{reasons:?}"
    );
    assert!(
        scan.skipped.iter().any(|s| s.file == "self.py"),
        "{reasons:?}"
    );
}

#[test]
fn too_large_files_are_skipped() {
    let dir = tree(&[
        ("a.py", ENV),
        ("big.py", &[ENV, &vec![b'#'; 10_000]].concat()),
    ]);
    let scan = scan(
        dir.path(),
        &ScanOptions {
            max_file_bytes: 1_000,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(scan.environments.len(), 1);
    assert!(matches!(
        scan.skipped[0].reason,
        SkipReason::TooLarge { limit: 1_000, .. }
    ));
}

#[test]
fn hidden_and_cache_folders_are_not_entered() {
    let dir = tree(&[
        (".venv/lib/x.py", ENV),
        ("__pycache__/y.py", ENV),
        ("z/a.py", ENV),
    ]);
    let scan = crate::scan_recursive(dir.path());
    let files: Vec<_> = scan.environments.iter().map(|e| e.file.as_str()).collect();
    assert_eq!(files, ["z/a.py"]);
}

#[test]
fn skip_reasons_read_well() {
    let reasons = [
        SkipReason::SyntaxError {
            line: 14,
            column: 15,
            message: "Expected ')', found newline".into(),
        },
        SkipReason::Undecodable {
            encoding: "utf-8".into(),
            detail: "invalid byte at offset 9 (line 2)".into(),
        },
        SkipReason::UnknownEncoding {
            label: "klingon".into(),
        },
        SkipReason::Binary,
        SkipReason::TooLarge {
            bytes: 5_000_000,
            limit: 4_194_304,
        },
        SkipReason::SymlinkLoop {
            ancestor: "pkg".into(),
        },
        SkipReason::Unreadable {
            message: "Permission denied (os error 13)".into(),
        },
        SkipReason::NotAFile {
            file_type: "FIFO (named pipe)".into(),
        },
        SkipReason::NameNotUtf8,
    ];
    let text: Vec<String> = reasons.iter().map(ToString::to_string).collect();
    insta::assert_snapshot!(text.join("\n"));
}

#[test]
fn files_named_like_modules_runs_import_are_warned_about_and_still_read() {
    let dir = tree(&[
        ("a.py", ENV),
        ("json.py", ENV),
        ("openai.py", b"x = 1\n"),
        ("typing/__init__.py", b"x = 1\n"),
        ("word_count.py", b"x = 1\n"),
        // Runs start from sub/, where an environment is: its random.py shadows.
        ("sub/env.py", ENV),
        ("sub/random.py", b"x = 1\n"),
        // No run starts from pkg/: its typing.py is pkg.typing.
        ("pkg/__init__.py", b""),
        ("pkg/typing.py", b"x = 1\n"),
    ]);
    let scan = crate::scan_recursive(dir.path());
    assert_eq!(
        scan.environments.len(),
        3,
        "json.py's environment is listed"
    );
    let warned: Vec<(&str, String)> = scan
        .warnings
        .iter()
        .map(|w| (w.file.as_str(), w.warning.to_string()))
        .collect();
    let files: Vec<&str> = warned.iter().map(|(file, _)| *file).collect();
    assert_eq!(
        files,
        [
            "json.py",
            "openai.py",
            "sub/random.py",
            "typing/__init__.py"
        ]
    );
    assert!(
        warned[0]
            .1
            .starts_with("shadows Python's standard library module `json`"),
        "{warned:?}"
    );
    assert!(
        warned[1]
            .1
            .contains("the module environments import at run time `openai`"),
        "{warned:?}"
    );
    assert_eq!(
        scan.warnings[3],
        FileWarning {
            file: "typing/__init__.py".to_owned(),
            warning: Warning::ShadowsModule {
                module: "typing".to_owned(),
                shadowed: Shadowed::StandardLibrary,
            },
        }
    );
}

#[test]
fn a_file_name_that_is_not_utf8_is_skipped_with_a_reason() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tree(&[("a.py", ENV)]);
    let name = std::ffi::OsStr::from_bytes(b"caf\xe9.py");
    std::fs::write(dir.path().join(name), ENV).unwrap();
    let scan = scan(dir.path(), &ScanOptions::default()).unwrap();
    assert_eq!(scan.environments.len(), 1);
    assert_eq!(scan.skipped.len(), 1);
    assert_eq!(scan.skipped[0].file, "caf\u{fffd}.py");
    assert_eq!(scan.skipped[0].reason, SkipReason::NameNotUtf8);
}
