//! The tinker-atropos tree and its environments for `rl doctor`: the folder found, its
//! environments counted, no file shadowing a module a run imports, and the selected
//! environment's own dependencies in the run's Python.

use std::path::Path;

use rl_settings::Settings;

use super::finding;
use crate::answers::Check;

/// The selected environment's own imports and requirements against the run's Python: said
/// only when it lacks any, or when the environment has a `requirements.txt`.
pub(super) fn dependencies_check(home: &Path, settings: &Settings) -> Option<Check> {
    let selection = rl_config::ConfigService::open(home, settings.clone())
        .ok()?
        .selection()
        .ok()?;
    let selected = &selection.environment;
    let deps = crate::env_dependencies::examine(
        home,
        settings,
        &selected.environments_dir.join(&selected.file),
        &selected.name,
        selected.kind,
    )?;
    let view = deps.view()?;
    let name = "environment dependencies";
    Some(if deps.ready() {
        finding(
            name,
            true,
            Ok(match view.requirements.as_deref() {
                Some(file) => format!(
                    "{}: {} holds what {} asks for",
                    selected.name,
                    deps.python.display(),
                    file.display()
                ),
                None => format!(
                    "{} ({}): {} imports what it needs",
                    selected.name,
                    selected.kind,
                    deps.python.display()
                ),
            }),
        )
    } else {
        finding(
            name,
            true,
            Err((
                format!("{}: {}", selected.name, deps.describe()),
                deps.fix(),
            )),
        )
    })
}

pub(super) fn tree_checks(settings: &Settings) -> Vec<Check> {
    let set_root = "set RL_TINKER_ATROPOS_ROOT (or tinker_atropos_root in config.toml, or --root) \
                    to your tinker-atropos checkout"
        .to_owned();
    let dir = match settings.environments_dir() {
        Ok(dir) => dir,
        Err(error) => {
            return vec![finding(
                "environments",
                true,
                Err((error.to_string(), set_root)),
            )];
        }
    };
    if !dir.is_dir() {
        return vec![finding(
            "environments",
            true,
            Err((format!("{} is not a folder", dir.display()), set_root)),
        )];
    }
    let scan = rl_config::scan_environments(settings, false);
    let shadowing = scan.as_ref().ok().and_then(shadowing_check);
    let counted = scan.map(|scan| Counted {
        listed: scan.environments.len(),
        unlisted: rl_config::unlisted_in_subfolders(settings, &scan).unwrap_or(0),
    });
    let mut checks = environment_count_check(&dir, counted, set_root);
    checks.extend(shadowing);
    checks
}

/// Files named like a module a run imports break every environment beside them.
fn shadowing_check(scan: &rl_discovery::Scan) -> Option<Check> {
    let shadowing: Vec<&rl_discovery::FileWarning> = scan
        .warnings
        .iter()
        .filter(|w| matches!(w.warning, rl_discovery::Warning::ShadowsModule { .. }))
        .collect();
    let first = shadowing.first()?;
    let names: Vec<&str> = shadowing.iter().map(|w| w.file.as_str()).collect();
    Some(finding(
        "environment file names",
        true,
        Err((
            format!("{} {}", first.file, first.warning),
            format!("rename {}", names.join(", ")),
        )),
    ))
}

/// The environments of the folder's top level, and those its sub-folders add.
struct Counted {
    listed: usize,
    unlisted: usize,
}

fn environment_count_check(
    dir: &std::path::Path,
    count: Result<Counted, rl_config::ConfigError>,
    set_root: String,
) -> Vec<Check> {
    match count {
        Ok(Counted { listed, unlisted }) if listed > 0 || unlisted > 0 => {
            let deeper = if unlisted > 0 {
                format!("; {}", crate::answers::unlisted_note(unlisted))
            } else {
                String::new()
            };
            vec![finding(
                "environments",
                true,
                Ok(format!("{listed} in {}{deeper}", dir.display())),
            )]
        }
        Ok(_) => vec![finding(
            "environments",
            true,
            Err((
                format!("no environment in {}", dir.display()),
                "write one with `rl envs new NAME` (rl's template), or point --envs-dir at the folder that has them"
                    .to_owned(),
            )),
        )],
        Err(error) => vec![finding(
            "environments",
            true,
            Err((error.to_string(), set_root)),
        )],
    }
}
