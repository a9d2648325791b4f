//! Open transactions on a real PostgreSQL: they hold the keys they touch
//! and the tables they scan, nothing wider.

use std::sync::Arc;
use std::time::Duration;

use mmc_storage::conformance;
use mmc_storage::{Backend, StorageError, Write};

use crate::Postgres;
use crate::test_util::TestDatabase;
use crate::tests::nodes;

#[test]
fn racing_open_transactions_on_three_nodes_one_creates_each_key() {
    let t = TestDatabase::create();
    let open = nodes(&t.url, 3);
    conformance::absent_reads_in_transactions_admit_one_creator(&open, 6, 40);
}

#[test]
fn scans_in_open_transactions_on_three_nodes_see_no_phantom() {
    let t = TestDatabase::create();
    let open = nodes(&t.url, 3);
    conformance::scans_in_transactions_see_no_phantom(&open, 6, 20);
}

/// Whether `f`, run on its own thread, ends within `within`; its answer if so.
fn ends_within<T: Send + 'static>(
    within: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> (std::sync::mpsc::Receiver<T>, Option<T>) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    let answer = rx.recv_timeout(within).ok();
    (rx, answer)
}

/// An open transaction holds the keys it touched, not its namespace: on
/// other nodes, open and prepared transactions on other keys of the same
/// tables commit while it is open; one on a key it holds waits for it, and
/// then sees what it wrote.
#[test]
fn open_transactions_wait_for_each_other_only_on_the_keys_they_share() {
    let t = TestDatabase::create();
    let (a, b) = (
        Postgres::connect(&t.url).unwrap(),
        Arc::new(Postgres::connect(&t.url).unwrap()),
    );
    b.apply(
        "c",
        vec![],
        vec![Write::Put {
            table: "t".into(),
            key: "read".into(),
            value: b"0".to_vec(),
        }],
    )
    .unwrap();
    let mut held = a.begin("c").unwrap();
    held.put("t", "written", b"a").unwrap();
    assert_eq!(held.get("t", "read").unwrap().as_deref(), Some(&b"0"[..]));
    assert_eq!(held.get("t", "absent").unwrap(), None);

    let other = b.clone();
    let (_, answer) = ends_within(Duration::from_secs(5), move || {
        let mut tx = other.begin("c")?;
        tx.put("t", "elsewhere", b"b")?;
        tx.get("t", "also-elsewhere")?;
        tx.commit()?;
        other.apply(
            "c",
            vec![],
            vec![Write::Put {
                table: "t".into(),
                key: "prepared".into(),
                value: b"b".to_vec(),
            }],
        )
    });
    assert!(
        matches!(answer, Some(Ok(true))),
        "other keys of the same table are written while the transaction is open: {answer:?}"
    );

    // Each key it holds: one it wrote, one it read, one it read absent.
    let mut waiting = Vec::new();
    for key in ["written", "read", "absent"] {
        let other = b.clone();
        let (rx, answer) = ends_within(Duration::from_millis(500), move || {
            other.apply(
                "c",
                vec![],
                vec![Write::Put {
                    table: "t".into(),
                    key: key.into(),
                    value: b"b".to_vec(),
                }],
            )
        });
        assert!(
            answer.is_none(),
            "{key}: a held key waits for the transaction: {answer:?}"
        );
        waiting.push((key, rx));
    }
    held.put("t", "read", b"a").unwrap();
    held.commit().unwrap();
    for (key, rx) in waiting {
        let answer = rx.recv_timeout(Duration::from_secs(5));
        assert!(
            matches!(answer, Ok(Ok(true))),
            "{key}: written once the holder ended: {answer:?}"
        );
        assert_eq!(
            b.get("c", "t", key).unwrap().as_deref(),
            Some(&b"b"[..]),
            "{key}"
        );
    }
}

/// A key read absent is held by a row no one else sees: not by reads
/// outside, not by scans (its own included), and gone when the transaction
/// ends without writing it.
#[test]
fn a_key_read_absent_leaves_no_trace() {
    let t = TestDatabase::create();
    let db = Postgres::connect(&t.url).unwrap();
    let mut tx = db.begin("c").unwrap();
    assert_eq!(tx.get("t", "b").unwrap(), None);
    assert_eq!(tx.get("t", "b").unwrap(), None, "read again, still absent");
    tx.put("t", "a", b"1").unwrap();
    tx.put("t", "c", b"3").unwrap();
    let scanned = tx.scan("t", "", "", 2).unwrap();
    assert_eq!(
        scanned.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
        ["a", "c"],
        "a scan inside passes over the held key, and still fills its page"
    );
    assert_eq!(db.get("c", "t", "b").unwrap(), None);
    tx.commit().unwrap();
    let rows = db.scan("c", "t", "", "", 10).unwrap();
    assert_eq!(
        rows.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
        ["a", "c"]
    );

    // Read absent, then written: the value stays; read absent, then deleted: gone.
    let mut tx = db.begin("c").unwrap();
    assert_eq!(tx.get("t", "d").unwrap(), None);
    tx.put("t", "d", b"4").unwrap();
    assert_eq!(tx.get("t", "e").unwrap(), None);
    tx.delete("t", "e").unwrap();
    tx.commit().unwrap();
    assert_eq!(db.get("c", "t", "d").unwrap().as_deref(), Some(&b"4"[..]));
    assert_eq!(db.get("c", "t", "e").unwrap(), None);
}

/// On three nodes: a delete in an open transaction is not passed over by a
/// prepared transaction inserting the same key (`Pending::send` locks the
/// key first).
#[test]
fn a_delete_in_an_open_transaction_is_not_lost_to_a_concurrent_insert() {
    let t = TestDatabase::create();
    let open = nodes(&t.url, 3);
    conformance::a_delete_in_a_transaction_is_not_lost_to_a_concurrent_insert(&open);
}

/// A full page from a scan inside an open transaction whose range holds a
/// key it read absent: the page is `MAX_SCAN` rows of the table's own, the
/// held key passed over and the next row read in its place.
#[test]
fn a_full_page_scanned_past_a_held_key_is_still_full() {
    let t = TestDatabase::create();
    let db = Postgres::connect(&t.url).unwrap();
    let rows = mmc_storage::MAX_SCAN as usize + 10;
    let writes = (0..rows)
        .map(|i| Write::Put {
            table: "t".into(),
            key: format!("k{i:05}"),
            value: b"v".to_vec(),
        })
        .collect();
    assert!(db.apply("c", vec![], writes).unwrap());
    let mut tx = db.begin("c").unwrap();
    assert_eq!(
        tx.get("t", "k00000a").unwrap(),
        None,
        "held, between two rows"
    );
    let page = tx.scan("t", "", "", mmc_storage::MAX_SCAN).unwrap();
    assert_eq!(page.len(), mmc_storage::MAX_SCAN as usize);
    assert_eq!(
        page.last().map(|(k, _)| k.as_str()),
        Some(format!("k{:05}", mmc_storage::MAX_SCAN - 1).as_str())
    );
    tx.commit().unwrap();
}

/// Two open transactions that take two keys in opposite orders (a read
/// locks its key at once): the server ends the wait by rolling one back,
/// reported as a conflict (nothing written, worth running again, unlike a
/// store that is down); the other commits. Neither hangs.
#[test]
fn open_transactions_locking_in_opposite_orders_end_one_as_a_conflict() {
    let t = TestDatabase::create();
    let (a, b) = (
        Arc::new(Postgres::connect(&t.url).unwrap()),
        Arc::new(Postgres::connect(&t.url).unwrap()),
    );
    let barrier = Arc::new(std::sync::Barrier::new(2));
    let run = |db: Arc<Postgres>, first: &'static str, then: &'static str| {
        let barrier = barrier.clone();
        std::thread::spawn(move || {
            let mut tx = db.begin("c").unwrap();
            tx.get("t", first).unwrap();
            tx.put("t", first, b"mine").unwrap();
            barrier.wait();
            tx.get("t", then)?;
            tx.put("t", then, b"mine")?;
            tx.commit()
        })
    };
    let (one, two) = (run(a, "x", "y"), run(b.clone(), "y", "x"));
    let answers = [one.join().unwrap(), two.join().unwrap()];
    let busy: Vec<_> = answers.iter().filter(|r| r.is_err()).collect();
    assert_eq!(busy.len(), 1, "one of the two is failed: {answers:?}");
    assert!(
        matches!(busy[0], Err(StorageError::Conflict(m)) if m.contains("waited for each other")),
        "{busy:?}"
    );
    assert_eq!(b.scan("c", "t", "", "", 10).unwrap().len(), 2);
}

/// A prepared transaction that crosses an open one's locks gives way: the
/// open one (which may be recording an operator's answer) commits, never
/// failed by the server's deadlock check, and the prepared one is applied
/// after it. The open transaction is made to wait first — the one the
/// server's check would fail — while the prepared one holds `a` and waits
/// for a third transaction's `b` before it reaches the open one's `c`.
#[test]
fn a_prepared_transaction_crossing_an_open_ones_locks_gives_way_to_it() {
    let t = TestDatabase::create();
    let db = Arc::new(Postgres::connect(&t.url).unwrap());
    for round in 0..3 {
        let mut third = db.begin("c").unwrap();
        assert_eq!(
            third.get("t", "b").unwrap().as_deref(),
            (round > 0).then_some(&b"p"[..])
        );
        let mut open = db.begin("c").unwrap();
        open.get("t", "c").unwrap();

        let prepared = db.clone();
        let (applied, _) = ends_within(Duration::ZERO, move || {
            let put = |key: &str| Write::Put {
                table: "t".into(),
                key: key.into(),
                value: b"p".to_vec(),
            };
            prepared.apply("c", vec![], vec![put("a"), put("b"), put("c")])
        });
        std::thread::sleep(Duration::from_millis(100));
        let (opened, _) = ends_within(Duration::ZERO, move || {
            open.put("t", "a", b"o")?;
            open.commit()
        });
        std::thread::sleep(Duration::from_millis(100));
        third.commit().unwrap();

        let opened = opened.recv_timeout(Duration::from_secs(15)).unwrap();
        assert!(
            opened.is_ok(),
            "round {round}: the open transaction commits: {opened:?}"
        );
        let applied = applied.recv_timeout(Duration::from_secs(15)).unwrap();
        assert!(
            matches!(applied, Ok(true)),
            "round {round}: then the prepared one: {applied:?}"
        );
        assert_eq!(db.get("c", "t", "a").unwrap().as_deref(), Some(&b"p"[..]));
    }
}
