//! `rl checkpoints serve`: a finished run's checkpoints as an OpenAI-compatible endpoint on
//! loopback, owned by the rl process that serves them, for as long as it lives.
//!
//! The server is the one a comparison starts (`rl_trainer.checkpoints` on a copy of the run's
//! engine folder), here long-lived: each one has a folder `served/<SERVE_ID>/` holding its
//! record (`served.json`: the models, the address, the owner), its log and the engine copy. The
//! owner is the rl process that started it; the server watches that process and ends itself
//! (engine included) when it is gone, so killing rl, even by SIGKILL, leaves nothing serving.
//! `rl checkpoints stop` asks the owner to end (SIGTERM), and ends the server's group itself if
//! the owner does not answer. A record whose owner is dead is cleared wherever it is read.
//!
//! A hosted run's checkpoints are served by Tinker itself: for those, rl answers the endpoint
//! and the model paths to give a client, and the key's name, never the key.

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rl_preflight::{ModelServer, ServedProcess};
use rl_process::ProcessIdentity;
use rl_settings::RunId;
use serde::{Deserialize, Serialize};

use crate::answers::{
    HostedEndpoint, HostedModel, ServedList, ServedView, ServingStarted, StoppedServer,
};
use crate::hosted::{TINKER_KEY_VARIABLE, TrainedOn};
use crate::{Tools, ToolsError};

/// Under the state directory: one folder per server.
pub const SERVED_DIR: &str = "served";
const RECORD: &str = "served.json";
/// How long an owner has to end its server after SIGTERM before rl ends the group itself.
const STOP_GRACE: Duration = Duration::from_secs(20);

/// Where a server is: loading its checkpoints, or answering.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ServedState {
    Starting,
    Ready,
}

/// What a server is, as its record (`served.json`) keeps it; answered as `ServedView`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Served {
    pub serve_id: String,
    pub state: ServedState,
    pub run_id: String,
    /// The names a request's `model` gives (`run:ID@STEP`, `run:ID@base`).
    pub models: Vec<String>,
    /// What an OpenAI-compatible client is pointed at; it takes any API key.
    pub base_url: String,
    pub port: u16,
    /// The rl process that owns it: its end is the server's.
    pub owner: ProcessIdentity,
    /// The server's process (leader of its group, with the engine), once started.
    pub server: Option<ProcessIdentity>,
    pub started_at: String,
    pub log: PathBuf,
}

impl From<&Served> for ServedView {
    fn from(served: &Served) -> Self {
        Self {
            serve_id: served.serve_id.clone(),
            state: match served.state {
                ServedState::Starting => "starting",
                ServedState::Ready => "ready",
            },
            run_id: served.run_id.clone(),
            models: served.models.clone(),
            base_url: served.base_url.clone(),
            port: served.port,
            owner_pid: served.owner.pid,
            started_at: served.started_at.clone(),
            log: served.log.clone(),
        }
    }
}

/// What serving asked checkpoints takes: a server of rl's own, or the service's endpoint.
#[derive(Debug)]
pub enum ServePlan {
    Local(LocalServe),
    Hosted(HostedEndpoint),
}

#[derive(Debug)]
pub struct LocalServe {
    pub serve_id: String,
    pub run_id: String,
    pub models: Vec<String>,
    pub server: ModelServer,
    pub dir: PathBuf,
}

/// How long a detached server's process has to record itself.
const DETACHED_RECORD_LIMIT: Duration = Duration::from_secs(30);

/// How a served endpoint ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServeEnd {
    /// Asked to (a signal, `rl checkpoints stop`).
    Stopped,
    /// The server exited by itself (its engine died): the end of its log, which goes with its
    /// folder.
    ServerExited { log_tail: String },
}

impl Tools {
    /// The folder holding every server's.
    pub fn served_dir(&self) -> PathBuf {
        self.home().join(SERVED_DIR)
    }

    /// What serving `models` (checkpoints of one run: `run:ID[@STEP|@best|@base]`) takes, on
    /// `port` or a free one. Refused before anything starts: an unknown run or step, a run
    /// still training on the local engine, a port in use.
    pub fn serve_plan(
        &self,
        models: &[String],
        port: Option<u16>,
        serve_id: Option<&str>,
    ) -> Result<ServePlan, ToolsError> {
        rl_preflight::check_models(models)?;
        let (run, named) = self.checkpoint_models(models)?;
        if let TrainedOn::Service(service) = self.trained_on(&run)? {
            let settings = self.settings()?;
            let paths = self.hosted_models(&run, &named)?;
            return Ok(ServePlan::Hosted(HostedEndpoint {
                run_id: run.id.clone(),
                base_url: settings.inference.tinker_openai_url(service.base_url()),
                models: named
                    .iter()
                    .zip(paths)
                    .map(|((name, _), model)| HostedModel {
                        name: name.clone(),
                        model,
                    })
                    .collect(),
                key_variable: TINKER_KEY_VARIABLE,
            }));
        }
        let port = match port {
            Some(port) if port < 1024 => {
                return Err(ToolsError::invalid(
                    "port",
                    format!("{port}: name a port from 1024 to 65535, or none for a free one"),
                ));
            }
            Some(port) => {
                if std::net::TcpListener::bind(("127.0.0.1", port)).is_err() {
                    return Err(ToolsError::invalid(
                        "port",
                        format!(
                            "127.0.0.1:{port} is in use (or not ours to take): name another, or none for a free one"
                        ),
                    ));
                }
                port
            }
            None => rl_process::free_loopback_ports::<1>()?[0],
        };
        let server = self.checkpoint_server(&run, &named, port)?;
        let serve_id = match serve_id {
            Some(id) => {
                let id = parse_serve_id(id)?;
                if self.served_dir().join(&id).exists() {
                    return Err(ToolsError::invalid("serve_id", format!("{id} is taken")));
                }
                id
            }
            None => RunId::generate().to_string(),
        };
        Ok(ServePlan::Local(LocalServe {
            dir: self.served_dir().join(&serve_id),
            serve_id,
            run_id: run.id.clone(),
            models: named.into_iter().map(|(name, _)| name).collect(),
            server,
        }))
    }

    /// Serves `plan` from this process until it is asked to stop (`stop` resolves) or the
    /// server exits by itself; `ready` hears the record once every model can be sampled. The
    /// folder is removed at the end, whichever way it comes.
    pub async fn serve(
        &self,
        plan: LocalServe,
        ready: impl FnOnce(&ServedView),
        stop: impl std::future::Future<Output = ()>,
    ) -> Result<ServeEnd, ToolsError> {
        rl_settings::create_private_dir(&self.served_dir())?;
        rl_settings::create_private_dir(&plan.dir)?;
        let owner = ProcessIdentity::of(std::process::id()).ok_or_else(|| {
            ToolsError::Internal("this process cannot be read in /proc".to_owned())
        })?;
        let log_limit = rl_process::LogLimit(self.settings()?.run.log_limit_bytes);
        let mut served = Served {
            serve_id: plan.serve_id.clone(),
            state: ServedState::Starting,
            run_id: plan.run_id.clone(),
            models: plan.models.clone(),
            base_url: plan.server.base_url(),
            port: plan.server.port,
            owner,
            server: None,
            started_at: jiff::Timestamp::now().to_string(),
            log: rl_preflight::PreflightFolder::at(&plan.dir).server_log(),
        };
        // Recorded while it starts, so that it is listed, stopped, and cleared if this process
        // dies before it is ready.
        if let Err(error) = write_record(&plan.dir, &served) {
            remove_folder(&plan.dir);
            return Err(error);
        }
        let mut stop = std::pin::pin!(stop);
        let started = tokio::select! {
            started = ServedProcess::start(&plan.server, &plan.dir, self.secrets(), log_limit) => started,
            // Dropping the start ends what it started.
            () = &mut stop => {
                remove_folder(&plan.dir);
                return Ok(ServeEnd::Stopped);
            }
        };
        let mut process = match started {
            Ok(process) => process,
            Err(reason) => {
                remove_folder(&plan.dir);
                return Err(ToolsError::Internal(reason));
            }
        };
        served.state = ServedState::Ready;
        served.server = Some(process.leader());
        if let Err(error) = write_record(&plan.dir, &served) {
            process.end().await;
            remove_folder(&plan.dir);
            return Err(error);
        }
        ready(&ServedView::from(&served));
        let end = tokio::select! {
            () = stop => ServeEnd::Stopped,
            _ = process.exited() => ServeEnd::ServerExited {
                log_tail: rl_process::read_log_tail(&served.log, 15)
                    .map(|tail| tail.lines.join("\n"))
                    .unwrap_or_default(),
            },
        };
        process.end().await;
        remove_folder(&plan.dir);
        Ok(end)
    }

    /// Starts serving `models` from a process of its own (`rl checkpoints serve` run again,
    /// on the port and id chosen here) and answers once it has recorded itself, `starting`:
    /// `served_one` then says when it is ready. A hosted run's endpoint is answered at once.
    pub fn start_serving(
        &self,
        models: &[String],
        port: Option<u16>,
    ) -> Result<ServingStarted, ToolsError> {
        let local = match self.serve_plan(models, port, None)? {
            ServePlan::Hosted(endpoint) => return Ok(ServingStarted::Hosted(endpoint)),
            ServePlan::Local(local) => local,
        };
        rl_settings::create_private_dir(&self.served_dir())?;
        let log_path = self.served_dir().join("detached.log");
        let log = crate::tools::append_log(&log_path)?;
        let program = &self.context().supervisor.program;
        let mut command = std::process::Command::new(program);
        // rl itself, reading the keys it needs on its own; rl's own secrets stay here.
        rl_settings::withhold(&mut command, &rl_settings::SECRET_NAMES);
        let mut child = command
            .args(["--json", "checkpoints", "serve", "--port"])
            .arg(local.server.port.to_string())
            .args(["--serve-id", &local.serve_id])
            .args(&local.models)
            .env("RL_HOME", self.home())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(log)
            // Its own process group: a signal aimed at the caller's group (a Ctrl-C, a client
            // ending its MCP server) misses it.
            .process_group(0)
            .spawn()
            .map_err(|source| ToolsError::Io {
                action: "cannot start the server's process",
                path: program.clone(),
                source,
            })?;
        let recorded = wait_until(DETACHED_RECORD_LIMIT, || {
            read_record(&local.dir).is_some()
                || child.try_wait().is_ok_and(|status| status.is_some())
        });
        let record = read_record(&local.dir);
        // It outlives this call: reaped here, so a long-lived caller collects no zombie.
        std::thread::spawn(move || child.wait());
        match record {
            Some(served) if recorded => Ok(ServingStarted::Local(ServedView::from(&served))),
            _ => Err(ToolsError::Internal(format!(
                "the server's process did not start (its messages: {})",
                log_path.display()
            ))),
        }
    }

    /// The server `serve_id`, while it is up (starting or ready); its owner gone, it is
    /// cleared and `None`.
    pub fn served_one(&self, serve_id: &str) -> Result<Option<ServedView>, ToolsError> {
        let id = parse_serve_id(serve_id)?;
        Ok(self
            .served()?
            .served
            .into_iter()
            .find(|served| served.serve_id == id))
    }

    /// Every server up, oldest first. Records whose owner is gone are cleared (their server
    /// ended, if it is still there).
    pub fn served(&self) -> Result<ServedList, ToolsError> {
        let dir = self.served_dir();
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Ok(ServedList {
                    served: Vec::new(),
                    count: 0,
                });
            }
            Err(source) => {
                return Err(ToolsError::Io {
                    action: "cannot read",
                    path: dir,
                    source,
                });
            }
        };
        let mut up = Vec::new();
        for entry in entries.flatten() {
            let folder = entry.path();
            let Some(served) = read_record(&folder) else {
                // A folder without a record: a server starting, or one whose start failed
                // before its owner could write it. Left to its owner.
                continue;
            };
            if served.owner.is_alive() {
                up.push(ServedView::from(&served));
            } else {
                end_server(&served);
                remove_folder(&folder);
            }
        }
        up.sort_by(|a, b| a.started_at.cmp(&b.started_at));
        Ok(ServedList {
            count: up.len(),
            served: up,
        })
    }

    /// Ends the server `serve_id`: its owner is asked to (SIGTERM); if it has not ended it
    /// within the grace, rl ends the server's group itself.
    pub fn stop_serving(&self, serve_id: &str) -> Result<StoppedServer, ToolsError> {
        let id = parse_serve_id(serve_id)?;
        let folder = self.served_dir().join(&id);
        let served = read_record(&folder).ok_or_else(|| {
            ToolsError::invalid(
                "serve_id",
                format!("no server {id} is up (rl_list_served lists those that are)"),
            )
        })?;
        let ended_by = if served.owner.is_alive()
            && served.owner.terminate()
            && wait_until(STOP_GRACE, || !served.owner.is_alive() && !folder.exists())
        {
            "owner"
        } else {
            end_server(&served);
            remove_folder(&folder);
            "forced"
        };
        Ok(StoppedServer {
            serve_id: served.serve_id,
            models: served.models,
            ended_by,
        })
    }
}

fn parse_serve_id(text: &str) -> Result<String, ToolsError> {
    RunId::parse(text).map(|id| id.to_string()).map_err(|_| {
        ToolsError::invalid(
            "serve_id",
            format!(
                "'{}' is no server's id: ids are 8 lowercase hexadecimal characters, as \
                 rl_list_served lists them",
                rl_settings::quoted(text)
            ),
        )
    })
}

/// Ends a server whose owner cannot (gone, or not answering): its group, if it is still the
/// one recorded.
fn end_server(served: &Served) {
    if let Some(server) = served.server {
        rl_process::stop_recorded_group(server, STOP_GRACE);
    }
}

fn write_record(dir: &Path, served: &Served) -> Result<(), ToolsError> {
    let text = serde_json::to_vec_pretty(served)
        .map_err(|error| ToolsError::Internal(error.to_string()))?;
    rl_settings::write_atomically(&dir.join(RECORD), &text)?;
    Ok(())
}

fn read_record(dir: &Path) -> Option<Served> {
    let text = std::fs::read(dir.join(RECORD)).ok()?;
    serde_json::from_slice(&text).ok()
}

fn remove_folder(dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
}

fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + limit;
    while std::time::Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    done()
}
