//! WandB's public GraphQL API as a metrics source: the only source that sees a run logged from
//! another machine, and the slowest and least reliable one, hence the bounded retries.
//!
//! Runs are found by display-name prefix within the group (nobody's run has the bare configured
//! name, see [`WandbNames`]), and history is read in full by step ranges: `history(samples: N)`
//! alone returns a sample, which would hide exactly the spikes the health digest looks for.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::sync::OnceCell;

use crate::error::MetricsError;
use crate::model::{HistoryRow, LoggedRun, MetricValue, RunMetrics, RunRole, SourceKind};
use crate::source::{MetricsSource, RunTarget, WandbNames};

mod responses;

use responses::{
    Envelope, HistoryProject, ProjectData, RowOutcome, RunNode, RunsProject, ViewerData, last_step,
    parse_row, parse_summary,
};

const DEFAULT_BASE_URL: &str = "https://api.wandb.ai";
/// Where people look at runs of the hosted service; a self-hosted server serves both.
const HOSTED_APP_URL: &str = "https://wandb.ai";
const RUNS_PER_PAGE: u32 = 50;
/// Server messages quoted in errors are cut here: a 502 page from a proxy is kilobytes of HTML.
const MAX_DETAIL_CHARS: usize = 200;

const VIEWER_QUERY: &str = "query Viewer { viewer { id entity } }";

const RUNS_QUERY: &str = "query Runs($project: String!, $entity: String!, $cursor: String, \
$perPage: Int, $filters: JSONString) { project(name: $project, entityName: $entity) { \
runs(filters: $filters, after: $cursor, first: $perPage, order: \"+created_at\") { \
edges { node { name displayName state group summaryMetrics historyKeys createdAt } cursor } \
pageInfo { endCursor hasNextPage } } } }";

const HISTORY_QUERY: &str = "query RunHistoryPage($project: String!, $entity: String!, \
$name: String!, $minStep: Int64!, $maxStep: Int64!, $samples: Int!) { \
project(name: $project, entityName: $entity) { run(name: $name) { \
history(minStep: $minStep, maxStep: $maxStep, samples: $samples) } } }";

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

    async fn entity(&self) -> Result<&str, MetricsError> {
        if let Some(entity) = self.config.entity.as_deref() {
            return Ok(entity);
        }
        self.viewer_entity
            .get_or_try_init(|| async {
                let data: ViewerData = self.graphql(VIEWER_QUERY, json!({})).await?;
                data.viewer
                    .and_then(|viewer| viewer.entity)
                    .filter(|entity| !entity.is_empty())
                    .ok_or_else(|| MetricsError::NotFound {
                        what: "default entity for this API key (set WANDB_ENTITY)".to_owned(),
                    })
            })
            .await
            .map(String::as_str)
    }

    /// The newest run of `role`, or `None` when it has not logged yet.
    async fn find_run(
        &self,
        entity: &str,
        names: &WandbNames,
        role: RunRole,
        warnings: &mut Vec<String>,
    ) -> Result<Option<RunNode>, MetricsError> {
        let prefix = match role {
            RunRole::Trainer => names.trainer_name_prefix.as_str(),
            RunRole::Env => match names.env_name_prefix.as_deref() {
                Some(prefix) => prefix,
                None => return Ok(None),
            },
        };
        let mut conditions =
            vec![json!({ "display_name": { "$regex": format!("^{}", escape_regex(prefix)) } })];
        if let Some(group) = &names.group {
            conditions.push(json!({ "group": group }));
        }
        let filters = json!({ "$and": conditions }).to_string();
        let mut runs = self.list_runs(entity, &names.project, &filters).await?;
        // The server's regex dialect is not ours to rely on, and an env prefix can be a prefix
        // of the trainer's: the same test the local sources use decides.
        runs.retain(|run| {
            run.display_name.as_deref().is_some_and(|name| match role {
                RunRole::Trainer => names.is_trainer_run(name),
                RunRole::Env => names.is_env_run(name),
            })
        });
        let count = runs.len();
        // Oldest first: a restarted training run's newest run is the live one.
        let Some(newest) = runs.pop() else {
            return Ok(None);
        };
        if count > 1 {
            let group = names
                .group
                .as_deref()
                .map(|group| format!(" in group '{group}'"))
                .unwrap_or_default();
            warnings.push(format!(
                "{count} WandB {role} runs are named '{prefix}…'{group}; using the newest, '{}' ({})",
                newest.display_name.as_deref().unwrap_or_default(),
                newest.name,
            ));
        }
        Ok(Some(newest))
    }

    async fn list_runs(
        &self,
        entity: &str,
        project: &str,
        filters: &str,
    ) -> Result<Vec<RunNode>, MetricsError> {
        let mut runs = Vec::new();
        let mut cursor: Option<String> = None;
        let mut seen_cursors = HashSet::new();
        loop {
            let variables = json!({
                "entity": entity,
                "project": project,
                "filters": filters,
                "cursor": cursor,
                "perPage": RUNS_PER_PAGE,
            });
            let data: ProjectData<RunsProject> = self.graphql(RUNS_QUERY, variables).await?;
            let Some(found) = data.project else {
                return Err(MetricsError::NotFound {
                    what: format!("project '{entity}/{project}'"),
                });
            };
            let Some(connection) = found.runs else {
                break;
            };
            let last_edge_cursor = connection.edges.last().and_then(|edge| edge.cursor.clone());
            runs.extend(connection.edges.into_iter().map(|edge| edge.node));
            if !connection.page_info.has_next_page {
                break;
            }
            // A cursor seen before would page forever.
            match connection.page_info.end_cursor.or(last_edge_cursor) {
                Some(next) if seen_cursors.insert(next.clone()) => cursor = Some(next),
                _ => {
                    return Err(MetricsError::Malformed(
                        "the runs list has more pages but its cursor does not advance".to_owned(),
                    ));
                }
            }
        }
        Ok(runs)
    }

    async fn logged_run(
        &self,
        entity: &str,
        project: &str,
        node: RunNode,
        warnings: &mut Vec<String>,
    ) -> Result<LoggedRun, MetricsError> {
        let summary = parse_summary(node.summary_metrics.as_ref(), &node.name, warnings);
        let last_step = last_step(node.history_keys.as_ref()).or_else(|| {
            summary
                .get("_step")
                .and_then(MetricValue::as_f64)
                .map(|step| step as i64)
        });
        let history = match last_step {
            Some(last_step) => {
                self.history(entity, project, &node.name, last_step, warnings)
                    .await?
            }
            None => Vec::new(),
        };
        let url = format!(
            "{}/{entity}/{project}/runs/{}",
            app_url(&self.config.base_url),
            node.name
        );
        Ok(LoggedRun {
            id: Some(node.name),
            name: node.display_name,
            group: node.group,
            state: node.state,
            url: Some(url),
            path: None,
            summary,
            history,
        })
    }

    /// Every row up to `last_step`, a page of steps `[min, max)` at a time, as the SDK's
    /// `scan_history` reads it: with at most one row per step, `samples` equal to the page's
    /// width returns the page unsampled.
    async fn history(
        &self,
        entity: &str,
        project: &str,
        run_id: &str,
        last_step: i64,
        warnings: &mut Vec<String>,
    ) -> Result<Vec<HistoryRow>, MetricsError> {
        let page = i64::from(self.config.history_page_size.max(1));
        let mut end = last_step.saturating_add(1);
        // A trainer that numbers steps by samples would otherwise cost thousands of requests.
        let limit = i64::from(self.config.max_history_pages.max(1)).saturating_mul(page);
        if end > limit {
            warnings.push(format!(
                "WandB run {run_id} logs steps up to {last_step}; only steps below {limit} were read ({} requests of {page} steps)",
                self.config.max_history_pages
            ));
            end = limit;
        }
        let mut rows = BTreeMap::new();
        let mut unreadable = 0usize;
        let mut min = 0i64;
        while min < end {
            let max = min.saturating_add(page).min(end);
            let variables = json!({
                "entity": entity,
                "project": project,
                "name": run_id,
                "minStep": min,
                "maxStep": max,
                "samples": page,
            });
            let data: ProjectData<HistoryProject> = self.graphql(HISTORY_QUERY, variables).await?;
            let Some(run) = data.project.and_then(|project| project.run) else {
                return Err(MetricsError::NotFound {
                    what: format!("run '{entity}/{project}/{run_id}'"),
                });
            };
            for line in run.history.unwrap_or_default() {
                match parse_row(&line) {
                    RowOutcome::Row(row) => {
                        // A server that counts `maxStep` in would send a boundary row twice.
                        rows.entry(row.step).or_insert(row);
                    }
                    RowOutcome::NoStep => {}
                    RowOutcome::Unreadable => unreadable += 1,
                }
            }
            min = max;
        }
        if unreadable > 0 {
            warnings.push(format!(
                "{unreadable} history row(s) of WandB run {run_id} could not be read and were skipped"
            ));
        }
        Ok(rows.into_values().collect())
    }

    /// One GraphQL request with the SDK's retry policy: rate limits, server errors, timeouts
    /// and lost connections are retried with backoff; a refused key or a bad request is not,
    /// since asking again cannot help.
    async fn graphql<T: DeserializeOwned>(
        &self,
        query: &str,
        variables: Value,
    ) -> Result<T, MetricsError> {
        let body = json!({ "query": query, "variables": variables });
        let max_attempts = self.config.max_attempts.max(1);
        let mut attempt = 1;
        loop {
            let (error, retry_after) = match self.attempt(&body, attempt).await {
                Ok(text) => return self.decode(&text),
                Err(Failure::Final(error)) => return Err(error),
                Err(Failure::Retry { error, retry_after }) => (error, retry_after),
            };
            if attempt >= max_attempts {
                return Err(error);
            }
            tokio::time::sleep(self.wait_before_retry(attempt, retry_after)).await;
            attempt += 1;
        }
    }

    async fn attempt(&self, body: &Value, attempt: u32) -> Result<String, Failure> {
        let response = self
            .client
            .post(&self.endpoint)
            .basic_auth("api", Some(&self.config.api_key))
            .json(body)
            .send()
            .await
            .map_err(|error| self.transport_failure(&error, attempt))?;
        let status = response.status();
        let retry_after = retry_after(response.headers());
        let text = response
            .text()
            .await
            .map_err(|error| self.transport_failure(&error, attempt))?;
        if status.is_success() {
            return Ok(text);
        }
        let code = status.as_u16();
        let detail = self.redact(&server_detail(&text, status));
        Err(match code {
            401 | 403 => Failure::Final(MetricsError::Unauthorized {
                status: code,
                detail: if detail.is_empty() {
                    String::new()
                } else {
                    format!(": {detail}")
                },
            }),
            404 => Failure::Final(MetricsError::NotFound {
                what: format!(
                    "API at {} (HTTP 404; is WANDB_BASE_URL right?)",
                    self.endpoint
                ),
            }),
            429 | 500..=599 => Failure::Retry {
                error: MetricsError::Http {
                    status: code,
                    attempts: attempt,
                    detail,
                },
                retry_after,
            },
            _ => Failure::Final(MetricsError::Http {
                status: code,
                attempts: attempt,
                detail,
            }),
        })
    }

    fn transport_failure(&self, error: &reqwest::Error, attempt: u32) -> Failure {
        if error.is_builder() {
            return Failure::Final(MetricsError::Transport {
                url: self.endpoint.clone(),
                detail: self.redact(&error_chain(error)),
            });
        }
        let error = if error.is_timeout() {
            MetricsError::Timeout {
                seconds: rounded_up(self.config.request_timeout),
                attempts: attempt,
            }
        } else {
            MetricsError::Transport {
                url: self.endpoint.clone(),
                detail: self.redact(&error_chain(error)),
            }
        };
        Failure::Retry {
            error,
            retry_after: None,
        }
    }

    fn wait_before_retry(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        let doubling = 1u32.checked_shl(attempt - 1).unwrap_or(u32::MAX);
        retry_after
            .unwrap_or_else(|| self.config.initial_backoff.saturating_mul(doubling))
            .min(self.config.max_backoff)
    }

    fn decode<T: DeserializeOwned>(&self, text: &str) -> Result<T, MetricsError> {
        let envelope: Envelope = serde_json::from_str(text).map_err(|error| {
            MetricsError::Malformed(format!("the answer is not a GraphQL response: {error}"))
        })?;
        if let Some(errors) = envelope.errors.filter(|errors| !errors.is_empty()) {
            let messages: Vec<String> = errors
                .into_iter()
                .map(|error| {
                    error
                        .message
                        .unwrap_or_else(|| "an error without a message".to_owned())
                })
                .collect();
            return Err(MetricsError::GraphQl(self.redact(&messages.join("; "))));
        }
        let data = envelope
            .data
            .filter(|data| !data.is_null())
            .ok_or_else(|| MetricsError::Malformed("the answer has no data".to_owned()))?;
        serde_json::from_value(data).map_err(|error| {
            MetricsError::Malformed(format!("the answer has an unexpected shape: {error}"))
        })
    }

    /// A server may echo what it was sent; the key must not reach an error message.
    fn redact(&self, text: &str) -> String {
        let key = self.config.api_key.as_str();
        if key.is_empty() {
            text.to_owned()
        } else {
            text.replace(key, "[REDACTED]")
        }
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

enum Failure {
    Retry {
        error: MetricsError,
        retry_after: Option<Duration>,
    },
    Final(MetricsError),
}

/// The filter's `$regex` is matched by the server, so the prefix must match only itself.
fn escape_regex(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

fn app_url(base_url: &str) -> &str {
    let base_url = base_url.trim_end_matches('/');
    if base_url == DEFAULT_BASE_URL {
        HOSTED_APP_URL
    } else {
        base_url
    }
}

/// `Retry-After` in seconds; the HTTP-date form is rare enough to fall back to our backoff.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    let seconds: f64 = value.trim().parse().ok()?;
    Duration::try_from_secs_f64(seconds).ok()
}

/// What the server said, briefly: GraphQL or JSON error messages when it sent them, else the
/// first line of its text, else the status's reason.
fn server_detail(body: &str, status: reqwest::StatusCode) -> String {
    let from_json = serde_json::from_str::<Value>(body).ok().and_then(|value| {
        let messages: Vec<&str> = value
            .get("errors")
            .and_then(Value::as_array)
            .map(|errors| {
                errors
                    .iter()
                    .filter_map(|error| error.get("message").and_then(Value::as_str))
                    .collect()
            })
            .unwrap_or_default();
        if messages.is_empty() {
            value
                .get("error")
                .or_else(|| value.get("message"))
                .and_then(Value::as_str)
                .map(str::to_owned)
        } else {
            Some(messages.join("; "))
        }
    });
    let detail = from_json.unwrap_or_else(|| {
        let first_line = body.lines().map(str::trim).find(|line| !line.is_empty());
        match first_line {
            Some(line) if !line.starts_with('<') => line.to_owned(),
            _ => status.canonical_reason().unwrap_or_default().to_owned(),
        }
    });
    match detail.char_indices().nth(MAX_DETAIL_CHARS) {
        Some((cut, _)) => format!("{}…", &detail[..cut]),
        None => detail,
    }
}

/// reqwest's own message is vague ("error sending request"); the cause is in its sources.
fn error_chain(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
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

    #[test]
    fn runs_of_the_hosted_service_link_to_its_app() {
        assert_eq!(app_url("https://api.wandb.ai"), "https://wandb.ai");
        assert_eq!(
            app_url("https://wandb.example.com"),
            "https://wandb.example.com"
        );
    }

    #[test]
    fn regex_metacharacters_in_a_prefix_are_escaped() {
        assert_eq!(escape_regex("gsm8k-1a2b-trainer-"), "gsm8k-1a2b-trainer-");
        assert_eq!(escape_regex("a.b+(c)[d]$"), r"a\.b\+\(c\)\[d\]\$");
    }

    #[test]
    fn backoff_doubles_and_is_capped_and_retry_after_is_capped_too() {
        let mut config = WandbApiConfig::new("http://127.0.0.1:1", KEY);
        config.initial_backoff = Duration::from_millis(100);
        config.max_backoff = Duration::from_millis(350);
        let api = WandbApi::new(config).expect("client");
        assert_eq!(api.wait_before_retry(1, None), Duration::from_millis(100));
        assert_eq!(api.wait_before_retry(2, None), Duration::from_millis(200));
        assert_eq!(api.wait_before_retry(3, None), Duration::from_millis(350));
        assert_eq!(api.wait_before_retry(40, None), Duration::from_millis(350));
        assert_eq!(
            api.wait_before_retry(1, Some(Duration::from_secs(60))),
            Duration::from_millis(350)
        );
        assert_eq!(
            api.wait_before_retry(3, Some(Duration::ZERO)),
            Duration::ZERO
        );
    }

    #[test]
    fn rows_keep_logged_keys_and_drop_wandb_bookkeeping() {
        let line = Value::String(
            r#"{"_step": 3, "_timestamp": 1700000000.5, "_runtime": 12, "train/loss": NaN, "reward/mean": 0.25}"#
                .to_owned(),
        );
        let RowOutcome::Row(row) = parse_row(&line) else {
            panic!("not a row");
        };
        assert_eq!(row.step, 3);
        assert_eq!(row.timestamp, Some(1_700_000_000.5));
        assert_eq!(
            row.values.keys().collect::<Vec<_>>(),
            ["reward/mean", "train/loss"]
        );
        assert!(row.number("train/loss").is_some_and(f64::is_nan));
        assert!(matches!(
            parse_row(&Value::String(r#"{"x": 1}"#.to_owned())),
            RowOutcome::NoStep
        ));
        assert!(matches!(
            parse_row(&Value::String("{broken".to_owned())),
            RowOutcome::Unreadable
        ));
    }

    #[test]
    fn server_details_are_short_and_never_html() {
        let status = reqwest::StatusCode::BAD_GATEWAY;
        assert_eq!(
            server_detail("<html><body>bad</body></html>", status),
            "Bad Gateway"
        );
        assert_eq!(
            server_detail(r#"{"errors":[{"message":"a"},{"message":"b"}]}"#, status),
            "a; b"
        );
        assert_eq!(server_detail(r#"{"error":"nope"}"#, status), "nope");
        assert_eq!(server_detail(&"x".repeat(500), status).chars().count(), 201);
    }
}
