//! Integration tests of rl-inference-test: the runner on plain processes, and whole tests of the
//! fixture environment in atroposlib's real `process` mode against the fixture OpenAI server.

#![allow(clippy::unwrap_used, clippy::print_stderr)]

mod preflight;
mod runner;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use rl_config::{ConfigService, Settings};
use rl_inference_test::{
    CorrectRule, Endpoint, LocalModelRunner, Progress, ProgressSink, Redactor, TestPlan,
    TestReport, TestRequest, TestStore,
};
use rl_test_support::workspace_root;

/// The fixture OpenAI-compatible server (fixtures/openai-server), its model names its policies.
pub(crate) struct FixtureServer {
    child: Child,
    pub(crate) base_url: String,
    pub(crate) request_log: PathBuf,
    _dir: tempfile::TempDir,
}

impl FixtureServer {
    pub(crate) fn start(python: &Path, required_key_sha256: Option<&str>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let request_log = dir.path().join("requests.jsonl");
        let mut command = Command::new(python);
        command
            .arg(workspace_root().join("fixtures/openai-server/openai_server.py"))
            .args(["--port", "0", "--log"])
            .arg(&request_log)
            .stdout(Stdio::piped());
        if let Some(hash) = required_key_sha256 {
            command.args(["--require-key-sha256", hash]);
        }
        let mut child = command.spawn().unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
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

    /// Models (policies) of the requests the server received, in order.
    pub(crate) fn requests(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(&self.request_log)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }
}

impl Drop for FixtureServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A state directory with the local stack's settings and the arithmetic environment selected.
pub(crate) struct Stack {
    pub(crate) home: tempfile::TempDir,
    pub(crate) service: ConfigService,
}

impl Stack {
    pub(crate) fn new(python: &Path) -> Self {
        let home = tempfile::tempdir().unwrap();
        let root = workspace_root();
        let template = std::fs::read_to_string(root.join("fixtures/local-stack.toml")).unwrap();
        let settings = template
            .replace("@REPO@", &root.display().to_string())
            .replace("@PYTHON@", &python.display().to_string());
        std::fs::write(home.path().join("config.toml"), settings).unwrap();
        let settings = Settings::load(home.path(), std::iter::empty()).unwrap();
        let service = ConfigService::open(home.path(), settings).unwrap();
        service.select("arithmetic").unwrap();
        Self { home, service }
    }

    pub(crate) fn plan(&self, request: TestRequest) -> TestPlan {
        let settings = self.service.settings();
        TestPlan::new(
            request,
            &self.service.selection().unwrap(),
            settings,
            settings.tinker_atropos_root.clone().unwrap(),
        )
        .unwrap()
    }

    pub(crate) fn store(&self) -> TestStore {
        TestStore::new(self.home.path())
    }

    pub(crate) async fn run(&self, plan: &TestPlan, redactor: Redactor) -> TestReport {
        rl_inference_test::run_test(
            plan,
            &self.store(),
            Arc::new(LocalModelRunner),
            redactor,
            ignore_progress(),
        )
        .await
        .unwrap()
    }
}

pub(crate) fn request(server: &FixtureServer, models: &[&str]) -> TestRequest {
    TestRequest {
        models: models.iter().map(|m| (*m).to_owned()).collect(),
        endpoint: Endpoint {
            base_url: server.base_url.clone(),
            key_variable: "FIXTURE_KEY".to_owned(),
            key: Some("sk-fixture-not-checked".to_owned()),
        },
        steps: 3,
        group_size: 4,
        use_wandb: false,
        concurrency: 4,
        timeout: Duration::from_secs(120),
        correct_rule: CorrectRule::TopScore,
    }
}

pub(crate) fn ignore_progress() -> ProgressSink {
    Arc::new(|_: Progress| {})
}

pub(crate) fn test_python() -> Option<PathBuf> {
    rl_test_support::test_python("the pre-flight tests against atroposlib")
}

/// Every process whose command line mentions `needle` (to prove none is left).
pub(crate) fn processes_mentioning(needle: &str) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
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
