//! The run pages: `/` lists the runs and sweeps, `/runs/{id}` shows one run (charts of its
//! series, the components' timeline, health, checkpoints, log tails, rollouts, its lineage),
//! live while it goes, and `/sweeps/{id}` one sweep (its runs' curves overlaid, coloured by
//! setting, and its ranked table). A browser asking for HTML (`Accept: text/html`) at those
//! paths gets a page; every other client gets the API's JSON there, as before. The page is a
//! static shell: its scripts read `/page/…` (read-only JSON) and render every text as text,
//! never as HTML. Every asset is inside the binary (uPlot, vendored in `assets/vendor/uplot/`),
//! under a content security policy that allows only this server's own scripts, styles and
//! requests.

use axum::Router;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use rl_settings::SweepId;
use rl_tools::{Tools, ToolsError};
use serde::Deserialize;

use super::AppState;
use super::heavy::HeavyRead;
use super::routes::status_of;

/// Only this server's scripts, styles, images and requests; no inline script, no framing.
pub(super) const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
     form-action 'self'; frame-ancestors 'none'";

/// The files the pages load, by their path under `/assets/`.
const ASSETS: [(&str, &str, &[u8]); 6] = [
    (
        "common.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../assets/common.js"),
    ),
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../assets/app.js"),
    ),
    (
        "sweep.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../assets/sweep.js"),
    ),
    (
        "app.css",
        "text/css; charset=utf-8",
        include_bytes!("../../assets/app.css"),
    ),
    (
        "uPlot.iife.min.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../assets/vendor/uplot/uPlot.iife.min.js"),
    ),
    (
        "uPlot.min.css",
        "text/css; charset=utf-8",
        include_bytes!("../../assets/vendor/uplot/uPlot.min.css"),
    ),
];

/// The pages' data and assets (GET only).
pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/page/runs", get(run_rows))
        .route("/page/runs/{id}", get(run_page))
        .route("/page/runs/{id}/rollouts/{step}", get(rollouts))
        .route("/page/sweeps", get(sweep_list))
        .route("/page/sweeps/{id}", get(sweep_page))
        .route("/assets/{name}", get(asset))
}

/// Before the API's routes: a browser's request for HTML at `/`, `/runs/{id}` or
/// `/sweeps/{id}` gets a page.
pub(super) async fn pages_first(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() != Method::GET || !wants_html(request.headers()) {
        return next.run(request).await;
    }
    let path = request.uri().path().to_owned();
    if path == "/" {
        return page("list", None);
    }
    if let Some(id) = path.strip_prefix("/runs/").filter(|id| !id.contains('/')) {
        let tools = state.registry.tools();
        return match tools
            .run_id(id)
            .and_then(|id| tools.run_status(&id, i64::MAX).map(|_| id))
        {
            Ok(id) => page("run", Some(id.as_str())),
            Err(error) => not_found_page(&error.to_string()),
        };
    }
    if let Some(id) = path.strip_prefix("/sweeps/").filter(|id| !id.contains('/')) {
        let tools = state.registry.tools();
        return match known_sweep(tools, id) {
            Ok(id) => page("sweep", Some(id.as_str())),
            Err(error) => not_found_page(&error),
        };
    }
    next.run(request).await
}

/// A checked sweep id that the store holds, or why not (a small read of the store only: no
/// run's files, so not a heavy read).
fn known_sweep(tools: &Tools, id: &str) -> Result<SweepId, String> {
    let id = SweepId::parse(id).map_err(|error| error.to_string())?;
    let store = rl_process::RunStore::open(tools.home()).map_err(|error| error.to_string())?;
    match store.sweep(&id) {
        Ok(Some(_)) => Ok(id),
        Ok(None) => Err(format!("no sweep {id}")),
        Err(error) => Err(error.to_string()),
    }
}

/// A browser's navigation: HTML before JSON in `Accept`.
fn wants_html(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|accept| accept.contains("text/html"))
}

/// The shell every page shares; `id` is a checked run or sweep id (hex, `sw-`), so it needs
/// no escaping. Each page loads the shared helpers (`common.js`), then its own script.
fn page(kind: &str, id: Option<&str>) -> Response {
    let (title, attribute, script) = match kind {
        "run" => ("rl: run", "data-run", "app.js"),
        "sweep" => ("rl: sweep", "data-sweep", "sweep.js"),
        _ => ("rl: runs", "data-run", "app.js"),
    };
    let data = id
        .map(|id| format!(" {attribute}=\"{id}\""))
        .unwrap_or_default();
    let html = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title}</title><link rel=\"icon\" href=\"data:,\">\
         <link rel=\"stylesheet\" href=\"/assets/uPlot.min.css\">\
         <link rel=\"stylesheet\" href=\"/assets/app.css\"></head>\
         <body><main id=\"app\" data-page=\"{kind}\"{data}><p class=\"quiet\">loading…</p></main>\
         <script src=\"/assets/uPlot.iife.min.js\"></script>\
         <script src=\"/assets/common.js\"></script>\
         <script src=\"/assets/{script}\"></script></body></html>\n"
    );
    html_response(StatusCode::OK, html)
}

fn not_found_page(error: &str) -> Response {
    let text: String = error
        .chars()
        .map(|c| match c {
            '<' => "&lt;".to_owned(),
            '>' => "&gt;".to_owned(),
            '&' => "&amp;".to_owned(),
            '"' => "&quot;".to_owned(),
            other => other.to_string(),
        })
        .collect();
    let html = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>rl: not found</title>\
         <link rel=\"icon\" href=\"data:,\">\
         <link rel=\"stylesheet\" href=\"/assets/app.css\"></head><body><main>\
         <p><a href=\"/\">← runs</a></p><h1>Not found</h1><p>{text}</p></main></body></html>\n"
    );
    html_response(StatusCode::NOT_FOUND, html)
}

fn html_response(status: StatusCode, html: String) -> Response {
    let mut response = (status, html).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    secure(headers);
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The headers every page and asset carries.
fn secure(headers: &mut HeaderMap) {
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
}

async fn asset(Path(name): Path<String>) -> Response {
    let Some((_, content_type, bytes)) = ASSETS.iter().find(|(file, ..)| *file == name) else {
        return super::responses::failure(StatusCode::NOT_FOUND, &format!("no asset {name}"));
    };
    let mut response = bytes.to_vec().into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    secure(headers);
    response
}

/// A page read's answer: its value as JSON, its failure with the status of its kind.
fn answer<T: serde::Serialize>(
    tools: &Tools,
    result: Result<T, ToolsError>,
    held: HeavyRead,
) -> Response {
    match result {
        Ok(value) => held.json(StatusCode::OK, &value),
        Err(error) => failed(tools, &error),
    }
}

fn failed(tools: &Tools, error: &ToolsError) -> Response {
    (
        status_of(error.kind()),
        axum::Json(rl_tools::error_answer(error, Some(tools))),
    )
        .into_response()
}

/// `work` on a blocking thread, as a heavy read (`heavy.rs`).
async fn read_blocking<T: Send + 'static>(
    state: &AppState,
    work: impl FnOnce(&Tools) -> Result<T, ToolsError> + Send + 'static,
) -> Result<(Result<T, ToolsError>, HeavyRead), Response> {
    let tools = state.registry.tools().clone();
    state
        .heavy
        .run(async move {
            tokio::task::spawn_blocking(move || work(&tools))
                .await
                .unwrap_or_else(|error| Err(ToolsError::Internal(error.to_string())))
        })
        .await
}

async fn run_rows(State(state): State<AppState>) -> Response {
    match read_blocking(&state, Tools::run_rows).await {
        Ok((rows, held)) => answer(state.registry.tools(), rows, held),
        Err(busy) => busy,
    }
}

#[derive(Deserialize)]
struct Since {
    #[serde(default)]
    since: i64,
}

async fn run_page(
    State(state): State<AppState>,
    Path(id): Path<String>,
    since: Result<Query<Since>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let tools = state.registry.tools().clone();
    let since = match since {
        Ok(Query(Since { since })) => since,
        Err(rejection) => {
            return super::responses::rejected(rejection.status(), &rejection.body_text());
        }
    };
    let id = match tools.run_id(&id) {
        Ok(id) => id,
        Err(error) => return failed(&tools, &error),
    };
    let reader = tools.clone();
    match state
        .heavy
        .run(async move { reader.run_page(&id, since).await })
        .await
    {
        Ok((page, held)) => answer(&tools, page, held),
        Err(busy) => busy,
    }
}

async fn rollouts(
    State(state): State<AppState>,
    Path((id, step)): Path<(String, String)>,
) -> Response {
    let tools = state.registry.tools().clone();
    let (id, step) = match (tools.run_id(&id), step.parse::<i64>()) {
        (Ok(id), Ok(step)) => (id, step),
        (Err(error), _) => return failed(&tools, &error),
        (_, Err(_)) => {
            let error = ToolsError::Invalid {
                what: "step".to_owned(),
                reason: format!("{step:?} is not a step number"),
            };
            return failed(&tools, &error);
        }
    };
    match read_blocking(&state, move |tools| tools.rollouts(&id, step)).await {
        Ok((rollouts, held)) => answer(&tools, rollouts, held),
        Err(busy) => busy,
    }
}

async fn sweep_list(State(state): State<AppState>) -> Response {
    match read_blocking(&state, Tools::list_sweeps).await {
        Ok((sweeps, held)) => answer(state.registry.tools(), sweeps, held),
        Err(busy) => busy,
    }
}

/// A sweep's table and its runs' curves: every run's metrics file read, so a heavy read.
async fn sweep_page(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    let tools = state.registry.tools().clone();
    let id = match SweepId::parse(&id) {
        Ok(id) => id,
        Err(error) => return failed(&tools, &ToolsError::from(error)),
    };
    match read_blocking(&state, move |tools| tools.sweep_page(&id)).await {
        Ok((page, held)) => answer(&tools, page, held),
        Err(busy) => busy,
    }
}
