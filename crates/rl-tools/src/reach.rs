//! Whether a service's host can be reached from here, and if not why: the name not resolved
//! (DNS), the connection refused, the TLS handshake failed, or no answer in time. Asked before
//! a hosted run starts and by `rl doctor`, of the Tinker service and of the Hugging Face hub,
//! so that a run never waits minutes on the SDK's retries to say "Connection error.".
//!
//! The probe is a TCP connection (and a TLS handshake for `https`), each step bounded, to the
//! host as the URL names it. A client set to go through a proxy (`HTTPS_PROXY`, …) reaches
//! the host another way, so the probe is not made then and says so.

use std::net::{SocketAddr, TcpStream, ToSocketAddrs as _};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The whole probe's bound: resolution, connection and handshake together.
pub(crate) const PROBE_LIMIT: Duration = Duration::from_secs(10);

/// A service's address as a URL names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Address {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) tls: bool,
}

impl Address {
    /// The host, port and scheme of `url` (`http` or `https`), or why it names none.
    pub(crate) fn of(url: &str) -> Result<Self, String> {
        let parsed = url::Url::parse(url).map_err(|error| format!("{url:?} is no URL: {error}"))?;
        let tls = match parsed.scheme() {
            "https" => true,
            "http" => false,
            other => {
                return Err(format!(
                    "{url:?}: the scheme {other:?} is neither http nor https"
                ));
            }
        };
        let host = match parsed.host() {
            Some(url::Host::Domain(name)) => name.to_owned(),
            Some(url::Host::Ipv4(ip)) => ip.to_string(),
            Some(url::Host::Ipv6(ip)) => ip.to_string(),
            None => return Err(format!("{url:?} names no host")),
        };
        let port = parsed
            .port_or_known_default()
            .ok_or_else(|| format!("{url:?} names no port"))?;
        Ok(Self { host, port, tls })
    }

    /// `host:port`, brackets around an IPv6 address.
    pub(crate) fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// Why a host could not be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
    /// Its name did not resolve.
    Dns,
    /// Every address refused the connection (nothing listens there).
    Refused,
    /// Connected, but the TLS handshake failed (a certificate, a proxy, not TLS).
    Tls,
    /// No answer within the bound (a firewall dropping packets, no route, a hung server).
    Timeout,
    /// Any other network error (unreachable network, reset).
    Network,
}

impl Failure {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Failure::Dns => "DNS",
            Failure::Refused => "connection refused",
            Failure::Tls => "TLS",
            Failure::Timeout => "timeout",
            Failure::Network => "network error",
        }
    }
}

/// A host that could not be reached: which, the kind of failure, and what was seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unreachable {
    pub(crate) address: Address,
    pub(crate) failure: Failure,
    pub(crate) seen: String,
}

impl std::fmt::Display for Unreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} could not be reached ({}: {})",
            self.address.authority(),
            self.failure.label(),
            self.seen
        )
    }
}

/// What a probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reach {
    /// Connected (and the TLS handshake passed, for `https`).
    Reached,
    /// Not probed: clients reach the host through this proxy variable's proxy.
    ThroughProxy(&'static str),
    Unreachable(Unreachable),
}

/// The proxy variables httpx (the Tinker SDK's and the hub's client) and reqwest read.
const PROXY_VARIABLES: [&str; 6] = [
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
];

/// Probes `address` within `limit`. `environment` is the one the clients run with (a run's
/// processes: rl's own, then the operator's `child_environment`): a proxy set there, and not
/// bypassed by `NO_PROXY` for this host, leaves the host unprobed.
pub(crate) fn probe(
    address: &Address,
    environment: &dyn Fn(&str) -> Option<String>,
    limit: Duration,
) -> Reach {
    if let Some(variable) = proxy_for(address, environment) {
        return Reach::ThroughProxy(variable);
    }
    match connect(address, limit) {
        Ok(()) => Reach::Reached,
        Err((failure, seen)) => Reach::Unreachable(Unreachable {
            address: address.clone(),
            failure,
            seen,
        }),
    }
}

/// The proxy variable a client would use for `address`, unless `NO_PROXY` exempts the host.
fn proxy_for(
    address: &Address,
    environment: &dyn Fn(&str) -> Option<String>,
) -> Option<&'static str> {
    let scheme_variables: &[&str] = if address.tls {
        &PROXY_VARIABLES[..2]
    } else {
        &PROXY_VARIABLES[2..4]
    };
    let variable = scheme_variables
        .iter()
        .chain(&PROXY_VARIABLES[4..])
        .find(|name| environment(name).is_some_and(|value| !value.trim().is_empty()))?;
    let exempt = ["NO_PROXY", "no_proxy"]
        .iter()
        .filter_map(|name| environment(name))
        .flat_map(|list| {
            list.split(',')
                .map(|entry| entry.trim().trim_start_matches('.').to_owned())
                .collect::<Vec<_>>()
        })
        .any(|entry| {
            entry == "*"
                || (!entry.is_empty()
                    && (address.host == entry || address.host.ends_with(&format!(".{entry}"))))
        });
    (!exempt).then_some(*variable)
}

fn connect(address: &Address, limit: Duration) -> Result<(), (Failure, String)> {
    let started = Instant::now();
    let addresses = resolve(address, limit)?;
    let left = |started: Instant| limit.saturating_sub(started.elapsed());
    let mut last = None;
    let mut stream = None;
    for socket in &addresses {
        let remaining = left(started);
        if remaining.is_zero() {
            break;
        }
        match TcpStream::connect_timeout(socket, remaining) {
            Ok(connected) => {
                stream = Some(connected);
                break;
            }
            Err(error) => last = Some(error),
        }
    }
    let Some(stream) = stream else {
        return Err(match last {
            Some(error) => classify_io(&error),
            None => (
                Failure::Timeout,
                format!("no connection within {} s", limit.as_secs()),
            ),
        });
    };
    if address.tls {
        handshake(address, stream, left(started))?;
    }
    Ok(())
}

/// The host's addresses, resolved on a thread of its own: the system's resolver has no
/// bound of its own that rl can set.
fn resolve(address: &Address, limit: Duration) -> Result<Vec<SocketAddr>, (Failure, String)> {
    let (sender, receiver) = std::sync::mpsc::channel();
    let target = (address.host.clone(), address.port);
    std::thread::spawn(move || {
        let _ = sender.send(target.to_socket_addrs().map(Vec::from_iter));
    });
    match receiver.recv_timeout(limit) {
        Ok(Ok(addresses)) if !addresses.is_empty() => Ok(addresses),
        Ok(Ok(_)) => Err((Failure::Dns, "the name has no address".to_owned())),
        Ok(Err(error)) => Err((Failure::Dns, error.to_string())),
        Err(_) => Err((
            Failure::Timeout,
            format!("the name did not resolve within {} s", limit.as_secs()),
        )),
    }
}

fn classify_io(error: &std::io::Error) -> (Failure, String) {
    use std::io::ErrorKind as K;
    let failure = match error.kind() {
        K::ConnectionRefused => Failure::Refused,
        K::TimedOut | K::WouldBlock => Failure::Timeout,
        _ => Failure::Network,
    };
    (failure, error.to_string())
}

/// A TLS handshake with the host, its certificate checked as the system trusts.
fn handshake(
    address: &Address,
    mut stream: TcpStream,
    limit: Duration,
) -> Result<(), (Failure, String)> {
    let tls_failure = |what: String| (Failure::Tls, what);
    if limit.is_zero() {
        return Err((
            Failure::Timeout,
            "no time left for the TLS handshake".to_owned(),
        ));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| tls_failure(error.to_string()))?;
    let config = rustls_platform_verifier::BuilderVerifierExt::with_platform_verifier(config)
        .map_err(|error| tls_failure(error.to_string()))?
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from(address.host.clone())
        .map_err(|error| tls_failure(format!("{}: {error}", address.host)))?;
    let mut connection = rustls::ClientConnection::new(Arc::new(config), name)
        .map_err(|error| tls_failure(error.to_string()))?;
    let _ = stream.set_read_timeout(Some(limit));
    let _ = stream.set_write_timeout(Some(limit));
    let started = Instant::now();
    while connection.is_handshaking() {
        if started.elapsed() >= limit {
            return Err((
                Failure::Timeout,
                format!(
                    "the TLS handshake did not finish within {} s",
                    limit.as_secs()
                ),
            ));
        }
        match connection.complete_io(&mut stream) {
            Ok(_) => {}
            Err(error) if error.kind() == std::io::ErrorKind::InvalidData => {
                return Err(tls_failure(error.to_string()));
            }
            Err(error) => {
                let (failure, seen) = classify_io(&error);
                return Err(match failure {
                    Failure::Timeout => (
                        Failure::Timeout,
                        format!("during the TLS handshake: {seen}"),
                    ),
                    // The peer closed or reset the connection mid-handshake: not TLS it speaks.
                    _ => tls_failure(seen),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    fn none(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn addresses_are_read_off_urls() {
        let hosted =
            Address::of("https://tinker.thinkingmachines.dev/services/tinker-prod").unwrap();
        assert_eq!(hosted.authority(), "tinker.thinkingmachines.dev:443");
        assert!(hosted.tls);
        let local = Address::of("http://[::1]:8000").unwrap();
        assert_eq!(local.authority(), "[::1]:8000");
        assert!(!local.tls);
        assert!(Address::of("ftp://x").is_err());
        assert!(Address::of("not a url").is_err());
    }

    #[test]
    fn a_port_nothing_listens_on_is_refused() {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let address = Address::of(&format!("http://127.0.0.1:{port}")).unwrap();
        let Reach::Unreachable(found) = probe(&address, &none, Duration::from_secs(5)) else {
            panic!("a closed port was reached");
        };
        assert_eq!(found.failure, Failure::Refused, "{found}");
        assert!(found.to_string().starts_with(&format!(
            "127.0.0.1:{port} could not be reached (connection refused"
        )));
    }

    #[test]
    fn a_listener_is_reached_and_tls_to_a_plain_one_fails_as_tls() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        // Answers every connection with plain HTTP, as a server that speaks no TLS does.
        std::thread::spawn(move || {
            for mut stream in listener.incoming().take(2).flatten() {
                let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
            }
        });
        let plain = Address::of(&format!("http://127.0.0.1:{port}")).unwrap();
        assert_eq!(probe(&plain, &none, Duration::from_secs(5)), Reach::Reached);
        let tls = Address::of(&format!("https://127.0.0.1:{port}")).unwrap();
        let Reach::Unreachable(found) = probe(&tls, &none, Duration::from_secs(5)) else {
            panic!("a plain server passed a TLS handshake");
        };
        assert_eq!(found.failure, Failure::Tls, "{found}");
    }

    #[test]
    fn a_name_that_does_not_resolve_is_dns() {
        let address = Address::of("https://name-that-does-not-exist.invalid").unwrap();
        let Reach::Unreachable(found) = probe(&address, &none, Duration::from_secs(8)) else {
            panic!("an .invalid name resolved");
        };
        // A resolver that never answers is a timeout; one that answers says the name is unknown.
        assert!(
            matches!(found.failure, Failure::Dns | Failure::Timeout),
            "{found}"
        );
    }

    #[test]
    fn a_proxy_leaves_the_host_unprobed_unless_no_proxy_names_it() {
        let address = Address::of("https://tinker.example.com/x").unwrap();
        let proxied = |name: &str| (name == "HTTPS_PROXY").then(|| "http://proxy:3128".to_owned());
        assert_eq!(proxy_for(&address, &proxied), Some("HTTPS_PROXY"));
        let exempt = |name: &str| match name {
            "HTTPS_PROXY" => Some("http://proxy:3128".to_owned()),
            "NO_PROXY" => Some("localhost,.example.com".to_owned()),
            _ => None,
        };
        assert_eq!(proxy_for(&address, &exempt), None);
        let http_only = |name: &str| (name == "HTTP_PROXY").then(|| "http://proxy:3128".to_owned());
        assert_eq!(proxy_for(&address, &http_only), None);
    }
}
