//! Readiness gates: questions asked over HTTP instead of sleeping and hoping.

use std::time::Duration;

use async_trait::async_trait;

use crate::ProcessError;

/// What "ready" means for each phase of a start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    /// run-api answers `GET /`.
    ApiAnswers { port: u16 },
    /// The trainer's inference server answers `GET /health` with a success.
    TrainerHealthy { port: u16 },
    /// The environment has registered with run-api. atroposlib 0.4.0 shows that only as
    /// `GET /status-env` with the body `{"env_id": 0}` turning from 500 to 200; every run has
    /// its own API, so its environment is always id 0.
    EnvRegistered { api_port: u16 },
}

impl Readiness {
    /// What was asked, for messages when the answer never came.
    pub fn describe(self, host: &str) -> String {
        match self {
            Readiness::ApiAnswers { port } => format!("GET http://{host}:{port}/"),
            Readiness::TrainerHealthy { port } => format!("GET http://{host}:{port}/health"),
            Readiness::EnvRegistered { api_port } => {
                format!("registration via GET http://{host}:{api_port}/status-env")
            }
        }
    }
}

#[cfg_attr(test, mockall::automock)]
#[async_trait]
pub trait Probe: Send + Sync {
    /// One attempt at `host`; `false` for "not yet" of every kind (refused, timed out, error
    /// status).
    async fn is_ready(&self, host: &str, readiness: Readiness) -> bool;
}

/// Asks over HTTP, never through a proxy.
#[derive(Debug, Clone)]
pub struct HttpProbe {
    client: reqwest::Client,
}

/// A component that takes longer than this to answer one question is not ready yet.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(1);

impl HttpProbe {
    pub fn new() -> Result<Self, ProcessError> {
        // The probes are plain HTTP on loopback, but reqwest is built with TLS and without a
        // provider, and refuses to build a client before one is installed.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .no_proxy()
            .timeout(ATTEMPT_TIMEOUT)
            .connect_timeout(ATTEMPT_TIMEOUT)
            .build()
            .map_err(|error| ProcessError::Probe(error.to_string()))?;
        Ok(Self { client })
    }
}

#[async_trait]
impl Probe for HttpProbe {
    async fn is_ready(&self, host: &str, readiness: Readiness) -> bool {
        let request = match readiness {
            Readiness::ApiAnswers { port } => {
                // Any HTTP answer means the server is up; the root has no route of its own.
                return self
                    .client
                    .get(format!("http://{host}:{port}/"))
                    .send()
                    .await
                    .is_ok();
            }
            Readiness::TrainerHealthy { port } => {
                self.client.get(format!("http://{host}:{port}/health"))
            }
            Readiness::EnvRegistered { api_port } => self
                .client
                .get(format!("http://{host}:{api_port}/status-env"))
                .json(&serde_json::json!({ "env_id": 0 })),
        };
        request
            .send()
            .await
            .is_ok_and(|response| response.status().is_success())
    }
}
