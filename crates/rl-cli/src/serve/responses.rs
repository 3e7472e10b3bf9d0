//! Answers that are not a tool's: successes and refusals as JSON, and axum's own plain-text
//! refusals rewritten as `{"error": ...}` on the way out.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::MAX_BODY_BYTES;

pub(super) fn ok(value: Value) -> Response {
    (StatusCode::OK, axum::Json(value)).into_response()
}

pub(super) fn failure(status: StatusCode, error: &str) -> Response {
    (status, axum::Json(json!({ "error": error }))).into_response()
}

/// A request's task ended without an answer (it panicked).
pub(super) fn worker_failed(error: &tokio::task::JoinError) -> Response {
    failure(
        StatusCode::INTERNAL_SERVER_ERROR,
        &format!("the request's worker failed: {error}"),
    )
}

pub(super) fn with_hint(status: StatusCode, error: &str, hint: &str) -> Response {
    (status, axum::Json(json!({ "error": error, "hint": hint }))).into_response()
}

/// An axum extractor's refusal; its statuses for unusable input are 4xx, made 400 unless more
/// precise (413).
pub(super) fn rejected(status: StatusCode, text: &str) -> Response {
    let status = if status.is_client_error() {
        status
    } else {
        StatusCode::BAD_REQUEST
    };
    failure(status, text)
}

/// axum's own refusals (and anything else not yet JSON) as `{"error": ...}`, so that every
/// error is a non-200 with a JSON body.
pub(super) async fn errors_as_json(response: Response) -> Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    // A page's own refusal (a run that does not exist) is for the person reading it.
    let is_answer = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|value| is_json_type(value) || value.as_bytes().starts_with(b"text/html"));
    if is_answer {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .map(|bytes| String::from_utf8_lossy(&bytes).trim().to_owned())
        .unwrap_or_default();
    let error = if text.is_empty() {
        status
            .canonical_reason()
            .unwrap_or("request refused")
            .to_owned()
    } else {
        text
    };
    let mut json = failure(status, &error);
    for (name, value) in &parts.headers {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            json.headers_mut().insert(name.clone(), value.clone());
        }
    }
    json
}

/// Whether a content type is JSON (`application/json`, or `application/*+json`).
pub(super) fn is_json_type(value: &HeaderValue) -> bool {
    let Ok(text) = value.to_str() else {
        return false;
    };
    let essence = text
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}
