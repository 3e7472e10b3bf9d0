//! The Python virtual environments the test suite, the demo and the bench run against: the
//! test venv (atroposlib, rl's trainer's pins, the test tools) and the local engine's venv
//! (skyrl-tx on CPU JAX), plus the tiny model the engine trains.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, bail};

use crate::{display, run_command};

// The variables that name each test Python to the tests (when one is already set, xtask
// provisions nothing for it): rl-test-support reads them, so it names them.
pub(crate) use rl_test_support::{
    BASE_MODEL_ENV, ENGINE_PYTHON_ENV, PYTHON_ENV, TORCH_PYTHON_ENV, VERIFIERS_V0_ENV,
    VERIFIERS_V1_ENV,
};
/// Every variable above: what `--no-python` takes out of an inherited environment.
const VARIABLES: [&str; 6] = [
    PYTHON_ENV,
    ENGINE_PYTHON_ENV,
    BASE_MODEL_ENV,
    VERIFIERS_V1_ENV,
    VERIFIERS_V0_ENV,
    TORCH_PYTHON_ENV,
];
const TINY_MODEL_SCRIPT: &str = "fixtures/tiny-model/make_tiny_model.py";
const TOKENIZER_DIR: &str = "fixtures/tokenizer";

const REQUIREMENTS: &str = "xtask/python/test-requirements.txt";
const TRAINER_REQUIREMENTS: &str = "crates/rl-python/requirements/trainer.txt";
const TORCH_REQUIREMENTS: &str = "xtask/python/transformers-requirements.txt";
/// Inside the venv, so deleting the venv (or `cargo clean`) also forgets what it holds.
const STAMP: &str = ".rl-requirements";
const MIN_PYTHON: (u32, u32) = (3, 11);

/// Every Python the tests run against, provisioned.
pub(crate) struct TestPythons {
    test: PathBuf,
    engine: LocalEngine,
    verifiers: VerifiersPythons,
    torch: PathBuf,
}

impl TestPythons {
    /// Makes (or finds current) each of them, the largest download first: `cargo xtask venvs`
    /// runs this beside the demo in CI, which makes the test venv and the engine's itself.
    pub(crate) fn ensure(root: &Path) -> anyhow::Result<Self> {
        let torch = ensure_torch(root)?;
        let verifiers = ensure_verifiers(root)?;
        Ok(Self {
            test: ensure_test_venv(root)?,
            engine: ensure_local_engine(root)?,
            verifiers,
            torch,
        })
    }

    /// Names each of them to `command` (the test runner) in its variable.
    pub(crate) fn name_to(&self, command: &mut Command) {
        let values: [&Path; 6] = [
            &self.test,
            &self.engine.python,
            &self.engine.base_model,
            &self.verifiers.v1,
            &self.verifiers.v0,
            &self.torch,
        ];
        for (variable, value) in VARIABLES.into_iter().zip(values) {
            command.env(variable, value);
        }
    }
}

/// Lets the Pythons started under `command` cache their bytecode, whatever this machine says
/// (CI's image sets `PYTHONDONTWRITEBYTECODE=1`), in `target/pycache` (`PYTHONPYCACHEPREFIX`)
/// rather than beside the sources: cargo watches `crates/rl-python/python`, and the fixtures
/// stay as committed. verifiers v1 runs each rollout's harness in a uv script environment that
/// uv installs without bytecode: with the variable set, every rollout compiled openai, mcp and
/// httpx anew, a third of a verifiers test's CPU (measured in `docs/decisions.md`). Caching
/// bytecode changes what Python runs in nothing.
///
/// And rl's installs (`rl setup`) do not compile (`UV_COMPILE_BYTECODE=0`): a test's home is
/// used once, so compiling every installed module (about 27 CPU-seconds a venv) would pay for
/// the many it never imports. The test venvs are made here with `--compile-bytecode` all the
/// same.
pub(crate) fn let_python_cache_bytecode(root: &Path, command: &mut Command) {
    command
        .env_remove("PYTHONDONTWRITEBYTECODE")
        .env("PYTHONPYCACHEPREFIX", root.join("target").join("pycache"))
        .env(rl_python::UV_COMPILE_BYTECODE, "0");
}

/// Takes every test Python's variable out of `command`'s environment: an inherited one would
/// bring the Python tests back despite `--no-python`.
pub(crate) fn unname(command: &mut Command) {
    for variable in VARIABLES {
        command.env_remove(variable);
    }
}

/// `fixtures/local-stack.toml` filled in for this checkout and `python`: the operator settings
/// of the local stack, as the demo and the bench write them into their state directory.
pub(crate) fn local_stack_settings(root: &Path, python: &Path) -> anyhow::Result<String> {
    filled(root, "fixtures/local-stack.toml", python, &[])
}

/// The settings template `file` with the checkout, `python` and `more` filled in.
fn filled(
    root: &Path,
    file: &str,
    python: &Path,
    more: &[(&str, &Path)],
) -> anyhow::Result<String> {
    let path = root.join(file);
    let mut text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?
        .replace("@REPO@", &root.display().to_string())
        .replace("@PYTHON@", &python.display().to_string());
    for (placeholder, value) in more {
        text = text.replace(placeholder, &value.display().to_string());
    }
    Ok(text)
}

/// The local engine's interpreter and the model it trains.
pub(crate) struct LocalEngine {
    pub(crate) python: PathBuf,
    pub(crate) base_model: PathBuf,
}

/// `fixtures/local-engine.toml` filled in: the operator settings of real training on the
/// local engine (rl's trainer, skyrl-tx, the tiny model, the digits environment).
pub(crate) fn local_engine_settings(
    root: &Path,
    python: &Path,
    engine: &LocalEngine,
) -> anyhow::Result<String> {
    filled(
        root,
        "fixtures/local-engine.toml",
        python,
        &[
            ("@ENGINE_PYTHON@", &engine.python),
            ("@BASE_MODEL@", &engine.base_model),
        ],
    )
}

/// The engine's venv (`target/engine-venv`: skyrl-tx without its CUDA-pinning dependencies,
/// then `crates/rl-python/requirements/engine.txt`) and the tiny model (`target/tiny-model`,
/// random weights and the fixture tokenizer: no hub), each made when missing or outdated.
pub(crate) fn ensure_local_engine(root: &Path) -> anyhow::Result<LocalEngine> {
    let python = match std::env::var_os(ENGINE_PYTHON_ENV).map(PathBuf::from) {
        Some(python) if python.is_file() => python,
        _ => {
            let package = rl_python::ENGINE_PACKAGE;
            let pinned = format!("{}=={}", package.name, package.version);
            let requirements = root.join("crates/rl-python/requirements/engine.txt");
            let stamp = format!(
                "{pinned}\n{}",
                std::fs::read_to_string(&requirements)
                    .with_context(|| format!("cannot read {}", requirements.display()))?
            );
            ensure_venv(
                &root.join("target").join("engine-venv"),
                &stamp,
                "the local engine (skyrl-tx, CPU JAX), about two minutes",
                &[
                    &["install", "--no-deps", &pinned],
                    &["install", "-r", &requirements.to_string_lossy()],
                ],
            )?
        }
    };
    let base_model = match std::env::var_os(BASE_MODEL_ENV).map(PathBuf::from) {
        Some(model) if model.is_dir() => model,
        _ => ensure_tiny_model(root, &python)?,
    };
    Ok(LocalEngine { python, base_model })
}

/// `target/tiny-model`, remade whenever its script or the tokenizer it copies changes.
fn ensure_tiny_model(root: &Path, python: &Path) -> anyhow::Result<PathBuf> {
    let model = root.join("target").join("tiny-model");
    locked(&model, || make_tiny_model(root, python, &model))?;
    Ok(model)
}

fn make_tiny_model(root: &Path, python: &Path, model: &Path) -> anyhow::Result<()> {
    let mut inputs = vec![root.join(TINY_MODEL_SCRIPT)];
    for entry in std::fs::read_dir(root.join(TOKENIZER_DIR))? {
        inputs.push(entry?.path());
    }
    inputs.sort();
    let mut stamp = String::new();
    for input in &inputs {
        let bytes =
            std::fs::read(input).with_context(|| format!("cannot read {}", input.display()))?;
        stamp.push_str(&format!(
            "{} {}\n",
            input.display(),
            rl_python::fnv1a(rl_python::FNV_OFFSET, &bytes)
        ));
    }
    let stamp_path = model.join(".rl-inputs");
    if std::fs::read_to_string(&stamp_path).is_ok_and(|made| made == stamp) {
        return Ok(());
    }
    run_command(
        Command::new(python)
            .arg(root.join(TINY_MODEL_SCRIPT))
            .arg(model),
    )
    .context("making the tiny model failed")?;
    std::fs::write(&stamp_path, stamp)
        .with_context(|| format!("cannot write {}", stamp_path.display()))
}

/// Runs `make` holding `folder`'s lock (`FOLDER.lock` beside it, exclusive, released when
/// `make` returns): CI runs `cargo xtask venvs` beside the demo, and both may make one folder.
fn locked<T>(folder: &Path, make: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<T> {
    let lock_path = folder.with_extension("lock");
    if let Some(parent) = lock_path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .with_context(|| format!("cannot open {}", lock_path.display()))?;
    lock.lock()
        .with_context(|| format!("cannot lock {}", lock_path.display()))?;
    make()
}

/// The Pythons of verifiers environments: `target/vf1-venv` (verifiers 0.4.0, its v1 API) and
/// `target/vf0-venv` (verifiers 0.3.1, its legacy API), each made from its pins in
/// `crates/rl-python/requirements/` when missing or outdated: what `rl setup --env` installs
/// into an environment's own venv.
pub(crate) struct VerifiersPythons {
    pub(crate) v1: PathBuf,
    pub(crate) v0: PathBuf,
}

pub(crate) fn ensure_verifiers(root: &Path) -> anyhow::Result<VerifiersPythons> {
    let one = |variable: &str, venv: &str, pins: &str| {
        pinned_venv(
            root,
            variable,
            venv,
            &root.join("crates/rl-python/requirements").join(pins),
            &format!("a verifiers environment's Python ({pins}), a minute or two"),
        )
    };
    Ok(VerifiersPythons {
        v1: one(VERIFIERS_V1_ENV, "vf1-venv", "verifiers-v1.txt")?,
        v0: one(VERIFIERS_V0_ENV, "vf0-venv", "verifiers-v0.txt")?,
    })
}

/// `target/torch-venv`: torch and transformers (`xtask/python/transformers-requirements.txt`),
/// for the one test that loads a merged export as a user of it would.
fn ensure_torch(root: &Path) -> anyhow::Result<PathBuf> {
    pinned_venv(
        root,
        TORCH_PYTHON_ENV,
        "torch-venv",
        &root.join(TORCH_REQUIREMENTS),
        "torch and transformers for the merged export's check (about 2.9 GB to download)",
    )
}

/// The Python `variable` names when it is a file, else `target/VENV` made from one pinned
/// requirements file (its text the stamp).
fn pinned_venv(
    root: &Path,
    variable: &str,
    venv: &str,
    requirements: &Path,
    what: &str,
) -> anyhow::Result<PathBuf> {
    if let Some(python) = std::env::var_os(variable).map(PathBuf::from)
        && python.is_file()
    {
        return Ok(python);
    }
    let stamp = std::fs::read_to_string(requirements)
        .with_context(|| format!("cannot read {}", requirements.display()))?;
    ensure_venv(
        &root.join("target").join(venv),
        &stamp,
        what,
        &[&["install", "-r", &requirements.to_string_lossy()]],
    )
}

/// Returns the python executable of a venv holding the test requirements (the test tools and
/// rl's trainer's pins), creating or refreshing `target/python-venv` when it is missing or was
/// built from other requirements.
pub(crate) fn ensure_test_venv(root: &Path) -> anyhow::Result<PathBuf> {
    if let Some(python) = std::env::var_os(PYTHON_ENV).map(PathBuf::from) {
        if python.is_file() {
            check_version(&python)?;
            return Ok(python);
        }
        eprintln!(
            "xtask: {PYTHON_ENV}={} is not a file; provisioning the test venv instead",
            python.display()
        );
    }

    let requirements_path = root.join(REQUIREMENTS);
    let trainer_path = root.join(TRAINER_REQUIREMENTS);
    let mut stamp = String::new();
    for path in [&requirements_path, &trainer_path] {
        stamp.push_str(
            &std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?,
        );
    }
    ensure_venv(
        &root.join("target").join("python-venv"),
        &stamp,
        "the test venv (atroposlib 0.4.0, rl's trainer's pins), about two minutes",
        &[&[
            "install",
            "-r",
            &requirements_path.to_string_lossy(),
            "-r",
            &trainer_path.to_string_lossy(),
        ]],
    )
}

/// The python of the venv at `venv`, (re)built with each of `installs` (pip's arguments)
/// unless it was built from the same `stamp` (the requirements' text) already. uv makes it
/// (rl's own, as `rl setup` installs it: `target/uv-venv`), else `venv` + `pip` when uv cannot
/// be installed.
fn ensure_venv(
    venv: &Path,
    stamp: &str,
    what: &str,
    installs: &[&[&str]],
) -> anyhow::Result<PathBuf> {
    locked(venv, || make_venv(venv, stamp, what, installs))
}

fn make_venv(
    venv: &Path,
    stamp: &str,
    what: &str,
    installs: &[&[&str]],
) -> anyhow::Result<PathBuf> {
    let python = venv_python(venv);
    let stamp_path = venv.join(STAMP);
    let up_to_date = python.is_file()
        && std::fs::read_to_string(&stamp_path).is_ok_and(|installed| installed == stamp);
    if up_to_date {
        return Ok(python);
    }
    eprintln!("xtask: provisioning {what}…");
    let started = Instant::now();
    check_version(Path::new("python3"))?;
    // A half-built or outdated venv can hold packages the new requirements no longer want.
    if venv.exists() {
        std::fs::remove_dir_all(venv)
            .with_context(|| format!("cannot remove the stale venv {}", venv.display()))?;
    }
    let uv = venv.parent().and_then(|target| {
        let log = target.join("uv-install.log");
        let uv_venv = target.join("uv-venv");
        locked(&uv_venv, || {
            rl_python::own_uv(&uv_venv, &log, &|| {
                eprintln!(
                    "xtask: installing uv {} into target/uv-venv",
                    rl_python::UV.version
                );
            })
            .map_err(anyhow::Error::from)
        })
        .inspect_err(|error| eprintln!("xtask: uv could not be installed ({error:#}): using pip"))
        .ok()
    });
    match &uv {
        Some(uv) => run_command(
            Command::new(uv)
                .args(["venv", "--seed", "--quiet", "--python", "python3"])
                .arg(venv),
        ),
        None => run_command(Command::new("python3").arg("-m").arg("venv").arg(venv)),
    }
    .with_context(|| format!("creating {} failed", venv.display()))?;
    for install in installs {
        // pip's arguments start with its subcommand (`install`), which uv's `--python` follows.
        let (subcommand, rest) = install
            .split_first()
            .context("an install without arguments")?;
        let mut command = if let Some(uv) = &uv {
            let mut command = Command::new(uv);
            command
                .args([
                    "pip",
                    "--quiet",
                    subcommand,
                    "--compile-bytecode",
                    "--python",
                ])
                .arg(&python);
            command
        } else {
            let mut command = Command::new(&python);
            command.args([
                "-m",
                "pip",
                "--disable-pip-version-check",
                "--quiet",
                subcommand,
            ]);
            command
        };
        run_command(command.args(rest))
            .with_context(|| format!("installing into {} failed", venv.display()))?;
    }
    // Written last: an interrupted install leaves no stamp and is redone next time.
    std::fs::write(&stamp_path, stamp)
        .with_context(|| format!("cannot write {}", stamp_path.display()))?;
    eprintln!(
        "xtask: {} ready in {:.0?}",
        venv.display(),
        started.elapsed()
    );
    Ok(python)
}

fn venv_python(venv: &Path) -> PathBuf {
    if cfg!(windows) {
        venv.join("Scripts").join("python.exe")
    } else {
        venv.join("bin").join("python")
    }
}

/// atroposlib 0.4.0 needs Python 3.11; an older one would fail deep inside pip or the tests.
fn check_version(python: &Path) -> anyhow::Result<()> {
    let mut command = Command::new(python);
    command.args(["-c", "import sys; print('%d.%d' % sys.version_info[:2])"]);
    let output = command
        .output()
        .with_context(|| format!("cannot start {} to check its version", python.display()))?;
    if !output.status.success() {
        bail!(
            "`{}` failed ({}): {}",
            display(&command),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let version = text
        .trim()
        .split_once('.')
        .and_then(|(major, minor)| Some((major.parse::<u32>().ok()?, minor.parse::<u32>().ok()?)))
        .with_context(|| format!("cannot read the version of {}: {text:?}", python.display()))?;
    if version < MIN_PYTHON {
        bail!(
            "{} is Python {}.{}; the test venv needs Python >= {}.{}",
            python.display(),
            version.0,
            version.1,
            MIN_PYTHON.0,
            MIN_PYTHON.1
        );
    }
    Ok(())
}
