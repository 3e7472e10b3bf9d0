//! Free loopback ports for a run's API and trainer, so that runs never share one.
//!
//! A run's ports are chosen by `rl runs start` and bound seconds later by Python components.
//! A port the kernel picked for a `bind(0)` is in its ephemeral range, where any other
//! `bind(0)` or outgoing connection on the machine may take it in between; so ports are drawn at
//! random below that range, where nothing is handed out unasked, and checked free by binding.

use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};
use std::ops::Range;
use std::time::Duration;

use crate::ProcessError;

/// The lowest port drawn: below it sit the well-known and many registered services.
const LOWEST_DRAWN: u16 = 10_000;
/// Enough ports below the ephemeral range to make two runs' draws unlikely to meet.
const LEAST_RANGE: u16 = 1_000;
/// Draws before falling back to the kernel's choice (a machine with that many busy ports).
const DRAWS: usize = 64;

/// Ports free now, distinct. The listeners are held until all are chosen so the same port is
/// not handed out twice; a later taker is caught when the component binds.
pub fn free_loopback_ports<const N: usize>() -> Result<[u16; N], ProcessError> {
    let drawn = drawable_range(ephemeral_range().as_ref());
    let mut listeners = Vec::with_capacity(N);
    let mut ports = [0u16; N];
    for port in &mut ports {
        let listener = drawn.clone().and_then(draw).map_or_else(|| bind(0), Ok)?;
        *port = listener
            .local_addr()
            .map_err(ProcessError::NoFreePort)?
            .port();
        listeners.push(listener);
    }
    Ok(ports)
}

fn bind(port: u16) -> Result<TcpListener, ProcessError> {
    TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port))
        .map_err(ProcessError::NoFreePort)
}

fn draw(range: Range<u16>) -> Option<TcpListener> {
    (0..DRAWS).find_map(|_| bind(fastrand::u16(range.clone())).ok())
}

/// The kernel's ephemeral ports (`net.ipv4.ip_local_port_range`), when it says.
fn ephemeral_range() -> Option<Range<u16>> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let mut bounds = text.split_whitespace().map(str::parse::<u16>);
    let (Some(Ok(low)), Some(Ok(high))) = (bounds.next(), bounds.next()) else {
        return None;
    };
    Some(low..high.saturating_add(1))
}

/// Where to draw: from [`LOWEST_DRAWN`] up to the ephemeral range, if that leaves room.
fn drawable_range(ephemeral: Option<&Range<u16>>) -> Option<Range<u16>> {
    let below = LOWEST_DRAWN..ephemeral?.start;
    (below.len() >= usize::from(LEAST_RANGE)).then_some(below)
}

/// Whether something listens on `127.0.0.1:port` now.
pub fn is_listening(port: u16) -> bool {
    std::net::TcpStream::connect_timeout(
        &SocketAddrV4::new(Ipv4Addr::LOCALHOST, port).into(),
        std::time::Duration::from_millis(200),
    )
    .is_ok()
}

/// How long a stopped run's ports may take to be free once its processes are gone: a socket
/// may linger in the kernel a moment.
pub(crate) const RELEASE_WAIT: Duration = Duration::from_secs(2);

/// Waits up to [`RELEASE_WAIT`] for `ports` to be free; returns those still in use. The one
/// wait of a stop, the supervisor's and that of a caller ending a run without it.
pub(crate) async fn wait_until_free(ports: &[u16]) -> Vec<u16> {
    let deadline = tokio::time::Instant::now() + RELEASE_WAIT;
    loop {
        let busy = still_listening(ports);
        if busy.is_empty() || tokio::time::Instant::now() >= deadline {
            return busy;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Those of `ports` something listens on now.
pub(crate) fn still_listening(ports: &[u16]) -> Vec<u16> {
    ports
        .iter()
        .copied()
        .filter(|port| is_listening(*port))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_distinct_and_free() {
        let [a, b] = free_loopback_ports::<2>().unwrap();
        assert_ne!(a, b);
        assert!(!is_listening(a) && !is_listening(b));
        let _held = TcpListener::bind(("127.0.0.1", a)).unwrap();
        assert!(is_listening(a));
    }

    #[test]
    fn ports_are_drawn_below_the_ephemeral_range() {
        assert_eq!(
            drawable_range(Some(&(32_768..61_000))),
            Some(10_000..32_768)
        );
        // No room below it, or no range known: the kernel chooses.
        assert_eq!(drawable_range(Some(&(10_500..61_000))), None);
        assert_eq!(drawable_range(None), None);
        if let Some(range) = drawable_range(ephemeral_range().as_ref()) {
            let ports = free_loopback_ports::<4>().unwrap();
            assert!(
                ports.iter().all(|port| range.contains(port)),
                "{ports:?} {range:?}"
            );
        }
    }
}
