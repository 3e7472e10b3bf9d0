//! Finding an environment by what a user typed, the same way for every command (`rl select`,
//! `rl envs show`, `rl setup --env`, the agents' tools): in the environments folder's top level
//! first, then in its sub-folders. What `rl envs list --recursive` shows is found by every
//! command, and a name the top level holds keeps meaning that environment.

use std::path::Path;

use rl_discovery::{DiscoveryError, Environment, Scan};
use rl_settings::Settings;

use crate::{ConfigError, scan_environments};

/// An environment found, with the scan that found it (its file is relative to the scan's root).
pub struct FoundEnvironment {
    pub scan: Scan,
    index: usize,
}

impl FoundEnvironment {
    pub fn environment(&self) -> &Environment {
        &self.scan.environments[self.index]
    }
}

/// The environment `name` means (its name, key or class name): looked for in the top folder
/// (the whole tree when `recursive` or the settings' `recursive_discovery` say so), then, when
/// the top folder has none of that name, in the sub-folders too, then among the verifiers
/// environments of the packages `rl setup --env PACKAGE` installed from the registry.
pub fn find_environment(
    home: &Path,
    settings: &Settings,
    name: &str,
    recursive: bool,
) -> Result<FoundEnvironment, ConfigError> {
    let unknown = |scan: &Scan| {
        matches!(
            scan.find(name),
            Err(DiscoveryError::UnknownEnvironment { .. })
        )
    };
    let mut scan = scan_environments(settings, recursive)?;
    if !scan.recursive && unknown(&scan) {
        scan = scan_environments(settings, true)?;
    }
    if unknown(&scan)
        && let Some(installed) = installed_scans(home)
            .into_iter()
            .find(|installed| !unknown(installed))
    {
        scan = installed;
    }
    let index = scan.position(name)?;
    Ok(FoundEnvironment { scan, index })
}

/// The verifiers environments of each package installed from the registry (`rl setup --env
/// PACKAGE`), one scan per top-level package it holds; what cannot be scanned is left out.
pub fn installed_scans(home: &Path) -> Vec<Scan> {
    rl_settings::installed_packages(home)
        .iter()
        .flat_map(|package| &package.roots)
        .filter_map(|root| installed_scan(root).ok())
        .collect()
}

/// The verifiers environments of one installed package folder (`root`, a top-level package in
/// its venv's site-packages).
pub(crate) fn installed_scan(root: &Path) -> Result<Scan, ConfigError> {
    let options = rl_discovery::ScanOptions {
        recursive: true,
        ..Default::default()
    };
    let mut scan = rl_discovery::scan(root, &options)?;
    scan.environments.retain(|env| env.kind.has_own_python());
    Ok(scan)
}

/// How many more environments the sub-folders hold than `top` (a scan of the top folder only)
/// lists: what `--recursive` adds. `None` when `top` already went down, or the deeper scan
/// fails (the top one is still shown).
pub fn unlisted_in_subfolders(settings: &Settings, top: &Scan) -> Option<usize> {
    if top.recursive {
        return None;
    }
    let whole = scan_environments(settings, true).ok()?;
    Some(
        whole
            .environments
            .len()
            .saturating_sub(top.environments.len()),
    )
}
