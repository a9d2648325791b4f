//! The contract every engine keeps, as test functions each engine's own tests
//! call on a fresh store (feature `conformance`). Components run unchanged on
//! any engine only if these hold on all of them.
//!
//! Each function uses its own namespace, so they may share one store. They
//! panic (assert) on a broken rule, as a test does.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::{Backend, Check, MAX_SCAN, OutboxEvent, StorageError, Write};

/// Opens another instance on the same store: another node, for an engine
/// that runs as a fleet; the same instance again for one that cannot.
pub type Open<'a> = &'a (dyn Fn() -> Arc<dyn Backend> + Sync);

/// Ids of the events committed so far, in commit order.
pub type Events<'a> = &'a dyn Fn() -> Vec<String>;

/// Every single-instance rule, in one call.
pub fn run(db: &dyn Backend, events: Events) {
    dropped_transaction_rolls_back(db);
    transaction_reads_its_own_writes(db);
    reads_outside_an_open_transaction_see_committed_data(db);
    finished_transaction_is_refused(db);
    scan_is_ordered_bounded_and_ranged(db);
    namespaces_and_tables_are_isolated(db);
    apply_writes_only_when_every_check_holds(db);
    emit_is_written_only_when_committed(db, events);
}

fn check(table: &str, key: &str, value: Option<&[u8]>) -> Check {
    Check {
        table: table.into(),
        key: key.into(),
        value: value.map(<[u8]>::to_vec),
    }
}

fn put(table: &str, key: &str, value: &[u8]) -> Write {
    Write::Put {
        table: table.into(),
        key: key.into(),
        value: value.to_vec(),
    }
}

fn event(id: &str) -> OutboxEvent {
    OutboxEvent {
        id: id.into(),
        event_type: "payment.completed".into(),
        merchant_id: "m1".into(),
        environment: "test".into(),
        subject_id: "p1".into(),
        extra_url: None,
        payload: b"{}".to_vec(),
    }
}

fn keys(rows: &[(String, Vec<u8>)]) -> Vec<&str> {
    rows.iter().map(|(k, _)| k.as_str()).collect()
}

pub fn dropped_transaction_rolls_back(db: &dyn Backend) {
    let ns = "conf-rollback";
    let mut tx = db.begin(ns).unwrap();
    tx.put("t", "kept", b"1").unwrap();
    tx.put("t", "gone", b"1").unwrap();
    tx.commit().unwrap();

    let mut tx = db.begin(ns).unwrap();
    tx.put("t", "new", b"2").unwrap();
    tx.put("t", "kept", b"2").unwrap();
    tx.delete("t", "gone").unwrap();
    drop(tx); // a component that trapped: nothing of it stays

    assert_eq!(db.get(ns, "t", "kept").unwrap(), Some(b"1".to_vec()));
    assert_eq!(db.get(ns, "t", "gone").unwrap(), Some(b"1".to_vec()));
    assert_eq!(db.get(ns, "t", "new").unwrap(), None);
    // And the writer is free again.
    let mut tx = db.begin(ns).unwrap();
    assert_eq!(tx.get("t", "new").unwrap(), None);
    tx.commit().unwrap();
}

pub fn transaction_reads_its_own_writes(db: &dyn Backend) {
    let ns = "conf-own-writes";
    let mut tx = db.begin(ns).unwrap();
    tx.put("t", "a", b"1").unwrap();
    tx.put("t", "b", b"2").unwrap();
    tx.put("t", "a", b"3").unwrap(); // a put replaces
    tx.delete("t", "b").unwrap();
    tx.delete("t", "never").unwrap(); // deleting nothing is no error
    assert_eq!(tx.get("t", "a").unwrap(), Some(b"3".to_vec()));
    assert_eq!(tx.get("t", "b").unwrap(), None);
    assert_eq!(keys(&tx.scan("t", "", "", 10).unwrap()), ["a"]);
    tx.commit().unwrap();
    assert_eq!(db.get(ns, "t", "a").unwrap(), Some(b"3".to_vec()));
    // Empty values are values, not absence.
    let mut tx = db.begin(ns).unwrap();
    tx.put("t", "empty", b"").unwrap();
    tx.commit().unwrap();
    assert_eq!(db.get(ns, "t", "empty").unwrap(), Some(Vec::new()));
}

/// A transaction may read outside itself (a component may), and nobody sees
/// its writes before it commits.
pub fn reads_outside_an_open_transaction_see_committed_data(db: &dyn Backend) {
    let ns = "conf-outside";
    let mut tx = db.begin(ns).unwrap();
    tx.put("t", "a", b"1").unwrap();
    tx.commit().unwrap();
    let mut tx = db.begin(ns).unwrap();
    tx.put("t", "a", b"2").unwrap();
    tx.put("t", "b", b"2").unwrap();
    assert_eq!(db.get(ns, "t", "a").unwrap(), Some(b"1".to_vec()));
    assert_eq!(db.get(ns, "t", "b").unwrap(), None);
    assert_eq!(keys(&db.scan(ns, "t", "", "", 10).unwrap()), ["a"]);
    tx.commit().unwrap();
    assert_eq!(db.get(ns, "t", "a").unwrap(), Some(b"2".to_vec()));
    assert_eq!(keys(&db.scan(ns, "t", "", "", 10).unwrap()), ["a", "b"]);
}

pub fn finished_transaction_is_refused(db: &dyn Backend) {
    let mut tx = db.begin("conf-finished").unwrap();
    tx.put("t", "a", b"1").unwrap();
    tx.commit().unwrap();
    assert!(matches!(
        tx.put("t", "b", b"1"),
        Err(StorageError::Finished)
    ));
    assert!(matches!(tx.commit(), Err(StorageError::Finished)));
    drop(tx);
    assert_eq!(db.get("conf-finished", "t", "b").unwrap(), None);
}

pub fn scan_is_ordered_bounded_and_ranged(db: &dyn Backend) {
    let ns = "conf-scan";
    // Byte order, whatever the engine's locale: "B" < "_" < "a" < "a-b" < "aB" < "a_b" < "b" < "é".
    let mixed = ["é", "b", "a_b", "aB", "a-b", "a", "_", "B"];
    let mut tx = db.begin(ns).unwrap();
    for k in mixed {
        tx.put("mixed", k, k.as_bytes()).unwrap();
    }
    for i in 0..(MAX_SCAN + 5) {
        tx.put("many", &format!("k{i:05}"), b"v").unwrap();
    }
    tx.put("many-other", "k00000", b"other table").unwrap();
    tx.commit().unwrap();

    let mut sorted = mixed.to_vec();
    sorted.sort_unstable(); // str's Ord is byte order
    let all = db.scan(ns, "mixed", "", "", 100).unwrap();
    assert_eq!(keys(&all), sorted, "keys in byte order");
    assert!(all.iter().all(|(k, v)| k.as_bytes() == v.as_slice()));

    // [start, end): start included, end excluded; "" = unbounded.
    assert_eq!(
        keys(&db.scan(ns, "mixed", "a", "b", 100).unwrap()),
        ["a", "a-b", "aB", "a_b"]
    );
    assert_eq!(
        keys(&db.scan(ns, "mixed", "a-b", "", 100).unwrap()),
        ["a-b", "aB", "a_b", "b", "é"]
    );
    assert_eq!(keys(&db.scan(ns, "mixed", "", "_", 100).unwrap()), ["B"]);
    assert!(db.scan(ns, "mixed", "c", "c", 100).unwrap().is_empty());
    assert_eq!(
        keys(&db.scan(ns, "mixed", "", "", 3).unwrap()),
        ["B", "_", "a"]
    );
    assert!(db.scan(ns, "mixed", "", "", 0).unwrap().is_empty());

    // Descending: the same ranges from the last key down.
    let mut reversed = sorted.clone();
    reversed.reverse();
    assert_eq!(
        keys(&db.scan_desc(ns, "mixed", "", "", 100).unwrap()),
        reversed
    );
    assert_eq!(
        keys(&db.scan_desc(ns, "mixed", "a", "b", 2).unwrap()),
        ["a_b", "aB"]
    );
    assert_eq!(
        keys(&db.scan_desc(ns, "mixed", "", "a", 100).unwrap()),
        ["_", "B"]
    );
    assert!(db.scan_desc(ns, "mixed", "c", "c", 100).unwrap().is_empty());
    assert_eq!(
        db.scan_desc(ns, "many", "", "", MAX_SCAN + 5)
            .unwrap()
            .len(),
        MAX_SCAN as usize
    );
    assert_eq!(
        keys(&db.scan_desc(ns, "many", "", "", 1).unwrap()),
        [format!("k{:05}", MAX_SCAN + 4)]
    );

    // Paging by the last key: every key once, in order.
    let mut seen = Vec::new();
    let mut from = String::new();
    loop {
        let page = db.scan(ns, "many", &from, "", 300).unwrap();
        let Some((last, _)) = page.last() else { break };
        from = format!("{last}\0");
        seen.extend(page.into_iter().map(|(k, _)| k));
    }
    assert_eq!(seen.len(), (MAX_SCAN + 5) as usize);
    assert!(seen.windows(2).all(|w| w[0] < w[1]));

    // Never more than MAX_SCAN, whatever is asked.
    let capped = db.scan(ns, "many", "", "", u32::MAX).unwrap();
    assert_eq!(capped.len(), MAX_SCAN as usize);
    assert_eq!(capped[0].0, "k00000");
    // The same rules inside a transaction.
    let mut tx = db.begin(ns).unwrap();
    assert_eq!(
        tx.scan("many", "", "", u32::MAX).unwrap().len(),
        MAX_SCAN as usize
    );
    assert_eq!(keys(&tx.scan("mixed", "a", "b", 2).unwrap()), ["a", "a-b"]);
}

pub fn namespaces_and_tables_are_isolated(db: &dyn Backend) {
    let (a, b) = ("conf-iso-a", "conf-iso-b");
    let mut tx = db.begin(a).unwrap();
    tx.put("t", "k", b"a").unwrap();
    tx.put("u", "k", b"a-u").unwrap();
    tx.commit().unwrap();
    let mut tx = db.begin(b).unwrap();
    assert_eq!(tx.get("t", "k").unwrap(), None, "another namespace's key");
    assert!(tx.scan("t", "", "", 10).unwrap().is_empty());
    tx.put("t", "k", b"b").unwrap();
    tx.delete("u", "k").unwrap(); // b's own (absent) row, not a's
    tx.commit().unwrap();
    assert_eq!(db.get(a, "t", "k").unwrap(), Some(b"a".to_vec()));
    assert_eq!(db.get(a, "u", "k").unwrap(), Some(b"a-u".to_vec()));
    assert_eq!(db.get(b, "t", "k").unwrap(), Some(b"b".to_vec()));
    assert_eq!(db.get(b, "u", "k").unwrap(), None);
    // A namespace that is a prefix of another is still another one.
    assert_eq!(db.get("conf-iso-", "t", "k").unwrap(), None);
    assert_eq!(
        db.scan(a, "t", "", "", 10).unwrap(),
        [("k".into(), b"a".to_vec())]
    );
    // Applies too.
    assert!(
        db.apply(
            b,
            vec![check("t", "k", Some(b"b"))],
            vec![put("t", "k", b"b2")]
        )
        .unwrap()
    );
    assert_eq!(db.get(a, "t", "k").unwrap(), Some(b"a".to_vec()));
}

pub fn apply_writes_only_when_every_check_holds(db: &dyn Backend) {
    let ns = "conf-apply";
    // Absent as read: applied and visible at once.
    assert!(
        db.apply(ns, vec![check("t", "a", None)], vec![put("t", "a", b"1")])
            .unwrap()
    );
    assert_eq!(db.get(ns, "t", "a").unwrap(), Some(b"1".to_vec()));
    // Stale "absent": nothing of it is written.
    let stale = db
        .apply(
            ns,
            vec![check("t", "a", None)],
            vec![put("t", "a", b"2"), put("t", "b", b"2")],
        )
        .unwrap();
    assert!(!stale);
    assert_eq!(db.get(ns, "t", "a").unwrap(), Some(b"1".to_vec()));
    assert_eq!(db.get(ns, "t", "b").unwrap(), None);
    // Stale value.
    assert!(
        !db.apply(
            ns,
            vec![check("t", "a", Some(b"0"))],
            vec![put("t", "b", b"x")]
        )
        .unwrap()
    );
    // One check of several fails: nothing written.
    let checks = vec![check("t", "a", Some(b"1")), check("t", "z", Some(b"nope"))];
    assert!(!db.apply(ns, checks, vec![put("t", "b", b"x")]).unwrap());
    assert_eq!(db.get(ns, "t", "b").unwrap(), None);
    // Every check holds (a value, an absence, another table): deletes included.
    let checks = vec![
        check("t", "a", Some(b"1")),
        check("t", "b", None),
        check("u", "a", None),
    ];
    let writes = vec![
        Write::Delete {
            table: "t".into(),
            key: "a".into(),
        },
        put("t", "b", b"3"),
        put("u", "a", b"4"),
    ];
    assert!(db.apply(ns, checks, writes).unwrap());
    assert_eq!(db.get(ns, "t", "a").unwrap(), None);
    assert_eq!(db.get(ns, "t", "b").unwrap(), Some(b"3".to_vec()));
    assert_eq!(db.get(ns, "u", "a").unwrap(), Some(b"4".to_vec()));
    // No checks: always applied; no writes: applied and nothing changes.
    assert!(db.apply(ns, vec![], vec![put("t", "c", b"5")]).unwrap());
    assert!(
        db.apply(ns, vec![check("t", "c", Some(b"5"))], vec![])
            .unwrap()
    );
    assert_eq!(db.scan(ns, "t", "", "", 10).unwrap().len(), 2);
}

pub fn emit_is_written_only_when_committed(db: &dyn Backend, events: Events) {
    let ns = "conf-emit";
    let mine = |events: Events| -> Vec<String> {
        events()
            .into_iter()
            .filter(|id| id.starts_with("conf-evt-"))
            .collect()
    };
    let mut tx = db.begin(ns).unwrap();
    tx.put("t", "a", b"1").unwrap();
    tx.emit(&event("conf-evt-1")).unwrap();
    tx.commit().unwrap();

    let mut tx = db.begin(ns).unwrap();
    tx.put("t", "b", b"1").unwrap();
    tx.emit(&event("conf-evt-dropped")).unwrap();
    drop(tx);

    // A prepared transaction emits only when it applies.
    assert!(
        !db.apply(
            ns,
            vec![check("t", "a", None)],
            vec![Write::Emit(event("conf-evt-stale"))]
        )
        .unwrap()
    );
    let writes = vec![put("t", "c", b"1"), Write::Emit(event("conf-evt-2"))];
    assert!(
        db.apply(ns, vec![check("t", "a", Some(b"1"))], writes)
            .unwrap()
    );

    let mut tx = db.begin(ns).unwrap();
    tx.emit(&event("conf-evt-3")).unwrap();
    tx.commit().unwrap();

    assert_eq!(
        mine(events),
        ["conf-evt-1", "conf-evt-2", "conf-evt-3"],
        "committed events, in commit order"
    );
    assert_eq!(db.get(ns, "t", "b").unwrap(), None);
}

/// Compare-and-swap counter: `threads` threads, each on its own instance from
/// `open`, each adding `increments` by `apply` with a check of the value it
/// read. Every increment lands exactly once; a stale one returns false and
/// writes nothing (its marker key is absent).
pub fn concurrent_applies_count_exactly_once(open: Open, threads: usize, increments: usize) {
    let ns = "conf-cas";
    let attempts: Vec<(Vec<String>, usize)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let db = open();
                s.spawn(move || {
                    let (mut won, mut lost) = (Vec::new(), 0);
                    let mut attempt = 0;
                    while won.len() < increments {
                        attempt += 1;
                        let seen = db.get(ns, "t", "counter").unwrap();
                        let n = seen.as_deref().map_or(0, parse);
                        let marker = format!("{t:02}-{attempt:05}");
                        let writes = vec![
                            put("t", "counter", (n + 1).to_string().as_bytes()),
                            put("marker", &marker, b"1"),
                        ];
                        if db
                            .apply(ns, vec![check("t", "counter", seen.as_deref())], writes)
                            .unwrap()
                        {
                            won.push(marker);
                        } else {
                            lost += 1;
                        }
                    }
                    (won, lost)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let db = open();
    let total = threads * increments;
    let counter = db
        .get(ns, "t", "counter")
        .unwrap()
        .as_deref()
        .map_or(0, parse);
    assert_eq!(counter, total, "every increment applied exactly once");
    let won: BTreeSet<String> = attempts
        .iter()
        .flat_map(|(w, _)| w.iter().cloned())
        .collect();
    let mut markers = BTreeSet::new();
    let mut from = String::new();
    loop {
        let page = db.scan(ns, "marker", &from, "", MAX_SCAN).unwrap();
        let Some((last, _)) = page.last() else { break };
        from = format!("{last}\0");
        markers.extend(page.into_iter().map(|(k, _)| k));
    }
    assert_eq!(
        markers, won,
        "exactly the applied attempts wrote; the conflicting ones nothing"
    );
    let lost: usize = attempts.iter().map(|(_, l)| l).sum();
    eprintln!("conformance: {total} increments over {threads} threads, {lost} conflicts refused");
}

/// Read-modify-write in interactive transactions from `threads` threads, each
/// on its own instance: writers of a namespace are serialised, so no
/// increment is lost and none fails.
pub fn concurrent_transactions_serialise(open: Open, threads: usize, increments: usize) {
    let ns = "conf-serial";
    std::thread::scope(|s| {
        for _ in 0..threads {
            let db = open();
            s.spawn(move || {
                for _ in 0..increments {
                    let mut tx = db.begin(ns).unwrap();
                    let n = tx.get("t", "counter").unwrap().as_deref().map_or(0, parse);
                    tx.put("t", "counter", (n + 1).to_string().as_bytes())
                        .unwrap();
                    tx.commit().unwrap();
                }
            });
        }
    });
    let n = open()
        .get(ns, "t", "counter")
        .unwrap()
        .as_deref()
        .map_or(0, parse);
    assert_eq!(n, threads * increments, "no increment lost");
}

/// Table and key limits (an engine that stores names checks them).
pub fn names_are_checked(db: &dyn Backend) {
    let ns = "conf-names";
    let long_table = "t".repeat(65);
    let long_key = "k".repeat(1025);
    assert!(invalid(db.get(ns, "", "k")));
    assert!(invalid(db.get(ns, &long_table, "k")));
    assert!(invalid(db.get(ns, "t", &long_key)));
    let mut tx = db.begin(ns).unwrap();
    assert!(invalid(tx.put("t", &long_key, b"v")));
    assert!(invalid(tx.put("", "k", b"v")));
    // The limits themselves are allowed.
    tx.put(&"t".repeat(64), &"k".repeat(1024), b"v").unwrap();
    tx.commit().unwrap();
    assert_eq!(
        db.get(ns, &"t".repeat(64), &"k".repeat(1024)).unwrap(),
        Some(b"v".to_vec())
    );
    assert!(invalid(db.apply(
        ns,
        vec![],
        vec![put("t", &long_key, b"v")]
    )));
}

fn invalid<T>(r: Result<T, StorageError>) -> bool {
    matches!(r, Err(StorageError::Invalid(_)))
}

fn parse(v: &[u8]) -> usize {
    std::str::from_utf8(v).unwrap().parse().unwrap()
}

/// Opens another handle on the same store's host tables (another node).
pub type OpenSql<'a> = &'a (dyn Fn() -> crate::sql::SqlDb + Sync);

/// The host-table rules ([`crate::sql`]), on the `leases` table every engine
/// has: typed values come back as written, a failed write leaves nothing,
/// upserts and `RETURNING` behave alike, and a read-then-write under
/// [`SqlConn::lock`](crate::sql::SqlConn::lock) loses no update when
/// `threads` writers on several handles race.
pub fn sql_rules(open: OpenSql, threads: usize, rounds: usize) {
    use crate::sql::Value;
    let db = open();
    // Typed round trip, and a NULL parameter in a comparison.
    db.write(|c| {
        c.execute(
            "INSERT INTO leases (name, holder, expires_ms) VALUES (?1, ?2, ?3)",
            crate::sql_params!["conf:a", "h", i64::MAX - 1],
        )
    })
    .unwrap();
    let row = db
        .read(|c| {
            c.query_one(
                "SELECT name, holder, expires_ms, CAST(?2 AS TEXT) FROM leases WHERE name = ?1",
                crate::sql_params!["conf:a", Option::<String>::None],
            )
        })
        .unwrap();
    assert_eq!(row.text(0).unwrap(), "conf:a");
    assert_eq!(row.int(2).unwrap(), i64::MAX - 1);
    assert_eq!(row.opt_text(3).unwrap(), None);

    // A failed write leaves nothing behind, even what ran before the failure.
    let failed = db.write(|c| {
        c.execute(
            "INSERT INTO leases (name, holder, expires_ms) VALUES (?1, 'h', 0)",
            crate::sql_params!["conf:b"],
        )?;
        c.execute(
            "INSERT INTO leases (name, holder, expires_ms) VALUES (?1, 'h', 0)",
            crate::sql_params!["conf:a"], // the primary key is taken
        )
    });
    assert!(failed.is_err());
    let b = db
        .read(|c| c.query_opt("SELECT 1 FROM leases WHERE name = 'conf:b'", &[]))
        .unwrap();
    assert!(b.is_none(), "the whole transaction rolled back");

    // An upsert's WHERE decides; RETURNING returns what was written.
    let changed = db
        .write(|c| {
            c.execute(
                "INSERT INTO leases (name, holder, expires_ms) VALUES (?1, ?2, 5)
                 ON CONFLICT (name) DO UPDATE SET holder = excluded.holder WHERE leases.holder = ?3",
                crate::sql_params!["conf:a", "other", "nobody"],
            )
        })
        .unwrap();
    assert_eq!(changed, 0);
    let returned = db
        .write(|c| {
            c.query(
                "UPDATE leases SET expires_ms = 7 WHERE name = ?1 RETURNING name, expires_ms",
                crate::sql_params!["conf:a"],
            )
        })
        .unwrap();
    assert_eq!(returned.len(), 1);
    assert_eq!(returned[0].0[1], Value::Int(7));

    // Read-then-write under a lock, from several handles at once.
    db.write(|c| {
        c.execute(
            "INSERT INTO leases (name, holder, expires_ms) VALUES ('conf:counter', 'h', 0)",
            &[],
        )
    })
    .unwrap();
    std::thread::scope(|s| {
        for _ in 0..threads {
            let db = open();
            s.spawn(move || {
                for _ in 0..rounds {
                    db.write(|c| {
                        c.lock("conf:counter")?;
                        let n = c
                            .query_one(
                                "SELECT expires_ms FROM leases WHERE name = 'conf:counter'",
                                &[],
                            )?
                            .int(0)?;
                        c.execute(
                            "UPDATE leases SET expires_ms = ?1 WHERE name = 'conf:counter'",
                            crate::sql_params![n + 1],
                        )
                    })
                    .unwrap();
                }
            });
        }
    });
    let n = db
        .read(|c| {
            c.query_one(
                "SELECT expires_ms FROM leases WHERE name = 'conf:counter'",
                &[],
            )?
            .int(0)
        })
        .unwrap();
    assert_eq!(n, (threads * rounds) as i64, "no update lost");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Memory;

    #[test]
    fn memory_keeps_the_contract() {
        let db = Memory::default();
        let events = || db.events().into_iter().map(|e| e.id).collect();
        // Memory checks no names (the sandbox's components are trusted to);
        // everything else is the whole contract.
        run(&db, &events);
    }

    #[test]
    fn memory_counts_concurrent_applies_exactly_once() {
        let db: Arc<dyn Backend> = Arc::new(Memory::default());
        concurrent_applies_count_exactly_once(&|| db.clone(), 8, 100);
        concurrent_transactions_serialise(&|| db.clone(), 8, 100);
    }
}
