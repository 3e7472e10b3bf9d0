//! How `cargo xtask test` packs the suite onto the machine's cores. A test that trains on the
//! local engine keeps about one core busy for its whole length (the engine, the trainer, the
//! environment, all Python); most of the others wait (on a timeout, SLURM, a stall, a child's
//! end). With nextest's default of one test per core the waits left a quarter of the cores idle
//! (measured: 4,050 busy CPU-seconds in 2,375 s on 2 cores). So nextest runs two tests per core,
//! and a test that needs the local engine takes two of those places: at most one engine test
//! per core, and the others' waits filled. Which tests need the engine is what their
//! `#[ignore]` reasons say (read by [`crate::quick`]), so a new engine test is weighed as one
//! without being listed here.

use std::path::{Path, PathBuf};

/// What an `#[ignore]` reason says of a test that trains on, or samples from, a local engine.
const NEEDS_THE_ENGINE: &str = "the local engine";
/// Places a test takes per core, and places an engine test takes.
const PLACES_PER_CORE: usize = 2;
const ENGINE_TEST_PLACES: usize = PLACES_PER_CORE;

/// The nextest arguments that schedule the suite: the number of places and the tool config
/// (written under `target/`) that weighs the engine tests.
pub(crate) fn nextest_arguments(root: &Path) -> anyhow::Result<Vec<String>> {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let config = write_tool_config(root)?;
    Ok(vec![
        "--test-threads".to_owned(),
        (cores * PLACES_PER_CORE).to_string(),
        "--tool-config-file".to_owned(),
        format!("xtask:{}", config.display()),
    ])
}

/// `target/nextest-schedule.toml`: the engine tests' weight, as a tool config nextest layers
/// under `.config/nextest.toml`.
fn write_tool_config(root: &Path) -> anyhow::Result<PathBuf> {
    let filter = engine_tests_filter(&root.join("crates"))?;
    let path = root.join("target").join("nextest-schedule.toml");
    std::fs::create_dir_all(root.join("target"))?;
    std::fs::write(&path, tool_config(&filter))?;
    Ok(path)
}

fn tool_config(filter: &str) -> String {
    format!(
        "# Written by `cargo xtask test` (xtask/src/schedule.rs) from the tests' #[ignore] reasons.\n\
         [[profile.default.overrides]]\nfilter = '''{filter}'''\nthreads-required = {ENGINE_TEST_PLACES}\n"
    )
}

/// The nextest filter set of the tests whose `#[ignore]` reason names the local engine.
fn engine_tests_filter(crates: &Path) -> anyhow::Result<String> {
    let mut names = crate::quick::ignored_tests_under(crates)
        .into_iter()
        .filter(|test| test.reason.contains(NEEDS_THE_ENGINE))
        .map(|test| crate::quick::test_filter(&test.name))
        .collect::<Vec<_>>();
    names.sort();
    names.dedup();
    if names.is_empty() {
        anyhow::bail!(
            "no test under {} says it needs {NEEDS_THE_ENGINE}",
            crates.display()
        );
    }
    Ok(names.join(" | "))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The engine's heaviest tests are weighed, the local stack's runs are not, and the tool
    /// config is one nextest reads.
    #[test]
    fn engine_tests_take_two_places_and_the_others_one() {
        let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates");
        let filter = engine_tests_filter(&crates).unwrap();
        for weighed in [
            "checkpoints_are_models_and_compare_gives_a_verdict_from_real_samples",
            "the_fixtures_are_listed_configured_and_the_tool_one_trains_and_compares",
        ] {
            assert!(filter.contains(&format!("::){weighed}$/")), "{weighed}");
        }
        assert!(!filter.contains(
            "a_run_goes_from_starting_to_running_to_completed_with_keys_only_in_the_environment"
        ));
        let config: toml::Value = toml::from_str(&tool_config(&filter)).unwrap();
        let overrides = &config["profile"]["default"]["overrides"][0];
        assert_eq!(overrides["threads-required"].as_integer(), Some(2));
        assert_eq!(overrides["filter"].as_str(), Some(filter.as_str()));
    }
}
