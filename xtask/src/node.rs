//! The official MCP TypeScript SDK's client the tests drive `rl mcp` with
//! (`crates/rl-cli/tests/it/mcp_ts_client.mjs`): `xtask/node/mcp-client`'s pinned
//! package.json and lock, installed with `npm ci` into `target/mcp-ts-client`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::Context;

use crate::run_command;

/// Tells the tests the `node_modules` folder holding the SDK; when already set to a folder,
/// nothing is provisioned.
pub(crate) const MCP_TS_ENV: &str = "RL_TEST_MCP_TS";
/// The tests that need it: rl-cli's `mcp_clients` module.
pub(crate) const MCP_TS_TESTS: &str = "binary_id(rl-cli::it) & test(/^mcp_clients::/)";

const PROJECT: &str = "xtask/node/mcp-client";
const FILES: [&str; 2] = ["package.json", "package-lock.json"];
/// Inside `node_modules`, which `npm ci` removes first: an interrupted install leaves none.
const STAMP: &str = ".rl-installed";

/// The version `program --version` prints, if it runs.
fn version(program: &str) -> Option<String> {
    let output = Command::new(program).arg("--version").output().ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// The `node_modules` folder of the pinned client: `$RL_TEST_MCP_TS` when it names a folder,
/// else `target/mcp-ts-client/node_modules`, installed unless the same package.json and lock
/// were installed there already. `Ok(None)` when `node` or `npm` is missing (said on stderr):
/// the tests that need it are skipped then. A failing `npm ci` is an error.
pub(crate) fn ensure_mcp_ts_client(root: &Path) -> anyhow::Result<Option<PathBuf>> {
    if let Some(modules) = std::env::var_os(MCP_TS_ENV).map(PathBuf::from) {
        if modules.is_dir() {
            return Ok(Some(modules));
        }
        eprintln!(
            "xtask: {MCP_TS_ENV}={} is not a folder; installing the MCP TypeScript client instead",
            modules.display()
        );
    }
    let (Some(node), Some(npm)) = (version("node"), version("npm")) else {
        eprintln!(
            "`node --version` or `npm --version` does not answer: the tests with the MCP \
             TypeScript SDK's client are skipped; install Node.js 18 or newer and npm (Debian: \
             nodejs npm)"
        );
        return Ok(None);
    };
    let project = root.join(PROJECT);
    let dir = root.join("target").join("mcp-ts-client");
    let modules = dir.join("node_modules");
    let mut stamp = String::new();
    for file in FILES {
        let path = project.join(file);
        stamp.push_str(
            &std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read {}", path.display()))?,
        );
    }
    let stamp_path = modules.join(STAMP);
    if std::fs::read_to_string(&stamp_path).is_ok_and(|installed| installed == stamp) {
        return Ok(Some(modules));
    }
    eprintln!("xtask: installing the MCP TypeScript SDK's client (node {node}, npm {npm})…");
    let started = Instant::now();
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for file in FILES {
        std::fs::copy(project.join(file), dir.join(file))
            .with_context(|| format!("cannot copy {file} to {}", dir.display()))?;
    }
    run_command(
        Command::new("npm")
            .args([
                "ci",
                "--ignore-scripts",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
            ])
            .current_dir(&dir),
    )
    .with_context(|| format!("npm failed while installing {}", dir.display()))?;
    // Written last: an interrupted install leaves no stamp and is redone next time.
    std::fs::write(&stamp_path, stamp)
        .with_context(|| format!("cannot write {}", stamp_path.display()))?;
    eprintln!(
        "xtask: {} ready in {:.0?}",
        modules.display(),
        started.elapsed()
    );
    Ok(Some(modules))
}
