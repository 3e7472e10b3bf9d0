//! The route table of `rl serve` (the original client's paths and methods, and one route for
//! each tool that came later) and its one handler: a route names its tool, the path's id is
//! one of its arguments, the query (GET) or the JSON body (POST) holds the others, and the
//! tool's failure kind becomes the HTTP status. The tool checks the arguments against its own
//! schema (`arguments.rs`), so no route keeps a list of keys of its own.

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, on};
use rl_tools::{Caller, FailureKind, ToolReply};
use serde_json::{Map, Value, json};

use super::AppState;
use super::arguments::{from_query, with_path};
use super::body::{json_body, optional_json_body};
use super::responses::{failure, ok, rejected, with_hint, worker_failed};
use super::seed::inference_arguments;

/// Every route of [`ROUTES`], with JSON answers for unknown paths and methods.
pub(super) fn router() -> Router<AppState> {
    ROUTES
        .iter()
        .fold(Router::new(), |router, route| {
            router.route(
                route.path,
                on(
                    route.method.filter(),
                    move |state: State<AppState>,
                          id: Result<Path<String>, PathRejection>,
                          query: Result<Query<Vec<(String, String)>>, QueryRejection>,
                          headers: HeaderMap,
                          body: Result<Bytes, BytesRejection>| {
                        handle(route, state, id, query, headers, body)
                    },
                ),
            )
        })
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
}

/// One route: [`router`] is built from [`ROUTES`], and the 404 and 405 answers list them.
struct Route {
    method: Method,
    /// The path as axum matches it (`{x}` its one parameter, if any).
    path: &'static str,
    /// The tool it calls.
    tool: &'static str,
    /// The tool's argument the path's parameter is.
    path_argument: Option<&'static str>,
    /// What the 404's list shows after the path: a query, a body.
    usage: &'static str,
    answer: Answer,
}

/// How a route answers with its tool's reply.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Answer {
    /// The reply as it is; the tool runs on a task of its own.
    Reply,
    /// A tool that reads a run's files whole: within the heavy reads' bound (`heavy.rs`).
    FileRead,
    /// The environments alone, as a list: the original server's answer.
    EnvironmentList,
    /// The pre-flight, which also reads the original client's body (`seed.rs`).
    Inference,
    /// A wait: it changes nothing, so it runs in the request itself and ends with it when the
    /// client hangs up, rather than holding a task for minutes nobody reads.
    Wait,
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

    const fn get(path: &'static str, tool: &'static str) -> Self {
        Self {
            method: Method::Get,
            path,
            tool,
            path_argument: None,
            usage: "",
            answer: Answer::Reply,
        }
    }

    const fn post(path: &'static str, tool: &'static str) -> Self {
        Self {
            method: Method::Post,
            ..Self::get(path, tool)
        }
    }

    const fn naming(self, argument: &'static str) -> Self {
        Self {
            path_argument: Some(argument),
            ..self
        }
    }

    const fn usage(self, usage: &'static str) -> Self {
        Self { usage, ..self }
    }

    const fn answer(self, answer: Answer) -> Self {
        Self { answer, ..self }
    }
}

/// Every route: each tool has one (`the_route_table_is_the_router`).
static ROUTES: [Route; 25] = [
    Route::get("/health", "rl_health_check"),
    Route::get("/environments", "rl_list_environments")
        .usage("?recursive=true")
        .answer(Answer::EnvironmentList),
    Route::post("/environments/{name}/install", "rl_install_environment").naming("name"),
    Route::post("/environments/{name}/select", "rl_select_environment").naming("name"),
    Route::get("/config", "rl_get_current_config"),
    Route::post("/config", "rl_edit_config").usage("  {\"field\": ..., \"value\": ...}"),
    Route::post("/runs", "rl_start_training").usage("  {} or {\"max_cost\": X, ...}"),
    Route::get("/runs", "rl_list_runs"),
    Route::get("/runs/{id}", "rl_check_status")
        .naming("run_id")
        .usage("?since=N")
        .answer(Answer::FileRead),
    Route::get("/runs/{id}/wait", "rl_wait_training")
        .naming("run_id")
        .usage("?until=step|change|finished&timeout_seconds=S&since=N")
        .answer(Answer::Wait),
    Route::post("/runs/{id}/stop", "rl_stop_training").naming("run_id"),
    Route::post("/runs/{id}/resume", "rl_resume_training")
        .naming("run_id")
        .usage("  {\"allow_changes\": false, \"steps\": N} (optional)"),
    Route::post("/runs/{id}/fork", "rl_fork_training")
        .naming("run_id")
        .usage("  {\"step\": S, \"settings\": {\"field\": value}}"),
    Route::post("/sweeps", "rl_start_sweep")
        .usage("  {\"settings\": {\"field\": [values]}, \"max_parallel\": N}"),
    Route::get("/sweeps/{id}", "rl_check_sweep")
        .naming("sweep_id")
        .answer(Answer::FileRead),
    Route::post("/sweeps/{id}/stop", "rl_stop_sweep").naming("sweep_id"),
    Route::get("/runs/{id}/metrics", "rl_get_results")
        .naming("run_id")
        .answer(Answer::FileRead),
    Route::get("/checkpoints", "rl_list_checkpoints").usage("?run_id=ID"),
    Route::post("/test/inference", "rl_test_inference")
        .usage("  {\"num_steps\": ..., \"group_size\": ..., \"models\": [...], \"wait\": false}")
        .answer(Answer::Inference),
    Route::post("/compare", "rl_compare_training")
        .usage("  {\"run_id\": ..., \"step\": ..., \"wait\": false}"),
    Route::post("/test/{id}/stop", "rl_stop_test").naming("test_id"),
    Route::post("/runs/{id}/export", "rl_export_checkpoint")
        .naming("run_id")
        .usage("  {\"step\": ..., \"merged\": true, \"name\": ...} (optional)"),
    Route::post("/served", "rl_serve_checkpoint")
        .usage("  {\"run_id\": ..., \"step\": ..., \"port\": P}"),
    Route::get("/served", "rl_list_served"),
    Route::post("/served/{id}/stop", "rl_stop_serving").naming("serve_id"),
];

/// Every route's handler: the tool's arguments from the request, then its answer.
async fn handle(
    route: &'static Route,
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let arguments = match arguments(route, id, query, &headers, body) {
        Ok(arguments) => arguments,
        Err(response) => return response,
    };
    match route.answer {
        Answer::Reply => call(&state, route.tool, arguments).await,
        Answer::FileRead => read_run_files(&state, route.tool, arguments).await,
        Answer::EnvironmentList => list_environments(&state, route.tool, arguments).await,
        Answer::Inference => test_inference(&state, route.tool, arguments).await,
        Answer::Wait => reply_response(Ok(state
            .registry
            .call(route.tool, arguments, Caller::Person)
            .await)),
    }
}

/// The tool's arguments: a GET's from its query, a POST's from its JSON body (a route whose
/// path names what it acts on takes no body as no arguments), and the path's id under its
/// argument's name.
#[expect(
    clippy::result_large_err,
    reason = "the refusal is the response itself, built once per request"
)]
fn arguments(
    route: &Route,
    id: Result<Path<String>, PathRejection>,
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Value, Response> {
    let arguments = match route.method {
        Method::Get => {
            let Query(pairs) = query.map_err(|rejection| {
                with_hint(
                    StatusCode::BAD_REQUEST,
                    &rejection.body_text(),
                    "The query holds the tool's arguments as `key=value` pairs",
                )
            })?;
            Value::Object(from_query(route.tool, pairs)?)
        }
        Method::Post if route.path_argument.is_some() => {
            optional_json_body(headers, body)?.unwrap_or_else(|| json!({}))
        }
        // No body at all is `null`: the tool says which keys are missing, with its schema.
        Method::Post => json_body(headers, body)?.unwrap_or(Value::Null),
    };
    let Some(key) = route.path_argument else {
        return Ok(arguments);
    };
    match id {
        Ok(Path(id)) => with_path(arguments, key, id),
        Err(rejection) => Err(rejected(rejection.status(), &rejection.body_text())),
    }
}

/// A list, as the original server answered (its client took `len(result)`).
async fn list_environments(state: &AppState, tool: &'static str, arguments: Value) -> Response {
    let reply = run_tool(state, tool, arguments).await;
    match reply {
        Ok(ToolReply {
            value,
            failure: None,
            ..
        }) => match value.get("environments") {
            Some(list @ Value::Array(_)) => ok(list.clone()),
            _ => failure(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("{tool} answered without an `environments` list"),
            ),
        },
        other => reply_response(other),
    }
}

/// Today's body (the tool's arguments), or the original client's `{prompts, max_tokens,
/// temperature}`, translated.
async fn test_inference(state: &AppState, tool: &'static str, body: Value) -> Response {
    let body = if body.is_null() { json!({}) } else { body };
    let (arguments, translation) = match inference_arguments(tool, body) {
        Ok(pair) => pair,
        Err(response) => return response,
    };
    let reply = run_tool(state, tool, arguments).await;
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
    /// twice (axum would panic at start) and the 405's lists come from it. Every tool has a
    /// route, and a path's id is one of its tool's arguments.
    #[test]
    fn the_route_table_is_the_router() {
        let mut seen = std::collections::HashSet::new();
        for route in &ROUTES {
            assert!(seen.insert(route.describe()), "{} twice", route.describe());
            assert!(route_matches(route.path, route.path), "{}", route.path);
        }
        for name in rl_tools::TOOL_NAMES {
            assert!(
                ROUTES.iter().any(|route| route.tool == name),
                "{name} has no route"
            );
        }
        for route in &ROUTES {
            let spec = rl_tools::spec(route.tool).expect("a route calls a tool");
            assert_eq!(
                route.path.contains('{'),
                route.path_argument.is_some(),
                "{}",
                route.path
            );
            if let Some(argument) = route.path_argument {
                assert!(
                    spec.parameters["properties"].get(argument).is_some(),
                    "{}: {argument} is not an argument of {}",
                    route.path,
                    route.tool
                );
            }
        }
        let described: Vec<String> = ROUTES.iter().map(Route::describe).collect();
        assert!(described.contains(&"GET /runs/{id}?since=N".to_owned()));
        assert!(described.contains(&"POST /environments/{name}/select".to_owned()));
    }
}
