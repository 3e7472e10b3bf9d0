//! Where `rl` finds its state and settings, with the command line's overrides applied.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use rl_config::ConfigError;
use rl_inference_test::LocalModelRunner;
use rl_process::SupervisorCommand;
use rl_settings::{Secrets, Settings, SettingsError};
use rl_tools::{Registry, ToolContext, Tools};

use crate::output;

/// mimalloc's option for a long-lived process, as an environment variable.
const LEAN_ALLOCATOR: (&str, &str) = ("MIMALLOC_ARENA_EAGER_COMMIT", "0");

pub(crate) struct Context {
    home: Option<PathBuf>,
    root: Option<PathBuf>,
    envs_dir: Option<PathBuf>,
    /// Built once per command: settings and keys read (and their warnings shown) once.
    tools: std::cell::OnceCell<Tools>,
}

impl Context {
    pub(crate) fn new(
        home: Option<PathBuf>,
        root: Option<PathBuf>,
        envs_dir: Option<PathBuf>,
    ) -> Self {
        Self {
            home,
            root,
            envs_dir,
            tools: std::cell::OnceCell::new(),
        }
    }

    /// Always absolute: run configs and logs under it are handed to processes with other
    /// working directories.
    pub(crate) fn home(&self) -> anyhow::Result<PathBuf> {
        let home = match &self.home {
            Some(home) => home.clone(),
            None => rl_settings::default_home(&process_environment())
                .context("no state directory: set RL_HOME or HOME, or pass --home")?,
        };
        let home = std::path::absolute(&home)
            .with_context(|| format!("state directory {}", home.display()))?;
        // A file there would surface later as an OS error about some file inside it.
        if home.exists() && !home.is_dir() {
            anyhow::bail!(
                "the state directory {} (--home, RL_HOME) is not a directory; name a directory \
                 (it is created when missing)",
                home.display()
            );
        }
        Ok(home)
    }

    /// Keys from the environment and `<home>/.env`; problems reading them are shown, never values.
    pub(crate) fn secrets(&self) -> anyhow::Result<Secrets> {
        let secrets = Secrets::load(&self.home()?, &process_environment());
        for warning in &secrets.warnings {
            output::warning(warning);
        }
        Ok(secrets)
    }

    /// Operator settings, then `--root` / `--envs-dir`; with no tree configured anywhere, the
    /// current folder is taken as the tinker-atropos tree.
    fn settings(&self, home: &Path) -> Result<Settings, ConfigError> {
        let mut settings = rl_config::load_settings(home, std::env::vars())?;
        if let Some(root) = &self.root {
            settings.tinker_atropos_root = Some(root.clone());
            settings.environments_dir = None;
        }
        if let Some(dir) = &self.envs_dir {
            settings.environments_dir = Some(dir.clone());
        }
        if settings.tinker_atropos_root.is_none() && settings.environments_dir.is_none() {
            settings.tinker_atropos_root = Some(PathBuf::from("."));
        }
        Ok(settings)
    }

    /// The operations every face shares, with this command line's state and settings.
    pub(crate) fn tools(&self) -> anyhow::Result<Tools> {
        if let Some(tools) = self.tools.get() {
            return Ok(tools.clone());
        }
        let home = self.home()?;
        // Kept as the reason, not as an error of this command: only the tools that need the
        // settings fail for it (`rl runs stop` works with a broken config.toml).
        let settings = self.settings(&home).map_err(|error| match error {
            ConfigError::Settings(SettingsError::Invalid(reason)) => reason,
            other => other.to_string(),
        });
        let tools = Tools::new(ToolContext {
            home,
            settings,
            secrets: self.secrets()?,
            environment: process_environment(),
            supervisor: SupervisorCommand {
                program: std::env::current_exe().context("cannot find the rl executable")?,
                args: vec!["supervise".to_owned()],
                // mimalloc commits its first arena eagerly, and with transparent huge pages
                // (`madvise`) each page it touches there is 2 MiB: 6 MiB resident for a few
                // hundred KiB of heap. A supervisor lives as long as its run, one per run; the
                // short-lived commands are left with mimalloc's defaults.
                // An operator's own setting stands. The components inherit the variable; Python
                // does not read it.
                env: std::env::var_os(LEAN_ALLOCATOR.0)
                    .is_none()
                    .then(|| (LEAN_ALLOCATOR.0.to_owned(), LEAN_ALLOCATOR.1.to_owned()))
                    .into_iter()
                    .collect(),
            },
        });
        Ok(self.tools.get_or_init(|| tools).clone())
    }

    pub(crate) fn registry(&self) -> anyhow::Result<Registry> {
        Ok(Registry::new(self.tools()?))
    }
}

/// A runtime for one command's async work (metrics, pre-flight, tool calls).
pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

pub(crate) fn process_environment() -> BTreeMap<String, String> {
    std::env::vars().collect()
}

/// Ctrl-C, a terminal closing, or a stop request. A terminal closing counts only when SIGHUP
/// is not ignored: started with `nohup`, the caller asked to outlive its terminal.
///
/// The handlers are installed by this call, not when the future is first polled: once a caller
/// has announced itself (a server's first answer, a "listening" line), a signal must find them
/// in place, or it gets the default action and the process dies without cleaning up. Call it
/// inside a runtime.
pub(crate) fn interrupted() -> impl Future<Output = ()> + Send + 'static {
    use tokio::signal::unix::{Signal, SignalKind, signal};
    let interrupt = signal(SignalKind::interrupt()).ok();
    let terminate = signal(SignalKind::terminate()).ok();
    let hangup = if hangup_ignored() {
        None
    } else {
        signal(SignalKind::hangup()).ok()
    };
    async fn received(stream: Option<Signal>) {
        match stream {
            Some(mut stream) => {
                stream.recv().await;
            }
            // A handler not wanted or not installed never fires; the others still do.
            None => std::future::pending().await,
        }
    }
    async move {
        tokio::select! {
            () = received(interrupt) => {}
            () = received(terminate) => {}
            () = received(hangup) => {}
        }
    }
}

/// Ends, in a thread of its own, what the killed owners of earlier pre-flight tests left (their
/// tests turn `interrupted`): a server that outlives many sessions finds the orphans of a dead
/// one at its start, not when someone next lists or runs a test. The server starts at once
/// meanwhile, and a store that cannot be read is said on stderr, never a reason not to start.
pub(crate) fn end_what_killed_tests_left(tools: &Tools, face: &'static str) {
    let store = tools.test_store();
    let say = move |line: String| {
        let _ = writeln!(std::io::stderr().lock(), "{face}: {line}");
    };
    let looked = std::thread::Builder::new()
        .name("rl-tests-reconcile".to_owned())
        .spawn(move || {
            if let Err(error) = store.list() {
                say(format!(
                    "cannot look for what killed pre-flight tests left in {}: {error}",
                    store.dir().display()
                ));
            }
        });
    if let Err(error) = looked {
        say(format!(
            "cannot look for what killed pre-flight tests left: {error}"
        ));
    }
}

/// Runs `work` to its end unless an interruption comes first. Then the pre-flight models
/// `models` started are stopped — they run in process groups of their own, which a Ctrl-C or a
/// signal to `rl` does not reach — and the answer is `None`.
pub(crate) fn until_interrupted<T>(
    models: &LocalModelRunner,
    work: impl Future<Output = T>,
) -> anyhow::Result<Option<T>> {
    let finished = runtime()?.block_on(async {
        tokio::select! {
            value = work => Some(value),
            () = interrupted() => None,
        }
    });
    if finished.is_none() {
        models.stop_all();
    }
    Ok(finished)
}

/// Whether this process ignores SIGHUP (`SigIgn` in `/proc/self/status`, SIGHUP being bit 0):
/// installing a handler would undo what `nohup` set up.
fn hangup_ignored() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("SigIgn:"))
                .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        })
        .is_some_and(|mask| mask & 1 != 0)
}
