//! `cargo xtask test`: every test of the workspace, with insta snapshots checked.

use std::path::Path;
use std::process::Command;

use anyhow::bail;

use crate::{node, quick, run_command, slowest, venv};

#[derive(clap::Args)]
pub(crate) struct TestArgs {
    /// CI mode: formatting and clippy must be clean, and a snapshot that differs fails instead
    /// of being written.
    #[arg(long, conflicts_with = "accept")]
    check: bool,
    /// Accept every changed snapshot (review the diff before committing).
    #[arg(long)]
    accept: bool,
    #[command(flatten)]
    tier: Tier,
}

/// Which tests run: every one unless one of these narrows them.
#[derive(clap::Args)]
struct Tier {
    /// Do not provision the Python test venv; the tests that need it are then reported as
    /// skipped.
    #[arg(long, conflicts_with = "quick")]
    no_python: bool,
    /// The contributor's tier, a few minutes: the tests that need nothing and the local stack's
    /// runs (rl-cli's `runs`, the test venv alone). The others are reported as skipped.
    #[arg(long, conflicts_with = "check")]
    quick: bool,
}

/// The Pythons a tier of the tests runs against.
enum Pythons {
    /// Every one: the full suite.
    All(venv::TestPythons),
    /// The test venv alone (`--quick`).
    TestVenv(std::path::PathBuf),
    /// None (`--no-python`).
    None,
}

/// The tests that need a SLURM cluster: rl-cli's `slurm` module.
const SLURM_TESTS: &str = "binary_id(rl-cli::it) & test(/^slurm::/)";

/// The tests that need Chromium: those with a `browser` module in their path (rl-cli's
/// `browser`, and a `mod browser` beside the other tests of a page). The one marker:
/// `browser_tests_are_marked` holds every user of the browser driver to it.
const BROWSER_TESTS: &str = "binary_id(rl-cli::it) & test(/(^|::)browser::/)";
/// The variable that names the Chromium the browser tests drive.
const CHROMIUM_ENV: &str = "RL_TEST_CHROMIUM";

/// The Chromium here: `$RL_TEST_CHROMIUM`, else `chromium` on the PATH, if it answers.
fn chromium() -> Option<String> {
    let program = std::env::var(CHROMIUM_ENV).unwrap_or_else(|_| "chromium".to_owned());
    Command::new(&program)
        .arg("--version")
        .output()
        .is_ok_and(|output| output.status.success())
        .then_some(program)
}

/// The tests that need network and mount namespaces (`unshare`, `ip`, root): rl-cli's
/// loopback-only pre-flights and runs.
const NAMESPACE_TESTS: &str =
    "binary_id(rl-cli::it) & test(=verifiers::preflights_and_training_reach_nothing_but_loopback)";

/// Whether this process may make a network and a mount namespace and bring its loopback up.
fn network_namespaces() -> bool {
    Command::new("unshare")
        .args(["-n", "-m", "ip", "link", "set", "lo", "up"])
        .output()
        .is_ok_and(|output| output.status.success())
}

/// Whether a SLURM controller answers here.
fn slurm_answers() -> bool {
    Command::new("sinfo")
        .args(["-h", "-o", "%t"])
        .output()
        .is_ok_and(|output| {
            output.status.success() && !String::from_utf8_lossy(&output.stdout).trim().is_empty()
        })
}

pub(crate) fn run(root: &Path, args: &TestArgs) -> anyhow::Result<()> {
    if args.check {
        crate::vendor::check(root)?;
        run_command(crate::cargo().args(["fmt", "--all", "--", "--check"]))?;
        run_command(crate::cargo().args([
            "clippy",
            "--workspace",
            "--all-targets",
            "--quiet",
            "--",
            "-D",
            "warnings",
        ]))?;
    }
    // After the quick checks, so a formatting slip does not wait on pip.
    let python = if args.tier.no_python {
        Pythons::None
    } else if args.tier.quick {
        Pythons::TestVenv(venv::ensure_test_venv(root)?)
    } else {
        Pythons::All(venv::TestPythons::ensure(root)?)
    };
    // The MCP TypeScript client's tests need the venv too (the stack, the fixture endpoint).
    let mcp_ts = if matches!(python, Pythons::All(_)) {
        node::ensure_mcp_ts_client(root)?
    } else {
        None
    };
    let test_command = |cargo_args: &[&str]| {
        let mut command = crate::cargo();
        command.args(cargo_args);
        venv::let_python_cache_bytecode(root, &mut command);
        match &mcp_ts {
            Some(modules) => command.env(node::MCP_TS_ENV, modules),
            None => command.env_remove(node::MCP_TS_ENV),
        };
        venv::unname(&mut command);
        match &python {
            Pythons::All(pythons) => pythons.name_to(&mut command),
            Pythons::TestVenv(test) => {
                command.env(venv::PYTHON_ENV, test);
            }
            Pythons::None => {}
        }
        command
    };
    // insta: `no` fails on a difference and writes nothing, `always` overwrites, `new` leaves a
    // `.snap.new` beside the snapshot for review.
    let insta_update = match (args.check, args.accept) {
        (true, _) => "no",
        (_, true) => "always",
        _ => "new",
    };
    let nextest_available = crate::cargo()
        .args(["nextest", "--version"])
        .output()
        .is_ok_and(|output| output.status.success());
    if nextest_available {
        // No doc tests: nextest does not run them, and the one the workspace had cost a
        // build of its own (155 s in CI). Examples are `examples/` programs, which the test
        // build and clippy compile, shown in the docs with `include_str!`.
        // The tests that need the venv (or SLURM) are `#[ignore]`d: asked for when what they
        // need is here, else left out and counted as skipped in nextest's summary — never
        // passed unrun. Under `--check` (CI) SLURM must answer: its tests run and fail if not.
        // Every test runs whatever one does: a failure must not hide the state of the rest.
        let mut nextest = vec![
            "nextest",
            "run",
            "--workspace",
            "--no-fail-fast",
            "--no-tests=fail",
            "--final-status-level=fail",
        ];
        // Under `--check` (CI) SLURM must answer, Chromium and Node be installed and network
        // namespaces allowed: their tests run and fail if not. Elsewhere what is missing is
        // left out and said so.
        let mut left_out = Vec::new();
        let quick_left_out = match python {
            Pythons::TestVenv(_) => quick::left_out_filter(&root.join("crates"))?,
            _ => String::new(),
        };
        let browser = chromium();
        if matches!(python, Pythons::TestVenv(_)) {
            nextest.extend(["--run-ignored", "all"]);
            left_out.push(quick_left_out.as_str());
        }
        if matches!(python, Pythons::All(_)) {
            nextest.extend(["--run-ignored", "all"]);
            if !args.check && !slurm_answers() {
                eprintln!(
                    "no SLURM answers (`sinfo`): its tests are skipped; start one with `sudo \
                     ci/slurm/up.sh`"
                );
                left_out.push(SLURM_TESTS);
            }
            if !args.check && browser.is_none() {
                eprintln!(
                    "no Chromium (`chromium` or ${CHROMIUM_ENV}): the browser tests are skipped; \
                     install Debian's chromium"
                );
                left_out.push(BROWSER_TESTS);
            }
            if !args.check && !network_namespaces() {
                eprintln!(
                    "no network namespaces (`unshare -n -m` as root, iproute2's `ip`): the \
                     loopback-only pre-flight and training test is skipped"
                );
                left_out.push(NAMESPACE_TESTS);
            }
            // Said by `ensure_mcp_ts_client` when node or npm is missing.
            if !args.check && mcp_ts.is_none() {
                left_out.push(node::MCP_TS_TESTS);
            }
        }
        // Two tests a core, an engine test taking both: the waits of the others are filled.
        let schedule = crate::schedule::nextest_arguments(root)?;
        nextest.extend(schedule.iter().map(String::as_str));
        let filter = left_out
            .iter()
            .map(|tests| format!("not ({tests})"))
            .collect::<Vec<_>>()
            .join(" & ");
        if !filter.is_empty() {
            nextest.extend(["-E", filter.as_str()]);
        }
        let mut command = test_command(&nextest);
        command.env("INSTA_UPDATE", insta_update);
        if let Some(browser) = &browser {
            command.env(CHROMIUM_ENV, browser);
        }
        let ran = run_command(&mut command);
        // Where the time went, whether the run passed or not.
        slowest::report(&root.join("target/nextest/default/junit.xml"));
        ran?;
    } else {
        if matches!(python, Pythons::TestVenv(_)) {
            bail!(
                "`--quick` picks its tests with cargo-nextest: install it (`cargo install cargo-nextest`)"
            );
        }
        let mut test = vec!["test", "--workspace", "--no-fail-fast"];
        if matches!(python, Pythons::All(_)) {
            test.extend(["--", "--include-ignored"]);
        }
        run_command(test_command(&test).env("INSTA_UPDATE", insta_update))?;
    }
    let pending = pending_snapshots(Path::new("crates"));
    if !pending.is_empty() {
        bail!(
            "snapshots changed and were not accepted:\n  {}\nreview them, then run `cargo xtask test --accept`",
            pending.join("\n  ")
        );
    }
    Ok(())
}

fn pending_snapshots(dir: &Path) -> Vec<String> {
    files_under(dir, &|path| path.to_string_lossy().ends_with(".snap.new"))
        .iter()
        .map(|path| path.display().to_string())
        .collect()
}

/// Every file under `dir` that `keep` takes, `target` folders left out.
pub(crate) fn files_under(dir: &Path, keep: &dyn Fn(&Path) -> bool) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|name| name != "target") {
                found.extend(files_under(&path, keep));
            }
        } else if keep(&path) {
            found.push(path);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// Every test file that takes rl-cli's browser driver (`use crate::browser::…`) takes it
    /// inside a `mod browser`, so the tests that can use it carry the marker `BROWSER_TESTS`
    /// filters on (the compiler refuses a use outside it).
    #[test]
    fn browser_tests_are_marked() {
        let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/rl-cli/tests/it");
        let mut users = 0;
        for entry in std::fs::read_dir(&tests).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|extension| extension != "rs")
                || path.file_name().is_some_and(|name| name == "browser.rs")
            {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let Some(used) = text.find("use crate::browser") else {
                continue;
            };
            users += 1;
            let module = text.find("mod browser {");
            assert!(
                module.is_some_and(|module| module < used),
                "{}: takes the browser driver outside a `mod browser`: `cargo xtask test` would \
                 not leave its tests out where Chromium is missing",
                path.display()
            );
        }
        assert!(
            users > 0,
            "no test file beside browser.rs drives the browser: is the marker still needed?"
        );
    }

    /// No documentation comment opens a Rust code block that rustdoc would run: `cargo xtask
    /// test` runs no doc tests (nextest cannot), so an example is an `examples/` program shown
    /// with `include_str!` in a block marked `ignore`, or a block of another language.
    #[test]
    fn no_doc_comment_holds_a_doc_test() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let is_rust = |path: &Path| path.extension().is_some_and(|extension| extension == "rs");
        let sources: Vec<_> = ["crates", "xtask"]
            .into_iter()
            .flat_map(|top| super::files_under(&root.join(top), &is_rust))
            .collect();
        assert!(sources.len() > 50, "{} sources found", sources.len());
        let mut doc_tests = Vec::new();
        for path in sources {
            let text = std::fs::read_to_string(&path).unwrap();
            let mut inside = false;
            for (number, line) in text.lines().enumerate() {
                let line = line.trim_start();
                let Some(doc) = line
                    .strip_prefix("//!")
                    .or_else(|| line.strip_prefix("///"))
                else {
                    continue;
                };
                let Some(info) = doc.trim_start().strip_prefix("```") else {
                    continue;
                };
                if inside {
                    inside = false;
                    continue;
                }
                inside = true;
                let runs = info.split(',').map(str::trim).all(|word| {
                    word.is_empty()
                        || matches!(word, "rust" | "no_run" | "should_panic" | "compile_fail")
                        || word.starts_with("edition")
                });
                if runs {
                    doc_tests.push(format!("{}:{}", path.display(), number + 1));
                }
            }
        }
        assert!(
            doc_tests.is_empty(),
            "doc tests that `cargo xtask test` would never run: {doc_tests:#?}"
        );
    }
}
