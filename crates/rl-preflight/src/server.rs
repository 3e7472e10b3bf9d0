//! The process that serves a test's models when nobody else does (a run's checkpoints, through
//! the local engine): started in the test's folder before any model, marked and recorded like
//! a model's process so that a stop or a dead owner's reconcile ends it too, ready once its
//! `GET /health` says every model can be sampled, and ended with the test, its copy of the
//! run's engine folder removed.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use rl_process::{HttpProbe, Probe as _, ProcessIdentity, Readiness};
use rl_settings::Secrets;
use serde::Serialize;

use crate::folder::PreflightFolder;
use crate::marks::{ModelMarks, STOP_GRACE};
use crate::tracking::{record_group, stop_request};

/// The server's name among the test's processes.
const SERVER: &str = PreflightFolder::SERVER;
const POLL: Duration = Duration::from_millis(500);

/// A server of the test's models on a loopback port. Its arguments never hold a key.
#[derive(Debug, Clone, Serialize)]
pub struct ModelServer {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub port: u16,
    /// How long it may take to answer that every model is loaded.
    pub ready_timeout: Duration,
    /// The run folder whose engine folder the server works on, as a copy made in the test's
    /// folder (`engine/`): the run's own is never written to.
    pub engine_of: Option<PathBuf>,
    /// The model whose chat template its chat route renders every request with (tools too).
    pub chat_template_of: Option<String>,
}

impl ModelServer {
    /// The OpenAI-compatible base URL the models are asked at.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }
}

/// A started server, ended by [`Running::end`].
pub(crate) struct Running {
    leader: ProcessIdentity,
    marks: ModelMarks,
    child: tokio::process::Child,
    copy: rl_process::OutputCopy,
    folder: PreflightFolder,
    /// Set once `end` has run; otherwise dropping it (the test's future dropped on a Ctrl-C)
    /// ends it there and then.
    ended: bool,
}

/// Starts `server` for the test in `dir` and waits until it is ready. On any failure it is
/// ended, and the reason (with the end of its log) is given back.
pub(crate) async fn start(
    server: &ModelServer,
    dir: &Path,
    secrets: &Secrets,
    log_limit: rl_process::LogLimit,
) -> Result<Running, String> {
    if let Some(run_dir) = &server.engine_of {
        rl_process::copy_engine(run_dir, dir)
            .map_err(|error| format!("cannot copy the run's engine folder: {error}"))?;
    }
    let folder = PreflightFolder::at(dir);
    let log = folder.server_log();
    let (output, copy) = rl_process::redacted_output(&log, secrets.clone(), log_limit)
        .map_err(|error| format!("cannot create {}: {error}", log.display()))?;
    let output_err = output
        .try_clone()
        .map_err(|error| format!("cannot share its output pipe: {error}"))?;
    let marks = ModelMarks {
        test_dir: dir.to_owned(),
        model: SERVER.to_owned(),
    };
    let mut command = tokio::process::Command::new(&server.program);
    command
        .args(&server.args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(output)
        .stderr(output_err)
        .process_group(0)
        .envs(server.env.iter().map(|(k, v)| (k, v)))
        .envs(marks.environment());
    rl_settings::withhold(command.as_std_mut(), &[]);
    let spawned = command.spawn();
    drop(command);
    let mut child =
        spawned.map_err(|error| format!("cannot start {}: {error}", server.program.display()))?;
    let pid = child.id().unwrap_or_default();
    let Some(leader) = ProcessIdentity::of(pid) else {
        rl_process::stop_group(pid, STOP_GRACE);
        let _ = child.wait().await;
        return Err(format!("its process {pid} cannot be read in /proc"));
    };
    let running = Running {
        leader,
        marks,
        child,
        copy,
        folder,
        ended: false,
    };
    let recorded = record_group(&running.folder.server_group(), SERVER, leader);
    if let Err(error) = recorded {
        return Err(running
            .fail(format!("its process group cannot be recorded: {error}"))
            .await);
    }
    match running.ready(server).await {
        Ok(running) => Ok(running),
        Err((running, reason)) => Err(running.fail(reason).await),
    }
}

impl Running {
    async fn ready(mut self, server: &ModelServer) -> Result<Self, (Self, String)> {
        let probe = match HttpProbe::new() {
            Ok(probe) => probe,
            Err(error) => return Err((self, error.to_string())),
        };
        let deadline = Instant::now() + server.ready_timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err((self, format!("it exited ({status}) before it was ready")));
            }
            if stop_request(&self.folder.stop()).is_some() {
                return Err((self, "the test was stopped".to_owned()));
            }
            let readiness = Readiness::TrainerHealthy { port: server.port };
            if probe.is_ready("127.0.0.1", readiness).await {
                return Ok(self);
            }
            if Instant::now() >= deadline {
                let reason = format!(
                    "it was not ready within {} s",
                    server.ready_timeout.as_secs()
                );
                return Err((self, reason));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Ends it, and gives back `reason` with the end of its log.
    async fn fail(self, reason: String) -> String {
        let log = self.folder.server_log();
        self.end().await;
        let tail = rl_process::read_log_tail(&log, 15)
            .map(|tail| tail.lines.join("\n"))
            .unwrap_or_default();
        format!(
            "the model server did not start: {reason}; {}:\n{tail}",
            log.display()
        )
    }

    /// Ends its group and whatever it left, and removes the engine copy.
    pub(crate) async fn end(mut self) {
        let (leader, marks) = (self.leader, self.marks.clone());
        let _ = tokio::task::spawn_blocking(move || {
            rl_process::stop_recorded_group(leader, STOP_GRACE);
            marks.end_processes(STOP_GRACE);
        })
        .await;
        let _ = self.child.wait().await;
        if !self.copy.ended(STOP_GRACE).await {
            self.copy.cut(STOP_GRACE).await;
        }
        self.folder.remove_engine_copy();
        self.ended = true;
    }
}

/// A model server started on its own, outside a test (`rl checkpoints serve`): the same start,
/// readiness and end as a test's, in a folder of its own.
pub struct ServedProcess(Running);

impl ServedProcess {
    /// Starts `server` in `dir` and waits until every model can be sampled; on any failure it
    /// is ended and the reason (with the end of its log) given back.
    pub async fn start(
        server: &ModelServer,
        dir: &Path,
        secrets: &Secrets,
        log_limit: rl_process::LogLimit,
    ) -> Result<Self, String> {
        start(server, dir, secrets, log_limit).await.map(Self)
    }

    /// The server's process (its group's leader).
    pub fn leader(&self) -> ProcessIdentity {
        self.0.leader
    }

    /// Waits until the server exits by itself (its engine died, its parent watch fired).
    pub async fn exited(&mut self) -> std::io::Result<std::process::ExitStatus> {
        self.0.child.wait().await
    }

    /// Ends its group and whatever it left, and removes the engine copy.
    pub async fn end(self) {
        self.0.end().await;
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if !self.ended {
            rl_process::stop_recorded_group(self.leader, STOP_GRACE);
            self.marks.end_processes(STOP_GRACE);
            self.folder.remove_engine_copy();
        }
    }
}
