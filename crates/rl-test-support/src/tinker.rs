//! Tinker servers a test starts on loopback: the local engine on its own (`python -m
//! rl_engine`, skyrl-tx with the routes the current SDK needs) and the stand-in for the hosted
//! service (`fixtures/tinker-service`), which checks keys and SDK versions and forwards
//! training and sampling to an engine. Both are ended with their process group when dropped.

use std::io::BufRead as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{LocalEngine, workspace_root};

/// How long the engine may take to answer: it imports JAX and loads the model (seconds when
/// idle, a minute on a busy 2-core machine).
const ENGINE_READY: Duration = Duration::from_secs(300);

fn end_group(child: &mut Child) {
    use nix::sys::signal::{Signal, killpg};
    use nix::unistd::Pid;
    if let Ok(pid) = i32::try_from(child.id()) {
        let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
    }
    let _ = child.wait();
}

/// A free loopback port (the kernel's choice, released for the server to take).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    listener.local_addr().expect("its address").port()
}

/// Whether something answers HTTP at `host:port` `path` (any status).
fn answers(port: u16, path: &str) -> bool {
    use std::io::{Read as _, Write as _};
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    let mut head = [0_u8; 12];
    stream.write_all(request.as_bytes()).is_ok()
        && stream.read_exact(&mut head).is_ok()
        && head.starts_with(b"HTTP/1.")
}

/// The local engine, serving `engine.base_model`, its database and checkpoints in `folder`.
pub struct EngineServer {
    child: Child,
    pub url: String,
}

impl EngineServer {
    /// # Panics
    /// When it cannot start or does not answer within [`ENGINE_READY`].
    pub fn start(engine: &LocalEngine, folder: &Path) -> Self {
        let port = free_port();
        let log = std::fs::File::create(folder.join("engine.log")).expect("the engine's log");
        let mut child = Command::new(&engine.python)
            .args(["-m", "rl_engine", "--base-model"])
            .arg(&engine.base_model)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .arg("--database-url")
            .arg(format!("sqlite:///{}", folder.join("tinker.db").display()))
            .arg("--checkpoints-base")
            .arg(folder.join("checkpoints"))
            .args([
                "--backend-config",
                r#"{"max_lora_adapters": 3, "max_lora_rank": 8, "sample_max_num_sequences": 64, "train_micro_batch_size": 8}"#,
            ])
            .env("PYTHONPATH", workspace_root().join("crates/rl-python/python"))
            .env("JAX_PLATFORMS", "cpu")
            .envs(crate::jax_cache_environment())
            .env("HF_HUB_OFFLINE", "1")
            .env("TRANSFORMERS_OFFLINE", "1")
            .current_dir(folder)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("the log again"))
            .stderr(log)
            .process_group(0)
            .spawn()
            .expect("the engine starts");
        let started = Instant::now();
        while !answers(port, "/api/v1/healthz") {
            if let Ok(Some(status)) = child.try_wait() {
                let said = std::fs::read_to_string(folder.join("engine.log")).unwrap_or_default();
                panic!("the engine ended ({status}) before answering:\n{said}");
            }
            if started.elapsed() > ENGINE_READY {
                end_group(&mut child);
                panic!("the engine did not answer within {ENGINE_READY:?}");
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }
}

impl Drop for EngineServer {
    fn drop(&mut self) {
        end_group(&mut self.child);
    }
}

/// How the stand-in for the hosted Tinker service is started.
#[derive(Default)]
pub struct ServiceOptions<'a> {
    /// The only key it accepts (it is told the key's SHA-256, never the key).
    pub key: Option<&'a str>,
    /// The engine it forwards training and sampling to.
    pub engine: Option<&'a str>,
    /// SDKs older than this are refused at `create_session`, as the hosted service does.
    pub min_sdk: Option<&'a str>,
    /// What it serves as any checkpoint's files, instead of the engine's.
    pub archive: Option<&'a Path>,
}

/// The stand-in for the hosted Tinker service (`fixtures/tinker-service`).
pub struct TinkerService {
    child: Child,
    pub url: String,
    log: PathBuf,
}

impl TinkerService {
    /// # Panics
    /// When it cannot start or does not say where it listens.
    pub fn start(folder: &Path, options: &ServiceOptions<'_>) -> Self {
        let log = folder.join("service.jsonl");
        let mut command = Command::new("python3");
        command
            .arg(workspace_root().join("fixtures/tinker-service/tinker_service.py"))
            .args(["--port", "0", "--log"])
            .arg(&log);
        if let Some(key) = options.key {
            command.args(["--require-key-sha256", &sha256_hex(key)]);
        }
        if let Some(engine) = options.engine {
            command.args(["--engine", engine]);
        }
        if let Some(version) = options.min_sdk {
            command.args(["--min-sdk", version]);
        }
        if let Some(archive) = options.archive {
            command.arg("--archive").arg(archive);
        }
        let mut child = command
            .stdout(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("the stand-in starts");
        let mut first = String::new();
        if let Some(stdout) = child.stdout.take() {
            let _ = std::io::BufReader::new(stdout).read_line(&mut first);
        }
        let url = first
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("the stand-in said {first:?}"))
            .to_owned();
        Self { child, url, log }
    }

    /// The requests it answered, one JSON object each (method, path, body, status,
    /// key_sha256, ...).
    pub fn requests(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }
}

impl Drop for TinkerService {
    fn drop(&mut self) {
        end_group(&mut self.child);
    }
}

/// Hex SHA-256, as the fixture servers log a key.
pub fn sha256_hex(text: &str) -> String {
    use sha2::Digest as _;
    use std::fmt::Write as _;
    sha2::Sha256::digest(text.as_bytes())
        .iter()
        .fold(String::with_capacity(64), |mut hex, byte| {
            let _ = write!(hex, "{byte:02x}");
            hex
        })
}
