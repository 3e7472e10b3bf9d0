//! Free loopback ports for a run's API and trainer, so that runs never share one.

use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};

use crate::ProcessError;

/// Ports the kernel says are free now. The listeners are held until all are chosen so the
/// same port is not handed out twice; a later taker is caught when the component binds.
pub fn free_loopback_ports<const N: usize>() -> Result<[u16; N], ProcessError> {
    let mut listeners = Vec::with_capacity(N);
    let mut ports = [0u16; N];
    for port in &mut ports {
        let listener = TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0))
            .map_err(ProcessError::NoFreePort)?;
        *port = listener
            .local_addr()
            .map_err(ProcessError::NoFreePort)?
            .port();
        listeners.push(listener);
    }
    Ok(ports)
}

/// Whether something listens on `127.0.0.1:port` now.
pub fn is_listening(port: u16) -> bool {
    std::net::TcpStream::connect_timeout(
        &SocketAddrV4::new(Ipv4Addr::LOCALHOST, port).into(),
        std::time::Duration::from_millis(200),
    )
    .is_ok()
}

/// Those of `ports` something listens on now.
pub fn still_listening(ports: &[u16]) -> Vec<u16> {
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
}
