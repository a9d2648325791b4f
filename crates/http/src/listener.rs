//! A listener's loop, the same for both listeners: a connection is admitted
//! under the caps before a byte of it is read, served by hyper with the
//! handler its listener was given, and closed when one of its clocks runs
//! out or, once draining has begun, after the request it is serving.

use std::convert::Infallible;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};

use super::connections::{Activity, Connections, Watched, client_of};
use super::*;
use mmc_common::shutdown::Drain;

/// A response on its way: what a listener's handler returns.
pub type Handled = Pin<Box<dyn Future<Output = Response<Body>> + Send>>;

/// What answers a listener's requests, given the state the listener serves.
pub type Handler<S> = fn(Arc<S>, Request<Incoming>) -> Handled;

/// Draining: how long a connection accepted before draining began has to
/// send its first request.
const FIRST_REQUEST_GRACE: Duration = Duration::from_millis(500);

/// Accepts connections until draining begins, each served on a task of its
/// own by `handler` with `state`.
pub async fn accept_loop<S: Send + Sync + 'static>(
    state: Arc<S>,
    listener: TcpListener,
    connections: Arc<Connections>,
    drain: Arc<Drain>,
    handler: Handler<S>,
) {
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = drain.started() => break, // the listener closes as it drops
        };
        let (stream, peer) = match accepted {
            Ok(s) => s,
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // Over a cap: closed at once, before a byte is read.
        let client = client_of(peer.ip());
        let Ok(admitted) = connections.admit(client) else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let (state, connections, drain) = (state.clone(), connections.clone(), drain.clone());
        tokio::spawn(async move {
            let _admitted = admitted;
            serve_connection(stream, client, state, &connections, &drain, handler).await;
        });
    }
}

/// One connection, from its first byte to its close.
async fn serve_connection<S: Send + Sync + 'static>(
    stream: TcpStream,
    client: IpAddr,
    state: Arc<S>,
    connections: &Connections,
    drain: &Drain,
    handler: Handler<S>,
) {
    let activity = Activity::new();
    let served = activity.clone();
    let service = service_fn(move |mut req: Request<Incoming>| {
        req.extensions_mut().insert(ClientAddr(client));
        let state = state.clone();
        let in_flight = served.request_started();
        async move {
            let resp = handler(state, req).await;
            drop(in_flight);
            Ok::<_, Infallible>(resp)
        }
    });
    let conn = http1::Builder::new()
        .max_buf_size(MAX_HEADER_BYTES.max(8192) * 4)
        .serve_connection(
            TokioIo::new(Watched::new(stream, activity.clone())),
            service,
        );
    tokio::pin!(conn);
    let every = Activity::check_every(&connections.config);
    let draining = drain.started();
    tokio::pin!(draining);
    let mut closing = false;
    // Draining, a connection accepted before it and not yet read from: its
    // client has sent, or is sending, a request it expects answered. hyper
    // would close it unread (its graceful shutdown closes an idle connection
    // at once), so it is given until this deadline for that first request.
    let mut first_request_until: Option<Instant> = None;
    loop {
        tokio::select! {
            _ = &mut conn => break,
            // The request in flight is answered, then the connection closes.
            _ = &mut draining, if !closing => {
                closing = true;
                if activity.served_any() {
                    conn.as_mut().graceful_shutdown();
                } else {
                    first_request_until = Some(Instant::now() + FIRST_REQUEST_GRACE);
                }
            }
            _ = tokio::time::sleep(Duration::from_millis(5)), if first_request_until.is_some() => {
                if activity.served_any()
                    || first_request_until.is_some_and(|t| Instant::now() >= t)
                {
                    conn.as_mut().graceful_shutdown();
                    first_request_until = None;
                }
            }
            _ = tokio::time::sleep(every) => {
                if let Some(cut) = activity.overdue(&connections.config) {
                    connections.cut(cut);
                    break; // dropping the connection closes it
                }
            }
        }
    }
}
