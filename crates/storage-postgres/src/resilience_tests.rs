//! The database's and the nodes' bad days, on private clusters (see
//! [`crate::cluster`]) where a test stops the server or turns TLS on, and
//! on the shared test server where it does neither; and storage called from
//! every kind of thread a runtime has.

use std::sync::Arc;
use std::time::{Duration, Instant};

use mmc_storage::{Backend, Order, StorageError, Write};

use crate::cluster::Cluster;
use crate::test_util::TestDatabase;
use crate::{IDLE_IN_TRANSACTION_TIMEOUT, Options, Postgres};

/// A node that stops talking inside a transaction (frozen, cut off) holds
/// the keys it touched only until the server ends its idle session: the
/// other node writes other keys at once, waits that long for one of those,
/// and what the frozen one wrote is rolled back.
#[test]
fn a_transaction_left_idle_is_rolled_back_and_stops_blocking_other_nodes() {
    let t = TestDatabase::create();
    let (a, b) = (
        Postgres::connect(&t.url).unwrap(),
        Postgres::connect(&t.url).unwrap(),
    );
    let mut frozen = a.begin("ns").unwrap();
    frozen.put("t", "half", b"written").unwrap();
    // Its next statement sends the write: the key is held from then on.
    assert_eq!(
        frozen.get("t", "half").unwrap().as_deref(),
        Some(&b"written"[..])
    );

    let started = Instant::now();
    let mut other = b.begin("ns").unwrap();
    other.put("t", "elsewhere", b"written").unwrap();
    other.commit().unwrap();
    let elsewhere = started.elapsed();
    assert!(
        elsewhere < IDLE_IN_TRANSACTION_TIMEOUT - Duration::from_secs(1),
        "another key waited {elsewhere:?}"
    );

    let started = Instant::now();
    let mut same = b.begin("ns").unwrap();
    same.put("t", "half", b"whole").unwrap();
    same.commit().unwrap();
    let waited = started.elapsed();
    assert!(
        waited >= IDLE_IN_TRANSACTION_TIMEOUT - Duration::from_millis(200)
            && waited < IDLE_IN_TRANSACTION_TIMEOUT + Duration::from_secs(2),
        "the held key waited {waited:?}"
    );
    // The frozen node wakes up: its transaction is gone, nothing of it written.
    let e = frozen.commit().unwrap_err();
    assert!(matches!(e, StorageError::Unavailable(_)), "{e}");
    assert_eq!(
        a.get("ns", "t", "half").unwrap().as_deref(),
        Some(&b"whole"[..])
    );
    // And it writes again without anyone's help (its dead connection dropped).
    let mut again = a.begin("ns").unwrap();
    again.put("t", "after", b"x").unwrap();
    again.commit().unwrap();
    println!("writer of a held key waited {waited:?} behind a transaction left idle");
}

/// The server restarted: calls meanwhile fail fast as unavailable (never
/// hang), and the node reconnects by itself once it is back, with
/// everything committed before still there.
#[test]
fn a_restarted_server_fails_calls_fast_and_is_reconnected_to() {
    let cluster = Cluster::start();
    let db = Postgres::connect(&cluster.url()).unwrap();
    db.apply("ns", vec![], vec![put("before")]).unwrap();
    // A read's connection is open and idle in the pool when the server goes.
    assert!(db.get("ns", "t", "before").unwrap().is_some());
    cluster.stop();
    for _ in 0..3 {
        let started = Instant::now();
        let e = db.apply("ns", vec![], vec![put("during")]).unwrap_err();
        assert!(matches!(e, StorageError::Unavailable(_)), "{e}");
        assert!(
            started.elapsed() < Duration::from_secs(6),
            "{:?}",
            started.elapsed()
        );
        let e = db
            .begin("ns")
            .err()
            .expect("no transaction without a server");
        assert!(matches!(e, StorageError::Unavailable(_)), "{e}");
        let started = Instant::now();
        let e = db.get("ns", "t", "before").unwrap_err();
        assert!(matches!(e, StorageError::Unavailable(_)), "{e}");
        assert!(
            started.elapsed() < Duration::from_secs(6),
            "{:?}",
            started.elapsed()
        );
    }
    cluster.resume();
    let started = Instant::now();
    loop {
        match db.apply("ns", vec![], vec![put("after")]) {
            Ok(_) => break,
            Err(e) if started.elapsed() < Duration::from_secs(10) => {
                assert!(matches!(e, StorageError::Unavailable(_)), "{e}");
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("not reconnected in 10 s: {e}"),
        }
    }
    assert!(db.get("ns", "t", "before").unwrap().is_some());
    assert!(db.get("ns", "t", "after").unwrap().is_some());
    assert!(db.get("ns", "t", "during").unwrap().is_none());

    // The server ends the connection a read left idle in the pool: the
    // next read runs on a new connection, and succeeds.
    let other = Postgres::connect(&cluster.url()).unwrap();
    let ended: i64 = other
        .with_client(|c| {
            Box::pin(async move {
                let sql = "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                           WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'";
                Ok(c.query_one(sql, &[]).await?.get(0))
            })
        })
        .unwrap();
    assert!(ended >= 1);
    std::thread::sleep(Duration::from_millis(200));
    assert!(db.get("ns", "t", "before").unwrap().is_some());
}

fn put(key: &str) -> Write {
    Write::Put {
        table: "t".into(),
        key: key.into(),
        value: b"v".to_vec(),
    }
}

/// A CA and a server certificate for 127.0.0.1 and localhost it signed, in
/// PEM: (CA certificate, server certificate, server key).
fn certificates(ca_name: &str) -> (String, String, String) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, ca_name);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let mut server = CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()]).unwrap();
    server
        .distinguished_name
        .push(DnType::CommonName, "localhost");
    let cert = server.signed_by(&key, &issuer).unwrap();
    (ca_cert.pem(), cert.pem(), key.serialize_pem())
}

/// A cluster serving TLS with a certificate from its own CA: (cluster, CA file).
fn tls_cluster() -> (Cluster, std::path::PathBuf) {
    let (ca, cert, key) = certificates("mmc test CA");
    let mut cluster = Cluster::init();
    let cert = cluster.write_file("server.crt", cert.as_bytes());
    let key = cluster.write_file("server.key", key.as_bytes());
    let ca = cluster.write_file("ca.pem", ca.as_bytes());
    cluster.set("ssl", "on");
    cluster.set("ssl_cert_file", &cert.display().to_string());
    cluster.set("ssl_key_file", &key.display().to_string());
    // Plaintext from the client refused: a session is encrypted or there is none.
    let hba = cluster.write_file(
        "pg_hba.conf",
        b"hostssl all all 127.0.0.1/32 trust\nhostnossl all all 127.0.0.1/32 reject\n",
    );
    cluster.set("hba_file", &hba.display().to_string());
    cluster.resume();
    (cluster, ca)
}

/// Whether the node's sessions are encrypted, as the server sees them:
/// `Some(true)` if every one is, `Some(false)` if none is (after a read
/// outside a transaction, so that its connection is among them).
fn encrypted(db: &Postgres) -> Option<bool> {
    db.get("ns", "t", "any").unwrap();
    let (all, none): (bool, bool) = db
        .with_client(|c| {
            Box::pin(async move {
                let row = c
                    .query_one(
                        "SELECT bool_and(s.ssl), NOT bool_or(s.ssl) FROM pg_stat_ssl s \
                         JOIN pg_stat_activity a USING (pid) WHERE a.backend_type = 'client backend'",
                        &[],
                    )
                    .await?;
                Ok((row.get(0), row.get(1)))
            })
        })
        .unwrap();
    match (all, none) {
        (true, false) => Some(true),
        (false, true) => Some(false),
        _ => None,
    }
}

#[test]
fn tls_require_and_verify_full_connect_and_a_wrong_ca_is_refused() {
    let (cluster, ca) = tls_cluster();
    let url = cluster.url();
    let db = Postgres::connect(&format!("{url}?sslmode=require")).unwrap();
    assert_eq!(encrypted(&db), Some(true));
    let ca = ca.display().to_string();
    for mode in ["verify-ca", "verify-full"] {
        let db = Postgres::connect(&format!("{url}?sslmode={mode}&sslrootcert={ca}")).unwrap();
        assert_eq!(encrypted(&db), Some(true), "{mode}");
        db.apply("ns", vec![], vec![put(mode)]).unwrap();
    }
    // Another CA's certificate: refused, saying why.
    let (wrong_ca, _, _) = certificates("another CA");
    let wrong = cluster.write_file("wrong-ca.pem", wrong_ca.as_bytes());
    for mode in ["verify-ca", "verify-full", "require"] {
        let e = Postgres::connect(&format!(
            "{url}?sslmode={mode}&sslrootcert={}",
            wrong.display()
        ))
        .err()
        .expect("a server certificate from another CA is refused");
        let m = e.to_string();
        assert!(
            m.contains("invalid peer certificate: UnknownIssuer"),
            "{mode}: {m}"
        );
    }
    // Plaintext is the default, and this server refuses it.
    for plain in [url.clone(), format!("{url}?sslmode=disable")] {
        let e = Postgres::connect(&plain).err().expect("plaintext refused");
        assert!(e.to_string().contains("no encryption"), "{e}");
    }
}

/// verify-full checks the server's name: a certificate for another name
/// is refused even from the trusted CA; verify-ca accepts it.
#[test]
fn tls_verify_full_refuses_a_certificate_for_another_name() {
    let (cluster, ca) = tls_cluster();
    // The server reached at its address under a name its certificate lacks.
    let base = format!(
        "postgres://postgres@mmc-other-name:{}/postgres?hostaddr=127.0.0.1&sslrootcert={}",
        cluster.port(),
        ca.display()
    );
    let e = Postgres::connect(&format!("{base}&sslmode=verify-full"))
        .err()
        .expect("a certificate for another name is refused");
    assert!(e.to_string().contains("not valid for name"), "{e}");
    Postgres::connect(&format!("{base}&sslmode=verify-ca")).unwrap();
}

/// Plaintext stays the default: a server without TLS is reached without
/// it, and `require` then refuses to go on in the clear.
#[test]
fn plaintext_is_the_default_and_require_needs_a_tls_server() {
    let t = TestDatabase::create();
    let db = Postgres::connect(&t.url).unwrap();
    assert_eq!(encrypted(&db), Some(false));
    let _ = Postgres::connect(&format!("{}?sslmode=disable", t.url)).unwrap();
    // The shared test server may or may not have TLS; a private one without it:
    let cluster = Cluster::start();
    let e = Postgres::connect(&format!("{}?sslmode=require", cluster.url()))
        .err()
        .expect("require refuses a server without TLS");
    assert!(e.to_string().to_lowercase().contains("tls"), "{e}");
}

/// The host calls storage from `spawn_blocking` and `block_in_place`; a
/// CLI from a plain thread; a mistake might call it on a runtime's own
/// thread. None of them may panic.
#[test]
fn callable_from_any_runtime_context() {
    let t = TestDatabase::create();
    let db = Arc::new(Postgres::connect(&t.url).unwrap());
    let put = |db: &Postgres, key: &str| {
        assert!(db.apply("ctx", vec![], vec![put(key)]).unwrap());
        assert_eq!(db.get("ctx", "t", key).unwrap().as_deref(), Some(&b"v"[..]));
        let scanned = db.scan_in("ctx", "t", (key, ""), Order::Asc, 1).unwrap();
        assert_eq!(scanned, vec![(key.to_string(), b"v".to_vec())]);
        let mut tx = db.begin("ctx").unwrap();
        assert!(tx.get("t", key).unwrap().is_some());
        tx.commit().unwrap();
    };

    let host = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    host.block_on(async {
        let d = db.clone();
        tokio::task::spawn_blocking(move || put(&d, "spawn-blocking"))
            .await
            .unwrap();
        let d = db.clone();
        tokio::spawn(async move { tokio::task::block_in_place(|| put(&d, "block-in-place")) })
            .await
            .unwrap();
        // On a worker thread itself: blocks that worker, but works.
        let d = db.clone();
        tokio::spawn(async move { put(&d, "worker") })
            .await
            .unwrap();
    });
    // A single-threaded runtime, as `#[tokio::main(flavor = "current_thread")]`.
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async { put(&db, "current-thread") });
    put(&db, "plain");
    assert_eq!(db.scan("ctx", "t", "", "", 10).unwrap().len(), 5);

    // Dropped on a runtime's thread, with a connection of its own reads
    // (whose runtime goes too): no "cannot drop a runtime" panic.
    let other = Postgres::connect(&t.url).unwrap();
    assert!(other.get("ctx", "t", "plain").unwrap().is_some());
    host.block_on(async move { drop(other) });
    // A transaction dropped there rolls back all the same.
    let d = db.clone();
    host.block_on(async move {
        let mut tx = d.begin("ctx").unwrap();
        tx.put("t", "dropped", b"v").unwrap();
    });
    assert_eq!(db.get("ctx", "t", "dropped").unwrap(), None);
}

/// Reads outside a transaction open connections of their own beside the
/// pool, at most `read_connections`, and none when it is 0: a node's
/// connections at the server are the pool's plus those.
#[test]
fn reads_open_at_most_their_own_connections_and_none_when_turned_off() {
    // A database each: the other node's connections, closing, are not counted.
    let connections_after_reads = |read_connections: usize| -> i64 {
        let t = TestDatabase::create();
        let options = Options {
            pool_size: 1,
            read_connections: Some(read_connections),
            ..Options::default()
        };
        let db = Postgres::connect_with(&t.url, options).unwrap();
        assert!(db.apply("r", vec![], vec![put("k")]).unwrap());
        std::thread::scope(|s| {
            for _ in 0..6 {
                s.spawn(|| {
                    for _ in 0..100 {
                        assert!(db.get("r", "t", "k").unwrap().is_some());
                        assert_eq!(
                            db.scan_in("r", "t", ("", ""), Order::Asc, 5).unwrap().len(),
                            1
                        );
                    }
                });
            }
        });
        db.with_client(|c| {
            Box::pin(async move {
                let sql = "SELECT count(*) FROM pg_stat_activity \
                           WHERE datname = current_database() AND backend_type = 'client backend'";
                Ok(c.query_one(sql, &[]).await?.get(0))
            })
        })
        .unwrap()
    };
    // The pool's one connection, and no other.
    assert_eq!(connections_after_reads(0), 1);
    // The pool's, the first read's own, and at most one more.
    let with_two = connections_after_reads(2);
    assert!((2..=3).contains(&with_two), "{with_two} connections");
}
