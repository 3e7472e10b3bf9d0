//! `--introspect python`: the same fields read by importing the environment with the user's
//! interpreter, as a cross-check of the static reading. It runs environment code, so it is
//! opt-in, bounded by a timeout, and never the default.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::time::{Duration, Instant};

use serde::Deserialize;

use rl_settings::Value;

use crate::{ConfigError, ConfigSchema};

const SCRIPT: &str = include_str!("../python/introspect_config.py");

/// The most of the helper's standard output kept: its answer is one JSON object of a few
/// hundred bytes per field. An environment printing without end costs no more.
const MAX_ANSWER: usize = 16 * 1024 * 1024;
/// The end of its standard error kept, for the error message.
const KEPT_ERRORS: usize = 64 * 1024;
/// Once the helper has ended, how long its output may take to close: a process the environment
/// started and left holding the pipe does not hold the answer.
const OUTPUT_GRACE: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Introspected {
    pub config_class: Option<String>,
    pub fields: Vec<IntrospectedField>,
    #[serde(default)]
    pub env_defaults: BTreeMap<String, Value>,
    #[serde(default)]
    pub errors: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct IntrospectedField {
    pub name: String,
    #[serde(rename = "type")]
    pub type_text: String,
    pub default: Option<Value>,
    pub required: bool,
    pub description: Option<String>,
}

/// Where the static reading and Python disagree.
#[derive(Debug, Clone, PartialEq)]
pub struct Disagreement {
    pub field: String,
    pub static_reading: String,
    pub python: String,
}

/// Imports `env_file` with `python`, takes `class_name`, and reports its config fields.
/// The child is killed when `timeout` passes.
pub fn introspect(
    python: &Path,
    env_file: &Path,
    class_name: &str,
    timeout: Duration,
) -> Result<Introspected, ConfigError> {
    let script = tempfile::Builder::new()
        .prefix("rl-introspect-")
        .suffix(".py")
        .tempfile()
        .map_err(|error| ConfigError::Introspection(format!("cannot write helper: {error}")))?;
    std::fs::write(script.path(), SCRIPT)
        .map_err(|error| ConfigError::Introspection(format!("cannot write helper: {error}")))?;
    let mut command = Command::new(python);
    // It imports the environment's own code: no key, nor rl's own secrets.
    rl_settings::withhold(&mut command, &[]);
    let mut child = command
        .arg(script.path())
        .arg(env_file)
        .arg(class_name)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("HF_HUB_OFFLINE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // A group of its own: what the import starts (a server, a pool's workers) is ended
        // with it, on a timeout and after it exits.
        .process_group(0)
        .spawn()
        .map_err(|error| {
            ConfigError::Introspection(format!("cannot run {}: {error}", python.display()))
        })?;
    let group = GroupGuard(child.id());
    // Pipes are drained on threads so a chatty child cannot block on a full pipe.
    let out = Captured::start(child.stdout.take(), Keep::Start(MAX_ANSWER));
    let err = Captured::start(child.stderr.take(), Keep::End(KEPT_ERRORS));
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() >= timeout => {
                drop(group);
                let _ = child.wait();
                return Err(ConfigError::Introspection(format!(
                    "{} did not finish within {} s and was stopped",
                    env_file.display(),
                    timeout.as_secs()
                )));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(error) => return Err(ConfigError::Introspection(error.to_string())),
        }
    };
    drop(group);
    let stdout = out.text(OUTPUT_GRACE);
    let stderr = err.text(OUTPUT_GRACE);
    match serde_json::from_str::<Introspected>(stdout.trim()) {
        Ok(introspected) if status.success() => Ok(introspected),
        Ok(introspected) => Err(ConfigError::Introspection(format!(
            "no config class found: {}",
            introspected.errors.join("; ")
        ))),
        Err(_) => Err(ConfigError::Introspection(format!(
            "the helper printed no result ({status}); last output: {}",
            tail(&stderr, 5)
        ))),
    }
}

/// Ends the introspection's whole process group when dropped (SIGKILL: it only imports).
struct GroupGuard(u32);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.0) {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// Which part of a stream is kept.
#[derive(Clone, Copy)]
enum Keep {
    /// Its first bytes, up to this many.
    Start(usize),
    /// Its last bytes, at least this many (at most twice).
    End(usize),
}

impl Keep {
    fn add(self, kept: &mut Vec<u8>, read: &[u8]) {
        match self {
            Self::Start(most) => {
                let room = most.saturating_sub(kept.len());
                kept.extend_from_slice(&read[..room.min(read.len())]);
            }
            Self::End(least) => {
                kept.extend_from_slice(read);
                // Dropped in bulk, not at every read.
                if kept.len() > 2 * least {
                    kept.drain(..kept.len() - least);
                }
            }
        }
    }
}

/// A stream read to its end on a thread of its own, in chunks, keeping only part of it.
struct Captured {
    kept: Arc<Mutex<Vec<u8>>>,
    closed: mpsc::Receiver<()>,
}

impl Captured {
    fn start(pipe: Option<impl Read + Send + 'static>, keep: Keep) -> Self {
        let kept = Arc::new(Mutex::new(Vec::new()));
        let (closing, closed) = mpsc::channel();
        let filled = kept.clone();
        std::thread::spawn(move || {
            if let Some(mut pipe) = pipe {
                let mut chunk = vec![0; 64 * 1024];
                loop {
                    match pipe.read(&mut chunk) {
                        Ok(0) => break,
                        Ok(read) => keep.add(
                            &mut filled.lock().unwrap_or_else(PoisonError::into_inner),
                            &chunk[..read],
                        ),
                        Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(_) => break,
                    }
                }
            }
            let _ = closing.send(());
        });
        Self { kept, closed }
    }

    /// What was kept, once the stream closed or `grace` passed.
    fn text(self, grace: Duration) -> String {
        let _ = self.closed.recv_timeout(grace);
        let kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        String::from_utf8_lossy(&kept).into_owned()
    }
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join(" | ")
}

/// Fields whose names or literal defaults differ between the two readings. A default the
/// static reading calls computed is not a disagreement: it only says Python knows more.
pub fn compare(schema: &ConfigSchema, python: &Introspected) -> Vec<Disagreement> {
    let mut disagreements = Vec::new();
    for field in &python.fields {
        let Some(spec) = schema.field(&field.name) else {
            disagreements.push(Disagreement {
                field: field.name.clone(),
                static_reading: "missing".to_owned(),
                python: format!("{} = {}", field.type_text, show(field.default.as_ref())),
            });
            continue;
        };
        let python_default = python
            .env_defaults
            .get(&field.name)
            .or(field.default.as_ref());
        if let (Some(ours), Some(theirs)) = (spec.effective_default().value(), python_default)
            && !same_value(ours, theirs)
        {
            disagreements.push(Disagreement {
                field: field.name.clone(),
                static_reading: ours.to_string(),
                python: theirs.to_string(),
            });
        }
    }
    for spec in &schema.fields {
        if !python.fields.iter().any(|f| f.name == spec.name) {
            disagreements.push(Disagreement {
                field: spec.name.clone(),
                static_reading: spec.type_text.clone(),
                python: "missing".to_owned(),
            });
        }
    }
    disagreements
}

/// `600` and `600.0` are one value to pydantic.
fn same_value(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

fn show(value: Option<&Value>) -> String {
    value.map_or_else(|| "(none)".to_owned(), ToString::to_string)
}
