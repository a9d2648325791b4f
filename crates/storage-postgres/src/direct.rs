//! Reads outside a transaction on connections the calling thread drives.
//!
//! A pooled connection is driven by the backend's runtime: a read hands its
//! statement to that runtime's thread and waits for it to hand the row back,
//! two wake-ups of other threads per read. Here a connection carries its own
//! single-threaded runtime, and the caller (a blocking thread of the host)
//! writes the statement and reads the answer itself. Only reads take this
//! way: they are idempotent, so a connection that fails mid-read is dropped
//! and the read is made again on the pool; writes keep the pool's
//! connections, whose number the server's `max_connections` is planned on.
//!
//! A caller that may not block its thread (inside a single-threaded runtime,
//! or when every direct connection is busy) is served by the pool as before.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use std::future::Future;

use parking_lot::Mutex;
use tokio::runtime::{Handle, Runtime, RuntimeFlavor};
use tokio_postgres::{Client, Config, Statement};
use tokio_postgres_rustls::MakeRustlsConnect;

use mmc_storage::StorageError;

use crate::db_err;
use crate::statements::{GET, SCAN, SCAN_DESC, get_with, scan_with, with_end};

/// One connection and what drives it: its runtime polls the connection's
/// I/O whenever a caller runs a statement on it.
struct Direct {
    /// `Some` until dropped (shut down in the background: a caller may
    /// drop one inside another runtime).
    runtime: Option<Runtime>,
    client: Client,
    get: Statement,
    /// `SCAN` then `SCAN_DESC`, each without and with an end key.
    scans: [Statement; 4],
}

/// What a read on a direct connection came to.
pub(crate) enum Read<T> {
    Done(Result<T, StorageError>),
    /// Not run here (no connection free, or this thread may not block):
    /// the caller reads on the pool.
    Elsewhere,
}

pub(crate) struct DirectReads {
    config: Config,
    tls: MakeRustlsConnect,
    idle: Mutex<Vec<Direct>>,
    /// Connections open, idle or in use.
    open: AtomicUsize,
    max: usize,
    /// No connection is opened before this (milliseconds since `since`):
    /// after one failed to open, reads go to the pool for a while rather
    /// than each wait for a connection the server refuses (at its
    /// `max_connections`, say).
    quiet_until: AtomicU64,
    since: Instant,
}

/// How long reads stay on the pool after a direct connection failed to open.
const QUIET_AFTER_FAILURE: Duration = Duration::from_secs(5);

impl Direct {
    fn block_on<F: Future>(&self, f: F) -> F::Output {
        self.runtime
            .as_ref()
            .expect("runtime until dropped")
            .block_on(f)
    }
}

impl Drop for Direct {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl DirectReads {
    pub(crate) fn new(config: Config, tls: MakeRustlsConnect, max: usize) -> DirectReads {
        DirectReads {
            config,
            tls,
            idle: Mutex::new(Vec::new()),
            open: AtomicUsize::new(0),
            max,
            quiet_until: AtomicU64::new(0),
            since: Instant::now(),
        }
    }

    pub(crate) fn get(&self, ns: &str, table: &str, key: &str) -> Read<Option<Vec<u8>>> {
        self.read(|d| d.block_on(get_with(&d.client, &d.get, ns, table, key)))
    }

    pub(crate) fn scan(
        &self,
        ns: &str,
        table: &str,
        range: (&str, &str),
        descending: bool,
        limit: u32,
    ) -> Read<Vec<(String, Vec<u8>)>> {
        self.read(|d| {
            let i = 2 * usize::from(descending) + with_end(range);
            d.block_on(scan_with(&d.client, &d.scans[i], ns, table, range, limit))
        })
    }

    /// Runs `f` on a direct connection, on this thread. A connection that
    /// failed (not a statement the server refused) is dropped.
    fn read<T>(&self, f: impl FnOnce(&Direct) -> Result<T, StorageError>) -> Read<T> {
        if self.max == 0 || !may_block() {
            return Read::Elsewhere;
        }
        let Some(d) = self.take() else {
            return Read::Elsewhere;
        };
        // A worker of a multi-threaded runtime hands its tasks to another
        // thread first; elsewhere this runs `f` as it is.
        let (out, healthy) = tokio::task::block_in_place(|| {
            let out = f(&d);
            (out, !d.client.is_closed())
        });
        match out {
            Err(_) if !healthy => {
                self.open.fetch_sub(1, Ordering::Relaxed);
                Read::Elsewhere
            }
            out => {
                self.idle.lock().push(d);
                Read::Done(out)
            }
        }
    }

    /// An idle connection, or a new one while fewer than `max` are open.
    fn take(&self) -> Option<Direct> {
        if let Some(d) = self.idle.lock().pop() {
            return Some(d);
        }
        let now = self.since.elapsed().as_millis() as u64;
        if now < self.quiet_until.load(Ordering::Relaxed) {
            return None;
        }
        if self.open.fetch_add(1, Ordering::Relaxed) >= self.max {
            self.open.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        match tokio::task::block_in_place(|| self.connect()) {
            Ok(d) => Some(d),
            Err(_) => {
                // The pool's read says what is wrong, if anything still is.
                self.open.fetch_sub(1, Ordering::Relaxed);
                let later = now + QUIET_AFTER_FAILURE.as_millis() as u64;
                self.quiet_until.fetch_max(later, Ordering::Relaxed);
                None
            }
        }
    }

    fn connect(&self) -> Result<Direct, StorageError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| StorageError::Unavailable(format!("postgres runtime: {e}")))?;
        let (client, connection) = runtime
            .block_on(self.config.connect(self.tls.clone()))
            .map_err(db_err)?;
        // Polled whenever a caller runs a statement; ends with the client.
        runtime.spawn(connection);
        let prepared = runtime.block_on(async {
            let get = client.prepare(GET).await?;
            let scans = [
                client.prepare(SCAN[0]).await?,
                client.prepare(SCAN[1]).await?,
                client.prepare(SCAN_DESC[0]).await?,
                client.prepare(SCAN_DESC[1]).await?,
            ];
            Ok::<_, tokio_postgres::Error>((get, scans))
        });
        let (get, scans) = prepared.map_err(db_err)?;
        Ok(Direct {
            runtime: Some(runtime),
            client,
            get,
            scans,
        })
    }
}

/// Whether this thread may block on a direct connection: outside any
/// runtime, or on a thread of a multi-threaded one (a worker moves its tasks
/// away first). Inside a single-threaded runtime it may be that runtime's
/// only thread.
fn may_block() -> bool {
    Handle::try_current().map_or(true, |h| h.runtime_flavor() == RuntimeFlavor::MultiThread)
}
