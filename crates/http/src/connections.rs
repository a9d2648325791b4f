//! Connection-level bounds, so that a client holding connections open cheaply
//! (slowloris: thousands of half-sent requests) cannot starve the others:
//! a cap on open connections and on connections per client address, and
//! three clocks per connection, watched by one task each:
//!
//! - **header read**: a new connection's first request, and any later
//!   request once its first byte arrives, must have its headers complete
//!   within `header_read_timeout_ms` (a connection that never sends a byte is
//!   cut by this clock too, not left to the longer idle one);
//! - **body read**: the body within `body_read_timeout_ms` (enforced where
//!   the body is read, `read_request`);
//! - **idle**: a kept-alive connection with no request in progress and no
//!   byte for `idle_timeout_ms` is closed. The default (75 s) outlives the
//!   usual load balancer idle timeouts (60 s), which must be the shorter.
//!
//! hyper's own header timer is not used: it runs from the moment a
//! connection waits for a request, so it would also be the idle timeout and
//! the two could not be set apart.

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use mmc_config::ConnectionConfig;
use mmc_metrics::Metrics;

/// The client an address counts as, for the caps and the per-client buckets:
/// an IPv4 address, or an IPv6 /64 (one subscriber's network: counting each
/// /128 would give anyone with a /64 unlimited clients). An IPv4-mapped IPv6
/// address is the IPv4 client.
pub fn client_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

/// Why a connection was cut, as counted in `mmc_connections_cut_total`.
#[derive(Debug, Clone, Copy)]
pub enum Cut {
    MaxConnections,
    PerClient,
    HeaderTimeout,
    BodyTimeout,
    Idle,
}

impl Cut {
    pub fn label(self) -> &'static str {
        match self {
            Cut::MaxConnections => "max_connections",
            Cut::PerClient => "max_connections_per_client",
            Cut::HeaderTimeout => "header_timeout",
            Cut::BodyTimeout => "body_timeout",
            Cut::Idle => "idle",
        }
    }
}

/// The connections of one listener.
pub struct Connections {
    pub config: ConnectionConfig,
    open: AtomicUsize,
    per_client: Mutex<HashMap<IpAddr, usize>>,
    metrics: Arc<Metrics>,
    /// Bodies being read, per API key ([`ConnectionConfig::body_reads_per_key`]).
    pub key_bodies: mmc_common::permits::KeyedPermits,
    /// Bodies being read without a key, per client address.
    pub client_bodies: mmc_common::permits::KeyedPermits,
}

/// Holds one admitted connection's place; dropping it frees the place.
pub struct Admitted {
    connections: Arc<Connections>,
    peer: IpAddr,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.connections.open.fetch_sub(1, Ordering::Relaxed);
        self.connections.metrics.connection_closed();
        let mut per_client = self.connections.per_client.lock();
        if let Some(n) = per_client.get_mut(&self.peer) {
            *n -= 1;
            if *n == 0 {
                per_client.remove(&self.peer);
            }
        }
    }
}

impl Connections {
    pub fn new(config: ConnectionConfig, metrics: Arc<Metrics>) -> Arc<Connections> {
        Arc::new(Connections {
            key_bodies: mmc_common::permits::KeyedPermits::new(config.body_reads_per_key),
            client_bodies: mmc_common::permits::KeyedPermits::new(config.body_reads_per_client),
            config,
            open: AtomicUsize::new(0),
            per_client: Mutex::new(HashMap::new()),
            metrics,
        })
    }

    /// Client addresses with a connection open now (at most `max_connections`).
    pub fn clients(&self) -> usize {
        self.per_client.lock().len()
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// A place for a new connection from `peer`, or why there is none.
    pub fn admit(self: &Arc<Self>, peer: IpAddr) -> Result<Admitted, Cut> {
        let mut per_client = self.per_client.lock();
        let from_peer = per_client.get(&peer).copied().unwrap_or(0);
        let cut = if self.open.load(Ordering::Relaxed) >= self.config.max_connections {
            Some(Cut::MaxConnections)
        } else if from_peer >= self.config.max_connections_per_client {
            Some(Cut::PerClient)
        } else {
            None
        };
        if let Some(cut) = cut {
            drop(per_client);
            self.metrics.connection_cut(cut.label());
            return Err(cut);
        }
        per_client.insert(peer, from_peer + 1);
        self.open.fetch_add(1, Ordering::Relaxed);
        self.metrics.connection_opened();
        Ok(Admitted {
            connections: self.clone(),
            peer,
        })
    }

    pub fn cut(&self, cut: Cut) {
        self.metrics.connection_cut(cut.label());
    }
}

/// What the watchdog of one connection knows: when bytes last moved, whether
/// a request is being read (its first byte seen, its headers not yet
/// complete) and since when, and how many requests are being served.
pub struct Activity {
    epoch: Instant,
    last_byte_ms: AtomicU64,
    reading_head: AtomicBool,
    head_started_ms: AtomicU64,
    in_flight: AtomicUsize,
    /// A request's headers were complete at least once.
    served_any: AtomicBool,
}

impl Activity {
    pub fn new() -> Arc<Activity> {
        Arc::new(Activity {
            epoch: Instant::now(),
            last_byte_ms: AtomicU64::new(0),
            // A client connects to send a request: its header clock runs from accept.
            reading_head: AtomicBool::new(true),
            head_started_ms: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            served_any: AtomicBool::new(false),
        })
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn bytes_read(&self) {
        let now = self.now_ms();
        self.last_byte_ms.store(now, Ordering::Relaxed);
        // The first byte of a request while none is being served starts its header clock.
        if self.in_flight.load(Ordering::Relaxed) == 0
            && !self.reading_head.swap(true, Ordering::Relaxed)
        {
            self.head_started_ms.store(now, Ordering::Relaxed);
        }
    }

    fn bytes_written(&self) {
        self.last_byte_ms.store(self.now_ms(), Ordering::Relaxed);
    }

    /// A request's headers are complete: it is being served.
    pub fn request_started(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        self.reading_head.store(false, Ordering::Relaxed);
        self.served_any.store(true, Ordering::Relaxed);
        InFlight(self.clone())
    }

    /// Whether a request has reached the service on this connection.
    pub fn served_any(&self) -> bool {
        self.served_any.load(Ordering::Relaxed)
    }

    /// Whether the connection has overstayed one of its clocks.
    pub fn overdue(&self, config: &ConnectionConfig) -> Option<Cut> {
        if self.in_flight.load(Ordering::Relaxed) > 0 {
            return None; // served: the body clock and the deadlines bound it
        }
        let now = self.now_ms();
        if self.reading_head.load(Ordering::Relaxed) {
            let started = self.head_started_ms.load(Ordering::Relaxed);
            return (now.saturating_sub(started) > config.header_read_timeout_ms)
                .then_some(Cut::HeaderTimeout);
        }
        let last = self.last_byte_ms.load(Ordering::Relaxed);
        (now.saturating_sub(last) > config.idle_timeout_ms).then_some(Cut::Idle)
    }

    /// How often a watchdog looks: a quarter of the shortest clock, within 50 ms–1 s.
    pub fn check_every(config: &ConnectionConfig) -> Duration {
        let shortest = config.header_read_timeout_ms.min(config.idle_timeout_ms);
        Duration::from_millis((shortest / 4).clamp(50, 1000))
    }
}

/// One request being served; dropping it ends it.
pub struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let a = &self.0;
        a.last_byte_ms.store(a.now_ms(), Ordering::Relaxed);
        a.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A connection's socket, telling its [`Activity`] when bytes move.
pub struct Watched<T> {
    io: T,
    activity: Arc<Activity>,
}

impl<T> Watched<T> {
    pub fn new(io: T, activity: Arc<Activity>) -> Watched<T> {
        Watched { io, activity }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Watched<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.bytes_read();
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Watched<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write(cx, data);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.bytes_written();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.bytes_written();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> ConnectionConfig {
        ConnectionConfig {
            header_read_timeout_ms: 100,
            idle_timeout_ms: 200,
            max_connections: 3,
            max_connections_per_client: 2,
            ..ConnectionConfig::default()
        }
    }

    #[test]
    fn caps_hold_and_places_are_given_back() {
        let c = Connections::new(config(), Arc::default());
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let a1 = c.admit(a).unwrap();
        let _a2 = c.admit(a).unwrap();
        assert!(matches!(c.admit(a), Err(Cut::PerClient)));
        let _b1 = c.admit(b).unwrap();
        assert!(matches!(c.admit(b), Err(Cut::MaxConnections)));
        drop(a1);
        assert!(c.admit(b).is_ok());
    }

    #[test]
    fn the_per_client_counts_hold_only_clients_with_a_connection_open() {
        let c = Connections::new(config(), Arc::default());
        for i in 0..1_000u32 {
            let held = c.admit(IpAddr::from(i.to_be_bytes())).unwrap();
            assert_eq!(c.clients(), 1);
            drop(held);
        }
        assert_eq!(
            c.clients(),
            0,
            "a client's entry goes with its last connection"
        );
        let held: Vec<_> = (0..10u32)
            .filter_map(|i| c.admit(IpAddr::from(i.to_be_bytes())).ok())
            .collect();
        assert_eq!(held.len(), 3, "refused at the cap");
        assert_eq!(c.clients(), 3, "the refused left no entry");
    }

    #[test]
    fn the_clocks_tell_a_slow_head_from_an_idle_connection() {
        let cfg = config();
        let a = Activity::new();
        assert!(a.overdue(&cfg).is_none());
        a.bytes_read(); // a request begins
        std::thread::sleep(Duration::from_millis(150));
        assert!(matches!(a.overdue(&cfg), Some(Cut::HeaderTimeout)));
        let served = a.request_started();
        std::thread::sleep(Duration::from_millis(250));
        assert!(
            a.overdue(&cfg).is_none(),
            "a request being served is never cut"
        );
        drop(served);
        assert!(a.overdue(&cfg).is_none());
        std::thread::sleep(Duration::from_millis(250));
        assert!(matches!(a.overdue(&cfg), Some(Cut::Idle)));
    }

    #[test]
    fn an_ipv6_network_counts_as_one_client() {
        let c = |s: &str| client_of(s.parse().unwrap());
        assert_eq!(c("2001:db8:1:2::1"), c("2001:db8:1:2:ffff::9"));
        assert_ne!(c("2001:db8:1:2::1"), c("2001:db8:1:3::1"));
        assert_eq!(c("::ffff:10.0.0.1"), c("10.0.0.1"));
        assert_ne!(c("10.0.0.1"), c("10.0.0.2"));
    }

    #[test]
    fn a_connection_that_never_sends_a_byte_is_on_the_header_clock() {
        let cfg = config();
        let a = Activity::new();
        std::thread::sleep(Duration::from_millis(150));
        assert!(
            matches!(a.overdue(&cfg), Some(Cut::HeaderTimeout)),
            "silent from accept: cut after the header timeout, not the idle one"
        );
    }
}
