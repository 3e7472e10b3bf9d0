//! `--introspect python`: the same fields read by importing the environment with the user's
//! interpreter, as a cross-check of the static reading. It runs environment code, so it is
//! opt-in, bounded by a timeout, and never the default.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::{ConfigError, ConfigSchema, Value};

const SCRIPT: &str = include_str!("../python/introspect_config.py");

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Introspected {
    pub config_class: Option<String>,
    pub fields: Vec<IntrospectedField>,
    #[serde(default)]
    pub env_defaults: BTreeMap<String, Value>,
    #[serde(default)]
    pub errors: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntrospectedField {
    pub name: String,
    #[serde(rename = "type")]
    pub type_text: String,
    pub default: Option<Value>,
    pub required: bool,
    pub description: Option<String>,
}

/// Where the static reading and Python disagree.
#[derive(Debug, Clone, PartialEq, Serialize)]
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
    let mut child = Command::new(python)
        .arg(script.path())
        .arg(env_file)
        .arg(class_name)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("HF_HUB_OFFLINE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| {
            ConfigError::Introspection(format!("cannot run {}: {error}", python.display()))
        })?;
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    // Pipes are drained on threads so a chatty child cannot block on a full pipe.
    let out = std::thread::spawn(move || read_all(stdout.as_mut()));
    let err = std::thread::spawn(move || read_all(stderr.as_mut()));
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() >= timeout => {
                let _ = child.kill();
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
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
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

fn read_all(pipe: Option<&mut impl Read>) -> String {
    let mut text = String::new();
    if let Some(pipe) = pipe {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        text = String::from_utf8_lossy(&bytes).into_owned();
    }
    text
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
