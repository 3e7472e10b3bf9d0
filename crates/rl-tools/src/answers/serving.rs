//! What serving answers: a server of rl's own (`ServedView`, from its record), a hosted run's
//! endpoint, a stop, and `rl_serve_checkpoint`'s answer with what to do next.

use std::path::PathBuf;

use serde::Serialize;

/// A server of rl's own, as `rl checkpoints served` and the agents' tools show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServedView {
    pub serve_id: String,
    /// `starting` (loading its checkpoints) or `ready`.
    pub state: &'static str,
    pub run_id: String,
    /// The names a request's `model` gives (`run:ID@STEP`, `run:ID@base`).
    pub models: Vec<String>,
    /// What an OpenAI-compatible client is pointed at; it takes any API key.
    pub base_url: String,
    pub port: u16,
    /// The rl process serving it: its end is the server's.
    pub owner_pid: u32,
    pub started_at: String,
    pub log: PathBuf,
}

impl ServedView {
    pub fn is_ready(&self) -> bool {
        self.state == "ready"
    }
}

/// Every server up.
#[derive(Debug, Clone, Serialize)]
pub struct ServedList {
    pub served: Vec<ServedView>,
    pub count: usize,
}

/// A hosted run's checkpoints, served by the Tinker service itself.
#[derive(Debug, Clone, Serialize)]
pub struct HostedEndpoint {
    pub run_id: String,
    pub base_url: String,
    /// rl's name for each, and the model a request to `base_url` gives (its sampler path, or
    /// the base model's name).
    pub models: Vec<HostedModel>,
    /// The variable holding the key the endpoint takes (never its value).
    pub key_variable: &'static str,
}

#[derive(Debug, Clone, Serialize)]
pub struct HostedModel {
    pub name: String,
    pub model: String,
}

/// What starting to serve answers: a server of rl's own, starting in a process of its own, or
/// the service's endpoint of a hosted run.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum ServingStarted {
    Local(ServedView),
    Hosted(HostedEndpoint),
}

/// What `rl_serve_checkpoint` answers: what started, and what to do next.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ServingAnswer {
    #[serde(flatten)]
    started: ServingStarted,
    #[serde(skip_serializing_if = "Option::is_none")]
    poll_after_seconds: Option<u64>,
    next: String,
}

impl From<ServingStarted> for ServingAnswer {
    fn from(started: ServingStarted) -> Self {
        let (poll_after_seconds, next) = match &started {
            ServingStarted::Local(served) => (
                Some(10),
                format!(
                    "call rl_list_served every poll_after_seconds until server {} is ready, then \
                     point an OpenAI-compatible client at its base_url with one of its models; \
                     rl_stop_serving ends it",
                    served.serve_id
                ),
            ),
            ServingStarted::Hosted(endpoint) => (
                None,
                format!(
                    "point an OpenAI-compatible client at base_url with a model's `model` and \
                     the key in {}",
                    endpoint.key_variable
                ),
            ),
        };
        Self {
            started,
            poll_after_seconds,
            next,
        }
    }
}

/// A server ended by `rl checkpoints stop`.
#[derive(Debug, Clone, Serialize)]
pub struct StoppedServer {
    pub serve_id: String,
    pub models: Vec<String>,
    /// `owner` when its rl process ended it, `forced` when rl ended its group itself.
    pub ended_by: &'static str,
}
