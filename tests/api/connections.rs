//! Connection-level bounds against slow and idle clients (slowloris): the
//! caps refuse what is over them at accept, the header, body and idle clocks
//! close what overstays, `/metrics` counts both, and a normal client is
//! served meanwhile.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::support::*;
use mmc_test_kit::service_test;

/// A connection from `source` (any 127/8 address is loopback) to `server`.
async fn connect_from(source: &str, server: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(format!("{source}:0").parse().unwrap())?;
    socket.connect(server).await
}

/// Whether the server closed `stream` within `within` (EOF or reset).
async fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 512];
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, stream.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => continue, // a response (408) before the close
        }
    }
}

async fn metric(app: &TestApp, name: &str) -> u64 {
    let text = reqwest::get(app.url("/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or(0)
}

/// Median of `n` sequential reads of a payment by a normal client, each on
/// a new connection. Not pooled on purpose: a pooling client may open a
/// spare connection it then never uses (its idle one came back first), and
/// the header clock rightly cuts that too, which would blur the count of
/// slow clients cut below.
async fn read_latency(app: &TestApp, key: &str, path: &str, n: usize) -> Duration {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let mut took = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        let (status, body) = app.get_with(&client, key, path).await;
        assert_eq!(status, 200, "{body}");
        took.push(t.elapsed());
    }
    took.sort();
    took[n / 2]
}

#[service_test]
async fn two_thousand_slow_clients_are_closed_while_a_normal_client_is_served() {
    let app = spawn_app_with(|c| {
        c.connections.header_read_timeout_ms = 3_000;
        c.connections.max_connections_per_client = 1_500;
    })
    .await;
    let server = app.service.running.addr;
    let key = app.test_key("Shop");
    let body = serde_json::json!({"reference": "c-1", "amount": 1500, "currency": "XOF",
        "country": "BJ", "operator": "mtn-bj", "customer": {"phone": "+2290166000001"}});
    let (id, _) = app.create_ok(&key, &body).await;
    let path = format!("/api/v1/collect/payments/{id}");
    let before = read_latency(&app, &key, &path, 21).await;

    // 2,000 clients from 127.0.0.2 each send half a request, then nothing.
    let slow: Vec<TcpStream> = futures::future::join_all((0..2_000).map(|_| async move {
        let mut s = connect_from("127.0.0.2", server).await.unwrap();
        // Refused ones may already be closed: the write may fail.
        let _ = s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n").await;
        s
    }))
    .await;

    // The normal client, from 127.0.0.1, is served as usual meanwhile.
    let during = read_latency(&app, &key, &path, 21).await;
    println!("median read latency: {before:?} before, {during:?} with 2,000 slow clients");
    assert!(
        during < before * 20 + Duration::from_millis(100),
        "{during:?} against {before:?}"
    );

    // Those over the per-client cap were refused at accept; the others are
    // closed by the header clock (3 s, looked at every 750 ms).
    let mut closed = 0;
    let closing = Instant::now();
    for mut s in slow {
        if closed_within(&mut s, Duration::from_secs(5)).await {
            closed += 1;
        }
    }
    println!(
        "2,000 slow connections closed within {:?}",
        closing.elapsed()
    );
    assert_eq!(closed, 2_000, "every slow connection is closed");
    // Over the cap at accept, or by the header clock: every one is counted
    // (how many were over the cap depends on how fast 2,000 connect here).
    let over_cap = metric(
        &app,
        "mmc_connections_cut_total{reason=\"max_connections_per_client\"}",
    )
    .await;
    let header = metric(&app, "mmc_connections_cut_total{reason=\"header_timeout\"}").await;
    assert!(over_cap > 0 && over_cap <= 500, "{over_cap}");
    assert_eq!(over_cap + header, 2_000, "{over_cap} + {header}");
    // And the service still serves.
    assert_eq!(app.get(&key, &path).await.0, 200);
}

#[service_test]
async fn a_slow_body_gets_408_and_an_idle_connection_is_closed() {
    let app = spawn_app_with(|c| {
        c.connections.body_read_timeout_ms = 500;
        c.connections.idle_timeout_ms = 800;
    })
    .await;
    let server = app.service.running.addr;
    // A merchant's key: a body is read only once its key authenticates.
    let key = app.test_key("Shop");

    // Headers at once, then 10 of the 100 bytes announced.
    let mut s = TcpStream::connect(server).await.unwrap();
    s.write_all(
        format!(
            "POST /api/v1/collect/payments HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n\
             Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"amount\""
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let mut answer = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(3), s.read(&mut answer))
        .await
        .expect("answered")
        .unwrap();
    let text = String::from_utf8_lossy(&answer[..n]);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    let body: Value = serde_json::from_str(text.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_eq!(body["error"]["code"], "request_timeout", "{body}");

    // One request answered, then silence: closed after the idle clock.
    let mut s = TcpStream::connect(server).await.unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 256];
    let n = s.read(&mut buf).await.unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
    let idle = Instant::now();
    assert!(closed_within(&mut s, Duration::from_secs(5)).await);
    assert!(
        idle.elapsed() >= Duration::from_millis(700),
        "not before its idle time: {:?}",
        idle.elapsed()
    );
    assert_eq!(
        metric(&app, "mmc_connections_cut_total{reason=\"body_timeout\"}").await,
        1
    );
    assert!(metric(&app, "mmc_connections_cut_total{reason=\"idle\"}").await >= 1);
}

#[service_test]
async fn a_connection_that_never_sends_a_byte_is_cut_by_the_header_clock() {
    let app = spawn_app_with(|c| {
        c.connections.header_read_timeout_ms = 500;
        c.connections.idle_timeout_ms = 30_000;
    })
    .await;
    // Connected, then silent: a cheap way to hold places until the idle clock.
    let mut s = TcpStream::connect(app.service.running.addr).await.unwrap();
    let silent = Instant::now();
    assert!(closed_within(&mut s, Duration::from_secs(5)).await);
    assert!(
        silent.elapsed() < Duration::from_secs(3),
        "cut by the header clock (500 ms), not the idle one (30 s): {:?}",
        silent.elapsed()
    );
    assert_eq!(
        metric(&app, "mmc_connections_cut_total{reason=\"header_timeout\"}").await,
        1
    );
}

#[service_test]
async fn draining_answers_the_first_request_of_a_connection_accepted_before_it(app: TestApp) {
    let server = app.service.running.addr;
    // Accepted before the drain, its request sent only after it began (a
    // client whose request was on its way when the node was told to stop).
    let mut late = TcpStream::connect(server).await.unwrap();
    let mut silent = TcpStream::connect(server).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    app.service.site.app.drain.start();
    tokio::time::sleep(Duration::from_millis(50)).await;
    late.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(3), late.read_to_end(&mut answer))
        .await
        .expect("answered, then closed")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // One that sends nothing is closed once the grace is over.
    assert!(closed_within(&mut silent, Duration::from_secs(2)).await);
}
