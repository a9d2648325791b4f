//! Paged responses: a body too large to hold (the CSV export of a year of
//! payments) is made by its component a page at a time. A component answers
//! a page and names the next in the `mmc-continue` response header (the
//! query to call it again with); the host sends the page, calls the
//! component again for the same caller with that query, and so on until a
//! page names no next one. One response, streamed (chunked), and memory
//! bounded by a page or two whatever its size: the next page is asked for
//! only once the last one has been handed to the connection.
//!
//! A page that fails once the status has gone out cannot become an error
//! status: the connection is cut before the final chunk, so the client sees
//! an incomplete response, never a short file that looks whole. So does a
//! stream whose key is revoked while it runs: the key is checked before each
//! page and every [`RECHECK`] while the client reads, and the stream stops
//! (its pages not yet sent dropped) once the key no longer authenticates.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{Either, Full};
use hyper::body::Frame;
use tokio::sync::mpsc;

use mmc_runtime::Runtime;
use mmc_runtime::bindings::http_types::{Caller, Request, Response};

/// The response header by which a component asks for another call. It is a
/// word between host and component: never sent to the client.
pub const CONTINUE_HEADER: &str = "mmc-continue";

/// Every public response's body: whole, or streamed page by page.
pub type Body = Either<Full<Bytes>, Paged>;

/// A whole body.
pub fn full(resp: hyper::Response<Full<Bytes>>) -> hyper::Response<Body> {
    resp.map(Either::Left)
}

/// The query of the next page, taken out of a component's headers.
pub fn take_continuation(resp: &mut Response) -> Option<String> {
    let at = resp
        .headers
        .iter()
        .position(|(k, _)| k.eq_ignore_ascii_case(CONTINUE_HEADER))?;
    let (_, query) = resp.headers.remove(at);
    // Only one: a second would be a component bug, and must not leak out.
    resp.headers
        .retain(|(k, _)| !k.eq_ignore_ascii_case(CONTINUE_HEADER));
    Some(query)
}

/// Why a streamed body stopped before its end.
#[derive(Debug, thiserror::Error)]
#[error("a page of a streamed response failed: {0}")]
pub struct PageError(String);

/// How often a stream waiting on its client checks that its key still
/// authenticates.
pub const RECHECK: Duration = Duration::from_millis(100);

/// Whether the key a stream is served for still authenticates (it may ask
/// the database: called off the workers).
pub type StillValid = Arc<dyn Fn() -> bool + Send + Sync>;

/// The body after a component's first page: the pages come through a
/// channel of one, so the producer is at most one page ahead.
pub struct Paged {
    rx: mpsc::Receiver<Result<Bytes, PageError>>,
    /// Set when the key was revoked: nothing more is sent, buffered page included.
    revoked: Arc<AtomicBool>,
}

impl hyper::body::Body for Paged {
    type Data = Bytes;
    type Error = PageError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, PageError>>> {
        if self.revoked.load(Ordering::Acquire) {
            return Poll::Ready(Some(Err(PageError("the API key was revoked".into()))));
        }
        self.rx
            .poll_recv(cx)
            .map(|page| page.map(|r| r.map(Frame::data)))
    }
}

/// The key was revoked: the body ends in error at its next poll (the
/// producer returning drops the sender, which wakes it).
fn stopped(stop: &AtomicBool) {
    tracing::info!("a streamed response stopped: its API key was revoked");
    stop.store(true, Ordering::Release);
}

/// `first`, then every page after it: `request` again with each
/// continuation's query, for `caller`, through `component`.
pub fn stream(
    runtime: Arc<Runtime>,
    component: String,
    caller: Caller,
    request: Request,
    first: Vec<u8>,
    next: String,
    still_valid: StillValid,
) -> Paged {
    let (tx, rx) = mpsc::channel(1);
    let revoked = Arc::new(AtomicBool::new(false));
    let stop = revoked.clone();
    let valid = move || {
        let still_valid = still_valid.clone();
        async move {
            tokio::task::spawn_blocking(move || still_valid())
                .await
                .unwrap_or(false)
        }
    };
    // The request's span: the pages' log lines are the request's.
    let span = tracing::Span::current();
    let in_request = span.clone();
    let pages = async move {
        if tx.send(Ok(Bytes::from(first))).await.is_err() {
            return;
        }
        let mut next = Some(next);
        while let Some(query) = next.take() {
            // Room first: a page nobody will read (a client gone, a HEAD)
            // is never asked for.
            let permit = loop {
                tokio::select! {
                    permit = tx.reserve() => match permit {
                        Ok(permit) => break permit,
                        Err(_) => return, // the client is gone
                    },
                    _ = tokio::time::sleep(RECHECK) => if !valid().await {
                        return stopped(&stop);
                    },
                }
            };
            if !valid().await {
                return stopped(&stop);
            }
            let (runtime, component, caller) = (runtime.clone(), component.clone(), caller.clone());
            let request = Request {
                query,
                ..request.clone()
            };
            let span = in_request.clone();
            let page = tokio::task::spawn_blocking(move || {
                let _in_request = span.enter();
                runtime.handle(&component, Some(&caller), &request)
            })
            .await;
            let failure = match page {
                Ok(Ok(mut resp)) if resp.status == 200 => {
                    next = take_continuation(&mut resp);
                    permit.send(Ok(Bytes::from(resp.body)));
                    continue;
                }
                Ok(Ok(resp)) => format!(
                    "status {}: {}",
                    resp.status,
                    String::from_utf8_lossy(&resp.body)
                ),
                Ok(Err(e)) => e.to_string(),
                Err(e) => format!("page task failed: {e}"),
            };
            tracing::error!(error = %failure, "a streamed response stopped before its end");
            permit.send(Err(PageError(failure)));
            return;
        }
    };
    tokio::spawn(tracing::Instrument::instrument(pages, span));
    Paged { rx, revoked }
}
