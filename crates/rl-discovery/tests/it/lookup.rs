use rl_discovery::{DiscoveryError, ScanOptions, scan};

use crate::fixture_environments;

fn fixture_scan() -> rl_discovery::Scan {
    scan(
        &fixture_environments(),
        &ScanOptions {
            recursive: true,
            ..Default::default()
        },
    )
    .unwrap()
}

#[test]
fn by_unique_name_key_or_class() {
    let scan = fixture_scan();
    assert_eq!(
        scan.find("gsm8k_tinker").unwrap().class_name,
        "GSM8kTinkerEnv"
    );
    assert_eq!(
        scan.find("  gsm8k_tinker ").unwrap().class_name,
        "GSM8kTinkerEnv"
    );
    assert_eq!(
        scan.find("countdown@countdown_v2.py").unwrap().class_name,
        "CountdownV2Env"
    );
    assert_eq!(scan.find("CountdownEnv").unwrap().file, "countdown.py");
}

#[test]
fn duplicate_name_is_ambiguous_and_lists_keys() {
    let scan = fixture_scan();
    let error = scan.find("countdown").unwrap_err();
    let DiscoveryError::AmbiguousEnvironment { candidates, .. } = &error else {
        panic!("{error}")
    };
    assert_eq!(
        candidates,
        &["countdown@countdown.py", "countdown@countdown_v2.py"]
    );
    insta::assert_snapshot!(error.to_string());
    let duplicate = scan
        .duplicate_names
        .iter()
        .find(|d| d.name == "countdown")
        .unwrap();
    assert_eq!(duplicate.keys, *candidates);
}

#[test]
fn unknown_name_suggests_close_ones() {
    let scan = fixture_scan();
    let error = scan.find("gsm8k").unwrap_err();
    let DiscoveryError::UnknownEnvironment { suggestions, .. } = &error else {
        panic!("{error}")
    };
    assert!(
        suggestions.contains(&"gsm8k_tinker".to_owned()),
        "{suggestions:?}"
    );
    assert!(suggestions.len() <= 3);
    insta::assert_snapshot!(error.to_string());
}

#[test]
fn nonsense_gets_no_suggestions() {
    let error = fixture_scan().find("../../etc/passwd").unwrap_err();
    assert!(
        matches!(&error, DiscoveryError::UnknownEnvironment { suggestions, .. } if suggestions.is_empty()),
        "{error}"
    );
    assert!(matches!(
        fixture_scan().find(""),
        Err(DiscoveryError::UnknownEnvironment { .. })
    ));
}

#[test]
fn keys_are_unique() {
    let scan = fixture_scan();
    let mut keys: Vec<_> = scan.environments.iter().map(|e| &e.key).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), scan.environments.len());
}

/// A huge name is not echoed whole in the error that refuses it.
#[test]
fn a_huge_unknown_name_is_repeated_only_in_part() {
    let huge = "a".repeat(5000);
    let error = fixture_scan().find(&huge).unwrap_err().to_string();
    assert!(error.len() < 400, "{} characters", error.len());
    assert!(error.contains('…'), "{error}");
}
