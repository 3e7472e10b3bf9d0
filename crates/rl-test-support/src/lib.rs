//! Helpers for the integration tests of every crate (a dev-dependency only; nothing ships it).

mod hostile;
mod snapshot;
mod tinker;

pub use hostile::{GOOD_ENVIRONMENT, deeply_nested_sources};
pub use snapshot::{scrub_strings, without_stamps};
pub use tinker::{EngineServer, ServiceOptions, TinkerService, sha256_hex};

use std::path::{Path, PathBuf};

/// `(name, value)` pairs as an environment to hand to a loader.
pub fn variables(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect()
}

/// The environment variable `cargo xtask test` sets to the test venv's Python.
pub const PYTHON_ENV: &str = "RL_TEST_PYTHON";

/// The workspace root, from this crate's own location in `crates/`.
///
/// # Panics
/// When the workspace is not where it was built (the tests cannot run then anyway).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace root exists")
}

/// The Python of the test venv (atroposlib, wandb, …), provided by `cargo xtask test` as
/// `RL_TEST_PYTHON`.
///
/// The tests that call it are `#[ignore]`d with the reason, so a plain `cargo test` lists them
/// as ignored instead of passing them unrun; `cargo xtask test` runs them once the venv exists.
///
/// # Panics
/// When `RL_TEST_PYTHON` is not set: a test that asked for it cannot check anything without it.
pub fn test_python() -> PathBuf {
    provided(PYTHON_ENV, "the test venv")
}

/// The environment variable `cargo xtask test` sets to `target/torch-venv`'s Python.
pub const TORCH_PYTHON_ENV: &str = "RL_TEST_TORCH_PYTHON";

/// The Python that has torch and transformers (`target/torch-venv`), for loading a merged
/// export as its user would; provided by `cargo xtask test` as `RL_TEST_TORCH_PYTHON`.
///
/// # Panics
/// When `RL_TEST_TORCH_PYTHON` is not set, like [`test_python`].
pub fn torch_python() -> PathBuf {
    provided(
        TORCH_PYTHON_ENV,
        "torch and transformers (target/torch-venv)",
    )
}

/// The interpreter (or folder) `variable` names, which `cargo xtask test` provides.
fn provided(variable: &str, what: &str) -> PathBuf {
    match std::env::var_os(variable).map(PathBuf::from) {
        Some(python) if python.exists() => python,
        _ => panic!(
            "{variable} is not set (or names nothing): this test needs {what}; run it through \
             `cargo xtask test`"
        ),
    }
}

/// Where `python` installs pure-Python packages (its `purelib`): what a venv's `.pth` file
/// points another venv at.
///
/// # Panics
/// When `python` cannot say.
pub fn purelib(python: &Path) -> PathBuf {
    let output = std::process::Command::new(python)
        .args([
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])",
        ])
        .output()
        .unwrap_or_else(|error| panic!("{}: {error}", python.display()));
    assert!(output.status.success(), "{output:?}");
    PathBuf::from(String::from_utf8_lossy(&output.stdout).trim())
}

/// A venv at `venv` that sees the test venv's packages (atroposlib, the trainer's pins) through
/// a `.pth` file, so that what is installed into it stays its own; its Python.
///
/// # Panics
/// When the venv cannot be made.
pub fn venv_over_the_test_venv(venv: &Path) -> PathBuf {
    let made = std::process::Command::new(test_python())
        .args(["-m", "venv"])
        .arg(venv)
        .output()
        .unwrap_or_else(|error| panic!("python -m venv: {error}"));
    assert!(made.status.success(), "{made:?}");
    let python = venv.join("bin/python");
    std::fs::write(
        purelib(&python).join("rl-test-venv.pth"),
        format!("{}\n", purelib(&test_python()).display()),
    )
    .unwrap_or_else(|error| panic!("{}: {error}", venv.display()));
    python
}

/// The local engine `cargo xtask test` provisions: its Python (skyrl-tx) and the tiny model.
#[derive(Debug, Clone)]
pub struct LocalEngine {
    pub python: PathBuf,
    pub base_model: PathBuf,
}

/// The environment variables `cargo xtask test` sets to the local engine's Python and the
/// tiny model's folder.
pub const ENGINE_PYTHON_ENV: &str = "RL_TEST_ENGINE_PYTHON";
pub const BASE_MODEL_ENV: &str = "RL_TEST_BASE_MODEL";
/// The environment variables `cargo xtask test` sets to the verifiers environments' Pythons.
pub const VERIFIERS_V1_ENV: &str = "RL_TEST_VERIFIERS_V1_PYTHON";
pub const VERIFIERS_V0_ENV: &str = "RL_TEST_VERIFIERS_V0_PYTHON";

/// The local engine from `RL_TEST_ENGINE_PYTHON` and `RL_TEST_BASE_MODEL`, like
/// [`test_python`].
///
/// # Panics
/// When either is missing.
pub fn local_engine() -> LocalEngine {
    LocalEngine {
        python: provided(ENGINE_PYTHON_ENV, "the local engine's Python"),
        base_model: provided(BASE_MODEL_ENV, "the tiny model's folder"),
    }
}

impl LocalEngine {
    /// This engine with the tiny model wearing a chat template that renders tools
    /// (`fixtures/tokenizer/tools_chat_template.jinja`): its weights and tokenizer linked from
    /// the tiny model's folder, its `tokenizer_config.json` with that template. Made once, in a
    /// folder beside the tiny model's (another test making it at once is harmless: the folder
    /// appears whole, by a rename).
    ///
    /// # Panics
    /// When the tiny model or the template cannot be read, or the folder cannot be made.
    pub fn with_tool_template(&self) -> LocalEngine {
        let model = &self.base_model;
        let name = model.file_name().map_or_else(
            || "tiny-model".to_owned(),
            |name| name.to_string_lossy().into_owned(),
        );
        let made = model.with_file_name(format!("{name}-tools"));
        if !made.is_dir() {
            let staging = tempfile::tempdir_in(model.parent().unwrap_or(model))
                .unwrap_or_else(|error| panic!("beside {}: {error}", model.display()));
            let entries = std::fs::read_dir(model)
                .unwrap_or_else(|error| panic!("{}: {error}", model.display()));
            for entry in entries.flatten() {
                let from = entry.path();
                let to = staging.path().join(entry.file_name());
                if entry.file_name() == "tokenizer_config.json" {
                    let text = std::fs::read_to_string(&from)
                        .unwrap_or_else(|error| panic!("{}: {error}", from.display()));
                    let mut config: serde_json::Value = serde_json::from_str(&text)
                        .unwrap_or_else(|error| panic!("{}: {error}", from.display()));
                    let template =
                        workspace_root().join("fixtures/tokenizer/tools_chat_template.jinja");
                    config["chat_template"] = std::fs::read_to_string(&template)
                        .unwrap_or_else(|error| panic!("{}: {error}", template.display()))
                        .into();
                    std::fs::write(&to, config.to_string())
                        .unwrap_or_else(|error| panic!("{}: {error}", to.display()));
                } else {
                    std::os::unix::fs::symlink(&from, &to)
                        .unwrap_or_else(|error| panic!("{}: {error}", to.display()));
                }
            }
            let staged = staging.keep();
            if std::fs::rename(&staged, &made).is_err() {
                // Made meanwhile by another test.
                let _ = std::fs::remove_dir_all(&staged);
            }
        }
        LocalEngine {
            python: self.python.clone(),
            base_model: made,
        }
    }
}

/// The Pythons of verifiers environments, one per API, from `RL_TEST_VERIFIERS_V1_PYTHON` and
/// `RL_TEST_VERIFIERS_V0_PYTHON` (`cargo xtask test` makes them: `target/vf1-venv`,
/// `target/vf0-venv`), like [`test_python`].
///
/// # Panics
/// When either is missing.
pub fn verifiers_pythons() -> VerifiersPythons {
    let what = "a verifiers environment's Python";
    VerifiersPythons {
        v1: provided(VERIFIERS_V1_ENV, what),
        v0: provided(VERIFIERS_V0_ENV, what),
    }
}

/// A verifiers environment's Python for each API.
#[derive(Debug, Clone)]
pub struct VerifiersPythons {
    pub v1: PathBuf,
    pub v0: PathBuf,
}

/// [`local_engine_settings`] for the verifiers fixtures (`fixtures/verifiers/`): that folder as
/// the environments folder and `verifiers`' Pythons as the operator's shared ones.
pub fn verifiers_engine_settings(
    python: &Path,
    engine: &LocalEngine,
    verifiers: &VerifiersPythons,
) -> String {
    let root = workspace_root();
    let settings = local_engine_settings(python, engine).replacen(
        "\n[engine]",
        &format!(
            "environments_dir = \"{}\"\n\n[engine]",
            root.join("fixtures/verifiers").display()
        ),
        1,
    );
    format!(
        "{settings}\n[verifiers]\npython_v1 = \"{}\"\npython_v0 = \"{}\"\n",
        verifiers.v1.display(),
        verifiers.v0.display()
    )
}

/// `fixtures/local-engine.toml` made concrete: real training with rl's trainer on the local
/// engine, for the test venv's Python and `engine`.
///
/// # Panics
/// When the template is missing.
pub fn local_engine_settings(python: &Path, engine: &LocalEngine) -> String {
    with_jax_cache(&filled(
        "fixtures/local-engine.toml",
        python,
        &[
            ("@ENGINE_PYTHON@", &engine.python),
            ("@BASE_MODEL@", &engine.base_model),
        ],
    ))
}

/// Settings whose `[child_environment]` gives every local engine the shared JAX cache
/// ([`jax_cache_environment`]): the tests' and `cargo xtask demo`'s (which runs first in CI, so
/// the tests start with its programs compiled).
pub fn with_jax_cache(settings: &str) -> String {
    let mut table = String::from("[child_environment]\n");
    for (name, value) in jax_cache_environment() {
        table.push_str(&format!("{name} = \"{value}\"\n"));
    }
    settings.replacen("[child_environment]\n", &table, 1)
}

/// JAX's own variables that give a process the tests' shared persistent compilation cache
/// ([`jax_cache_dir`]), for every program however short its compile. JAX writes only programs
/// that took a second or more to compile by default; an engine's start runs some 140 smaller
/// ones (the model and its LoRA slots built op by op, ~35 ms each), compiled again by every
/// engine: 6 CPU-s of an engine's start were 2.5 s with them cached (measured on the tiny model).
pub fn jax_cache_environment() -> [(&'static str, String); 2] {
    [
        (JAX_CACHE_VARIABLE, jax_cache_dir().display().to_string()),
        ("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0".to_owned()),
    ]
}

/// JAX's own variable for its persistent compilation cache.
const JAX_CACHE_VARIABLE: &str = "JAX_COMPILATION_CACHE_DIR";

/// The persistent compilation cache every local engine of the tests shares (`target/jax-cache`).
/// They all compile the same programs (the tiny model at fixed batch shapes), a minute or more
/// each on 2 cores, for every engine a run, a test or a comparison starts; JAX reuses a compiled
/// executable only for the same program, backend and flags, and compiles again when an entry
/// cannot be read. What the tests prove of rl does not depend on how long a compile takes.
pub fn jax_cache_dir() -> PathBuf {
    workspace_root().join("target").join("jax-cache")
}

/// The settings template `file` with the checkout, `python` and `more` filled in.
fn filled(file: &str, python: &Path, more: &[(&str, &Path)]) -> String {
    let root = workspace_root();
    let mut text = std::fs::read_to_string(root.join(file))
        .expect("a settings template of fixtures/")
        .replace("@REPO@", &root.display().to_string())
        .replace("@PYTHON@", &python.display().to_string());
    for (placeholder, value) in more {
        text = text.replace(placeholder, &value.display().to_string());
    }
    text
}

/// `fixtures/local-stack.toml` made concrete: the operator settings of the local stack (real
/// atroposlib, fixture trainer, arithmetic environment) for the test venv's Python.
///
/// # Panics
/// When the template is missing.
pub fn local_stack_settings(python: &Path) -> String {
    filled("fixtures/local-stack.toml", python, &[])
}

/// Every process whose command line mentions `needle`, but this one (to prove none is left).
pub fn processes_mentioning(needle: &str) -> Vec<(u32, String)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(needle) && pid != std::process::id() {
            found.push((pid, cmdline));
        }
    }
    found
}

/// Starts measuring `peak_memory` from now (Linux's `clear_refs` 5). Where that is refused, the
/// peak is the process's whole life's: a bound all the stricter.
pub fn reset_peak_memory() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// The highest resident memory of this process since `reset_peak_memory`, in bytes (`VmHWM`).
/// nextest runs each test in a process of its own: the peak is the test's.
///
/// # Panics
/// When `/proc/self/status` has no `VmHWM` line (not Linux).
pub fn peak_memory() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("a VmHWM line");
    kib * 1024
}

/// Kills, when dropped, every process whose command line holds its marker, with its process
/// group: a failing assertion must not leave a test's sleepers behind, least of all ones
/// started in a session of their own, which nothing else would stop. Put the marker in the
/// command line of every process a test starts.
pub struct KillOnDrop {
    pub marker: String,
}

impl KillOnDrop {
    /// A marker unique to this test process and `name`.
    pub fn new(name: &str) -> Self {
        Self {
            marker: format!("rl-{name}-marker-{}", std::process::id()),
        }
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        use nix::sys::signal::{Signal, kill, killpg};
        use nix::unistd::Pid;
        for (pid, _) in processes_mentioning(&self.marker) {
            let Ok(pid) = i32::try_from(pid) else {
                continue;
            };
            // Its group too: a marked shell's children (`sleep`) do not hold the marker.
            let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}

/// The fixture OpenAI-compatible server (`fixtures/openai-server`) on loopback: its model
/// names are its policies (`always-right`, `mixed`, `slow`, `http-500`, …). Stopped on drop.
pub struct FixtureServer {
    child: std::process::Child,
    pub base_url: String,
    request_log: PathBuf,
    _dir: tempfile::TempDir,
}

impl FixtureServer {
    /// With `required_key_sha256`, the server refuses every other key (HTTP 401).
    ///
    /// # Panics
    /// When the server cannot start or does not say where it listens.
    pub fn start(python: &Path, required_key_sha256: Option<&str>) -> Self {
        Self::serving(python, required_key_sha256, None)
    }

    /// As [`FixtureServer::start`]; with `any_model`, a model name that is none of its
    /// policies is answered with that policy (as an endpoint that serves any checkpoint).
    ///
    /// # Panics
    /// When the server cannot start or does not say where it listens.
    pub fn serving(
        python: &Path,
        required_key_sha256: Option<&str>,
        any_model: Option<&str>,
    ) -> Self {
        Self::serving_on(python, 0, required_key_sha256, any_model)
    }

    /// As [`FixtureServer::serving`], on loopback port `port` (0: any free one): a process
    /// holding a port that something else named, logging what reaches it.
    ///
    /// # Panics
    /// When the server cannot start (the port is taken) or does not say where it listens.
    pub fn serving_on(
        python: &Path,
        port: u16,
        required_key_sha256: Option<&str>,
        any_model: Option<&str>,
    ) -> Self {
        use std::io::BufRead;
        let dir = tempfile::tempdir().expect("a temporary folder");
        let request_log = dir.path().join("requests.jsonl");
        let mut command = std::process::Command::new(python);
        command
            .arg(workspace_root().join("fixtures/openai-server/openai_server.py"))
            .arg("--port")
            .arg(port.to_string())
            .arg("--log")
            .arg(&request_log)
            .stdout(std::process::Stdio::piped());
        if let Some(hash) = required_key_sha256 {
            command.args(["--require-key-sha256", hash]);
        }
        if let Some(policy) = any_model {
            command.args(["--any-model", policy]);
        }
        let mut child = command.spawn().expect("the fixture server starts");
        let mut first = String::new();
        if let Some(stdout) = child.stdout.take() {
            let _ = std::io::BufReader::new(stdout).read_line(&mut first);
        }
        let base_url = first
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("the fixture server said {first:?}"))
            .to_owned();
        Self {
            child,
            base_url,
            request_log,
            _dir: dir,
        }
    }

    /// The requests it received, one JSON object each (model, n, status, auth_sha256, …).
    pub fn requests(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(&self.request_log)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }
}

impl Drop for FixtureServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
