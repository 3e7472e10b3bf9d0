//! The operator's locks checked against atroposlib's config classes when settings are loaded.

use rl_settings::Value;
use rl_test_support::variables;

/// The operator's locked values are checked as an agent's edits are, and a server entry's keys
/// are all known.
#[test]
fn locked_values_are_checked_like_edits() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("config.toml");
    for (text, expected) in [
        ("[locked.env]\ngroup_size = \"abc\"\n", "group_size"),
        ("[locked.env]\ngroup_size = 0\n", ">= 1"),
        ("[locked.env]\neval_limit_ratio = 2.5\n", "between 0 and 1"),
        (
            "[[locked.openai]]\nmodel_name = \"m\"\ntimout = 5\n",
            "`timout`",
        ),
        ("[[locked.openai]]\ntimeout = \"soon\"\n", "timeout"),
    ] {
        std::fs::write(&file, text).unwrap();
        let error = rl_config::load_settings(home.path(), variables(&[]))
            .unwrap_err()
            .to_string();
        assert!(error.contains(expected), "{text}: {error}");
    }
    std::fs::write(&file, "[locked.env]\ngroup_size = 8\n").unwrap();
    let error = rl_config::load_settings(
        home.path(),
        variables(&[("RL_LOCKED__ENV__GROUP_SIZE", "abc")]),
    )
    .unwrap_err()
    .to_string();
    assert!(error.contains("group_size"), "{error}");
    let settings = rl_config::load_settings(home.path(), variables(&[])).unwrap();
    assert_eq!(settings.locked.env["group_size"], Value::Int(8));
}
