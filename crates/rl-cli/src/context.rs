//! Where `rl` finds its state and settings, with the command line's overrides applied.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::PathBuf;

use anyhow::Context as _;
use rl_tools::{EvaluateCommand, Registry, SupervisorCommand, ToolContext, Tools, TreeOverride};

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
    /// `--root` (or `RL_TINKER_ATROPOS_ROOT`) as given.
    pub(crate) fn root_override(&self) -> Option<&PathBuf> {
        self.root.as_ref()
    }

    /// `--envs-dir` (or `RL_ENVIRONMENTS_DIR`) as given.
    pub(crate) fn envs_dir_override(&self) -> Option<&PathBuf> {
        self.envs_dir.as_ref()
    }

    pub(crate) fn home(&self) -> anyhow::Result<PathBuf> {
        let home = match &self.home {
            Some(home) => home.clone(),
            None => rl_tools::default_home(&process_environment())
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

    /// Gives each running sweep whose driver is gone (killed, or the machine restarted) a new
    /// one. Quiet and harmless where there is no store yet; a failure is a warning, never the
    /// command's.
    pub(crate) fn resume_sweeps(&self) {
        let Ok(home) = self.home() else {
            return;
        };
        if !rl_tools::has_store(&home) {
            return;
        }
        let resumed = self
            .tools()
            .map_err(|error| error.to_string())
            .and_then(|tools| {
                tools
                    .resume_sweep_drivers()
                    .map_err(|error| error.to_string())
            });
        match resumed {
            Ok(started) => {
                for sweep in started {
                    crate::output::progress(&format!(
                        "sweep {sweep} had lost its driver: a new one starts its queued runs"
                    ));
                }
            }
            Err(error) => crate::output::warning(&format!("the sweeps' drivers: {error}")),
        }
    }

    /// The operations every face shares, with this command line's state and settings.
    pub(crate) fn tools(&self) -> anyhow::Result<Tools> {
        if let Some(tools) = self.tools.get() {
            return Ok(tools.clone());
        }
        let tree = TreeOverride {
            root: self.root.clone(),
            envs_dir: self.envs_dir.clone(),
        };
        let rl = std::env::current_exe().context("cannot find the rl executable")?;
        let home = self.home()?;
        // What a run's trainer runs to evaluate a checkpoint: this rl, on this state directory.
        let evaluate = EvaluateCommand {
            program: rl.clone(),
            args: vec![
                "--home".into(),
                home.clone().into_os_string(),
                "--json".into(),
                "runs".into(),
                "evaluate".into(),
            ],
        };
        let context = ToolContext::load(
            home,
            &tree,
            process_environment(),
            SupervisorCommand {
                program: rl,
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
            evaluate,
        );
        for warning in &context.secrets.warnings {
            output::warning(warning);
        }
        let tools = Tools::new(context);
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
    let tools = tools.clone();
    let say = move |line: String| {
        let _ = writeln!(std::io::stderr().lock(), "{face}: {line}");
    };
    let looked = std::thread::Builder::new()
        .name("rl-tests-reconcile".to_owned())
        .spawn(move || {
            if let Err(error) = tools.preflights() {
                say(format!(
                    "cannot look for what killed pre-flight tests left in {}: {error}",
                    tools.preflight_dir().display()
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
/// the tools started are stopped — they run in process groups of their own, which a Ctrl-C or a
/// signal to `rl` does not reach — and the answer is `None`.
pub(crate) fn until_interrupted<T>(
    tools: &Tools,
    work: impl Future<Output = T>,
) -> anyhow::Result<Option<T>> {
    let finished = runtime()?.block_on(async {
        tokio::select! {
            value = work => Some(value),
            () = interrupted() => None,
        }
    });
    if finished.is_none() {
        tools.model_runner().stop_all();
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

/// A `--timeout` of the commands that wait for something another process does (`rl runs wait`,
/// `rl preflight wait`): seconds, up to a week.
pub(crate) fn wait_limit(seconds: f64) -> anyhow::Result<std::time::Duration> {
    std::time::Duration::try_from_secs_f64(seconds)
        .ok()
        .filter(|_| seconds <= 7.0 * 86_400.0)
        .with_context(|| format!("--timeout {seconds} is not a number of seconds up to a week"))
}
