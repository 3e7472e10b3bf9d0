//! One GraphQL request to WandB with the SDK's retry policy, and the errors it ends in: the
//! server's words kept short and the key never in them.

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::responses::Envelope;
use super::{WandbApi, rounded_up};
use crate::error::MetricsError;

/// Server messages quoted in errors are cut here: a 502 page from a proxy is kilobytes of HTML.
const MAX_DETAIL_CHARS: usize = 200;

impl WandbApi {
    /// One GraphQL request with the SDK's retry policy: rate limits, server errors, timeouts
    /// and lost connections are retried with backoff; a refused key or a bad request is not,
    /// since asking again cannot help.
    pub(super) async fn graphql<T: DeserializeOwned>(
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

enum Failure {
    Retry {
        error: MetricsError,
        retry_after: Option<Duration>,
    },
    Final(MetricsError),
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
pub(super) fn error_chain(error: &reqwest::Error) -> String {
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
    use crate::wandb_api::WandbApiConfig;

    const KEY: &str = "0123456789abcdef0123456789abcdef01234567";

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
