//! Transactions and applies: rollback, reading one's own writes, committed
//! reads, checks that decide, and events written only at commit.

use crate::{Backend, StorageError, Write};

use super::helpers::{check, event, keys, put};

/// Ids of the events committed so far, in commit order.
pub type Events<'a> = &'a dyn Fn() -> Vec<String>;

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
    // A key written several times holds its last write; a key checked twice
    // for two values cannot hold both.
    let del = |key: &str| Write::Delete {
        table: "t".into(),
        key: key.into(),
    };
    let writes = vec![
        put("t", "d", b"1"),
        put("t", "d", b"2"),
        put("t", "e", b"1"),
        del("e"),
        del("f"),
        put("t", "f", b"3"),
    ];
    let checks = vec![check("t", "d", None), check("t", "d", None)];
    assert!(db.apply(ns, checks, writes).unwrap());
    assert_eq!(db.get(ns, "t", "d").unwrap(), Some(b"2".to_vec()));
    assert_eq!(db.get(ns, "t", "e").unwrap(), None);
    assert_eq!(db.get(ns, "t", "f").unwrap(), Some(b"3".to_vec()));
    let checks = vec![check("t", "d", Some(b"2")), check("t", "d", Some(b"1"))];
    assert!(!db.apply(ns, checks, vec![put("t", "g", b"x")]).unwrap());
    assert_eq!(db.get(ns, "t", "g").unwrap(), None);
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
