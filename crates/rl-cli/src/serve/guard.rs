//! Keeps browsers out: a page on another site must not drive the API through a visitor's
//! browser (cross-site requests, DNS rebinding).

use std::net::IpAddr;

use axum::extract::{Request, State};
use axum::http::uri::Authority;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::Response;

use super::responses::with_hint;
use super::{AppState, Hosts};

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
pub(super) async fn browser_guard(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
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

#[cfg(test)]
mod tests {
    use super::*;

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
