//! Readiness gates: questions asked over HTTP instead of sleeping and hoping.

use std::time::Duration;

use async_trait::async_trait;

use crate::ProcessError;

/// What "ready" means for each phase of a start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    /// The local Tinker-compatible engine answers `GET /api/v1/healthz`.
    EngineHealthy { port: u16 },
    /// run-api answers `GET /status` with its step counter.
    ApiAnswers { port: u16 },
    /// The trainer's inference server answers `GET /health` with a success.
    TrainerHealthy { port: u16 },
    /// The environment has registered with run-api and sent it a first scored group: run-api's
    /// `GET /latest_example` holds tokens. atroposlib 0.4.0 has no question that tells the
    /// registration alone without raising: `GET /status-env` answers 500 until then, and
    /// run-api logs a 5 KB traceback for each (hundreds a start, asked every 100 ms).
    /// `/latest_example` never raises, and only an environment's data fills it.
    EnvSending { api_port: u16 },
}

impl Readiness {
    /// What was asked, for messages when the answer never came.
    pub fn describe(self, host: &str) -> String {
        match self {
            Readiness::EngineHealthy { port } => {
                format!("GET http://{host}:{port}{ENGINE_HEALTH_PATH}")
            }
            Readiness::ApiAnswers { port } => format!("GET http://{host}:{port}/status"),
            Readiness::TrainerHealthy { port } => format!("GET http://{host}:{port}/health"),
            Readiness::EnvSending { api_port } => {
                format!("a first scored group at GET http://{host}:{api_port}{LATEST_EXAMPLE_PATH}")
            }
        }
    }
}

/// skyrl-tx's health route (the hosted Tinker's too).
const ENGINE_HEALTH_PATH: &str = "/api/v1/healthz";
/// run-api's last scored group received (empty lists before the first).
const LATEST_EXAMPLE_PATH: &str = "/latest_example";

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

impl HttpProbe {
    /// Whether `url` answers with a success whose JSON body (`None`: not JSON) passes `check`.
    async fn answers(&self, url: &str, check: impl Fn(Option<serde_json::Value>) -> bool) -> bool {
        let Ok(response) = self.client.get(url).send().await else {
            return false;
        };
        response.status().is_success() && check(response.json::<serde_json::Value>().await.ok())
    }
}

#[async_trait]
impl Probe for HttpProbe {
    async fn is_ready(&self, host: &str, readiness: Readiness) -> bool {
        let request = match readiness {
            Readiness::ApiAnswers { port } => {
                // run-api's own route and shape, so that another server on the port (one that
                // took it before the API could bind it) is never taken for the run's API.
                return self
                    .answers(&format!("http://{host}:{port}/status"), |status| {
                        status.is_some_and(|status| status.get("current_step").is_some())
                    })
                    .await;
            }
            Readiness::EngineHealthy { port } => self
                .client
                .get(format!("http://{host}:{port}{ENGINE_HEALTH_PATH}")),
            Readiness::TrainerHealthy { port } => {
                // rl's trainer serves /health while it sets up; it is ready once it says it
                // is initialised (a trainer that does not say is ready when it answers).
                return self
                    .answers(&format!("http://{host}:{port}/health"), |health| {
                        health.is_none_or(|health| {
                            health.get("trainer_initialized")
                                != Some(&serde_json::Value::Bool(false))
                        })
                    })
                    .await;
            }
            Readiness::EnvSending { api_port } => {
                return self
                    .answers(
                        &format!("http://{host}:{api_port}{LATEST_EXAMPLE_PATH}"),
                        has_tokens,
                    )
                    .await;
            }
        };
        request
            .send()
            .await
            .is_ok_and(|response| response.status().is_success())
    }
}

/// Whether run-api's latest example is a group an environment sent (before any, its `tokens`
/// is an empty list).
#[allow(clippy::needless_pass_by_value)] // the shape `answers` hands every check
fn has_tokens(example: Option<serde_json::Value>) -> bool {
    example
        .as_ref()
        .and_then(|example| example.get("tokens"))
        .and_then(serde_json::Value::as_array)
        .is_some_and(|tokens| !tokens.is_empty())
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpListener;

    use super::*;

    /// Answers every request on a loopback port with `body` (200, JSON), until dropped.
    fn server_answering(body: &'static str) -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for mut stream in listener.incoming().map_while(Result::ok) {
                let mut request = [0u8; 4096];
                let _ = stream.read(&mut request);
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
                     connection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        port
    }

    #[test]
    fn only_a_group_an_environment_sent_counts_as_the_environment_sending() {
        let before = serde_json::json!({"tokens": [], "masks": [], "scores": []});
        let after = serde_json::json!({"tokens": [[1, 2], [3]], "scores": [1.0, 0.0]});
        assert!(!has_tokens(Some(before)));
        assert!(!has_tokens(None));
        assert!(!has_tokens(Some(
            serde_json::json!({"detail": "Not Found"})
        )));
        assert!(has_tokens(Some(after)));
    }

    #[tokio::test]
    async fn only_run_api_itself_counts_as_the_api() {
        let probe = HttpProbe::new().unwrap();
        let api = server_answering(r#"{"current_step":0,"queue_size":0}"#);
        // Asked again and again, as the supervisor's gate does: one attempt may time out on a
        // loaded machine.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while !probe
            .is_ready("127.0.0.1", Readiness::ApiAnswers { port: api })
            .await
        {
            assert!(
                tokio::time::Instant::now() < deadline,
                "run-api never ready"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let stranger = server_answering(r#"{"message":"hello"}"#);
        assert!(
            !probe
                .is_ready("127.0.0.1", Readiness::ApiAnswers { port: stranger })
                .await
        );
    }
}
