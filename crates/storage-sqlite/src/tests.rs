use super::*;

#[test]
fn wal_bytes_count_the_frames_a_commit_writes() {
    let dir = tempfile::tempdir().unwrap();
    let db = Sqlite::open(&dir.path().join("t.db")).unwrap();
    let before = wal_bytes_written();
    let value = vec![7u8; 64 * 1024]; // spans many pages
    let mut tx = db.begin("c").unwrap();
    tx.put("t", "big", &value).unwrap();
    tx.commit().unwrap();
    let frame = 4096 + 24;
    let written = wal_bytes_written() - before; // other tests may add theirs
    assert!(written >= 16 * frame, "{written} bytes");
    let wal = std::fs::metadata(dir.path().join("t.db-wal"))
        .unwrap()
        .len();
    assert!(wal >= 16 * frame, "the WAL holds them: {wal} bytes");
}

/// An outbox event with id `id` (ids are unique: a taken one fails the insert).
fn event(id: &str) -> Write {
    Write::Emit(mmc_storage::OutboxEvent {
        id: id.into(),
        event_type: "payment.created".into(),
        merchant_id: "m".into(),
        environment: "test".into(),
        subject_id: "p".into(),
        extra_url: None,
        payload: b"{}".to_vec(),
    })
}

pub(crate) fn put(key: &str, value: &str) -> Write {
    Write::Put {
        table: "t".into(),
        key: key.into(),
        value: value.as_bytes().to_vec(),
    }
}

/// Readers keep their snapshots between reads (`read_kv`) only while this
/// process committed nothing: a read after a write's answer sees it, on
/// whichever reader it lands, written by `apply` or by a transaction.
#[test]
fn a_kept_snapshot_never_hides_a_write_this_process_answered() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Sqlite::open(&dir.path().join("s.db")).unwrap());
    let workers: Vec<_> = (0..4)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                let key = format!("k{t}");
                for i in 0..150 {
                    let value = i.to_string();
                    if i % 2 == 0 {
                        assert!(db.apply("c", vec![], vec![put(&key, &value)]).unwrap());
                    } else {
                        let mut tx = db.begin("c").unwrap();
                        tx.put("t", &key, value.as_bytes()).unwrap();
                        tx.commit().unwrap();
                    }
                    assert_eq!(
                        db.get("c", "t", &key).unwrap(),
                        Some(value.clone().into_bytes()),
                        "{key} after write {i}"
                    );
                    let rows = db.scan("c", "t", &key, "", 1).unwrap();
                    assert_eq!(rows, vec![(key.clone(), value.into_bytes())]);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
}

/// Another process's commits are not counted here: a kept snapshot may
/// hide one for at most `SNAPSHOT_FOR`. And an idle reader lets go of
/// its snapshot, so the WAL can restart (a TRUNCATE checkpoint completes).
#[test]
fn another_process_write_is_seen_soon_and_idle_snapshots_let_the_wal_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.db");
    let db = Sqlite::open(&path).unwrap();
    let other = Sqlite::open(&path).unwrap(); // as the CLI would, from another process
    assert!(db.apply("c", vec![], vec![put("k", "1")]).unwrap());
    assert_eq!(db.get("c", "t", "k").unwrap(), Some(b"1".to_vec()));
    assert!(other.apply("c", vec![], vec![put("k", "2")]).unwrap());
    let written = Instant::now();
    while db.get("c", "t", "k").unwrap() != Some(b"2".to_vec()) {
        assert!(written.elapsed() < Duration::from_secs(5), "never seen");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(db.get("c", "t", "k").unwrap(), Some(b"2".to_vec())); // a snapshot kept again
    let checkpoint = Connection::open(&path).unwrap();
    let idle = Instant::now();
    loop {
        // (busy, frames in the WAL, frames checkpointed): 0 frames once it restarted.
        let (busy, log): (i64, i64) = checkpoint
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        if busy == 0 && log == 0 {
            break;
        }
        assert!(
            idle.elapsed() < Duration::from_secs(5),
            "a snapshot still held"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(db.get("c", "t", "k").unwrap(), Some(b"2".to_vec()));
}

#[test]
fn dropped_transaction_rolls_back_and_scan_is_ordered() {
    let dir = tempfile::tempdir().unwrap();
    let db = Sqlite::open(&dir.path().join("t.db")).unwrap();
    {
        let mut tx = db.begin("c").unwrap();
        tx.put("t", "b", b"2").unwrap();
        tx.put("t", "a", b"1").unwrap();
        tx.commit().unwrap();
    }
    {
        let mut tx = db.begin("c").unwrap();
        tx.put("t", "c", b"3").unwrap();
        // dropped: rolled back
    }
    let rows = db.scan("c", "t", "", "", 10).unwrap();
    assert_eq!(
        rows,
        vec![("a".into(), b"1".to_vec()), ("b".into(), b"2".to_vec())]
    );
    assert_eq!(
        db.get("other", "t", "a").unwrap(),
        None,
        "namespaces are separate"
    );
}

#[test]
fn apply_writes_only_when_every_check_still_holds() {
    use mmc_storage::{Check, Write};
    let dir = tempfile::tempdir().unwrap();
    let db = Sqlite::open(&dir.path().join("a.db")).unwrap();
    let check = |key: &str, value: Option<&[u8]>| Check {
        table: "t".into(),
        key: key.into(),
        value: value.map(<[u8]>::to_vec),
    };
    // Absent as read: applied, durable, visible at once.
    assert!(
        db.apply("c", vec![check("a", None)], vec![put("a", "1")])
            .unwrap()
    );
    assert_eq!(db.get("c", "t", "a").unwrap(), Some(b"1".to_vec()));
    // A draft that read "a" as absent is stale now: nothing of it is written.
    let stale = db
        .apply(
            "c",
            vec![check("a", None)],
            vec![put("a", "2"), put("b", "2")],
        )
        .unwrap();
    assert!(!stale);
    assert_eq!(db.get("c", "t", "a").unwrap(), Some(b"1".to_vec()));
    assert_eq!(db.get("c", "t", "b").unwrap(), None);
    // Read as it is: applied, deletes included.
    let writes = vec![
        Write::Delete {
            table: "t".into(),
            key: "a".into(),
        },
        put("b", "3"),
    ];
    assert!(db.apply("c", vec![check("a", Some(b"1"))], writes).unwrap());
    assert_eq!(db.get("c", "t", "a").unwrap(), None);
    assert_eq!(db.get("c", "t", "b").unwrap(), Some(b"3".to_vec()));
}

#[test]
fn a_write_that_fails_in_a_batch_undoes_only_its_own_job() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Sqlite::open(&dir.path().join("b.db")).unwrap());
    assert!(db.apply("c", vec![], vec![event("evt_taken")]).unwrap());
    // An open transaction holds the writer: the first apply below takes
    // the applier to the lock, the rest queue behind it as one batch.
    let holder = db.begin("c").unwrap();
    let spawn = |key: &'static str, event_id: &'static str| {
        let db = db.clone();
        std::thread::spawn(move || db.apply("c", vec![], vec![put(key, "1"), event(event_id)]))
    };
    let first = spawn("first", "evt_first");
    std::thread::sleep(Duration::from_millis(50));
    let before = spawn("before", "evt_before");
    std::thread::sleep(Duration::from_millis(20));
    let failing = spawn("failing", "evt_taken"); // its event id is taken: the insert fails
    std::thread::sleep(Duration::from_millis(20));
    let after = spawn("after", "evt_after");
    std::thread::sleep(Duration::from_millis(50));
    drop(holder);
    assert!(first.join().unwrap().unwrap());
    assert!(before.join().unwrap().unwrap());
    assert!(failing.join().unwrap().is_err());
    assert!(after.join().unwrap().unwrap());
    for key in ["first", "before", "after"] {
        assert_eq!(db.get("c", "t", key).unwrap(), Some(b"1".to_vec()), "{key}");
    }
    // Its put came before the failed insert, in the same job: undone with it.
    assert_eq!(db.get("c", "t", "failing").unwrap(), None);
    // And the writer goes on.
    assert!(db.apply("c", vec![], vec![put("later", "1")]).unwrap());
}

/// The same, for both kinds of batch: one that opens its group (no
/// savepoint: undone by rolling the group back) and one inside a group
/// that already holds an earlier transaction (which must survive).
#[test]
fn a_failed_batch_is_undone_whether_or_not_it_opened_its_group() {
    for group_already_open in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let db = Sqlite::open(&dir.path().join("g.db")).unwrap();
        assert!(db.apply("c", vec![], vec![event("evt_taken")]).unwrap());
        let job = |key: &str, event_id: &str| {
            Arc::new(Job {
                ns: "c".into(),
                checks: vec![],
                writes: vec![put(key, "1"), event(event_id)],
                claimed: AtomicBool::new(true),
                outcome: Mutex::new(None),
                caller: std::thread::current(),
            })
        };
        let mut w = db.writer.lock();
        assert!(!w.open, "the first apply's group is committed");
        if group_already_open {
            enter(&mut w, Savepoint::Txn).unwrap();
            put_on(&w.conn, "c", "t", "earlier", b"1").unwrap();
            leave(&mut w, Savepoint::Txn, true).unwrap();
        }
        let jobs = vec![
            job("before", "evt_before"),
            job("failing", "evt_taken"), // its event id is taken: the insert fails
            job("after", "evt_after"),
        ];
        let outcomes: Vec<_> = apply_batch(&mut w, jobs)
            .into_iter()
            .map(|(_, o)| o.map_err(|e| e.to_string()))
            .collect();
        assert!(
            matches!(outcomes[..], [Ok(true), Err(_), Ok(true)]),
            "{outcomes:?}"
        );
        assert!(w.open, "the jobs that applied wait in the open group");
        drop(w);
        // A later apply joins that group and commits it.
        assert!(db.apply("c", vec![], vec![put("later", "1")]).unwrap());
        let mut kept = vec!["before", "after", "later"];
        if group_already_open {
            kept.push("earlier");
        }
        for key in kept {
            assert_eq!(db.get("c", "t", key).unwrap(), Some(b"1".to_vec()), "{key}");
        }
        assert_eq!(db.get("c", "t", "failing").unwrap(), None);
    }
}

#[test]
fn concurrent_applies_all_become_durable_and_a_conflict_applies_once() {
    use mmc_storage::Check;
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Sqlite::open(&dir.path().join("q.db")).unwrap());
    let absent = |key: &str| Check {
        table: "t".into(),
        key: key.into(),
        value: None,
    };
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                let mut won = 0;
                for i in 0..50 {
                    let key = format!("{t:02}-{i:03}");
                    assert!(
                        db.apply("c", vec![absent(&key)], vec![put(&key, "v")])
                            .unwrap()
                    );
                    // Applied means durable and visible to readers, at once.
                    assert!(db.get("c", "t", &key).unwrap().is_some());
                    // Every thread races for the same key: one of them gets it.
                    let shared = format!("shared-{i:03}");
                    let mine = format!("{t}");
                    if db
                        .apply("c", vec![absent(&shared)], vec![put(&shared, &mine)])
                        .unwrap()
                    {
                        won += 1;
                    }
                }
                won
            })
        })
        .collect();
    let won: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(won, 50, "each shared key applied exactly once");
    drop(db);
    let again = Sqlite::open(&dir.path().join("q.db")).unwrap();
    assert_eq!(again.scan("c", "t", "", "", 1000).unwrap().len(), 450);
}

#[test]
fn outbox_cursor_starts_after_what_an_older_file_dispatched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("o.db");
    {
        // A file from before the cursor: two events dispatched by flag, one not.
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE outbox (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE,
                event_type TEXT NOT NULL, merchant_id TEXT NOT NULL, environment TEXT NOT NULL,
                subject_id TEXT NOT NULL, extra_url TEXT, payload BLOB NOT NULL,
                created_ms INTEGER NOT NULL, dispatched INTEGER NOT NULL DEFAULT 0);
             INSERT INTO outbox (id, event_type, merchant_id, environment, subject_id, payload, created_ms, dispatched)
             VALUES ('e1', 't', 'm', 'test', 's', x'', 0, 1), ('e2', 't', 'm', 'test', 's', x'', 0, 1),
                    ('e3', 't', 'm', 'test', 's', x'', 0, 0);",
        )
        .unwrap();
    }
    let db = Sqlite::open(&path).unwrap();
    let seq: i64 = db
        .read(|c| Ok(c.query_row("SELECT seq FROM outbox_cursor", [], |r| r.get(0))?))
        .unwrap();
    assert_eq!(seq, 2, "e3 is still to dispatch");
}

#[test]
fn concurrent_transactions_share_commits_and_all_become_durable() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Sqlite::open(&dir.path().join("g.db")).unwrap());
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                for i in 0..50 {
                    let mut tx = db.begin("c").unwrap();
                    tx.put("t", &format!("{t:02}-{i:03}"), b"v").unwrap();
                    tx.commit().unwrap();
                    // Committed means visible to readers (on disk), at once.
                    assert!(
                        db.get("c", "t", &format!("{t:02}-{i:03}"))
                            .unwrap()
                            .is_some()
                    );
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(db.scan("c", "t", "", "", 1000).unwrap().len(), 400);
    drop(db);
    // Reopened from the file: everything is there.
    let again = Sqlite::open(&dir.path().join("g.db")).unwrap();
    assert_eq!(again.scan("c", "t", "", "", 1000).unwrap().len(), 400);
}

/// A transaction that reads outside itself while it holds the writer (as a
/// component may) waits for what it saw to be durable; the committer must
/// make that durable without the writer. It once took the writer first:
/// both waited for ever (seen as a hung test suite).
#[test]
fn a_transaction_reading_outside_itself_never_deadlocks_the_committer() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Sqlite::open(&dir.path().join("d.db")).unwrap());
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let mut threads = Vec::new();
    for t in 0..4 {
        let db = db.clone();
        threads.push(std::thread::spawn(move || {
            for i in 0..200 {
                let mut tx = db.begin("c").unwrap();
                tx.put("t", &format!("{t}-{i}"), b"v").unwrap();
                // A read outside the transaction, writer held.
                db.get("c", "t", &format!("{}-{i}", (t + 1) % 4)).unwrap();
                tx.commit().unwrap();
            }
        }));
    }
    for t in 0..4 {
        let db = db.clone();
        threads.push(std::thread::spawn(move || {
            for i in 0..200 {
                let w = Write::Put {
                    table: "a".into(),
                    key: format!("{t}-{i}"),
                    value: b"v".to_vec(),
                };
                assert!(db.apply("c", vec![], vec![w]).unwrap());
            }
        }));
    }
    std::thread::spawn(move || {
        for t in threads {
            t.join().unwrap();
        }
        done_tx.send(()).unwrap();
    });
    done_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("every transaction ended: no deadlock");
    assert_eq!(db.scan("c", "t", "", "", 1000).unwrap().len(), 800);
    assert_eq!(db.scan("c", "a", "", "", 1000).unwrap().len(), 800);
}
