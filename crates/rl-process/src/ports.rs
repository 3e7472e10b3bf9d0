//! Free loopback ports for a run's API and trainer, so that runs never share one.
//!
//! A run's ports are chosen by `rl runs start` and bound seconds later by Python components.
//! A port the kernel picked for a `bind(0)` is in its ephemeral range, where any other
//! `bind(0)` or outgoing connection on the machine may take it in between; so ports are drawn at
//! random below that range, where nothing is handed out unasked, and checked free by binding.
//! A port drawn is free but not yet bound: another rl process drawing in those seconds (a
//! sweep's second run, another test's) could draw it too, and the later binder's run fails. So
//! every draw of this user's rl processes is written, under a lock, to a file in the temporary
//! folder, and a draw passes over the ports drawn in the last [`RESERVED_FOR`].

use std::collections::BTreeSet;
use std::io::Read as _;
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};
use std::ops::Range;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::ProcessError;

/// The lowest port drawn: below it sit the well-known and many registered services.
const LOWEST_DRAWN: u16 = 10_000;
/// Enough ports below the ephemeral range to make two runs' draws unlikely to meet.
const LEAST_RANGE: u16 = 1_000;
/// Draws before falling back to the kernel's choice (a machine with that many busy ports).
const DRAWS: usize = 64;
/// How long a drawn port is kept from other draws: a run's components bind theirs within a
/// minute or two of its start (the engine first, on a slow CPU).
const RESERVED_FOR: Duration = Duration::from_secs(300);
/// The most of the draws file read: a few thousand draws, far more than live at once.
const DRAWS_FILE_LIMIT: u64 = 256 * 1024;

/// Ports free now, distinct. The listeners are held until all are chosen so the same port is
/// not handed out twice; a later taker is caught when the component binds.
pub fn free_loopback_ports<const N: usize>() -> Result<[u16; N], ProcessError> {
    let drawn = drawable_range(ephemeral_range().as_ref());
    // Without the file (another user's, a read-only folder) ports are drawn as before.
    let mut reserved = Reserved::open();
    let mut listeners = Vec::with_capacity(N);
    let mut ports = [0u16; N];
    for port in &mut ports {
        let taken = reserved.as_ref().map(Reserved::ports).unwrap_or_default();
        let listener = drawn
            .clone()
            .and_then(|range| draw(range, &taken))
            .map_or_else(|| bind(0), Ok)?;
        *port = listener
            .local_addr()
            .map_err(ProcessError::NoFreePort)?
            .port();
        if let Some(reserved) = &mut reserved {
            reserved.add(*port);
        }
        listeners.push(listener);
    }
    if let Some(reserved) = reserved {
        reserved.save();
    }
    Ok(ports)
}

/// The ports this user's rl processes drew lately, held under the draws file's lock.
struct Reserved {
    path: PathBuf,
    _lock: nix::fcntl::Flock<std::fs::File>,
    /// Port and the second it was drawn, the stale ones left out.
    draws: Vec<(u16, u64)>,
    now: u64,
}

impl Reserved {
    fn open() -> Option<Self> {
        let uid = nix::unistd::geteuid();
        let dir = std::env::temp_dir();
        let lock =
            rl_settings::lock_exclusive(&dir.join(format!("rl-drawn-ports-{uid}.lock"))).ok()?;
        let path = dir.join(format!("rl-drawn-ports-{uid}"));
        let now = SystemTime::now().duration_since(UNIX_EPOCH).ok()?.as_secs();
        let mut text = String::new();
        if let Ok(file) = std::fs::File::open(&path) {
            let _ = file.take(DRAWS_FILE_LIMIT).read_to_string(&mut text);
        }
        let draws = text
            .lines()
            .filter_map(|line| {
                let (port, at) = line.split_once(' ')?;
                Some((port.parse().ok()?, at.parse().ok()?))
            })
            .filter(|(_, at): &(u16, u64)| now.saturating_sub(*at) < RESERVED_FOR.as_secs())
            .collect();
        Some(Self {
            path,
            _lock: lock,
            draws,
            now,
        })
    }

    fn ports(&self) -> BTreeSet<u16> {
        self.draws.iter().map(|(port, _)| *port).collect()
    }

    fn add(&mut self, port: u16) {
        self.draws.push((port, self.now));
    }

    /// Written whole beside, then renamed: a reader never sees half a file. A failed write
    /// loses only the reservation, never the run.
    fn save(self) {
        let mut text = String::new();
        for (port, at) in &self.draws {
            text.push_str(&format!("{port} {at}\n"));
        }
        let _ = rl_settings::write_atomically(&self.path, text.as_bytes());
    }
}

fn bind(port: u16) -> Result<TcpListener, ProcessError> {
    TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port))
        .map_err(ProcessError::NoFreePort)
}

fn draw(range: Range<u16>, taken: &BTreeSet<u16>) -> Option<TcpListener> {
    (0..DRAWS).find_map(|_| {
        let port = fastrand::u16(range.clone());
        if taken.contains(&port) {
            return None;
        }
        bind(port).ok()
    })
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

    /// 600 ports drawn in a row, each released at once as a run's are until its components
    /// bind them: without the draws file, two of them would almost surely meet (the birthday
    /// bound over ~22,000 ports); with it, none does.
    #[test]
    fn ports_drawn_lately_are_not_drawn_again() {
        let range = drawable_range(ephemeral_range().as_ref());
        assert!(
            range.is_some(),
            "no room below the ephemeral range: {range:?}"
        );
        let mut seen = BTreeSet::new();
        for _ in 0..200 {
            for port in free_loopback_ports::<3>().unwrap() {
                assert!(seen.insert(port), "{port} drawn twice");
            }
        }
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
