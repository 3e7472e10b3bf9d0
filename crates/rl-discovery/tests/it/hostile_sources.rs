//! Files built to break a parser are skipped with their reason; the environment beside them
//! is still found. Before the nesting check, each of these aborted the process.

use rl_discovery::{Nesting, ScanOptions, SkipReason, scan};
use rl_test_support::{GOOD_ENVIRONMENT, deeply_nested_sources};

use crate::tree;

#[test]
fn deeply_nested_files_are_skipped_with_their_reason_and_the_good_one_is_listed() {
    let sources = deeply_nested_sources();
    let mut files: Vec<(&str, &[u8])> = vec![("good.py", GOOD_ENVIRONMENT.as_bytes())];
    files.extend(
        sources
            .iter()
            .map(|(name, text, ..)| (*name, text.as_bytes())),
    );
    let dir = tree(&files);

    let scan = scan(dir.path(), &ScanOptions::default()).unwrap();

    let names: Vec<_> = scan.environments.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["good"]);
    assert_eq!(scan.skipped.len(), sources.len(), "{:#?}", scan.skipped);
    for (name, _, nesting, line) in &sources {
        let skipped = scan.skipped.iter().find(|s| s.file == *name).unwrap();
        let SkipReason::TooDeeplyNested {
            nesting: found,
            line: found_line,
            limit,
        } = &skipped.reason
        else {
            panic!("{name}: {:?}", skipped.reason);
        };
        assert_eq!(format!("{found:?}").to_lowercase(), *nesting, "{name}");
        assert_eq!(found_line, line, "{name}");
        assert_eq!(*limit, found.limit(), "{name}");
    }
}

#[test]
fn the_reasons_say_what_python_says() {
    let reason = |nesting| {
        SkipReason::TooDeeplyNested {
            nesting,
            line: 3,
            limit: Nesting::limit(nesting),
        }
        .to_string()
    };
    insta::assert_snapshot!(
        [Nesting::Brackets, Nesting::Indentation, Nesting::Expression]
            .map(reason)
            .join("\n")
    );
}

/// Trees as deep as the limits allow are read, walked and dropped on a thread with half the
/// stack of the threads that scan (rayon's) or serve (tokio's blocking pool) in a debug build.
#[test]
fn files_just_inside_the_limits_are_read_on_a_small_stack() {
    let limit = Nesting::Expression.limit() as usize;
    let class = |body: &str| {
        format!(
            "from atroposlib.envs.base import BaseEnv\nimport a\n\n\nclass E(BaseEnv):\n    name = \"e\"\n    env_config_cls = a{}\n    x = {body}\n",
            ".b".repeat(limit - 20)
        )
    };
    let sources = [
        class(&format!("1{}", "+1".repeat(limit - 20))),
        class(&format!("{}1", "-".repeat(limit - 20))),
        class(&format!("f{}", "()".repeat(limit - 20))),
        class(&format!("{}1", "lambda: ".repeat(limit - 20))),
        class(&format!("{}1{}", "[".repeat(199), "]".repeat(199))),
    ];
    let files: Vec<(String, Vec<u8>)> = sources
        .iter()
        .enumerate()
        .map(|(i, text)| (format!("e{i}.py"), text.clone().into_bytes()))
        .collect();
    let borrowed: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(name, text)| (name.as_str(), text.as_slice()))
        .collect();
    let dir = tree(&borrowed);
    let root = dir.path().to_owned();
    let scan = std::thread::Builder::new()
        .stack_size(1024 * 1024)
        .spawn(move || scan(&root, &ScanOptions::default()).unwrap())
        .unwrap()
        .join()
        .unwrap();
    assert!(scan.skipped.is_empty(), "{:#?}", scan.skipped);
    assert_eq!(scan.environments.len(), sources.len());
}

/// 20 000 classes each deriving from the one before: followed no deeper than the limit (this
/// took minutes and gigabytes when every class's whole ancestry was listed).
#[test]
fn a_long_inheritance_chain_is_cut_with_a_warning() {
    let classes = 20_000;
    let mut source = String::from(
        "from atroposlib.envs.base import BaseEnv\n\n\nclass C0(BaseEnv):\n    pass\n",
    );
    for i in 1..classes {
        source.push_str(&format!("\n\nclass C{i}(C{}):\n    pass\n", i - 1));
    }
    let dir = tree(&[
        ("chain.py", source.as_bytes()),
        ("good.py", GOOD_ENVIRONMENT.as_bytes()),
    ]);
    let scan = scan(dir.path(), &ScanOptions::default()).unwrap();
    // C0 … C63 are 1 … 64 classes from BaseEnv, and good.
    assert_eq!(scan.environments.len(), 65);
    assert_eq!(scan.warnings.len(), 1, "{:?}", scan.warnings);
    assert_eq!(
        scan.warnings[0].warning.to_string(),
        "class C64 is more than 64 classes away from BaseEnv; rl follows inheritance no deeper, \
         so it and the classes deriving from it are not listed"
    );
    let deepest = scan
        .environments
        .iter()
        .find(|e| e.class_name == "C63")
        .unwrap();
    assert_eq!(deepest.bases.len(), 64);
}

/// A name bound 5 000 times, and a name re-exported twice by each of 30 files importing one
/// another (2^30 paths): resolution looks at a bounded number of bindings (each of these took
/// longer than ten minutes).
#[test]
fn names_bound_many_times_resolve_in_bounded_work() {
    let bindings = 5_000;
    let mut fan = String::new();
    for i in 0..bindings {
        fan.push_str(&format!("from m{i} import A\n"));
    }
    for i in 0..bindings {
        fan.push_str(&format!("class E{i}(A): pass\n"));
    }
    let mut files = vec![
        ("fan.py".to_owned(), fan),
        ("good.py".to_owned(), GOOD_ENVIRONMENT.to_owned()),
        (
            "m30.py".to_owned(),
            "from atroposlib.envs.base import BaseEnv\nclass X(BaseEnv): pass\n".to_owned(),
        ),
        (
            "top.py".to_owned(),
            "from m0 import X\nclass Top(X):\n    name = 'top'\n".to_owned(),
        ),
    ];
    for k in 0..30 {
        let next = k + 1;
        files.push((
            format!("m{k}.py"),
            format!(
                "try:\n    from m{next} import X\nexcept ImportError:\n    from m{next} import X\n"
            ),
        ));
    }
    let borrowed: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(name, text)| (name.as_str(), text.as_bytes()))
        .collect();
    let dir = tree(&borrowed);
    let scan = scan(dir.path(), &ScanOptions::default()).unwrap();
    let mut names: Vec<&str> = scan.environments.iter().map(|e| e.name.as_str()).collect();
    names.dedup();
    assert_eq!(names, ["good", "m30", "top"]);
}
