//! verifiers packages built to break a scan: a huge `pyproject.toml`, TOML nesting far past
//! any real file (tables, dotted keys, arrays, inline tables), a `load_environment` of 100 000
//! keyword arguments or with a default nested past Python's own limit. Each scan ends, on a
//! thread with half the stack of a tool server's, with the environments beside them listed and
//! what cannot be read said, never a crash.

use std::time::{Duration, Instant};

use rl_discovery::{EnvironmentKind, Scan, ScanOptions, SkipReason};

use crate::tree;

/// The TOML nesting of each hostile `pyproject.toml` (within the size limit): far past any real
/// file, and enough to overflow a small stack in a recursive parse, conversion or drop.
const TOML_DEPTH: usize = 30_000;

const V0_MODULE: &str = "import verifiers as vf\n\n\ndef load_environment(n: int = 1):\n    return vf.SingleTurnEnv()\n";

fn pyproject(name: &str, tail: &str) -> String {
    format!(
        "[project]\nname = \"{name}\"\nversion = \"0.1.0\"\ndependencies = [\"verifiers>=0.1.9\"]\n{tail}"
    )
}

/// `scan(root)` (top-level, as `rl envs list` runs it) on a thread with a 1 MiB stack, bounded
/// in time: a stack overflow aborts the test binary, a hang fails it.
fn scan_bounded(root: &std::path::Path) -> Scan {
    let root = root.to_owned();
    let (done, finished) = std::sync::mpsc::channel();
    let began = Instant::now();
    std::thread::Builder::new()
        .stack_size(1024 * 1024)
        .spawn(move || {
            let _ = done.send(rl_discovery::scan(&root, &ScanOptions::default()).unwrap());
        })
        .unwrap();
    let scan = finished
        .recv_timeout(Duration::from_secs(120))
        .expect("the scan did not end");
    eprintln!("scanned in {:?}", began.elapsed());
    scan
}

#[test]
fn hostile_pyproject_files_are_skipped_with_their_reason_and_the_good_package_is_listed() {
    let huge = pyproject("huge", &format!("# {}\n", "x".repeat(10 * 1024 * 1024)));
    let dotted = pyproject(
        "dotted",
        &format!("{} = 1\n", vec!["a"; TOML_DEPTH].join(".")),
    );
    let header = pyproject(
        "header",
        &format!("[{}]\n", vec!["a"; TOML_DEPTH].join(".")),
    );
    let arrays = pyproject(
        "arrays",
        &format!("x = {}{}\n", "[".repeat(TOML_DEPTH), "]".repeat(TOML_DEPTH)),
    );
    let inline = pyproject(
        "inline",
        &format!(
            "x = {}1{}\n",
            "{a = ".repeat(TOML_DEPTH),
            "}".repeat(TOML_DEPTH)
        ),
    );
    let hostile = [
        ("huge", &huge),
        ("dotted", &dotted),
        ("header", &header),
        ("arrays", &arrays),
        ("inline", &inline),
    ];
    let good = pyproject("good", "");
    let mut files: Vec<(String, Vec<u8>)> = vec![
        ("good/pyproject.toml".to_owned(), good.into_bytes()),
        ("good/good_env.py".to_owned(), V0_MODULE.as_bytes().to_vec()),
    ];
    for (name, text) in &hostile {
        files.push((format!("{name}/pyproject.toml"), text.as_bytes().to_vec()));
        files.push((
            format!("{name}/{name}_env.py"),
            V0_MODULE.as_bytes().to_vec(),
        ));
    }
    let borrowed: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(name, text)| (name.as_str(), text.as_slice()))
        .collect();
    let dir = tree(&borrowed);

    let scan = scan_bounded(dir.path());

    let found: Vec<(&str, EnvironmentKind)> = scan
        .environments
        .iter()
        .map(|env| (env.name.as_str(), env.kind))
        .collect();
    assert_eq!(found, [("good", EnvironmentKind::VerifiersV0)]);
    for (name, _) in &hostile {
        let file = format!("{name}/pyproject.toml");
        let skipped = scan
            .skipped
            .iter()
            .find(|skipped| skipped.file == file)
            .unwrap_or_else(|| panic!("{file} is not said: {:#?}", scan.skipped));
        let reason = skipped.reason.to_string();
        let expected = match *name {
            "huge" => "bytes, over the limit of 262144 bytes",
            "arrays" | "inline" => "cannot read: TOML nested more than 32 deep at line 5",
            _ => "cannot read: not valid TOML at line 5",
        };
        assert!(reason.contains(expected), "{file}: {reason}");
    }
}

/// `load_environment` with 100 000 keyword arguments is read in bounded time; one whose default
/// nests deeper than Python allows is skipped with the reason, the good module beside listed.
#[test]
fn hostile_load_environment_signatures_end_with_a_result_or_a_reason() {
    let wide: String = {
        let mut text = String::from("import verifiers as vf\n\n\ndef load_environment(\n");
        for i in 0..100_000 {
            text.push_str(&format!("    p{i}: int = {i},\n"));
        }
        text.push_str("):\n    return vf.SingleTurnEnv()\n");
        text
    };
    let deep = format!(
        "import verifiers as vf\n\n\ndef load_environment(x: dict = {}1{}):\n    return vf.SingleTurnEnv()\n",
        "{\"a\": ".repeat(10_000),
        "}".repeat(10_000)
    );
    let dir = tree(&[
        ("wide.py", wide.as_bytes()),
        ("deep.py", deep.as_bytes()),
        ("good.py", V0_MODULE.as_bytes()),
    ]);

    let scan = scan_bounded(dir.path());

    let names: Vec<&str> = scan.environments.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["good", "wide"], "{:#?}", scan.skipped);
    let deep = scan.skipped.iter().find(|s| s.file == "deep.py").unwrap();
    assert!(
        matches!(deep.reason, SkipReason::TooDeeplyNested { .. }),
        "{}",
        deep.reason
    );
}
