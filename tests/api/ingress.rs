//! What a request costs before it is known to be a merchant's: a key that
//! authenticates nothing is refused on its headers, its body never read, so
//! a thousand clients sending made-up keys and large bodies cost the server
//! no memory; an authenticated key, or a client on the routes without a key,
//! has a few bodies read at once and no more.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::process::{ServerProcess, cli_merchant, post_json};
use crate::support::*;
use mmc_test_kit::service_test;

/// A connection from `source` (any 127/8 address is loopback) to `server`.
async fn connect_from(source: &str, server: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(format!("{source}:0").parse().unwrap())?;
    socket.connect(server).await
}

fn addr_of(base: &str) -> SocketAddr {
    base.trim_start_matches("http://").parse().unwrap()
}

/// The head of a POST of `length` bytes to `path` with `key`.
fn post_head(path: &str, key: &str, length: usize) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nHost: mmc\r\nAuthorization: Bearer {key}\r\n\
         Content-Type: application/json\r\nIdempotency-Key: {}\r\nContent-Length: {length}\r\n\r\n",
        new_key()
    )
}

/// The status line's code of what the server answered on `stream`, read
/// within `within`, and whether it then closed the connection.
async fn answer(stream: &mut (impl AsyncReadExt + Unpin), within: Duration) -> (Option<u16>, bool) {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + within;
    let closed = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, stream.read(&mut buf)).await {
            Err(_) => break false,
            Ok(Ok(0)) | Ok(Err(_)) => break true,
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
    };
    let status = std::str::from_utf8(&got)
        .ok()
        .and_then(|t| t.strip_prefix("HTTP/1.1 "))
        .and_then(|t| t.get(..3))
        .and_then(|c| c.parse().ok());
    (status, closed)
}

/// Resident memory of process `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/<pid>/status")
}

#[service_test]
async fn a_made_up_key_is_refused_on_its_headers_without_its_body_being_read(app: TestApp) {
    let server = addr_of(&app.base);
    for path in [
        "/api/v1/collect/payments",
        "/api/v1/bulk-payments",
        "/api/v1/webhook-endpoints",
    ] {
        let mut stream = connect_from("127.0.0.1", server).await.unwrap();
        // A body announced, not one byte of it sent: the answer comes anyway.
        stream
            .write_all(post_head(path, &new_key(), 1_000_000).as_bytes())
            .await
            .unwrap();
        let (status, closed) = answer(&mut stream, Duration::from_secs(5)).await;
        assert_eq!(status, Some(401), "{path}");
        assert!(closed, "{path}: the unread body is not waited for");
    }
}

#[service_test]
async fn a_key_or_an_anonymous_client_has_a_few_bodies_read_at_once() {
    let app = spawn_app_with(|c| {
        c.connections.body_reads_per_key = 2;
        c.connections.body_reads_per_client = 2;
        c.connections.body_permit_wait_ms = 200;
    })
    .await;
    let key = app.test_key("Shop");
    let server = addr_of(&app.base);
    for (path, key) in [
        ("/api/v1/collect/payments", key.as_str()),
        // Operators' callbacks: no key, counted per client address.
        ("/api/v1/psp/simulator", ""),
    ] {
        // Two bodies begun and never finished hold the two reads.
        let mut slow = Vec::new();
        for _ in 0..2 {
            let mut s = connect_from("127.0.0.1", server).await.unwrap();
            let head = if key.is_empty() {
                format!("POST {path} HTTP/1.1\r\nHost: mmc\r\nContent-Length: 1000\r\n\r\n{{")
            } else {
                format!("{}{{", post_head(path, key, 1000))
            };
            s.write_all(head.as_bytes()).await.unwrap();
            slow.push(s);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let mut third = app
            .client
            .post(app.url(path))
            .json(&direct_payment("+2290166000001"));
        if !key.is_empty() {
            third = third.bearer_auth(key).header("Idempotency-Key", new_key());
        }
        let resp = third.send().await.unwrap();
        assert_eq!(
            resp.status(),
            429,
            "{path}: a third body waits, then is refused"
        );
        assert!(resp.headers().contains_key("retry-after"), "{path}");
        if !key.is_empty() {
            // A request without a body needs no read.
            let (status, _) = app.get(key, "/api/v1/collect/payments/operators/").await;
            assert_eq!(status, 200);
        }
        drop(slow);
        tokio::time::sleep(Duration::from_millis(100)).await;
        if !key.is_empty() {
            let (status, body) = app
                .create(key, &new_key(), &direct_payment("+2290166000001"))
                .await;
            assert_eq!(status, 201, "the reads are given back: {body}");
        }
    }
}

/// 1,000 connections (from eight addresses, as many clients would) send
/// made-up keys and 2 MiB bodies slowly; the real server's resident memory
/// stays within 64 MiB of its idle size, and a merchant is served meanwhile.
#[service_test]
async fn a_thousand_slow_clients_with_made_up_keys_cost_the_server_no_memory() {
    const CLIENTS: usize = 1_000;
    const BODY: usize = 2 * 1024 * 1024;
    const CHUNK: usize = 64 * 1024;
    let dir = tempfile::tempdir().unwrap();
    let (_, key) = cli_merchant(dir.path(), "Shop", "test");
    let server = ServerProcess::start(dir.path(), &[]);
    let pid = server.child.id();
    let addr = addr_of(&server.base);
    let client = reqwest::Client::new();
    let operators = format!("{}/api/v1/collect/payments/operators/", server.base);
    for _ in 0..20 {
        let resp = client
            .get(&operators)
            .bearer_auth(&key)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let idle = rss_kib(pid);

    let started = Instant::now();
    let attackers: Vec<_> = (0..CLIENTS)
        .map(|i| {
            tokio::spawn(async move {
                let source = format!("127.0.0.{}", 2 + i % 8);
                let Ok(s) = connect_from(&source, addr).await else {
                    return None;
                };
                let head = post_head("/api/v1/bulk-payments", &new_key(), BODY);
                let (mut read, mut write) = s.into_split();
                // The body, a chunk every 100 ms, for as long as the server takes it,
                // while its answer is read.
                let sending = async move {
                    write.write_all(head.as_bytes()).await.ok()?;
                    let chunk = vec![b'x'; CHUNK];
                    for _ in 0..BODY / CHUNK {
                        write.write_all(&chunk).await.ok()?;
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    Some(())
                };
                let (sent_whole, (status, _)) =
                    tokio::join!(sending, answer(&mut read, Duration::from_secs(10)));
                // Refused: answered 401 (or 429 once its address's bucket
                // for made-up keys is empty), or cut before its body was taken.
                Some(matches!(status, Some(401 | 429)) || sent_whole.is_none())
            })
        })
        .collect();

    let mut peak = idle;
    let mut served = 0;
    while attackers.iter().any(|a| !a.is_finished()) {
        let resp = client
            .get(&operators)
            .bearer_auth(&key)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "a merchant is served meanwhile");
        served += 1;
        peak = peak.max(rss_kib(pid));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the slow clients never ended"
        );
    }
    let (status, body) = post_json(
        &client,
        &format!("{}/api/v1/collect/payments", server.base),
        &key,
        Some(&new_key()),
        &direct_payment("+2290166000001"),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    peak = peak.max(rss_kib(pid));

    let mut refused = 0;
    for a in attackers {
        if a.await.unwrap() == Some(true) {
            refused += 1;
        }
    }
    println!(
        "RSS idle {} MiB, peak {} MiB under {CLIENTS} slow clients with made-up keys \
         ({refused} refused, {served} merchant reads served meanwhile)",
        idle / 1024,
        peak / 1024
    );
    assert!(
        refused >= CLIENTS * 9 / 10,
        "{refused} of {CLIENTS} refused"
    );
    assert!(
        peak - idle < 64 * 1024,
        "RSS grew from {idle} KiB to {peak} KiB"
    );
}
