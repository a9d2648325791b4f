//! Reads by key and range: order, bounds and ranges, isolated namespaces
//! and tables, and the limits on names.

use crate::{Backend, MAX_SCAN};

use super::helpers::{check, invalid, keys, put};

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
