//! WandB's public GraphQL API as a metrics source: the only source that sees a run logged from
//! another machine, and the slowest and least reliable one, hence the bounded retries.
//!
//! Runs are found by display-name prefix within the group (nobody's run has the bare configured
//! name, see [`WandbNames`](crate::WandbNames)), and history is read in full by step ranges:
//! `history(samples: N)` alone returns a sample, which would hide exactly the spikes the health
//! digest looks for.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::OnceCell;

use crate::error::MetricsError;
use crate::model::{RunMetrics, RunRole, SourceKind};
use crate::source::{MetricsSource, RunTarget};

mod queries;
mod responses;
mod transport;

use transport::error_chain;

const DEFAULT_BASE_URL: &str = "https://api.wandb.ai";

/// How to reach WandB. The key is private so that nothing prints it by accident: `Debug`
/// redacts it and no error text carries it.
#[derive(Clone)]
pub struct WandbApiConfig {
    /// Without a trailing slash, e.g. `https://api.wandb.ai`.
    pub base_url: String,
    api_key: String,
    /// `None` asks WandB for the key's default entity (once per [`WandbApi`]).
    pub entity: Option<String>,
    /// Per HTTP request, so that one hung request cannot stall a status.
    pub request_timeout: Duration,
    /// The whole lookup (every request, retry and wait) ends by then: the one limit a caller
    /// is promised.
    pub deadline: Duration,
    /// Attempts per request, the first included.
    pub max_attempts: u32,
    /// Doubled after each failed attempt.
    pub initial_backoff: Duration,
    /// Also caps a server's `Retry-After`, so a status never waits minutes.
    pub max_backoff: Duration,
    /// Steps per history request.
    pub history_page_size: u32,
    /// History requests per run at most; steps beyond are left out with a warning.
    pub max_history_pages: u32,
}

impl fmt::Debug for WandbApiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WandbApiConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &"[REDACTED]")
            .field("entity", &self.entity)
            .field("request_timeout", &self.request_timeout)
            .field("deadline", &self.deadline)
            .field("max_attempts", &self.max_attempts)
            .field("initial_backoff", &self.initial_backoff)
            .field("max_backoff", &self.max_backoff)
            .field("history_page_size", &self.history_page_size)
            .field("max_history_pages", &self.max_history_pages)
            .finish()
    }
}

impl WandbApiConfig {
    pub fn new(base_url: impl Into<String>, api_key: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into().trim_end_matches('/').to_owned(),
            api_key: api_key.into(),
            entity: None,
            request_timeout: Duration::from_secs(20),
            deadline: Duration::from_secs(60),
            max_attempts: 4,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            history_page_size: 500,
            max_history_pages: 200,
        }
    }

    /// From `WANDB_API_KEY` (required), `WANDB_BASE_URL` and `WANDB_ENTITY`, the variables the
    /// wandb SDK itself reads, so a run's environment needs nothing new.
    pub fn from_env() -> Result<Self, MetricsError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// `from_env` over any lookup: a caller that also reads keys from a `.env` file passes its
    /// own, and tests need not touch the process's environment (they run in parallel).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, MetricsError> {
        let non_empty = |name: &str| {
            lookup(name)
                .map(|value| value.trim().to_owned())
                .filter(|value| !value.is_empty())
        };
        let api_key = non_empty("WANDB_API_KEY").ok_or(MetricsError::MissingApiKey)?;
        let base_url = non_empty("WANDB_BASE_URL").unwrap_or_else(|| DEFAULT_BASE_URL.to_owned());
        let mut config = Self::new(base_url, api_key);
        config.entity = non_empty("WANDB_ENTITY");
        Ok(config)
    }
}

/// The WandB API client. Cheap to share; the default entity, once asked, is kept.
#[derive(Debug)]
pub struct WandbApi {
    config: WandbApiConfig,
    client: reqwest::Client,
    endpoint: String,
    viewer_entity: OnceCell<String>,
}

impl WandbApi {
    pub fn new(config: WandbApiConfig) -> Result<Self, MetricsError> {
        if config.api_key.trim().is_empty() {
            return Err(MetricsError::MissingApiKey);
        }
        let endpoint = format!("{}/graphql", config.base_url.trim_end_matches('/'));
        // reqwest is built without a TLS provider; building a client without one installed
        // panics. Err means one is installed already, which is the goal.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .timeout(config.request_timeout)
            .user_agent(concat!("rl-metrics/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|error| MetricsError::Transport {
                url: endpoint.clone(),
                detail: error_chain(&error),
            })?;
        Ok(Self {
            config,
            client,
            endpoint,
            viewer_entity: OnceCell::new(),
        })
    }
}

#[async_trait]
impl MetricsSource for WandbApi {
    fn kind(&self) -> SourceKind {
        SourceKind::WandbApi
    }

    async fn fetch(&self, target: &RunTarget) -> Result<Option<RunMetrics>, MetricsError> {
        let deadline = self.config.deadline;
        tokio::time::timeout(deadline, self.fetch_unbounded(target))
            .await
            .unwrap_or_else(|_| {
                Err(MetricsError::Deadline {
                    seconds: rounded_up(deadline),
                })
            })
    }
}

/// Whole seconds, rounded up: "within 0 s" would read as no wait at all.
fn rounded_up(duration: Duration) -> u64 {
    duration.as_secs() + u64::from(duration.subsec_nanos() > 0)
}

impl WandbApi {
    async fn fetch_unbounded(
        &self,
        target: &RunTarget,
    ) -> Result<Option<RunMetrics>, MetricsError> {
        let Some(names) = target.wandb.as_ref() else {
            return Ok(None);
        };
        let entity = self.entity().await?;
        let mut warnings = Vec::new();
        // Both runs are looked up before any history is read, so a run that has not logged
        // yet costs one or two small requests.
        let trainer = if target.env_only {
            None
        } else {
            self.find_run(entity, names, RunRole::Trainer, &mut warnings)
                .await?
        };
        let env = self
            .find_run(entity, names, RunRole::Env, &mut warnings)
            .await?;
        if trainer.is_none() && env.is_none() {
            return Ok(None);
        }
        let project = names.project.as_str();
        let mut metrics = RunMetrics::empty(SourceKind::WandbApi);
        if let Some(node) = trainer {
            metrics.trainer = Some(
                self.logged_run(entity, project, node, &mut warnings)
                    .await?,
            );
        }
        if let Some(node) = env {
            metrics.env = Some(
                self.logged_run(entity, project, node, &mut warnings)
                    .await?,
            );
        }
        metrics.warnings = warnings;
        Ok(Some(metrics))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "0123456789abcdef0123456789abcdef01234567";

    fn lookup<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            pairs
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        }
    }

    #[test]
    fn debug_output_never_shows_the_key() {
        let config = WandbApiConfig::new("https://api.wandb.ai", KEY);
        let debug = format!("{config:?}");
        assert!(!debug.contains(KEY), "{debug}");
        assert!(debug.contains("REDACTED"));
        let api = WandbApi::new(config).expect("client");
        assert!(!format!("{api:?}").contains(KEY));
    }

    #[test]
    fn a_missing_or_empty_key_is_refused() {
        assert!(matches!(
            WandbApiConfig::from_lookup(lookup(&[])),
            Err(MetricsError::MissingApiKey)
        ));
        assert!(matches!(
            WandbApiConfig::from_lookup(lookup(&[("WANDB_API_KEY", "  ")])),
            Err(MetricsError::MissingApiKey)
        ));
        assert!(matches!(
            WandbApi::new(WandbApiConfig::new("http://127.0.0.1:1", "")),
            Err(MetricsError::MissingApiKey)
        ));
    }

    #[test]
    fn the_environment_sets_key_url_and_entity() {
        let config = WandbApiConfig::from_lookup(lookup(&[("WANDB_API_KEY", KEY)])).expect("ok");
        assert_eq!(config.base_url, "https://api.wandb.ai");
        assert_eq!(config.entity, None);
        assert_eq!(config.api_key, KEY);

        let config = WandbApiConfig::from_lookup(lookup(&[
            ("WANDB_API_KEY", KEY),
            ("WANDB_BASE_URL", "https://wandb.example.com/"),
            ("WANDB_ENTITY", "team"),
        ]))
        .expect("ok");
        assert_eq!(config.base_url, "https://wandb.example.com");
        assert_eq!(config.entity.as_deref(), Some("team"));

        let config = WandbApiConfig::from_lookup(lookup(&[
            ("WANDB_API_KEY", KEY),
            ("WANDB_BASE_URL", ""),
            ("WANDB_ENTITY", ""),
        ]))
        .expect("ok");
        assert_eq!(config.base_url, "https://api.wandb.ai");
        assert_eq!(config.entity, None);
    }
}
