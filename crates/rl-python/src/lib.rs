//! The Python programs rl ships, where the ecosystem is Python-only: its trainer on the `tinker`
//! SDK (`rl_trainer`), the launcher of the local Tinker-compatible engine (`rl_engine`) and the
//! runner of environments that keeps the held-out slice out of training (`rl_env`).
//!
//! They are embedded in the binary, so an installed `rl` needs no checkout: [`install`] writes
//! them into the state directory, in a folder named by their content, and a run hands that
//! folder to its Python as `PYTHONPATH` ([`PythonLauncher`]). Their third-party packages are pinned exactly in
//! [`TRAINER_REQUIREMENTS`] and [`ENGINE_REQUIREMENTS`].

use std::io::Write;
use std::path::{Path, PathBuf};

use include_dir::{Dir, DirEntry, include_dir};
use rl_settings::HeldOut;

mod installer;
mod launch;

pub use installer::{
    UV, UV_COMPILE_BYTECODE, compile_bytecode_value, own_uv, run_logged, version_of,
};
pub use launch::{Imports, ProgramCommand, PythonLauncher, python_path_of};

static PROGRAMS: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/python");

/// The packages rl installs from [`PROGRAMS`]; anything else there (tests) stays behind.
const PACKAGES: [&str; 4] = ["rl_trainer", "rl_engine", "rl_env", "rl_verifiers"];

/// What rl's trainer imports beyond the standard library, in the Python that runs atroposlib.
pub const TRAINER_REQUIREMENTS: &str = include_str!("../requirements/trainer.txt");
/// The local engine's own Python: skyrl-tx and CPU JAX, kept apart from atroposlib's pins.
pub const ENGINE_REQUIREMENTS: &str = include_str!("../requirements/engine.txt");
/// A verifiers v1 environment's own Python (verifiers 0.4.0 and uv), pinned.
pub const VERIFIERS_V1_REQUIREMENTS: &str = include_str!("../requirements/verifiers-v1.txt");
/// A verifiers v0 (legacy API) environment's own Python (verifiers 0.3.1), pinned.
pub const VERIFIERS_V0_REQUIREMENTS: &str = include_str!("../requirements/verifiers-v0.txt");

/// The pins of an environment's own Python, for the kinds that have one.
pub fn own_requirements(kind: rl_settings::EnvironmentKind) -> Option<&'static str> {
    match kind {
        rl_settings::EnvironmentKind::Atropos => None,
        rl_settings::EnvironmentKind::VerifiersV1 => Some(VERIFIERS_V1_REQUIREMENTS),
        rl_settings::EnvironmentKind::VerifiersV0 => Some(VERIFIERS_V0_REQUIREMENTS),
    }
}

/// The Atropos library the environments, run-api and rl's trainer run on.
pub const ATROPOSLIB: Pin = Pin {
    name: "atroposlib",
    version: "0.4.0",
};
/// The Tinker SDK rl's programs are written for, pinned in both requirements files (a test
/// holds them to this): the version `rl doctor` and `rl setup --check` compare against.
pub const SDK: Pin = Pin {
    name: "tinker",
    version: "0.38.0",
};
/// skyrl-tx itself, installed without its dependencies (see `requirements/engine.txt`).
pub const ENGINE_PACKAGE: Pin = Pin {
    name: "skyrl-tx",
    version: "0.3.0",
};

/// The folder, inside the state directory, the programs are installed in.
const INSTALL_DIR: &str = "python";

#[derive(Debug, thiserror::Error)]
pub enum PythonError {
    #[error("cannot {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// A command rl runs to install Python packages failed, or could not start.
    #[error("{command} {detail}")]
    Command { command: String, detail: String },
}

/// `python -m rl_env ENV_FILE ...`: an environment file run with the items a process draws
/// chosen by the variables of [`items_variables`].
pub const ENV_RUNNER: &str = "rl_env";
/// A file the runner waits for before its environment registers with run-api: set, the
/// environment is started first and its setup (imports, tokenizer, data) runs while the other
/// components start; the supervisor writes the file once they are ready.
pub const ENV_GO_VARIABLE: &str = "RL_ENV_GO_FILE";
/// Where the runner writes what it drew (`{"source", "drawn", "exhausted", ...}`).
pub const ITEMS_REPORT_VARIABLE: &str = "RL_ITEMS_REPORT";
/// The trainer's way to evaluate a checkpoint every `eval_every` steps: a JSON list, the
/// command line of `rl runs evaluate RUN_ID` to which it adds `--step`, `--base-url` and
/// `--model`.
pub const EVALUATE_COMMAND_VARIABLE: &str = "RL_EVALUATE_COMMAND";
/// Set to `1` for a trainer that trains on rl's local engine (skyrl-tx 0.3.0): what the engine
/// computes that the run config does not say (its ppo's fixed clip bounds, for the clip
/// fraction the trainer logs).
pub const LOCAL_ENGINE_VARIABLE: &str = "RL_LOCAL_ENGINE";
const ITEMS_VARIABLE: &str = "RL_ITEMS";
const FRACTION_VARIABLE: &str = "RL_HELD_OUT_FRACTION";
const SEED_VARIABLE: &str = "RL_HELD_OUT_SEED";

/// Which of an environment's items a process draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Items {
    /// Every item outside the held-out slice: a training run's.
    Training,
    /// The held-out slice (or the environment's eval split), each item once: `rl compare`'s.
    HeldOut,
}

/// The variables that tell [`ENV_RUNNER`] which items to draw: those whose seeded content hash
/// falls below the slice's fraction are the held-out ones.
pub fn items_variables(items: Items, slice: HeldOut) -> Vec<(String, String)> {
    let items = match items {
        Items::Training => "training",
        Items::HeldOut => "held-out",
    };
    vec![
        (ITEMS_VARIABLE.to_owned(), items.to_owned()),
        (FRACTION_VARIABLE.to_owned(), slice.fraction.to_string()),
        (SEED_VARIABLE.to_owned(), slice.seed.to_string()),
    ]
}

/// Whether a Python command's arguments run [`ENV_RUNNER`] (`-m rl_env`), which alone keeps
/// a slice of an environment's items out.
pub fn runs_env_runner(args: &[String]) -> bool {
    args.windows(2)
        .any(|pair| pair[0] == "-m" && pair[1] == ENV_RUNNER)
}

/// The slice a command kept out of its items: `Some` when it runs [`ENV_RUNNER`] drawing
/// training items with a slice of more than nothing. How the slice of a run is found when its
/// launch record is older than the slice recorded in it.
pub fn held_out_in_command(args: &[String], env: &[(String, String)]) -> Option<HeldOut> {
    let runs_runner = runs_env_runner(args);
    let value = |name: &str| {
        env.iter()
            .rev()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    };
    if !runs_runner || value(ITEMS_VARIABLE) != Some("training") {
        return None;
    }
    let slice = HeldOut {
        fraction: value(FRACTION_VARIABLE)?.parse().ok()?,
        seed: value(SEED_VARIABLE)?.parse().ok()?,
    };
    slice.keeps_out().then_some(slice)
}

/// One exact pin of a requirements file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pin {
    pub name: &'static str,
    pub version: &'static str,
}

/// The `name==version` lines of a requirements file; comments, blank lines and options are
/// not pins.
pub fn pins(requirements: &'static str) -> Vec<Pin> {
    requirements
        .lines()
        .map(|line| line.split('#').next().unwrap_or_default().trim())
        .filter_map(|line| line.split_once("=="))
        .map(|(name, version)| Pin {
            name: name.trim(),
            version: version.trim(),
        })
        .collect()
}

/// Writes the programs into `<home>/python/<digest>/` unless they are there already, and
/// returns that folder: what a run's `PYTHONPATH` names. The folder is complete or absent
/// (written beside it, then renamed), so two runs starting at once never see half of it, and
/// a folder of another build of rl is never overwritten under a run that uses it.
pub fn install(home: &Path) -> Result<PathBuf, PythonError> {
    let files = program_files();
    let parent = home.join(INSTALL_DIR);
    let target = parent.join(format!("{:016x}", digest(&files)));
    if target.is_dir() {
        return Ok(target);
    }
    let io = |action, path: &Path| {
        let path = path.to_path_buf();
        move |source| PythonError::Io {
            action,
            path,
            source,
        }
    };
    std::fs::create_dir_all(&parent).map_err(io("create", &parent))?;
    let staging = parent.join(format!(
        ".staging-{}-{:x}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.subsec_nanos())
    ));
    let written = files.iter().try_for_each(|(path, contents)| {
        let destination = staging.join(path);
        if let Some(folder) = destination.parent() {
            std::fs::create_dir_all(folder).map_err(io("create", folder))?;
        }
        let mut file = std::fs::File::create(&destination).map_err(io("create", &destination))?;
        file.write_all(contents).map_err(io("write", &destination))
    });
    if let Err(error) = written {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(error);
    }
    match std::fs::rename(&staging, &target) {
        Ok(()) => Ok(target),
        // Another run installed the same programs first: theirs are identical.
        Err(_) if target.is_dir() => {
            let _ = std::fs::remove_dir_all(&staging);
            Ok(target)
        }
        Err(source) => {
            let _ = std::fs::remove_dir_all(&staging);
            Err(PythonError::Io {
                action: "install",
                path: target,
                source,
            })
        }
    }
}

/// The embedded files of [`PACKAGES`], without Python's byte-code caches, sorted by path.
/// The trainer's contract (rl-settings' `trainer` table), generated beside the packages.
const CONTRACT_FILE: &str = "contract.json";

fn program_files() -> Vec<(PathBuf, &'static [u8])> {
    fn walk(dir: &'static Dir<'static>, out: &mut Vec<(PathBuf, &'static [u8])>) {
        for entry in dir.entries() {
            match entry {
                DirEntry::Dir(sub) => {
                    if sub.path().file_name().is_some_and(|n| n != "__pycache__") {
                        walk(sub, out);
                    }
                }
                DirEntry::File(file) => {
                    if file.path().extension().is_some_and(|e| e == "py") {
                        out.push((file.path().to_path_buf(), file.contents()));
                    }
                }
            }
        }
    }
    let mut files = Vec::new();
    for package in PACKAGES {
        if let Some(dir) = PROGRAMS.get_dir(package) {
            walk(dir, &mut files);
        }
    }
    // Beside the packages: what every one of them reads of rl's (defaults, bounds, names).
    if let Some(contract) = PROGRAMS.get_file(CONTRACT_FILE) {
        files.push((contract.path().to_path_buf(), contract.contents()));
    }
    files.sort_by(|a, b| a.0.cmp(&b.0));
    files
}

/// A name that changes whenever a program does: FNV-1a over every path and content.
fn digest(files: &[(PathBuf, &[u8])]) -> u64 {
    files.iter().fold(FNV_OFFSET, |hash, (path, contents)| {
        let hash = fnv1a(hash, path.to_string_lossy().as_bytes());
        let hash = fnv1a(hash, &[0]);
        let hash = fnv1a(hash, &(contents.len() as u64).to_le_bytes());
        fnv1a(hash, contents)
    })
}

/// FNV-1a's starting value.
pub const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a of `bytes`, continuing from `hash` ([`FNV_OFFSET`] to start): a cheap fingerprint
/// of files whose change must be noticed (no adversary to resist).
pub fn fnv1a(hash: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(hash, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_pythons_pin_the_sdk_rl_is_written_for() {
        for requirements in [TRAINER_REQUIREMENTS, ENGINE_REQUIREMENTS] {
            let sdk: Vec<Pin> = pins(requirements)
                .into_iter()
                .filter(|pin| pin.name == SDK.name)
                .collect();
            assert_eq!(sdk, [SDK], "{requirements}");
        }
    }

    #[test]
    fn a_command_keeps_a_slice_out_only_through_the_runner_drawing_training_items() {
        let slice = HeldOut {
            fraction: 0.25,
            seed: 7,
        };
        let runner: Vec<String> = ["-m", "rl_env", "env.py", "serve"]
            .map(String::from)
            .to_vec();
        let training = items_variables(Items::Training, slice);
        assert_eq!(held_out_in_command(&runner, &training), Some(slice));
        let plain: Vec<String> = ["env.py", "serve"].map(String::from).to_vec();
        assert_eq!(held_out_in_command(&plain, &training), None);
        assert_eq!(
            held_out_in_command(&runner, &items_variables(Items::HeldOut, slice)),
            None
        );
        let nothing = HeldOut {
            fraction: 0.0,
            seed: 7,
        };
        assert_eq!(
            held_out_in_command(&runner, &items_variables(Items::Training, nothing)),
            None
        );
    }

    #[test]
    fn pins_are_read_from_requirement_lines() {
        let pins =
            pins("# header\n\ntinker==0.16.1  # the SDK\n--no-deps\nnumpy == 2.4.6\nloose>=1\n");
        assert_eq!(
            pins,
            vec![
                Pin {
                    name: "tinker",
                    version: "0.16.1"
                },
                Pin {
                    name: "numpy",
                    version: "2.4.6"
                }
            ]
        );
    }

    #[test]
    fn the_shipped_requirements_pin_the_sdk_and_the_engine() {
        assert!(
            pins(TRAINER_REQUIREMENTS)
                .iter()
                .any(|pin| pin.name == "tinker"),
            "the trainer's requirements pin the tinker SDK"
        );
        assert!(
            pins(ENGINE_REQUIREMENTS)
                .iter()
                .any(|pin| pin.name == "jax"),
            "the engine's requirements pin CPU JAX"
        );
        for pin in pins(ENGINE_REQUIREMENTS) {
            let lower = pin.name.to_ascii_lowercase();
            assert!(
                !(lower.starts_with("torch")
                    || lower.starts_with("nvidia")
                    || lower.contains("cuda")),
                "no CUDA or torch wheel on a CPU engine: {}",
                pin.name
            );
        }
    }
}
