//! Against a real PostgreSQL, one throwaway database per test
//! (`test_util`): no server is a failure, never a skip.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mmc_storage::conformance;
use mmc_storage::{Backend, OutboxEvent, StorageError, Write};

use crate::test_util::TestDatabase;
use crate::{MIGRATIONS, Options, Postgres};

/// Numbers what is committed and not yet numbered, as the dispatcher does
/// (one at a time), and returns the numbered events' ids after `after`, in
/// `seq` order, with the last `seq` read.
fn dispatch_round(db: &Postgres, after: i64) -> (Vec<String>, i64) {
    db.with_client(move |c| {
        Box::pin(async move {
            let tx = c.transaction().await?;
            let numbering = mmc_storage::sql::dollar_placeholders(crate::SEQUENCE_OUTBOX);
            tx.execute(&numbering, &[&i64::MAX]).await?;
            let rows = tx
                .query(
                    "SELECT id, seq FROM outbox WHERE seq > $1 ORDER BY seq",
                    &[&after],
                )
                .await?;
            tx.commit().await?;
            let last = rows.last().map_or(after, |r| r.get(1));
            Ok((rows.iter().map(|r| r.get(0)).collect(), last))
        })
    })
    .unwrap()
}

/// Inserts event `id` and commits 30 ms later.
fn slow_emit(db: &Postgres, id: String) {
    db.with_client(move |c| {
        Box::pin(async move {
            let tx = c.transaction().await?;
            tx.execute(
                "INSERT INTO outbox (id, event_type, merchant_id, environment, subject_id, payload, created_ms, seq)
                 VALUES ($1, 'payment.completed', 'm', 'test', 's', '\\x7b7d', 0, NULL)",
                &[&id],
            )
            .await?;
            tokio::time::sleep(Duration::from_millis(30)).await;
            tx.commit().await
        })
    })
    .unwrap()
}

/// Every committed event, in the dispatcher's order.
fn outbox_ids(db: &Postgres) -> Vec<String> {
    dispatch_round(db, 0).0
}

fn event(id: String) -> OutboxEvent {
    OutboxEvent {
        id,
        event_type: "payment.completed".into(),
        merchant_id: "m".into(),
        environment: "test".into(),
        subject_id: "s".into(),
        extra_url: Some("https://example.test/hook".into()),
        payload: vec![0, 1, 2, 255],
    }
}

/// `n` nodes on one database, handed out in turn.
pub(crate) fn nodes(url: &str, n: usize) -> impl Fn() -> Arc<dyn Backend> + Sync {
    let nodes: Vec<Arc<dyn Backend>> = (0..n)
        .map(|_| Arc::new(Postgres::connect(url).unwrap()) as Arc<dyn Backend>)
        .collect();
    let next = AtomicUsize::new(0);
    move || nodes[next.fetch_add(1, Ordering::Relaxed) % nodes.len()].clone()
}

#[test]
fn keeps_the_storage_contract() {
    let t = TestDatabase::create();
    let db = Postgres::connect(&t.url).unwrap();
    conformance::run(&db, &|| outbox_ids(&db));
    conformance::names_are_checked(&db);
}

#[test]
fn host_tables_keep_the_sql_rules_on_three_nodes() {
    let t = TestDatabase::create();
    let handles: Vec<mmc_storage::sql::SqlDb> = (0..3)
        .map(|_| mmc_storage::sql::SqlDb::new(Arc::new(Postgres::connect(&t.url).unwrap())))
        .collect();
    let next = AtomicUsize::new(0);
    let open = || handles[next.fetch_add(1, Ordering::Relaxed) % handles.len()].clone();
    conformance::sql_rules(&open, 6, 30);
}

#[test]
fn concurrent_applies_on_three_nodes_count_exactly_once() {
    let t = TestDatabase::create();
    let open = nodes(&t.url, 3);
    conformance::concurrent_applies_count_exactly_once(&open, 6, 40);
}

#[test]
fn racing_creators_on_three_nodes_one_wins_each_key() {
    let t = TestDatabase::create();
    let open = nodes(&t.url, 3);
    conformance::absent_checks_admit_one_creator(&open, 6, 60);
}

#[test]
fn open_transactions_and_applies_on_three_nodes_lose_no_increment() {
    let t = TestDatabase::create();
    let open = nodes(&t.url, 3);
    conformance::transactions_and_applies_exclude_each_other(&open, 6, 30);
}

#[test]
fn concurrent_transactions_on_three_nodes_serialise() {
    let t = TestDatabase::create();
    let open = nodes(&t.url, 3);
    conformance::concurrent_transactions_serialise(&open, 6, 40);
}

#[test]
fn nodes_starting_together_migrate_once() {
    let t = TestDatabase::create();
    let started: Vec<Postgres> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| s.spawn(|| Postgres::connect(&t.url).unwrap()))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let versions: Vec<i32> = started[0]
        .with_client(|c| {
            Box::pin(async move {
                let rows = c
                    .query(
                        "SELECT version FROM schema_migrations ORDER BY version",
                        &[],
                    )
                    .await?;
                Ok(rows.iter().map(|r| r.get(0)).collect())
            })
        })
        .unwrap();
    let known: Vec<i32> = MIGRATIONS.iter().map(|(v, _)| *v).collect();
    assert_eq!(versions, known);
    let cursors: i64 = started[1]
        .with_client(|c| {
            Box::pin(async move {
                Ok(c.query_one("SELECT count(*) FROM outbox_cursor", &[])
                    .await?
                    .get(0))
            })
        })
        .unwrap();
    assert_eq!(cursors, 1);
    // Reconnecting to a migrated database applies nothing again.
    drop(started);
    Postgres::connect(&t.url).unwrap();
}

/// A dispatcher reads the outbox past a cursor: it must never pass an event
/// that commits after it read, or it skips that one for ever. Writers of
/// different namespaces on different nodes emit at once, in open and in
/// prepared transactions, some held open a while after their events are
/// written (so later events commit first), while a dispatcher numbers and
/// reads past its cursor: it reads every event exactly once, each writer's
/// in its own order.
#[test]
fn the_outbox_cursor_never_skips_an_event_committed_late() {
    let t = TestDatabase::create();
    let open = nodes(&t.url, 3);
    let reader = Postgres::connect(&t.url).unwrap();
    let done = AtomicBool::new(false);
    let read = std::thread::scope(|s| {
        let writers: Vec<_> = (0..6)
            .map(|w| {
                let (db, url) = (open(), &t.url);
                s.spawn(move || {
                    let slow = Postgres::connect(url).unwrap();
                    for i in 0..40 {
                        let ns = format!("ns-{}", w % 3);
                        let id = format!("e-{w}-{i}");
                        if i % 8 == 0 {
                            // A writer frozen between its event's insert and
                            // its commit (a paused node): others commit meanwhile.
                            slow_emit(&slow, id);
                        } else if i % 2 == 0 {
                            let mut tx = db.begin(&ns).unwrap();
                            tx.put("t", &id, b"v").unwrap();
                            tx.emit(&event(id)).unwrap();
                            tx.commit().unwrap();
                        } else {
                            let writes = vec![Write::Emit(event(id.clone()))];
                            assert!(db.apply(&ns, vec![], writes).unwrap());
                        }
                    }
                })
            })
            .collect();
        let dispatcher = s.spawn(|| {
            let (mut read, mut cursor) = (Vec::new(), 0);
            loop {
                let finished = done.load(Ordering::SeqCst);
                let (ids, last) = dispatch_round(&reader, cursor);
                read.extend(ids);
                cursor = last;
                if finished {
                    return read;
                }
            }
        });
        let written: Vec<_> = writers.into_iter().map(|w| w.join()).collect();
        // Set even when a writer failed: the dispatcher would wait for ever.
        done.store(true, Ordering::SeqCst);
        written.into_iter().for_each(|w| w.unwrap());
        dispatcher.join().unwrap()
    });
    assert_eq!(read.len(), 240, "every event read, none twice: {read:?}");
    for w in 0..6 {
        let mine: Vec<_> = read
            .iter()
            .filter(|id| id.starts_with(&format!("e-{w}-")))
            .collect();
        let want: Vec<String> = (0..40).map(|i| format!("e-{w}-{i}")).collect();
        assert_eq!(mine, want.iter().collect::<Vec<_>>());
    }
}

/// While versions are mixed, a node of an older version writes events the
/// old way (numbered as written, under the outbox lock): the dispatcher
/// reads them with ours, each once, in the order they were made.
#[test]
fn events_an_older_node_writes_are_read_with_ours_each_once() {
    let t = TestDatabase::create();
    let db = Postgres::connect(&t.url).unwrap();
    let old_style = |id: &'static str| {
        let key = crate::lock_key("", "outbox", "");
        db.with_client(move |c| {
            Box::pin(async move {
                let tx = c.transaction().await?;
                tx.execute("SELECT pg_advisory_xact_lock($1)", &[&key]).await?;
                tx.execute(
                    "INSERT INTO outbox (id, event_type, merchant_id, environment, subject_id, payload, created_ms)
                     VALUES ($1, 'payment.completed', 'm', 'test', 's', '\\x7b7d', 0)",
                    &[&id],
                )
                .await?;
                tx.commit().await
            })
        })
        .unwrap()
    };
    let ours = |id: &str| {
        let writes = vec![Write::Emit(event(id.to_string()))];
        assert!(db.apply("ns", vec![], writes).unwrap());
    };
    old_style("old-1");
    ours("new-1");
    let (first, cursor) = dispatch_round(&db, 0);
    assert_eq!(first, ["old-1", "new-1"]);
    ours("new-2");
    old_style("old-2");
    ours("new-3");
    let (rest, _) = dispatch_round(&db, cursor);
    // The older node's event is numbered when written, ours when dispatched.
    assert_eq!(rest, ["old-2", "new-2", "new-3"]);
}

/// A transaction that reads outside itself (as a component may) needs a
/// second connection; with open transactions limited to half the pool, a
/// pool of two is enough for any number of them.
#[test]
fn transactions_reading_outside_themselves_do_not_starve_the_pool() {
    let t = TestDatabase::create();
    let db = Postgres::connect_with(
        &t.url,
        Options {
            pool_size: 2,
            ..Options::default()
        },
    )
    .unwrap();
    std::thread::scope(|s| {
        for w in 0..8 {
            let db = &db;
            s.spawn(move || {
                for i in 0..20 {
                    let mut tx = db.begin("c").unwrap();
                    tx.put("t", &format!("{w}-{i}"), b"v").unwrap();
                    db.get("c", "t", &format!("{}-{i}", (w + 1) % 8)).unwrap();
                    tx.commit().unwrap();
                }
            });
        }
    });
    assert_eq!(db.scan("c", "t", "", "", 1000).unwrap().len(), 160);
}

#[test]
fn schemas_isolate_stores_in_one_database() {
    let t = TestDatabase::create();
    let a = Postgres::connect_schema(&t.url, "node_a").unwrap();
    let b = Postgres::connect_schema(&t.url, "node_b").unwrap();
    assert!(
        a.apply("c", vec![], vec![Write::Emit(event("only-a".into()))])
            .unwrap()
    );
    let mut tx = a.begin("c").unwrap();
    tx.put("t", "k", b"a").unwrap();
    tx.commit().unwrap();
    assert_eq!(b.get("c", "t", "k").unwrap(), None);
    assert_eq!(outbox_ids(&a), ["only-a"]);
    assert!(outbox_ids(&b).is_empty());
    assert!(matches!(
        Postgres::connect_schema(&t.url, "bad; DROP TABLE kv"),
        Err(StorageError::Invalid(_))
    ));
}

#[test]
fn commits_are_synchronous() {
    let t = TestDatabase::create();
    let db = Postgres::connect(&t.url).unwrap();
    let setting: String = db
        .with_client(|c| {
            Box::pin(async move { Ok(c.query_one("SHOW synchronous_commit", &[]).await?.get(0)) })
        })
        .unwrap();
    assert_eq!(setting, "on");
}

#[test]
fn an_unreachable_server_fails_fast_as_unavailable() {
    // Port 1: nothing listens there.
    let started = Instant::now();
    let err = Postgres::connect("postgres://postgres@127.0.0.1:1/postgres")
        .err()
        .expect("no server there");
    assert!(matches!(err, StorageError::Unavailable(_)), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(15));
    assert!(matches!(
        Postgres::connect("mysql://nope"),
        Err(StorageError::Invalid(_))
    ));
}

/// A commit that fails (here: an event id already in the outbox) reports
/// the failure and writes nothing of the transaction.
#[test]
fn a_failed_commit_is_reported_and_writes_nothing() {
    let t = TestDatabase::create();
    let db = Postgres::connect(&t.url).unwrap();
    assert!(
        db.apply("c", vec![], vec![Write::Emit(event("dup".into()))])
            .unwrap()
    );
    let mut tx = db.begin("c").unwrap();
    tx.put("t", "k", b"v").unwrap();
    tx.emit(&event("dup".into())).unwrap();
    assert!(matches!(tx.commit(), Err(StorageError::Unavailable(_))));
    assert_eq!(db.get("c", "t", "k").unwrap(), None);
    let writes = vec![
        Write::Put {
            table: "t".into(),
            key: "k".into(),
            value: b"v".to_vec(),
        },
        Write::Emit(event("dup".into())),
    ];
    assert!(db.apply("c", vec![], writes).is_err());
    assert_eq!(db.get("c", "t", "k").unwrap(), None);
    // The namespace is free and the pool healthy afterwards.
    assert!(
        db.apply("c", vec![], vec![Write::Emit(event("next".into()))])
            .unwrap()
    );
    assert_eq!(outbox_ids(&db), ["dup", "next"]);
}

/// Takes the newest version back out, as if this build had just added it.
fn unapply_newest_version(db: &Postgres) {
    let last = MIGRATIONS.last().unwrap().0;
    db.with_client(move |c| {
        Box::pin(async move {
            // The newest version replaces a function: applied again, it
            // replaces it again.
            c.execute("DELETE FROM schema_migrations WHERE version = $1", &[&last])
                .await
                .map(|_| ())
        })
    })
    .unwrap();
}

/// A migrator frozen with the migration lock blocks a starting node only
/// for `migration_lock_wait`: then the start fails, naming the session that
/// holds the lock; once the holder has let go, a node starts.
#[test]
fn a_migration_lock_held_too_long_fails_the_start_naming_its_holder() {
    let t = TestDatabase::create();
    let frozen = Postgres::connect(&t.url).unwrap();
    // A node starting on a database of its own version takes no lock: one
    // version is left to apply.
    unapply_newest_version(&frozen);
    // A migration in the middle of a long statement holds the lock row's
    // transaction open (not idle: the server's idle timeout would end it).
    frozen
        .with_client(move |c| {
            Box::pin(async move {
                c.batch_execute(
                    "SET application_name = 'frozen migrator';
                     SET idle_in_transaction_session_timeout = 0;
                     BEGIN;
                     SELECT 1 FROM schema_migrations_lock WHERE id = 1 FOR UPDATE",
                )
                .await?;
                Ok(())
            })
        })
        .unwrap();
    let impatient = Options {
        migration_lock_wait: Duration::from_millis(600),
        ..Options::default()
    };
    let started = Instant::now();
    let refused = Postgres::connect_with(&t.url, impatient.clone()).err();
    assert!(
        matches!(&refused, Some(StorageError::Unavailable(m)) if m.contains("\"frozen migrator\"")),
        "{refused:?}"
    );
    assert!(started.elapsed() >= Duration::from_millis(600));
    drop(frozen);
    let patient = Options {
        migration_lock_wait: Duration::from_secs(20),
        ..impatient
    };
    Postgres::connect_with(&t.url, patient).expect("the lock was released with its session");
}

/// A database migrated up to a version less than this build's: nodes
/// starting together apply the rest once, each version under the lock row.
#[test]
fn nodes_starting_together_on_an_older_schema_apply_the_rest_once() {
    let t = TestDatabase::create();
    let first = Postgres::connect(&t.url).unwrap();
    unapply_newest_version(&first);
    drop(first);
    let started: Vec<Postgres> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| s.spawn(|| Postgres::connect(&t.url).unwrap()))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let (versions, locks): (Vec<i32>, i64) = started[0]
        .with_client(|c| {
            Box::pin(async move {
                let rows = c
                    .query("SELECT version FROM schema_migrations ORDER BY version", &[])
                    .await?;
                let locks = c
                    .query_one(
                        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'
                         AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
                        &[],
                    )
                    .await?
                    .get(0);
                Ok((rows.iter().map(|r| r.get(0)).collect(), locks))
            })
        })
        .unwrap();
    let known: Vec<i32> = MIGRATIONS.iter().map(|(v, _)| *v).collect();
    assert_eq!(versions, known);
    assert_eq!(locks, 0, "no advisory lock is held after the start");
}

/// A prepared transaction of hundreds of keys (a books batch) keeps the
/// same rules as a small one.
#[test]
fn a_large_prepared_transaction_keeps_the_rules() {
    let t = TestDatabase::create();
    let db = Postgres::connect(&t.url).unwrap();
    let put = |k: &str, v: &[u8]| Write::Put {
        table: "t".into(),
        key: k.into(),
        value: v.to_vec(),
    };
    let check = |k: &str, v: Option<&[u8]>| mmc_storage::Check {
        table: "t".into(),
        key: k.into(),
        value: v.map(<[u8]>::to_vec),
    };
    let keys: Vec<String> = (0..200).map(|i| format!("k{i:03}")).collect();
    let mut writes: Vec<Write> = keys.iter().map(|k| put(k, b"first")).collect();
    writes.extend(keys.iter().step_by(2).map(|k| put(k, b"last")));
    writes.push(Write::Delete {
        table: "t".into(),
        key: "k199".into(),
    });
    let checks: Vec<_> = keys.iter().map(|k| check(k, None)).collect();
    assert!(db.apply("c", checks, writes).unwrap());
    assert_eq!(
        db.get("c", "t", "k000").unwrap().as_deref(),
        Some(&b"last"[..])
    );
    assert_eq!(
        db.get("c", "t", "k001").unwrap().as_deref(),
        Some(&b"first"[..])
    );
    assert_eq!(db.get("c", "t", "k199").unwrap(), None);
    assert_eq!(db.scan("c", "t", "", "", 1000).unwrap().len(), 199);

    // One stale check among a hundred that hold: nothing written.
    let held = |i: usize| -> &[u8] {
        if i.is_multiple_of(2) {
            b"last"
        } else {
            b"first"
        }
    };
    let mut checks: Vec<_> = (0..100).map(|i| check(&keys[i], Some(held(i)))).collect();
    let writes: Vec<Write> = keys.iter().map(|k| put(k, b"again")).collect();
    assert!(
        db.apply("c", checks.clone(), vec![put("k000", b"last")])
            .unwrap(),
        "the hundred checks hold"
    );
    checks.push(check("k150", Some(b"stale")));
    assert!(!db.apply("c", checks, writes).unwrap());
    assert_eq!(
        db.get("c", "t", "k000").unwrap().as_deref(),
        Some(&b"last"[..])
    );
}
