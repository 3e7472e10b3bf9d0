//! Request bodies: which content types a route reads, and why (browsers cannot send JSON
//! cross-site without asking first).

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use serde_json::Value;

use super::MAX_BODY_BYTES;
use super::responses::{is_json_type, rejected, with_hint};

/// What a route reads from its body.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Body {
    /// A JSON object (`POST /config`, `/runs`, `/test/inference`).
    Json,
    /// A JSON object or nothing: the path names what the route acts on (`stop`, `resume`).
    Optional,
}

/// The body as JSON, `None` when there is none (empty or blank), after its content type.
///
/// A page on another site can make a browser POST here without asking first (a CORS "simple"
/// request) only with no content type, a form's, or `text/plain`; `application/json` makes the
/// browser ask first (a preflight), which this server never grants. So:
/// - a route that reads a JSON body needs `Content-Type: application/json`, even for an empty
///   body: the original client always sent it (`json=data`, `{}` included);
/// - a route whose path names what it acts on takes an empty body whatever its content type: an
///   empty body is no more arguments. The original client sends `json=None`, which aiohttp
///   turns into `Content-Type: application/octet-stream` and no body. A body that is not empty
///   must be JSON. These routes rely on [`browser_guard`] alone against browsers (every
///   browser sends `Origin` with a cross-site POST).
///
/// The refusal is 415 Unsupported Media Type, HTTP's status for content in a type the route
/// does not read (the request itself may be well formed, so not 400).
#[expect(
    clippy::result_large_err,
    reason = "the refusal is the response itself, built once per request"
)]
fn read_body(
    expected: Body,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Option<Value>, Response> {
    let bytes = body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            with_hint(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!("the body is larger than {MAX_BODY_BYTES} bytes"),
                "The API's bodies are small JSON objects",
            )
        } else {
            rejected(rejection.status(), &rejection.body_text())
        }
    })?;
    let blank = bytes.iter().all(u8::is_ascii_whitespace);
    let hint = match expected {
        Body::Json => {
            "Send the body as JSON with `Content-Type: application/json`, `{}` when there is \
             nothing to say"
        }
        Body::Optional => {
            "This route's path names what it acts on: send no body, or its other arguments as \
             JSON with `Content-Type: application/json`"
        }
    };
    if expected == Body::Optional && blank {
        return Ok(None);
    }
    match headers.get(header::CONTENT_TYPE) {
        Some(kind) if !is_json_type(kind) => {
            return Err(with_hint(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                &format!(
                    "the content type is {}, not JSON",
                    String::from_utf8_lossy(kind.as_bytes())
                ),
                hint,
            ));
        }
        None => {
            return Err(with_hint(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "the request has no content type: this route needs `Content-Type: \
                 application/json`",
                hint,
            ));
        }
        _ => {}
    }
    if blank {
        return Ok(None);
    }
    serde_json::from_slice(&bytes).map(Some).map_err(|error| {
        with_hint(
            StatusCode::BAD_REQUEST,
            &format!("the body is not valid JSON: {error}"),
            hint,
        )
    })
}

/// A route's JSON body: see [`read_body`].
#[expect(
    clippy::result_large_err,
    reason = "the refusal is the response itself, built once per request"
)]
pub(super) fn json_body(
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Option<Value>, Response> {
    read_body(Body::Json, headers, body)
}

/// A route whose path names what it acts on: its other arguments as a JSON body, or none.
#[expect(
    clippy::result_large_err,
    reason = "the refusal is the response itself, built once per request"
)]
pub(super) fn optional_json_body(
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Option<Value>, Response> {
    read_body(Body::Optional, headers, body)
}
