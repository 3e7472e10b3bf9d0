//! Runs as their callers see them: start one (which hands it to a detached supervisor), read its
//! status and events, wait for it, stop it. Every read reconciles the store with the processes
//! that actually exist, so a run whose supervisor vanished shows as `lost`, not `running`.

use std::ffi::{OsStr, OsString};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use rl_python::PythonLauncher;
use rl_settings::{
    Backend, RunEndpoints, RunFolder, RunId, SECRET_NAMES, Secrets, Settings, run_dir,
};

use crate::ProcessError;
use crate::identity::ProcessIdentity;
use crate::launcher::{LaunchSpec, open_log};
use crate::plan::{LaunchPlan, LaunchRecord};
use crate::ports::{free_loopback_ports, is_listening};
use crate::state::{Component, ComponentStatus, RunState};
use crate::store::{Event, Lineage, NewRun, RunRecord, RunStore};
use crate::template::{TemplateValues, render};

/// A run whose supervisor never recorded itself within this long after creation is lost (its
/// starter was killed between creating the run and starting the supervisor).
const SUPERVISOR_RECORD_LIMIT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(50);
/// Events returned with a status when the caller does not say how many.
pub const DEFAULT_EVENT_LIMIT: usize = 200;

/// How to start a supervisor: the program (normally the running `rl` itself) and the arguments
/// before the run id. The state directory reaches it as `RL_HOME`.
#[derive(Debug, Clone)]
pub struct SupervisorCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Variables the supervisor needs from its first instruction on (its allocator's options).
    pub env: Vec<(String, String)>,
}

/// How a run's trainer asks for an evaluation of the checkpoint it serves (every `eval_every`
/// steps): the program and the arguments before the run id, normally the running `rl` with
/// `--home HOME --json runs evaluate`. The caller's, like [`SupervisorCommand`]: this crate
/// never spells rl's command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvaluateCommand {
    pub program: PathBuf,
    pub args: Vec<OsString>,
}

impl EvaluateCommand {
    /// The command line for run `run_id` as the trainer reads it ([`EVALUATE_COMMAND_VARIABLE`]):
    /// a JSON list of strings, so every word must be text.
    ///
    /// [`EVALUATE_COMMAND_VARIABLE`]: rl_python::EVALUATE_COMMAND_VARIABLE
    fn for_run(&self, run_id: &RunId) -> Result<String, ProcessError> {
        let word = |word: &OsStr| {
            word.to_str()
                .map(str::to_owned)
                .ok_or_else(|| ProcessError::Launch {
                    component: Component::Trainer,
                    reason: format!(
                        "its evaluation command names {}, which is not UTF-8 (the trainer reads \
                         the command as JSON text)",
                        word.to_string_lossy()
                    ),
                })
        };
        let words = std::iter::once(self.program.as_os_str())
            .chain(self.args.iter().map(OsString::as_os_str))
            .map(word)
            .chain(std::iter::once(Ok(run_id.to_string())))
            .collect::<Result<Vec<String>, _>>()?;
        Ok(serde_json::Value::from(words).to_string())
    }
}

#[derive(Debug, Clone)]
pub struct RunStatus {
    pub run: RunRecord,
    /// Seconds since the run was created, until it finished.
    pub elapsed_secs: f64,
    pub supervisor_log: PathBuf,
    /// The components whose log reached the run's `log_limit_bytes`: its head is kept, its
    /// latest output is in its tail files (`capped_log.rs`).
    pub capped_logs: Vec<Component>,
    /// Events after the `since` cursor the caller gave.
    pub events: Vec<Event>,
    /// Pass this as `since` to get only what happens next.
    pub next_since: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitUntil {
    /// Any change of state or phase.
    Change,
    /// `running`, or an end.
    Running,
    /// An end: stopped, completed, failed or lost.
    Finished,
}

#[derive(Debug, Clone)]
pub struct WaitOutcome {
    pub timed_out: bool,
    pub status: RunStatus,
}

#[derive(Debug, Clone)]
pub struct StopReport {
    /// What happened, in a sentence.
    pub message: String,
    /// Whether this call stopped anything (false for a run that had already ended).
    pub stopped: bool,
    pub status: RunStatus,
}

struct Prepared {
    run_id: RunId,
    endpoints: RunEndpoints,
    programs: PathBuf,
    root: PathBuf,
}

/// A new run's config file as its caller wrote it.
#[derive(Debug, Clone)]
pub struct WrittenConfig {
    pub path: PathBuf,
    /// The environment's key, as the run is listed under.
    pub environment: String,
    /// The environment's Python file, which the env component runs.
    pub env_file: PathBuf,
    /// Which API it is written against (`rl_env` is told: `RL_ENV_KIND`).
    pub environment_kind: rl_settings::EnvironmentKind,
    /// The Python that runs it: the env component's `{python}` (the run's own for Atropos).
    pub env_python: PathBuf,
    /// The run it continues, when it resumes one.
    pub resumed_from: Option<Lineage>,
    /// The sweep point it is made of.
    pub sweep: Option<crate::SweepMember>,
}

pub struct Runs {
    home: PathBuf,
    store: RunStore,
}

impl Runs {
    pub fn open(home: &Path) -> Result<Self, ProcessError> {
        Ok(Self {
            home: home.to_path_buf(),
            store: RunStore::open(home)?,
        })
    }

    /// Creates a run and hands it to a detached supervisor. Returns once the supervisor runs;
    /// the run is then starting its first component. `write_config` writes the run's config
    /// once its id and addresses are known: the caller's, as rl-process does not know how a
    /// selection becomes a config, and its error is returned as it is. `supervisor` starts the
    /// run's owner, `evaluate` is what its trainer runs to evaluate a checkpoint.
    pub fn start<E: From<ProcessError>>(
        &mut self,
        settings: &Settings,
        write_config: impl FnOnce(&RunId, RunEndpoints) -> Result<WrittenConfig, E>,
        secrets: &Secrets,
        supervisor: &SupervisorCommand,
        evaluate: &EvaluateCommand,
    ) -> Result<RunStatus, E> {
        let prepared = self.prepare(settings, secrets)?;
        let written = write_config(&prepared.run_id, prepared.endpoints)?;
        Ok(self.launch(settings, prepared, &written, secrets, supervisor, evaluate)?)
    }

    /// What a run needs before its config can be written: checks, an id, free ports.
    fn prepare(
        &mut self,
        settings: &Settings,
        secrets: &Secrets,
    ) -> Result<Prepared, ProcessError> {
        if settings.engine.is_local()
            && let Some(problem) = settings.engine.base_model_problem()
        {
            return Err(ProcessError::Launch {
                component: Component::Engine,
                reason: format!(
                    "{problem}; set [engine] base_model in config.toml to a Hugging Face model \
                     folder on disk"
                ),
            });
        }
        if settings.needs_tinker_key() {
            let Some(key) = secrets.get("TINKER_API_KEY") else {
                return Err(ProcessError::MissingTinkerKey {
                    dotenv: self.home.join(".env"),
                });
            };
            if let Some(problem) = rl_settings::tinker_key_problem(key) {
                return Err(ProcessError::MalformedTinkerKey {
                    problem,
                    dotenv: self.home.join(".env"),
                });
            }
        }
        // Absolute, as the components run with it as their working directory: the tree, or
        // without one the environments folder (rl's trainer needs no tree).
        let root = match &settings.tinker_atropos_root {
            Some(root) => absolute(root)?,
            None => absolute(
                &settings
                    .environments_dir()
                    .map_err(|_| ProcessError::NoRoot)?,
            )?,
        };
        // Runs whose supervisor vanished are `lost`, not unfinished, when counted below.
        self.list()?;
        let run_id = self.unused_id()?;
        let [api_port, free_port, engine_port] = free_loopback_ports::<3>()?;
        let engine_port = settings.engine.is_local().then_some(engine_port);
        let trainer_port = match settings.trainer_port {
            Some(port) if is_listening(port) => {
                return Err(ProcessError::FixedPortInUse { port });
            }
            Some(port) => port,
            None => free_port,
        };
        let endpoints = RunEndpoints {
            api_port,
            trainer_port,
            engine_port,
        };
        let programs = rl_python::install(&self.home)?;
        Ok(Prepared {
            run_id,
            endpoints,
            programs,
            root,
        })
    }

    fn launch(
        &mut self,
        settings: &Settings,
        prepared: Prepared,
        written: &WrittenConfig,
        secrets: &Secrets,
        supervisor: &SupervisorCommand,
        evaluate: &EvaluateCommand,
    ) -> Result<RunStatus, ProcessError> {
        let Prepared {
            run_id,
            endpoints:
                RunEndpoints {
                    api_port,
                    trainer_port,
                    engine_port,
                },
            programs,
            root,
        } = prepared;
        let dir = run_dir(&self.home, &run_id);
        let env_file = absolute(&written.env_file)?;
        let values = TemplateValues::new()
            .with("python", settings.python.to_string_lossy())
            .with("config", written.path.to_string_lossy())
            .with("env_file", env_file.to_string_lossy())
            .with("api_port", api_port.to_string())
            .with("trainer_port", trainer_port.to_string())
            .with("run_id", run_id.as_str())
            .with("run_dir", dir.to_string_lossy())
            .with("root", root.to_string_lossy())
            .with("engine_python", settings.engine_python().to_string_lossy())
            .with("engine_port", engine_port.unwrap_or_default().to_string())
            .with(
                "base_model",
                settings
                    .engine
                    .base_model
                    .as_deref()
                    .map(|model| model.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            )
            .with(
                "engine_backend_config",
                serde_json::to_string(&settings.engine.backend_config).map_err(|error| {
                    ProcessError::Store(format!("engine.backend_config: {error}"))
                })?,
            );
        if engine_port.is_some() {
            // The engine keeps its database and checkpoints in the run's folder.
            let engine_dir = RunFolder::at(&dir).engine();
            std::fs::create_dir_all(&engine_dir).map_err(|source| ProcessError::Io {
                action: "create",
                path: engine_dir,
                source,
            })?;
        }
        let launcher = PythonLauncher::new(&programs, &settings.child_environment);
        let mut components = Vec::with_capacity(Component::START_ORDER.len());
        for component in Component::START_ORDER {
            let template = match component {
                Component::Engine if engine_port.is_some() => &settings.commands.engine,
                Component::Engine => continue,
                Component::Api => &settings.commands.api,
                Component::Trainer => &settings.commands.trainer,
                Component::Env => &settings.commands.env,
            };
            // The environment runs in its own Python (a verifiers environment's venv).
            let env_values;
            let values = if component == Component::Env {
                env_values = values
                    .clone()
                    .with("python", written.env_python.to_string_lossy());
                &env_values
            } else {
                &values
            };
            let mut argv = render(component, template, values)?.into_iter();
            let program = PathBuf::from(argv.next().unwrap_or_default());
            let args: Vec<String> = argv.collect();
            let variables::ComponentVariables { env, env_remove } = variables::of_component(
                component,
                &args,
                &variables::RunVariables {
                    settings,
                    secrets,
                    run_id: &run_id,
                    dir: &dir,
                    launcher: &launcher,
                    evaluate,
                    local_engine: engine_port.is_some(),
                    environment_kind: written.environment_kind,
                },
            )?;
            components.push(LaunchSpec {
                component,
                program,
                args,
                cwd: root.clone(),
                env,
                env_remove,
                log_path: RunFolder::at(&dir).log(component.as_str()),
            });
        }
        let record = LaunchRecord::new(
            LaunchPlan {
                run_id: run_id.clone(),
                api_port,
                trainer_port,
                engine_port,
                components,
                timing: settings.run.clone(),
                slurm: (settings.backend == Backend::Slurm).then(|| settings.slurm.clone()),
            },
            settings.held_out,
        );
        record.save(&self.home)?;
        let logs = record
            .plan
            .components
            .iter()
            .map(|spec| (spec.component, spec.log_path.clone()))
            .collect();
        self.store
            .create_run(&NewRun {
                id: run_id.clone(),
                environment: written.environment.clone(),
                config_path: written.path.clone(),
                api_port: Some(api_port),
                trainer_port: Some(trainer_port),
                logs,
                queued: settings.backend == Backend::Slurm,
                max_active: Some(settings.max_active_runs),
                resumed_from: written.resumed_from.clone(),
                sweep: written.sweep.clone(),
            })
            .inspect_err(|_| {
                // Nothing of a run that was never recorded is kept.
                let _ = std::fs::remove_dir_all(&dir);
            })?;
        if let Err(error) = self.spawn_supervisor(&run_id, secrets, supervisor) {
            self.store.set_error(&run_id, &error.to_string())?;
            self.store
                .transition(&run_id, RunState::Failed, "the supervisor did not start")?;
            return Err(error);
        }
        self.status(&run_id, 0)
    }

    fn unused_id(&self) -> Result<RunId, ProcessError> {
        for _ in 0..16 {
            let id = RunId::generate();
            if self.store.run(&id)?.is_none() && !run_dir(&self.home, &id).exists() {
                return Ok(id);
            }
        }
        Err(ProcessError::Store(
            "no unused run id after 16 tries".to_owned(),
        ))
    }

    fn spawn_supervisor(
        &mut self,
        run_id: &RunId,
        secrets: &Secrets,
        supervisor: &SupervisorCommand,
    ) -> Result<(), ProcessError> {
        let fail = |reason: String| ProcessError::Supervisor {
            run_id: run_id.to_string(),
            reason,
        };
        let log_path = supervisor_log(&self.home, run_id);
        let (log, log_err) = open_log(&log_path)
            .map_err(|e| fail(format!("cannot open {}: {e}", log_path.display())))?;
        let mut command = std::process::Command::new(&supervisor.program);
        command
            .args(&supervisor.args)
            .arg(run_id.as_str())
            .envs(supervisor.env.iter().map(|(name, value)| (name, value)))
            .env("RL_HOME", &self.home)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            // Its own process group: a Ctrl-C or SIGKILL aimed at the caller's group misses it.
            .process_group(0);
        // Every key rl holds (the `.env` file's too), handed explicitly: the supervisor hands
        // each component the ones it needs. rl's own secrets (`rl serve`'s token) stay here.
        rl_settings::withhold(&mut command, &[]);
        command.envs(secrets.for_child(&SECRET_NAMES));
        let mut child = command
            .spawn()
            .map_err(|e| fail(format!("{}: {e}", supervisor.program.display())))?;
        let identity = ProcessIdentity::of(child.id())
            .ok_or_else(|| fail("it ended as soon as it started; see supervisor.log".to_owned()))?;
        self.store.set_supervisor(run_id, identity)?;
        // A long-lived caller (the MCP server) must not collect zombies; a short one exits anyway.
        std::thread::spawn(move || child.wait());
        Ok(())
    }

    /// The run as it is now, with its events after `since`.
    pub fn status(&mut self, id: &RunId, since: i64) -> Result<RunStatus, ProcessError> {
        let run = self.reconciled(id)?;
        let events = self.store.events(id, since, DEFAULT_EVENT_LIMIT)?;
        let next_since = events.last().map_or(since, |e| e.seq);
        let capped_logs = run
            .components
            .iter()
            .filter(|component| crate::capped_log::is_capped(&component.log_path))
            .map(|component| component.component)
            .collect();
        Ok(RunStatus {
            elapsed_secs: elapsed_secs(&run),
            supervisor_log: supervisor_log(&self.home, id),
            capped_logs,
            run,
            events,
            next_since,
        })
    }

    /// Every run, newest first, reconciled.
    pub fn list(&mut self) -> Result<Vec<RunRecord>, ProcessError> {
        let runs = self.store.runs()?;
        let mut reconciled = Vec::with_capacity(runs.len());
        for run in runs {
            if run.state.is_finished() && !claims_running_component(&run) {
                reconciled.push(run);
            } else {
                let id = RunId::parse(&run.id)?;
                reconciled.push(self.reconciled(&id)?);
            }
        }
        Ok(reconciled)
    }

    /// Reads a run and, when it claims to be live but its supervisor is gone, records `lost`;
    /// once no supervisor can record them, components whose processes are gone are recorded
    /// `lost` rather than left `running`.
    fn reconciled(&mut self, id: &RunId) -> Result<RunRecord, ProcessError> {
        let run = self.read(id)?;
        if run.state.is_finished() {
            let supervised = !run.from_another_boot()
                && run
                    .supervisor
                    .is_some_and(|supervisor| supervisor.is_alive());
            // A supervisor still ending the run records its components' ends itself.
            if supervised || !claims_running_component(&run) {
                return Ok(run);
            }
        } else {
            let reason = match run.supervisor {
                _ if run.from_another_boot() => {
                    "the machine has restarted since the run started; none of its processes remain"
                        .to_owned()
                }
                Some(supervisor) if supervisor.is_alive() => return Ok(run),
                Some(supervisor) => format!(
                    "its supervisor (pid {}) is gone without recording an end (killed, or the \
                     machine restarted); stop the run to end any process it left",
                    supervisor.pid
                ),
                None if age(&run) < SUPERVISOR_RECORD_LIMIT => return Ok(run),
                None => "its supervisor was never started (the starting process died)".to_owned(),
            };
            if self.store.is_read_only() {
                return Ok(seen_lost(run, Some(reason)));
            }
            // Refused when the supervisor recorded an end just before it exited: that end holds.
            if self.store.transition(id, RunState::Lost, "")?.is_some() {
                self.store.set_error(id, &reason)?;
            }
        }
        if self.store.is_read_only() {
            return Ok(seen_lost(run, None));
        }
        self.record_unseen_ends(id, &run)?;
        self.read(id)
    }

    /// Whether the state directory could be opened only for reading: nothing can be started,
    /// stopped or recorded.
    pub fn is_read_only(&self) -> bool {
        self.store.is_read_only()
    }

    /// Records `lost` for each component of `run` still said to be running whose process is
    /// gone: its supervisor, which would have recorded how it ended, is gone too.
    fn record_unseen_ends(&mut self, id: &RunId, run: &RunRecord) -> Result<(), ProcessError> {
        let another_boot = run.from_another_boot();
        for component in &run.components {
            if ended_unseen(another_boot, component) {
                self.store.record_component(
                    id,
                    component.component,
                    None,
                    ComponentStatus::Lost,
                )?;
            }
        }
        Ok(())
    }

    /// Blocks until the run reaches `until` or `timeout` passes.
    pub fn wait(
        &mut self,
        id: &RunId,
        until: WaitUntil,
        timeout: Duration,
        since: i64,
    ) -> Result<WaitOutcome, ProcessError> {
        let started = Instant::now();
        let mut first = None;
        loop {
            let state = self.reconciled(id)?.state;
            let first = *first.get_or_insert(state);
            let reached = match until {
                WaitUntil::Change => state != first,
                WaitUntil::Running => state == RunState::Running || state.is_finished(),
                WaitUntil::Finished => state.is_finished(),
            };
            if reached || started.elapsed() >= timeout {
                return Ok(WaitOutcome {
                    timed_out: !reached,
                    status: self.status(id, since)?,
                });
            }
            std::thread::sleep(POLL);
        }
    }

    fn read(&self, id: &RunId) -> Result<RunRecord, ProcessError> {
        self.store
            .run(id)?
            .ok_or_else(|| ProcessError::UnknownRun(id.to_string()))
    }

    pub fn events(&self, id: &RunId, since: i64, limit: usize) -> Result<Vec<Event>, ProcessError> {
        self.read(id)?;
        self.store.events(id, since, limit)
    }
}

fn absolute(path: &Path) -> Result<PathBuf, ProcessError> {
    std::path::absolute(path).map_err(|source| ProcessError::Io {
        action: "resolve",
        path: path.to_path_buf(),
        source,
    })
}

fn supervisor_log(home: &Path, id: &RunId) -> PathBuf {
    RunFolder::of(home, id).log("supervisor")
}

/// Whether the run's record says one of its components is running.
fn claims_running_component(run: &RunRecord) -> bool {
    run.components
        .iter()
        .any(|component| component.status == ComponentStatus::Running)
}

fn timestamp(text: &str) -> Option<jiff::Timestamp> {
    text.parse().ok()
}

fn age(run: &RunRecord) -> Duration {
    timestamp(&run.created_at)
        .and_then(|created| Duration::try_from(jiff::Timestamp::now().duration_since(created)).ok())
        .unwrap_or_default()
}

fn elapsed_secs(run: &RunRecord) -> f64 {
    let Some(created) = timestamp(&run.created_at) else {
        return 0.0;
    };
    let end = if run.state.is_finished() {
        timestamp(&run.updated_at).unwrap_or_else(jiff::Timestamp::now)
    } else {
        jiff::Timestamp::now()
    };
    end.duration_since(created).as_secs_f64().max(0.0)
}

mod stopping;
mod variables;
/// What reconciling `run` would record, shown without writing: the run `lost` for `reason`
/// (when given), and each component said to run whose process is gone `lost` too.
fn seen_lost(mut run: RunRecord, reason: Option<String>) -> RunRecord {
    if let Some(reason) = reason
        && run.state.can_become(RunState::Lost)
    {
        run.state = RunState::Lost;
        run.error = Some(reason);
    }
    let another_boot = run.from_another_boot();
    for component in &mut run.components {
        if ended_unseen(another_boot, component) {
            component.status = ComponentStatus::Lost;
        }
    }
    run
}

/// Whether `component` is said to run while its process is gone (`another_boot`: the machine
/// restarted since its run started, so no process of it remains).
fn ended_unseen(another_boot: bool, component: &crate::store::ComponentRecord) -> bool {
    let alive = !another_boot && component.process.is_some_and(|p| p.is_alive());
    component.status == ComponentStatus::Running && !alive
}

#[cfg(test)]
mod tests;
