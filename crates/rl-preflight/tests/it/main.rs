//! Integration tests of rl-preflight: the runner on plain processes, and whole tests of the
//! fixture environment in atroposlib's real `process` mode against the fixture OpenAI server.

#![allow(clippy::unwrap_used, clippy::print_stderr)]

mod hostile_models;
mod preflight;
mod runner;
mod served;
mod tracking;
mod verdicts;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rl_config::ConfigService;
use rl_preflight::{
    CorrectRule, Endpoint, LocalModelRunner, PreflightPlan, PreflightReport, PreflightRequest,
    PreflightStore, Progress, ProgressSink,
};
use rl_settings::{Secrets, Settings};
pub(crate) use rl_test_support::{FixtureServer, processes_mentioning};

/// A state directory with the local stack's settings and the arithmetic environment selected.
pub(crate) struct Stack {
    pub(crate) home: tempfile::TempDir,
    pub(crate) service: ConfigService,
}

impl Stack {
    pub(crate) fn new(python: &Path) -> Self {
        let home = tempfile::tempdir().unwrap();
        let settings = rl_test_support::local_stack_settings(python);
        std::fs::write(home.path().join("config.toml"), settings).unwrap();
        let settings = Settings::load(home.path(), std::iter::empty()).unwrap();
        let service = ConfigService::open(home.path(), settings).unwrap();
        service.select("arithmetic").unwrap();
        Self { home, service }
    }

    pub(crate) fn plan(&self, request: PreflightRequest) -> PreflightPlan {
        let settings = self.service.settings();
        PreflightPlan::new(
            request,
            &self.service.selection().unwrap(),
            settings,
            settings.tinker_atropos_root.clone().unwrap(),
        )
        .unwrap()
    }

    pub(crate) fn store(&self) -> PreflightStore {
        PreflightStore::new(self.home.path())
    }

    pub(crate) async fn run(&self, plan: &PreflightPlan, secrets: Secrets) -> PreflightReport {
        rl_preflight::run_test(
            plan,
            &self.store(),
            Arc::new(LocalModelRunner::default()),
            secrets,
            ignore_progress(),
        )
        .await
        .unwrap()
    }
}

pub(crate) fn request(server: &FixtureServer, models: &[&str]) -> PreflightRequest {
    request_at(&server.base_url, models)
}

pub(crate) fn request_at(base_url: &str, models: &[&str]) -> PreflightRequest {
    PreflightRequest {
        models: models.iter().map(|m| (*m).to_owned()).collect(),
        endpoint: Endpoint {
            base_url: base_url.to_owned(),
            key_variable: "FIXTURE_KEY".to_owned(),
            key: Some("sk-fixture-not-checked".to_owned()),
        },
        steps: 3,
        group_size: 4,
        use_wandb: false,
        wandb_key: None,
        environment_keys: Vec::new(),
        concurrency: 4,
        timeout: Duration::from_secs(120),
        correct_rule: CorrectRule::TopScore,
        server: None,
        held_out: None,
        runner: None,
        python: None,
    }
}

pub(crate) fn ignore_progress() -> ProgressSink {
    Arc::new(|_: Progress| {})
}

pub(crate) fn test_python() -> PathBuf {
    rl_test_support::test_python()
}
