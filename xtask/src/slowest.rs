//! The slowest tests of a `cargo nextest run`, read from the JUnit report nextest writes
//! (`[profile.*.junit]` in `.config/nextest.toml`), so that every run of `cargo xtask test`
//! ends by saying where its time went.

use std::path::Path;

use anyhow::Context;

/// How many of the slowest tests `cargo xtask test` names.
pub(crate) const SHOWN: usize = 15;

/// One test's wall time as nextest measured it.
#[derive(Debug, PartialEq)]
pub(crate) struct Timed {
    /// `binary-id test::path`, as nextest names a test on its command line and in its output.
    pub(crate) name: String,
    pub(crate) seconds: f64,
}

/// Every test case of a JUnit report with its time, the slowest first.
pub(crate) fn read(report: &str) -> anyhow::Result<Vec<Timed>> {
    let document = roxmltree::Document::parse(report).context("nextest's JUnit report")?;
    let mut timed: Vec<Timed> = document
        .descendants()
        .filter(|node| node.has_tag_name("testcase"))
        .filter_map(|case| {
            let seconds = case.attribute("time")?.parse::<f64>().ok()?;
            let name = match case.attribute("classname") {
                Some(binary) => format!("{binary} {}", case.attribute("name")?),
                None => case.attribute("name")?.to_owned(),
            };
            Some(Timed { name, seconds })
        })
        .collect();
    timed.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
    Ok(timed)
}

/// The table `cargo xtask test` ends with: the `shown` slowest, and what they add up to
/// against the whole.
pub(crate) fn table(timed: &[Timed], shown: usize) -> String {
    let total: f64 = timed.iter().map(|test| test.seconds).sum();
    let slowest = &timed[..shown.min(timed.len())];
    let theirs: f64 = slowest.iter().map(|test| test.seconds).sum();
    let mut lines = vec![format!(
        "the {} slowest of {} tests ({theirs:.0} s of {total:.0} s of test time):",
        slowest.len(),
        timed.len()
    )];
    lines.extend(
        slowest
            .iter()
            .map(|test| format!("  {:>7.1} s  {}", test.seconds, test.name)),
    );
    lines.join("\n")
}

/// Prints [`table`] of the report at `path`, or why there is none (a run that never started
/// writes no report; that must not hide the run's own error).
pub(crate) fn report(path: &Path) {
    let timed = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read {}", path.display()))
        .and_then(|text| read(&text));
    match timed {
        Ok(timed) if !timed.is_empty() => eprintln!("{}", table(&timed, SHOWN)),
        Ok(_) => eprintln!("xtask: {} names no test", path.display()),
        Err(error) => eprintln!("xtask: no slowest tests to show: {error:#}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPORT: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="nextest-run" tests="3" failures="1" errors="0" time="12.5">
  <testsuite name="rl-cli::it" tests="2" disabled="0" errors="0" failures="1">
    <testcase name="runs::a_run_completes" classname="rl-cli::it" timestamp="2026-12-02T10:00:00Z" time="9.25">
    </testcase>
    <testcase name="envs_list_prints_a_table" classname="rl-cli::it" time="0.5">
      <failure type="test failure">assertion failed</failure>
    </testcase>
  </testsuite>
  <testsuite name="xtask" tests="1">
    <testcase name="tests::a_unit" classname="xtask" time="2.75"/>
  </testsuite>
</testsuites>"#;

    #[test]
    fn every_case_is_read_with_its_binary_the_slowest_first() {
        let timed = read(REPORT).unwrap();
        let names: Vec<(&str, f64)> = timed
            .iter()
            .map(|test| (test.name.as_str(), test.seconds))
            .collect();
        assert_eq!(
            names,
            [
                ("rl-cli::it runs::a_run_completes", 9.25),
                ("xtask tests::a_unit", 2.75),
                ("rl-cli::it envs_list_prints_a_table", 0.5),
            ]
        );
    }

    #[test]
    fn the_table_names_the_slowest_and_their_share() {
        let timed = read(REPORT).unwrap();
        let table = table(&timed, 2);
        assert_eq!(
            table,
            "the 2 slowest of 3 tests (12 s of 12 s of test time):\n      9.2 s  rl-cli::it \
             runs::a_run_completes\n      2.8 s  xtask tests::a_unit"
        );
    }

    #[test]
    fn a_report_that_is_not_xml_is_an_error() {
        assert!(read("not xml <").is_err());
    }
}
