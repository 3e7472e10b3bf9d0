//! `rl serve`: the RL API over HTTP, with the paths, methods and JSON keys the original first
//! version's client called (`GET /environments`, `POST /runs`, `GET /runs/{id}`, ...). Each
//! route is a thin adapter of one `rl_*` tool of the registry: state lives in the state
//! directory, so a run started here is one `rl runs stop` can stop, and the reverse.
//!
//! Every answer is JSON, errors included (`{"error": ...}` with a non-200 status): a tool's
//! failure kind decides the status (see [`status_of`]), and axum's own plain-text refusals
//! (bad path parameters, bodies, methods) are rewritten as JSON on the way out.

use std::future::IntoFuture;
use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use rl_tools::{Caller, FailureKind, Registry, ToolReply};
use serde_json::{Map, Value, json};

use crate::context::Context;

/// The largest request body accepted; the API's bodies are a few hundred bytes.
const MAX_BODY_BYTES: usize = 1024 * 1024;

/// How long open connections may take to finish after a stop signal before the server quits.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// The schema's maximum of `rl_test_inference`'s `num_steps`.
const MAX_TEST_STEPS: usize = 100;

/// Every route, for the 404 answer.
const ROUTES: [&str; 11] = [
    "GET /health",
    "GET /environments",
    "POST /environments/{name}/select",
    "GET /config",
    "POST /config  {\"field\": ..., \"value\": ...}",
    "POST /runs",
    "GET /runs",
    "GET /runs/{id}?since=N",
    "POST /runs/{id}/stop",
    "GET /runs/{id}/metrics",
    "POST /test/inference  {\"num_steps\": ..., \"group_size\": ..., \"models\": [...]}",
];

/// The body keys of `POST /test/inference` today, and those of the original client.
const INFERENCE_KEYS: [&str; 3] = ["num_steps", "group_size", "models"];
const OLD_INFERENCE_KEYS: [&str; 3] = ["prompts", "max_tokens", "temperature"];

#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// Address to listen on; loopback unless --allow-remote. Port 0 picks a free port.
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:8080")]
    addr: String,
    /// Environment variable holding the bearer token every request must then carry
    /// (`Authorization: Bearer <token>`); read once at start, never printed.
    #[arg(long, value_name = "VAR")]
    token_env: Option<String>,
    /// Listen on an address other than loopback (requires --token-env). The API starts
    /// processes: never expose it without a token, and prefer a TLS proxy in front.
    #[arg(long)]
    allow_remote: bool,
}

/// What every request sees.
#[derive(Clone)]
struct AppState {
    registry: Registry,
    /// The bearer token, when one is required. Never printed: no `Debug` here.
    token: Option<Arc<[u8]>>,
}

pub(crate) fn run(context: &Context, args: ServeArgs) -> anyhow::Result<()> {
    let ServeArgs {
        addr,
        token_env,
        allow_remote,
    } = args;
    let addresses = resolve(&addr)?;
    let token = read_token(token_env.as_deref())?;
    let remote: Vec<SocketAddr> = addresses
        .iter()
        .copied()
        .filter(|address| !address.ip().to_canonical().is_loopback())
        .collect();
    if !remote.is_empty() {
        anyhow::ensure!(
            allow_remote,
            "{} is not a loopback address: the API starts processes on this machine, so it \
             listens on loopback only (127.0.0.1 or ::1) unless you pass --allow-remote \
             together with --token-env VAR",
            addr
        );
        anyhow::ensure!(
            token.is_some(),
            "--allow-remote needs --token-env VAR: a server that starts processes must not be \
             open to the network without a token"
        );
    }
    let registry = context.registry()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let state = AppState {
        registry: registry.clone(),
        token: token.map(|token| Arc::from(token.into_bytes())),
    };
    let outcome = runtime.block_on(serve(
        state,
        &addresses,
        !remote.is_empty(),
        token_env.as_deref(),
    ));
    // Pre-flight models run in process groups of their own: end any a request left behind.
    registry.tools().model_runner().stop_all();
    runtime.shutdown_timeout(Duration::from_secs(5));
    outcome
}

/// `HOST:PORT` to socket addresses (`localhost:8080` included).
fn resolve(text: &str) -> anyhow::Result<Vec<SocketAddr>> {
    let addresses: Vec<SocketAddr> = text
        .to_socket_addrs()
        .with_context(|| format!("--addr {text}: expected HOST:PORT, such as 127.0.0.1:8080"))?
        .collect();
    anyhow::ensure!(!addresses.is_empty(), "--addr {text}: no address found");
    Ok(addresses)
}

fn read_token(variable: Option<&str>) -> anyhow::Result<Option<String>> {
    let Some(variable) = variable else {
        return Ok(None);
    };
    match std::env::var(variable) {
        Ok(token) if !token.trim().is_empty() => Ok(Some(token.trim().to_owned())),
        Ok(_) => anyhow::bail!("--token-env {variable}: the variable is empty"),
        Err(std::env::VarError::NotPresent) => {
            anyhow::bail!("--token-env {variable}: the variable is not set")
        }
        Err(std::env::VarError::NotUnicode(_)) => {
            anyhow::bail!("--token-env {variable}: the variable is not valid UTF-8")
        }
    }
}

async fn serve(
    state: AppState,
    addresses: &[SocketAddr],
    remote: bool,
    token_env: Option<&str>,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addresses)
        .await
        .with_context(|| format!("cannot listen on {}", describe(addresses)))?;
    let local = listener
        .local_addr()
        .context("cannot read the address listened on")?;
    let registry = state.registry.clone();
    let app = router(state);
    let mut line = format!("rl serve: listening on http://{local}");
    if let Some(variable) = token_env {
        line.push_str(&format!(
            " (requests need `Authorization: Bearer <token>`, the token from ${variable})"
        ));
    }
    say(&line);
    if remote {
        say(
            "rl serve: warning: plain HTTP on a non-loopback address: the token and every \
             answer cross the network unencrypted; put a TLS proxy in front",
        );
    }

    let stopping = Arc::new(tokio::sync::Notify::new());
    let signal = {
        let stopping = Arc::clone(&stopping);
        async move {
            stop_signal().await;
            say("rl serve: stopping");
            // Models of a test in flight would keep its request open: end them first.
            let runner = registry.tools().model_runner().clone();
            let _ = tokio::task::spawn_blocking(move || runner.stop_all()).await;
            stopping.notify_one();
        }
    };
    let server = axum::serve(listener, app).with_graceful_shutdown(signal);
    tokio::select! {
        result = server.into_future() => result.context("the server failed")?,
        () = async {
            stopping.notified().await;
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        } => {
            say("rl serve: connections still open after the grace period; closing them");
        }
    }
    Ok(())
}

fn describe(addresses: &[SocketAddr]) -> String {
    addresses
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Ctrl-C or SIGTERM. If the SIGTERM handler cannot be set, Ctrl-C alone.
async fn stop_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
}

/// One line on stderr; a closed stderr is not worth failing for.
fn say(line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

fn router(state: AppState) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/environments", get(list_environments))
        .route("/environments/{name}/select", post(select_environment))
        .route("/config", get(current_config).post(edit_config))
        .route("/runs", get(list_runs).post(start_training))
        .route("/runs/{id}", get(check_status))
        .route("/runs/{id}/stop", post(stop_training))
        .route("/runs/{id}/metrics", get(results))
        .route("/test/inference", post(test_inference))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            authenticate,
        ))
        .layer(axum::middleware::map_response(errors_as_json))
        .with_state(state)
}

// ---------------------------------------------------------------------------------------------
// Routes

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
    let name = match name {
        Ok(Path(name)) => name,
        Err(rejection) => return rejected(rejection.status(), &rejection.body_text()),
    };
    if let Err(response) = no_body(&headers, body) {
        return response;
    }
    call(&state, "rl_select_environment", json!({ "name": name })).await
}

async fn current_config(State(state): State<AppState>) -> Response {
    call(&state, "rl_get_current_config", json!({})).await
}

async fn edit_config(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match json_body(&headers, body) {
        // No body at all: the tool says which keys are missing, with its schema.
        Ok(body) => call(&state, "rl_edit_config", body.unwrap_or(Value::Null)).await,
        Err(response) => response,
    }
}

/// `POST /runs` with no body, `{}` (the original client's), or nothing else.
async fn start_training(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match json_body(&headers, body) {
        Ok(body) => call(&state, "rl_start_training", body.unwrap_or(Value::Null)).await,
        Err(response) => response,
    }
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
    call(
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
    let id = match id {
        Ok(Path(id)) => id,
        Err(rejection) => return rejected(rejection.status(), &rejection.body_text()),
    };
    if let Err(response) = no_body(&headers, body) {
        return response;
    }
    call(&state, "rl_stop_training", json!({ "run_id": id })).await
}

async fn results(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
) -> Response {
    match id {
        Ok(Path(id)) => call(&state, "rl_get_results", json!({ "run_id": id })).await,
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

/// The tool's arguments, and with the old body, what was made of it.
#[allow(clippy::result_large_err)]
fn inference_arguments(body: Value) -> Result<(Value, Option<Value>), Response> {
    let Value::Object(object) = body else {
        // The tool refuses it with its schema.
        return Ok((body, None));
    };
    let unknown: Vec<&str> = object
        .keys()
        .map(String::as_str)
        .filter(|key| !INFERENCE_KEYS.contains(key) && !OLD_INFERENCE_KEYS.contains(key))
        .collect();
    let new: Vec<&str> = INFERENCE_KEYS
        .into_iter()
        .filter(|key| object.contains_key(*key))
        .collect();
    let old: Vec<&str> = OLD_INFERENCE_KEYS
        .into_iter()
        .filter(|key| object.contains_key(*key))
        .collect();
    let shapes = "Send {\"num_steps\": N, \"group_size\": N, \"models\": [...]} (every key \
                  optional), or the original {\"prompts\": [...], \"max_tokens\": N, \
                  \"temperature\": X}, not both";
    if !unknown.is_empty() {
        return Err(with_hint(
            StatusCode::BAD_REQUEST,
            &format!("unknown key(s) in the body: {}", unknown.join(", ")),
            shapes,
        ));
    }
    if !new.is_empty() && !old.is_empty() {
        return Err(with_hint(
            StatusCode::BAD_REQUEST,
            &format!(
                "the body mixes the current keys ({}) with the original client's ({})",
                new.join(", "),
                old.join(", ")
            ),
            shapes,
        ));
    }
    if old.is_empty() {
        return Ok((Value::Object(object), None));
    }
    let prompts = match object.get("prompts") {
        None | Some(Value::Null) => 0,
        Some(Value::Array(prompts)) if prompts.iter().all(Value::is_string) => prompts.len(),
        Some(_) => {
            return Err(with_hint(
                StatusCode::BAD_REQUEST,
                "`prompts` must be a list of strings",
                shapes,
            ));
        }
    };
    if let Some(max_tokens) = object.get("max_tokens").filter(|value| !value.is_null())
        && max_tokens.as_u64().is_none_or(|tokens| tokens == 0)
    {
        return Err(with_hint(
            StatusCode::BAD_REQUEST,
            "`max_tokens` must be a positive integer",
            shapes,
        ));
    }
    if let Some(temperature) = object.get("temperature").filter(|value| !value.is_null())
        && temperature.as_f64().is_none_or(|value| value < 0.0)
    {
        return Err(with_hint(
            StatusCode::BAD_REQUEST,
            "`temperature` must be a non-negative number",
            shapes,
        ));
    }
    let num_steps = prompts.clamp(1, MAX_TEST_STEPS);
    let translation = json!({
        "message": format!(
            "The original body was read as num_steps = {num_steps} (one group per prompt, at \
             least 1, at most {MAX_TEST_STEPS}) with the default group_size. `prompts`, \
             `max_tokens` and `temperature` were not sent as such: the test draws its items \
             from the environment itself, and atroposlib's process mode has no per-request \
             prompt input. Send {{\"num_steps\", \"group_size\", \"models\"}} to choose the \
             test's size directly."
        ),
        "num_steps": num_steps,
        "prompts_received": prompts,
        "not_sent": old,
    });
    Ok((json!({ "num_steps": num_steps }), Some(translation)))
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
    body.insert(
        "hint".to_owned(),
        json!(format!("The routes are: {}", ROUTES.join("; "))),
    );
    body.insert("routes".to_owned(), json!(ROUTES));
    (StatusCode::NOT_FOUND, axum::Json(Value::Object(body))).into_response()
}

async fn method_not_allowed(request: Request) -> Response {
    let path = request.uri().path();
    let allowed: Vec<&str> = ROUTES
        .iter()
        .copied()
        .filter(|route| route_matches(route, path))
        .collect();
    let body = json!({
        "error": format!("{} is not allowed on {path}", request.method()),
        "hint": format!("This path answers: {}", allowed.join("; ")),
        "allowed": allowed,
    });
    (StatusCode::METHOD_NOT_ALLOWED, axum::Json(body)).into_response()
}

/// Whether a route of [`ROUTES`] (`METHOD /a/{x}/b  body`) has the shape of `path`.
fn route_matches(route: &str, path: &str) -> bool {
    let pattern = route.split_whitespace().nth(1).unwrap_or_default();
    let pattern = pattern.split('?').next().unwrap_or_default();
    let pattern: Vec<&str> = pattern.split('/').collect();
    let path: Vec<&str> = path.split('/').collect();
    pattern.len() == path.len()
        && pattern
            .iter()
            .zip(&path)
            .all(|(want, have)| want.starts_with('{') || want == have)
}

// ---------------------------------------------------------------------------------------------
// Tools → HTTP

/// The tool's answer as a response.
async fn call(state: &AppState, tool: &'static str, arguments: Value) -> Response {
    reply_response(run_tool(state, tool, arguments).await)
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
        Ok(ToolReply { value, failure }) => {
            let status = failure.map_or(StatusCode::OK, status_of);
            (status, axum::Json(value)).into_response()
        }
        Err(error) => failure(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("the request's worker failed: {error}"),
        ),
    }
}

/// A tool's failure kind as an HTTP status. `Precondition` ("select an environment first",
/// "the key is missing") is 409 Conflict — the request conflicts with the state of the
/// machine — rather than 412 Precondition Failed, which HTTP keeps for conditional headers
/// (`If-Match`, `If-Unmodified-Since`) this API does not use.
fn status_of(kind: FailureKind) -> StatusCode {
    match kind {
        FailureKind::BadRequest => StatusCode::BAD_REQUEST,
        FailureKind::NotFound => StatusCode::NOT_FOUND,
        FailureKind::Precondition => StatusCode::CONFLICT,
        FailureKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

// ---------------------------------------------------------------------------------------------
// Bodies

/// The JSON body, `None` when there is none (empty or blank). A body sent with a content type
/// other than JSON is refused; one without a content type is read as JSON.
#[allow(clippy::result_large_err)]
fn json_body(
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
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    if let Some(kind) = headers.get(header::CONTENT_TYPE)
        && !is_json_type(kind)
    {
        return Err(with_hint(
            StatusCode::BAD_REQUEST,
            &format!(
                "the body's content type is {}, not JSON",
                String::from_utf8_lossy(kind.as_bytes())
            ),
            "Send a JSON object with `Content-Type: application/json`",
        ));
    }
    serde_json::from_slice(&bytes).map(Some).map_err(|error| {
        with_hint(
            StatusCode::BAD_REQUEST,
            &format!("the body is not valid JSON: {error}"),
            "Send a JSON object with `Content-Type: application/json`",
        )
    })
}

/// A route that takes its arguments from the path: no body, or an empty object.
#[allow(clippy::result_large_err)]
fn no_body(headers: &HeaderMap, body: Result<Bytes, BytesRejection>) -> Result<(), Response> {
    match json_body(headers, body)? {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Object(object)) if object.is_empty() => Ok(()),
        Some(_) => Err(with_hint(
            StatusCode::BAD_REQUEST,
            "this route takes no body",
            "Its arguments are in the path; send no body or {}",
        )),
    }
}

fn is_json_type(value: &HeaderValue) -> bool {
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

// ---------------------------------------------------------------------------------------------
// Errors, authentication

fn ok(value: Value) -> Response {
    (StatusCode::OK, axum::Json(value)).into_response()
}

fn failure(status: StatusCode, error: &str) -> Response {
    (status, axum::Json(json!({ "error": error }))).into_response()
}

fn with_hint(status: StatusCode, error: &str, hint: &str) -> Response {
    (status, axum::Json(json!({ "error": error, "hint": hint }))).into_response()
}

/// An axum extractor's refusal; its statuses for unusable input are 4xx, made 400 unless more
/// precise (413).
fn rejected(status: StatusCode, text: &str) -> Response {
    let status = if status.is_client_error() {
        status
    } else {
        StatusCode::BAD_REQUEST
    };
    failure(status, text)
}

/// Every request carries the token when one is set, `/health` and unknown paths included.
async fn authenticate(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Some(expected) = &state.token else {
        return next.run(request).await;
    };
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(HeaderValue::as_bytes)
        .and_then(bearer_token);
    match given {
        Some(given) if same_token(given, expected) => next.run(request).await,
        found => {
            let error = if found.is_some() {
                "the bearer token is wrong"
            } else {
                "this server needs `Authorization: Bearer <token>`"
            };
            let mut response = with_hint(
                StatusCode::UNAUTHORIZED,
                error,
                "Send the token the operator set in the variable named by `rl serve --token-env`",
            );
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            response
        }
    }
}

/// The token of `Bearer <token>` (the scheme in any case).
fn bearer_token(value: &[u8]) -> Option<&[u8]> {
    let (scheme, rest) = value.split_at_checked(7)?;
    scheme
        .eq_ignore_ascii_case(b"bearer ")
        .then(|| rest.trim_ascii())
        .filter(|token| !token.is_empty())
}

/// Compares in a time that depends on the expected token's length only, never on where the
/// given one differs.
fn same_token(given: &[u8], expected: &[u8]) -> bool {
    let mut difference = u8::from(given.len() != expected.len());
    for (index, byte) in expected.iter().enumerate() {
        let other = given.get(index).copied().unwrap_or(0);
        difference |= std::hint::black_box(byte ^ other);
    }
    difference == 0
}

/// axum's own refusals (and anything else not yet JSON) as `{"error": ...}`, so that every
/// error is a non-200 with a JSON body.
async fn errors_as_json(response: Response) -> Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(is_json_type);
    if is_json {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(same_token(b"abc", b"abc"));
        assert!(!same_token(b"abd", b"abc"));
        assert!(!same_token(b"ab", b"abc"));
        assert!(!same_token(b"abcd", b"abc"));
        assert!(!same_token(b"", b"abc"));
    }

    #[test]
    fn bearer_scheme_is_read_in_any_case() {
        assert_eq!(bearer_token(b"Bearer t0k"), Some(&b"t0k"[..]));
        assert_eq!(bearer_token(b"bearer  t0k "), Some(&b"t0k"[..]));
        assert_eq!(bearer_token(b"Basic t0k"), None);
        assert_eq!(bearer_token(b"Bearer "), None);
    }

    #[test]
    fn old_inference_bodies_become_num_steps() {
        let (arguments, translation) =
            inference_arguments(json!({"prompts": ["a", "b"], "max_tokens": 9})).unwrap();
        assert_eq!(arguments, json!({"num_steps": 2}));
        assert_eq!(
            translation.unwrap()["not_sent"],
            json!(["prompts", "max_tokens"])
        );
        let many: Vec<String> = (0..500).map(|n| n.to_string()).collect();
        let (arguments, _) = inference_arguments(json!({ "prompts": many })).unwrap();
        assert_eq!(arguments, json!({"num_steps": 100}));
        let (arguments, _) = inference_arguments(json!({"prompts": [], "temperature": 1})).unwrap();
        assert_eq!(arguments, json!({"num_steps": 1}));
        let (arguments, translation) = inference_arguments(json!({"num_steps": 2})).unwrap();
        assert_eq!((arguments, translation), (json!({"num_steps": 2}), None));
        for bad in [
            json!({"prompts": ["a"], "num_steps": 2}),
            json!({"prompts": "a"}),
            json!({"prompts": ["a"], "max_tokens": 0}),
            json!({"prompts": ["a"], "temperature": "hot"}),
            json!({"steps": 2}),
        ] {
            let refused = inference_arguments(bad.clone()).unwrap_err();
            assert_eq!(refused.status(), StatusCode::BAD_REQUEST, "{bad}");
        }
    }

    #[test]
    fn method_routes_match_their_shape() {
        assert!(route_matches("GET /runs/{id}?since=N", "/runs/0badc0de"));
        assert!(route_matches("POST /runs/{id}/stop", "/runs/x/stop"));
        assert!(!route_matches("POST /runs/{id}/stop", "/runs/x"));
        assert!(route_matches("POST /config  {\"field\": ...}", "/config"));
    }
}
