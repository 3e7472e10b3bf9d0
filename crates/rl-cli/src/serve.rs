//! `rl serve`: the RL API over HTTP, with the paths, methods and JSON keys the original first
//! version's client called (`GET /environments`, `POST /runs`, `GET /runs/{id}`, ...). Each
//! route is a thin adapter of one `rl_*` tool of the registry: state lives in the state
//! directory, so a run started here is one `rl runs stop` can stop, and the reverse.
//!
//! Every answer is JSON, errors included (`{"error": ...}` with a non-200 status): a tool's
//! failure kind decides the status (see [`status_of`]), and axum's own plain-text refusals
//! (bad path parameters, bodies, methods) are rewritten as JSON on the way out.
//!
//! Browsers are kept out: the API starts processes, and any page a user visits could otherwise
//! make their browser call it (cross-site requests, DNS rebinding). See [`browser_guard`] and
//! [`read_body`] for the rules.

use std::future::IntoFuture;
use std::io::Write;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::uri::Authority;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, MethodRouter, on};
use rl_tools::{Caller, FailureKind, MAX_STEPS, Registry, ToolReply};
use serde_json::{Map, Value, json};

use crate::context::{Context, end_what_killed_tests_left, interrupted};

/// The largest request body accepted; the API's bodies are a few hundred bytes.
const MAX_BODY_BYTES: usize = 1024 * 1024;

/// How long open connections may take to finish after a stop signal before the server quits.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

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
const ROUTES: [Route; 11] = [
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
    /// The `Host` headers answered.
    hosts: Hosts,
}

/// Which names a request may call the server by (its `Host` header).
#[derive(Clone, Copy, Debug)]
enum Hosts {
    /// Any: `--allow-remote` with a token, which a page elsewhere cannot make a browser send.
    Any,
    /// A loopback address or `localhost`, or the address listened on (once known). A name a
    /// page elsewhere controls can point at loopback (DNS rebinding): its requests carry that
    /// name, and are refused.
    Local(Option<IpAddr>),
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
            "{addr} is not a loopback address: the API starts processes on this machine, so it \
             listens on loopback only (127.0.0.1 or ::1) unless you pass --allow-remote \
             together with --token-env VAR"
        );
        anyhow::ensure!(
            token.is_some(),
            "--allow-remote needs --token-env VAR: a server that starts processes must not be \
             open to the network without a token"
        );
    }
    let registry = context.registry()?;
    end_what_killed_tests_left(registry.tools(), "rl serve");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let hosts = if allow_remote && token.is_some() {
        Hosts::Any
    } else {
        Hosts::Local(None)
    };
    let state = AppState {
        registry: registry.clone(),
        token: token.map(|token| Arc::from(token.into_bytes())),
        hosts,
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
    mut state: AppState,
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
    if let Hosts::Local(listened) = &mut state.hosts {
        *listened = Some(local.ip());
    }
    // Before the "listening" line: whoever reads it may signal at once.
    let stop = interrupted();
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
            stop.await;
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

/// One line on stderr; a closed stderr is not worth failing for.
fn say(line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// The routes of [`ROUTES`]; around them, from the outside in: errors as JSON, the browser
/// guard, the token, the body limit.
fn router(state: AppState) -> Router {
    ROUTES
        .iter()
        .fold(Router::new(), |router, route| {
            router.route(route.path, (route.handler)(route.method.filter()))
        })
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            authenticate,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            browser_guard,
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

/// `POST /runs` with `{}` (the original client's) or an empty body, as JSON; nothing else.
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
    let num_steps = u32::try_from(prompts)
        .unwrap_or(u32::MAX)
        .clamp(1, MAX_STEPS);
    let translation = json!({
        "message": format!(
            "The original body was read as num_steps = {num_steps} (one group per prompt, at \
             least 1, at most {MAX_STEPS}) with the default group_size. `prompts`, \
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

/// What a route reads from its body.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Body {
    /// A JSON object (`POST /config`, `/runs`, `/test/inference`).
    Json,
    /// Nothing: the arguments are in the path (`select`, `stop`).
    Nothing,
}

/// The body as JSON, `None` when there is none (empty or blank), after its content type.
///
/// A page on another site can make a browser POST here without asking first (a CORS "simple"
/// request) only with no content type, a form's, or `text/plain`; `application/json` makes the
/// browser ask first (a preflight), which this server never grants. So:
/// - a route that reads a JSON body needs `Content-Type: application/json`, even for an empty
///   body: the original client always sent it (`json=data`, `{}` included);
/// - a route whose arguments are in the path takes an empty body whatever its content type: an
///   empty body is no arguments. The original client sends `json=None`, which aiohttp turns
///   into `Content-Type: application/octet-stream` and no body. A body that is not empty must be
///   JSON. These routes rely on [`browser_guard`] alone against browsers (every browser sends
///   `Origin` with a cross-site POST).
///
/// The refusal is 415 Unsupported Media Type, HTTP's status for content in a type the route
/// does not read (the request itself may be well formed, so not 400).
#[allow(clippy::result_large_err)]
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
        Body::Nothing => {
            "This route's arguments are in the path: send no body, or `{}` with `Content-Type: \
             application/json`"
        }
    };
    if expected == Body::Nothing && blank {
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
#[allow(clippy::result_large_err)]
fn json_body(
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Option<Value>, Response> {
    read_body(Body::Json, headers, body)
}

/// A route that takes its arguments from the path: no body, or an empty object.
#[allow(clippy::result_large_err)]
fn no_body(headers: &HeaderMap, body: Result<Bytes, BytesRejection>) -> Result<(), Response> {
    match read_body(Body::Nothing, headers, body)? {
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

/// Keeps browsers out: a page on another site must not drive the API through a visitor's
/// browser. Refused with 403, each before anything else is looked at (the token included):
/// - a `Host` the server is not (see [`Hosts`]): DNS rebinding, a name a page controls that
///   points at loopback, which makes its requests same-origin to the browser;
/// - `Sec-Fetch-Site` other than `same-origin` or `none` (typed in the address bar): every
///   modern browser sends it, and `same-site` includes other ports of localhost;
/// - an `Origin` other than the server's own (`http://` + the `Host` asked): browsers send it
///   with every POST, and with cross-origin reads. `Origin: null` (sandboxes, files) included.
///
/// Scripts and `curl` send none of these headers but `Host`, and are not affected.
async fn browser_guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    match cross_site(state.hosts, request.headers(), request.uri()) {
        None => next.run(request).await,
        Some((error, hint)) => with_hint(StatusCode::FORBIDDEN, &error, hint),
    }
}

/// Why a request is refused as cross-site, if it is: the error and its hint.
fn cross_site(hosts: Hosts, headers: &HeaderMap, uri: &Uri) -> Option<(String, &'static str)> {
    let shown = |value: &HeaderValue| String::from_utf8_lossy(value.as_bytes()).into_owned();
    // HTTP/1.1 names the server in `Host`; an absolute request target in its authority.
    let host = match headers.get(header::HOST) {
        Some(value) => Some(
            value
                .to_str()
                .ok()
                .map(str::to_owned)
                .ok_or_else(|| shown(value)),
        ),
        None => uri
            .authority()
            .map(|authority| Ok(authority.as_str().to_owned())),
    };
    if let Some(host) = &host {
        let allowed = host.as_ref().is_ok_and(|host| host_allowed(hosts, host));
        if !allowed {
            let host = match host {
                Ok(host) | Err(host) => host,
            };
            return Some((
                format!("a request for `{host}` is refused: that is not this server's name"),
                "Call it by a loopback address (http://127.0.0.1:PORT, http://localhost:PORT, \
                 http://[::1]:PORT) or the address it listens on. Other names are refused: a \
                 page elsewhere can point a name it owns at this machine (DNS rebinding). \
                 `--allow-remote` with `--token-env` accepts any name",
            ));
        }
    }
    if let Some(site) = headers.get("sec-fetch-site")
        && !matches!(site.as_bytes(), b"same-origin" | b"none")
    {
        return Some((
            format!(
                "a browser request from another site (Sec-Fetch-Site: {}) is refused",
                shown(site)
            ),
            "The API starts processes on this machine: it answers its own clients (scripts, \
             curl, the first version's client), never pages of other sites",
        ));
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let own = match &host {
            Some(Ok(host)) => same_origin(origin.as_bytes(), host),
            _ => false,
        };
        if !own {
            return Some((
                format!(
                    "a browser request from the page at {} is refused",
                    shown(origin)
                ),
                "The API starts processes on this machine: only its own origin may call it \
                 from a browser, never pages of other sites",
            ));
        }
    }
    None
}

/// Whether `Host` (`name[:port]`) names this server; see [`Hosts`]. The port is not compared:
/// a name that reaches the server with another port cannot be a browser's.
fn host_allowed(hosts: Hosts, host: &str) -> bool {
    let Hosts::Local(listened) = hosts else {
        return true;
    };
    let Ok(authority) = host.parse::<Authority>() else {
        return false;
    };
    if authority.as_str().contains('@') {
        return false;
    }
    let name = authority.host().trim_end_matches('.').to_ascii_lowercase();
    if name == "localhost" {
        return true;
    }
    let address = name
        .strip_prefix('[')
        .and_then(|name| name.strip_suffix(']'));
    address
        .unwrap_or(&name)
        .parse::<IpAddr>()
        .is_ok_and(|ip| ip.to_canonical().is_loopback() || Some(ip) == listened)
}

/// Whether `Origin` is the server's own: `http://` (or `https://`, behind a TLS proxy) and the
/// `Host` asked, in any case.
fn same_origin(origin: &[u8], host: &str) -> bool {
    let origin = origin.to_ascii_lowercase();
    let rest = origin
        .strip_prefix(b"http://")
        .or_else(|| origin.strip_prefix(b"https://"));
    rest.is_some_and(|rest| rest.eq_ignore_ascii_case(host.as_bytes()))
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

    fn local() -> Hosts {
        Hosts::Local(Some(IpAddr::from([127, 0, 0, 2])))
    }

    #[test]
    fn hosts_are_loopback_names_or_the_address_listened_on() {
        for host in [
            "localhost",
            "LocalHost:8080",
            "localhost.:8080",
            "127.0.0.1",
            "127.0.0.1:8080",
            "127.0.0.2:8080",
            "[::1]:8080",
            "[::1]",
            "[::ffff:127.0.0.1]:8080",
        ] {
            assert!(host_allowed(local(), host), "{host}");
        }
        for host in [
            "evil.example",
            "evil.example:8080",
            "localhost.evil.example",
            "127.0.0.1.nip.io",
            "user@localhost",
            "10.0.0.5:8080",
            "",
            "[::1",
        ] {
            assert!(!host_allowed(local(), host), "{host}");
        }
        assert!(host_allowed(Hosts::Any, "evil.example"));
        let listened = Hosts::Local(Some(IpAddr::from([10, 0, 0, 5])));
        assert!(host_allowed(listened, "10.0.0.5:8080"));
        assert!(!host_allowed(Hosts::Local(None), "10.0.0.5:8080"));
    }

    #[test]
    fn origins_are_the_host_asked_for() {
        assert!(same_origin(b"http://127.0.0.1:8080", "127.0.0.1:8080"));
        assert!(same_origin(b"HTTP://LOCALHOST:8080", "localhost:8080"));
        assert!(same_origin(b"https://rl.example.org", "rl.example.org"));
        assert!(!same_origin(b"http://localhost:8080", "127.0.0.1:8080"));
        assert!(!same_origin(b"http://127.0.0.1:8081", "127.0.0.1:8080"));
        assert!(!same_origin(b"null", "127.0.0.1:8080"));
        assert!(!same_origin(b"http://127.0.0.1:8080/", "127.0.0.1:8080"));
        assert!(!same_origin(b"ftp://127.0.0.1:8080", "127.0.0.1:8080"));
    }

    #[test]
    fn cross_site_requests_are_told_apart() {
        let uri: Uri = "/config".parse().unwrap();
        let check = |pairs: &[(&'static str, &'static str)]| {
            let mut headers = HeaderMap::new();
            for (name, value) in pairs {
                headers.insert(*name, HeaderValue::from_static(value));
            }
            cross_site(local(), &headers, &uri).map(|(error, _)| error)
        };
        // curl, scripts, the original client.
        assert_eq!(check(&[]), None);
        assert_eq!(check(&[("host", "127.0.0.1:8080")]), None);
        // A browser on the server's own page, or its address bar.
        let own = [
            ("host", "127.0.0.1:8080"),
            ("origin", "http://127.0.0.1:8080"),
            ("sec-fetch-site", "same-origin"),
        ];
        assert_eq!(check(&own), None);
        assert_eq!(
            check(&[("host", "127.0.0.1:8080"), ("sec-fetch-site", "none")]),
            None
        );
        for refused in [
            &[("host", "evil.example:8080")][..],
            &[
                ("host", "127.0.0.1:8080"),
                ("origin", "https://evil.example"),
            ],
            &[("origin", "http://127.0.0.1:8080")],
            &[("host", "127.0.0.1:8080"), ("sec-fetch-site", "cross-site")],
            &[("host", "127.0.0.1:8080"), ("sec-fetch-site", "same-site")],
        ] {
            assert!(check(refused).is_some(), "{refused:?}");
        }
        // An absolute request target names the server as a Host would.
        let absolute: Uri = "http://evil.example/config".parse().unwrap();
        assert!(cross_site(local(), &HeaderMap::new(), &absolute).is_some());
    }
}
