//! `rl serve`: the RL API over HTTP, with the paths, methods and JSON keys the original first
//! version's client called (`GET /environments`, `POST /runs`, `GET /runs/{id}`, ...). Each
//! route is a thin adapter of one `rl_*` tool of the registry: state lives in the state
//! directory, so a run started here is one `rl runs stop` can stop, and the reverse.
//!
//! Every answer is JSON, errors included (`{"error": ...}` with a non-200 status): a tool's
//! failure kind decides the status (`routes.rs`), and axum's own plain-text refusals (bad path
//! parameters, bodies, methods) are rewritten as JSON on the way out (`responses.rs`).
//!
//! Browsers are kept out: the API starts processes, and any page a user visits could otherwise
//! make their browser call it (cross-site requests, DNS rebinding): `guard.rs` and `body.rs`
//! hold the rules; `auth.rs` the token; `seed.rs` the first client's old request bodies.
//! Reads of run files (pages, metrics, rollouts) are bounded in number, a step's rollouts in
//! bytes too: `heavy.rs`.

mod arguments;
mod auth;
mod body;
mod guard;
mod heavy;
mod pages;
mod responses;
mod routes;
mod seed;

use std::future::IntoFuture;
use std::io::Write;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use rl_tools::Registry;

use crate::context::{Context, end_what_killed_tests_left, interrupted};

/// The largest request body accepted; the API's bodies are a few hundred bytes.
const MAX_BODY_BYTES: usize = 1024 * 1024;

/// How long open connections may take to finish after a stop signal before the server quits.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

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
    /// The bound on reads of run files.
    heavy: heavy::HeavyReads,
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
    if let Some(variable) = &token_env {
        // The token is the server's alone: no process it starts (a run's supervisor, a
        // test's worker, an installer) inherits it, and none of theirs then can.
        rl_settings::register_own_secret(variable);
    }
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
        heavy: heavy::HeavyReads::new(),
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

/// The routes of `routes.rs` and the pages' (`pages.rs`); around them, from the outside in:
/// errors as JSON, the browser guard, the token, the body limit, a browser's page.
fn router(state: AppState) -> Router {
    routes::router()
        .merge(pages::router())
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            pages::pages_first,
        ))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::authenticate,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            guard::browser_guard,
        ))
        .layer(axum::middleware::map_response(responses::errors_as_json))
        .with_state(state)
}
