//! The route table of `rl serve` (the original client's paths and methods) and its handlers:
//! each a thin adapter of one `rl_*` tool, whose failure kind becomes the HTTP status.

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, MethodRouter, on};
use rl_tools::{Caller, FailureKind, ToolReply};
use serde_json::{Map, Value, json};

use super::AppState;
use super::body::{json_body, no_body};
use super::responses::{failure, ok, rejected, with_hint, worker_failed};
use super::seed::inference_arguments;

/// Every route of [`ROUTES`], with JSON answers for unknown paths and methods.
pub(super) fn router() -> Router<AppState> {
    ROUTES
        .iter()
        .fold(Router::new(), |router, route| {
            router.route(route.path, (route.handler)(route.method.filter()))
        })
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
}

/// One route: [`router`] is built from [`ROUTES`], and the 404 and 405 answers list them.
struct Route {
    method: Method,
    /// The path as axum matches it (`{x}` a parameter).
    path: &'static str,
    /// What the 404's list shows after the path: a query, a body.
    usage: &'static str,
    handler: fn(MethodFilter) -> MethodRouter<AppState>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Method {
    Get,
    Post,
}

impl Method {
    fn filter(self) -> MethodFilter {
        match self {
            Self::Get => MethodFilter::GET,
            Self::Post => MethodFilter::POST,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Get => "GET",
            Self::Post => "POST",
        }
    }
}

impl Route {
    /// `METHOD /path  usage`, as the 404 lists it.
    fn describe(&self) -> String {
        format!("{} {}{}", self.method.name(), self.path, self.usage)
    }
}

/// Every route.
const ROUTES: [Route; 16] = [
    Route {
        method: Method::Get,
        path: "/health",
        usage: "",
        handler: |method| on(method, health),
    },
    Route {
        method: Method::Get,
        path: "/environments",
        usage: "",
        handler: |method| on(method, list_environments),
    },
    Route {
        method: Method::Post,
        path: "/environments/{name}/select",
        usage: "",
        handler: |method| on(method, select_environment),
    },
    Route {
        method: Method::Get,
        path: "/config",
        usage: "",
        handler: |method| on(method, current_config),
    },
    Route {
        method: Method::Post,
        path: "/config",
        usage: "  {\"field\": ..., \"value\": ...}",
        handler: |method| on(method, edit_config),
    },
    Route {
        method: Method::Post,
        path: "/runs",
        usage: "  {}",
        handler: |method| on(method, start_training),
    },
    Route {
        method: Method::Get,
        path: "/runs",
        usage: "",
        handler: |method| on(method, list_runs),
    },
    Route {
        method: Method::Get,
        path: "/runs/{id}",
        usage: "?since=N",
        handler: |method| on(method, check_status),
    },
    Route {
        method: Method::Post,
        path: "/runs/{id}/stop",
        usage: "",
        handler: |method| on(method, stop_training),
    },
    Route {
        method: Method::Post,
        path: "/runs/{id}/resume",
        usage: "  {\"allow_changes\": false} (optional)",
        handler: |method| on(method, resume_training),
    },
    Route {
        method: Method::Post,
        path: "/runs/{id}/fork",
        usage: "  {\"step\": S, \"settings\": {\"field\": value}}",
        handler: |method| on(method, fork_training),
    },
    Route {
        method: Method::Post,
        path: "/sweeps",
        usage: "  {\"settings\": {\"field\": [values]}, \"max_parallel\": N}",
        handler: |method| on(method, start_sweep),
    },
    Route {
        method: Method::Get,
        path: "/sweeps/{id}",
        usage: "",
        handler: |method| on(method, check_sweep),
    },
    Route {
        method: Method::Post,
        path: "/sweeps/{id}/stop",
        usage: "",
        handler: |method| on(method, stop_sweep),
    },
    Route {
        method: Method::Get,
        path: "/runs/{id}/metrics",
        usage: "",
        handler: |method| on(method, results),
    },
    Route {
        method: Method::Post,
        path: "/test/inference",
        usage: "  {\"num_steps\": ..., \"group_size\": ..., \"models\": [...]}",
        handler: |method| on(method, test_inference),
    },
];

async fn health(State(state): State<AppState>) -> Response {
    call(&state, "rl_health_check", json!({})).await
}

/// A list, as the original server answered (its client took `len(result)`).
async fn list_environments(State(state): State<AppState>) -> Response {
    let reply = run_tool(&state, "rl_list_environments", json!({})).await;
    match reply {
        Ok(ToolReply {
            value,
            failure: None,
            ..
        }) => match value.get("environments") {
            Some(list @ Value::Array(_)) => ok(list.clone()),
            _ => failure(
                StatusCode::INTERNAL_SERVER_ERROR,
                "rl_list_environments answered without an `environments` list",
            ),
        },
        other => reply_response(other),
    }
}

async fn select_environment(
    State(state): State<AppState>,
    name: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    path_only(
        &state,
        "rl_select_environment",
        "name",
        name,
        &headers,
        body,
    )
    .await
}

async fn current_config(State(state): State<AppState>) -> Response {
    call(&state, "rl_get_current_config", json!({})).await
}

async fn edit_config(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    body_only(&state, "rl_edit_config", &headers, body).await
}

/// `POST /runs` with `{}` (the original client's) or an empty body, as JSON; nothing else.
async fn start_training(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    body_only(&state, "rl_start_training", &headers, body).await
}

async fn list_runs(State(state): State<AppState>) -> Response {
    call(&state, "rl_list_runs", json!({})).await
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct StatusQuery {
    #[serde(default)]
    since: u32,
}

async fn check_status(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
    query: Result<Query<StatusQuery>, QueryRejection>,
) -> Response {
    let id = match id {
        Ok(Path(id)) => id,
        Err(rejection) => return rejected(rejection.status(), &rejection.body_text()),
    };
    let since = match query {
        Ok(Query(query)) => query.since,
        Err(rejection) => {
            return with_hint(
                StatusCode::BAD_REQUEST,
                &rejection.body_text(),
                "The only query parameter is `since`, a non-negative integer (an earlier \
                 answer's `next_since`)",
            );
        }
    };
    read_run_files(
        &state,
        "rl_check_status",
        json!({ "run_id": id, "since": since }),
    )
    .await
}

async fn stop_training(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    path_only(&state, "rl_stop_training", "run_id", id, &headers, body).await
}

/// `POST /runs/{id}/resume` with no body, or `{"allow_changes": true}`.
async fn resume_training(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match path_and_body(id, "run_id", &headers, body) {
        Ok(arguments) => call(&state, "rl_resume_training", arguments).await,
        Err(response) => response,
    }
}

/// `POST /runs/{id}/fork` with `{"step": S, "settings": {...}}`.
async fn fork_training(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match path_and_body(id, "run_id", &headers, body) {
        Ok(arguments) => call(&state, "rl_fork_training", arguments).await,
        Err(response) => response,
    }
}

/// The tool's arguments: the JSON body's object with the path's id under `key` (the path names
/// it; an id in the body could only contradict it), or the id alone without a body. A body
/// that is no object goes to the tool as it is, which refuses it with its schema.
#[expect(
    clippy::result_large_err,
    reason = "the refusal is the response itself, built once per request"
)]
fn path_and_body(
    id: Result<Path<String>, PathRejection>,
    key: &str,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Value, Response> {
    let id = match id {
        Ok(Path(id)) => id,
        Err(rejection) => return Err(rejected(rejection.status(), &rejection.body_text())),
    };
    Ok(match json_body(headers, body)? {
        None => json!({ key: id }),
        Some(Value::Object(mut body)) => {
            body.insert(key.to_owned(), Value::String(id));
            Value::Object(body)
        }
        Some(other) => other,
    })
}

async fn start_sweep(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    body_only(&state, "rl_start_sweep", &headers, body).await
}

async fn check_sweep(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
) -> Response {
    match id {
        Ok(Path(id)) => read_run_files(&state, "rl_check_sweep", json!({ "sweep_id": id })).await,
        Err(rejection) => rejected(rejection.status(), &rejection.body_text()),
    }
}

async fn stop_sweep(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    path_only(&state, "rl_stop_sweep", "sweep_id", id, &headers, body).await
}

/// A `POST` whose JSON body is the tool's arguments. No body at all is `null`: the tool says
/// which keys are missing, with its schema.
async fn body_only(
    state: &AppState,
    tool: &'static str,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match json_body(headers, body) {
        Ok(body) => call(state, tool, body.unwrap_or(Value::Null)).await,
        Err(response) => response,
    }
}

/// A `POST` whose path names the tool's one argument (`key`) and which takes no body.
async fn path_only(
    state: &AppState,
    tool: &'static str,
    key: &str,
    value: Result<Path<String>, PathRejection>,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let value = match value {
        Ok(Path(value)) => value,
        Err(rejection) => return rejected(rejection.status(), &rejection.body_text()),
    };
    if let Err(response) = no_body(headers, body) {
        return response;
    }
    call(state, tool, json!({ key: value })).await
}

async fn results(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
) -> Response {
    match id {
        Ok(Path(id)) => read_run_files(&state, "rl_get_results", json!({ "run_id": id })).await,
        Err(rejection) => rejected(rejection.status(), &rejection.body_text()),
    }
}

/// Today's body `{num_steps, group_size, models}`, or the original client's
/// `{prompts, max_tokens, temperature}`, translated.
async fn test_inference(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match json_body(&headers, body) {
        Ok(body) => body.unwrap_or_else(|| json!({})),
        Err(response) => return response,
    };
    let (arguments, translation) = match inference_arguments(body) {
        Ok(pair) => pair,
        Err(response) => return response,
    };
    let reply = run_tool(&state, "rl_test_inference", arguments).await;
    match (reply, translation) {
        (Ok(mut reply), Some(translation)) => {
            if let Some(object) = reply.value.as_object_mut() {
                object.insert("translated_from_old_body".to_owned(), translation);
            }
            reply_response(Ok(reply))
        }
        (reply, _) => reply_response(reply),
    }
}

async fn not_found(request: Request) -> Response {
    let mut body = Map::new();
    body.insert(
        "error".to_owned(),
        json!(format!(
            "no route {} {}",
            request.method(),
            request.uri().path()
        )),
    );
    let routes: Vec<String> = ROUTES.iter().map(Route::describe).collect();
    body.insert(
        "hint".to_owned(),
        json!(format!("The routes are: {}", routes.join("; "))),
    );
    body.insert("routes".to_owned(), json!(routes));
    (StatusCode::NOT_FOUND, axum::Json(Value::Object(body))).into_response()
}

async fn method_not_allowed(request: Request) -> Response {
    let path = request.uri().path();
    let allowed: Vec<String> = ROUTES
        .iter()
        .filter(|route| route_matches(route.path, path))
        .map(Route::describe)
        .collect();
    let body = json!({
        "error": format!("{} is not allowed on {path}", request.method()),
        "hint": format!("This path answers: {}", allowed.join("; ")),
        "allowed": allowed,
    });
    (StatusCode::METHOD_NOT_ALLOWED, axum::Json(body)).into_response()
}

/// Whether a route's path (`/a/{x}/b`) has the shape of `path`.
fn route_matches(pattern: &str, path: &str) -> bool {
    let pattern: Vec<&str> = pattern.split('/').collect();
    let path: Vec<&str> = path.split('/').collect();
    pattern.len() == path.len()
        && pattern
            .iter()
            .zip(&path)
            .all(|(want, have)| want.starts_with('{') || want == have)
}

/// The tool's answer as a response.
async fn call(state: &AppState, tool: &'static str, arguments: Value) -> Response {
    reply_response(run_tool(state, tool, arguments).await)
}

/// A tool that reads a run's files (its metrics, logs), whole: a heavy read (`heavy.rs`).
async fn read_run_files(state: &AppState, tool: &'static str, arguments: Value) -> Response {
    let registry = state.registry.clone();
    let read = state
        .heavy
        .run(async move { registry.call(tool, arguments, Caller::Person).await })
        .await;
    match read {
        Ok((ToolReply { value, failure, .. }, held)) => {
            held.json(failure.map_or(StatusCode::OK, status_of), &value)
        }
        Err(response) => response,
    }
}

/// Runs the tool on a task of its own: a client that hangs up does not cut a start or a test
/// short (the test still ends and is kept; `rl preflight list` shows it).
async fn run_tool(
    state: &AppState,
    tool: &'static str,
    arguments: Value,
) -> Result<ToolReply, tokio::task::JoinError> {
    let registry = state.registry.clone();
    tokio::spawn(async move { registry.call(tool, arguments, Caller::Person).await }).await
}

fn reply_response(reply: Result<ToolReply, tokio::task::JoinError>) -> Response {
    match reply {
        Ok(ToolReply { value, failure, .. }) => {
            let status = failure.map_or(StatusCode::OK, status_of);
            (status, axum::Json(value)).into_response()
        }
        Err(error) => worker_failed(&error),
    }
}

/// A tool's failure kind as an HTTP status. `Precondition` ("select an environment first",
/// "the key is missing") is 409 Conflict — the request conflicts with the state of the
/// machine — rather than 412 Precondition Failed, which HTTP keeps for conditional headers
/// (`If-Match`, `If-Unmodified-Since`) this API does not use.
pub(super) fn status_of(kind: FailureKind) -> StatusCode {
    match kind {
        FailureKind::BadRequest => StatusCode::BAD_REQUEST,
        FailureKind::NotFound => StatusCode::NOT_FOUND,
        FailureKind::Precondition => StatusCode::CONFLICT,
        FailureKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn method_routes_match_their_shape() {
        assert!(route_matches("/runs/{id}", "/runs/0badc0de"));
        assert!(route_matches("/runs/{id}/stop", "/runs/x/stop"));
        assert!(!route_matches("/runs/{id}/stop", "/runs/x"));
        assert!(route_matches("/config", "/config"));
    }

    /// The router is built from [`ROUTES`], so each is answered; the table must not hold one
    /// twice (axum would panic at start) and the 405's lists come from it.
    #[test]
    fn the_route_table_is_the_router() {
        let mut seen = std::collections::HashSet::new();
        for route in &ROUTES {
            assert!(seen.insert(route.describe()), "{} twice", route.describe());
            assert!(route_matches(route.path, route.path), "{}", route.path);
        }
        let described: Vec<String> = ROUTES.iter().map(Route::describe).collect();
        assert!(described.contains(&"GET /runs/{id}?since=N".to_owned()));
        assert!(described.contains(&"POST /environments/{name}/select".to_owned()));
    }
}
