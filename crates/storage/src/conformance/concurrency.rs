//! Writers racing from several instances: every apply counted once, one
//! creator per key, transactions serialised, and neither kind losing the
//! other's writes.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::{Backend, MAX_SCAN, Write};

use super::helpers::{check, parse, put};

/// Opens another instance on the same store: another node, for an engine
/// that runs as a fleet; the same instance again for one that cannot.
pub type Open<'a> = &'a (dyn Fn() -> Arc<dyn Backend> + Sync);

/// The counter `ns` holds (0 when never written).
fn counter(db: &dyn Backend, ns: &str) -> usize {
    db.get(ns, "t", "counter")
        .unwrap()
        .as_deref()
        .map_or(0, parse)
}

/// Adds one to the counter in an open transaction.
fn increment_in_transaction(db: &dyn Backend, ns: &str) {
    let mut tx = db.begin(ns).unwrap();
    let n = tx.get("t", "counter").unwrap().as_deref().map_or(0, parse);
    tx.put("t", "counter", (n + 1).to_string().as_bytes())
        .unwrap();
    tx.commit().unwrap();
}

/// Adds one to the counter by `apply`, checking the value it read, with
/// `also` written beside; false when another writer got there first.
fn increment_by_apply(db: &dyn Backend, ns: &str, also: Vec<Write>) -> bool {
    let seen = db.get(ns, "t", "counter").unwrap();
    let n = seen.as_deref().map_or(0, parse);
    let mut writes = vec![put("t", "counter", (n + 1).to_string().as_bytes())];
    writes.extend(also);
    db.apply(ns, vec![check("t", "counter", seen.as_deref())], writes)
        .unwrap()
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
                        let marker = format!("{t:02}-{attempt:05}");
                        let also = vec![put("marker", &marker, b"1")];
                        if increment_by_apply(&*db, ns, also) {
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
    assert_eq!(
        counter(&*db, ns),
        total,
        "every increment applied exactly once"
    );
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
                    increment_in_transaction(&*db, ns);
                }
            });
        }
    });
    assert_eq!(
        counter(&*open(), ns),
        threads * increments,
        "no increment lost"
    );
}

/// Racing creators: `threads` threads, each on its own instance, try to
/// create the same `keys` keys in the same order, each with a check that the
/// key is absent. Exactly one creator wins each key (its value is the
/// winner's); the others are refused and write nothing (no marker of theirs).
pub fn absent_checks_admit_one_creator(open: Open, threads: usize, keys: usize) {
    let ns = "conf-create";
    let wins: Vec<Vec<usize>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let db = open();
                s.spawn(move || {
                    (0..keys)
                        .filter(|k| {
                            let key = format!("k{k:04}");
                            let writes = vec![
                                put("t", &key, t.to_string().as_bytes()),
                                put("by", &format!("{k:04}-{t:02}"), b"1"),
                            ];
                            db.apply(ns, vec![check("t", &key, None)], writes).unwrap()
                        })
                        .collect()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    one_creator_each(&*open(), ns, &wins, keys);
}

/// Open transactions and prepared applies on one counter at once, from
/// `threads` threads (every other one opens transactions), each on its own
/// instance: no increment of either kind is lost.
pub fn transactions_and_applies_exclude_each_other(open: Open, threads: usize, increments: usize) {
    let ns = "conf-mixed";
    std::thread::scope(|s| {
        for t in 0..threads {
            let db = open();
            s.spawn(move || {
                let mut done = 0;
                while done < increments {
                    if t % 2 == 0 {
                        increment_in_transaction(&*db, ns);
                        done += 1;
                    } else if increment_by_apply(&*db, ns, Vec::new()) {
                        done += 1;
                    }
                }
            });
        }
    });
    assert_eq!(
        counter(&*open(), ns),
        threads * increments,
        "no increment lost"
    );
}

/// Racing creators in open transactions: `threads` threads, each on its own
/// instance, read each of `keys` keys and create it when absent. Exactly
/// one creates each key (a key read absent stays absent to everyone else
/// until that transaction ends); the others find it there and write nothing.
pub fn absent_reads_in_transactions_admit_one_creator(open: Open, threads: usize, keys: usize) {
    let ns = "conf-create-open";
    let wins: Vec<Vec<usize>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let db = open();
                s.spawn(move || {
                    (0..keys)
                        .filter(|k| {
                            let key = format!("k{k:04}");
                            let mut tx = db.begin(ns).unwrap();
                            if tx.get("t", &key).unwrap().is_some() {
                                return false; // dropped: rolled back
                            }
                            tx.put("t", &key, t.to_string().as_bytes()).unwrap();
                            tx.put("by", &format!("{k:04}-{t:02}"), b"1").unwrap();
                            tx.commit().unwrap();
                            true
                        })
                        .collect()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    one_creator_each(&*open(), ns, &wins, keys);
}

/// A log appended to from `threads` threads, each on its own instance: every
/// other one appends in an open transaction that scans the log to count it
/// and writes the next entry; the rest append by `apply`, counting outside
/// and checking that the next entry is still absent. A scan inside a
/// transaction sees no phantom: no writer adds to the range it read before
/// it commits, so no two appends take the same place and none is lost.
pub fn scans_in_transactions_see_no_phantom(open: Open, threads: usize, appends: usize) {
    let ns = "conf-phantom";
    std::thread::scope(|s| {
        for t in 0..threads {
            let db = open();
            s.spawn(move || {
                let mut done = 0;
                while done < appends {
                    let me = format!("{t:02}-{done:04}");
                    if t % 2 == 0 {
                        let mut tx = db.begin(ns).unwrap();
                        let n = tx.scan("log", "", "", MAX_SCAN).unwrap().len();
                        tx.put("log", &format!("{n:05}"), me.as_bytes()).unwrap();
                        tx.commit().unwrap();
                        done += 1;
                    } else {
                        let n = db.scan(ns, "log", "", "", MAX_SCAN).unwrap().len();
                        let at = format!("{n:05}");
                        let writes = vec![put("log", &at, me.as_bytes())];
                        if db.apply(ns, vec![check("log", &at, None)], writes).unwrap() {
                            done += 1;
                        }
                    }
                }
            });
        }
    });
    let log = open().scan(ns, "log", "", "", MAX_SCAN).unwrap();
    let places: Vec<String> = (0..threads * appends).map(|n| format!("{n:05}")).collect();
    assert_eq!(
        log.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(),
        places,
        "one entry per place, none skipped"
    );
    let writers: BTreeSet<&[u8]> = log.iter().map(|(_, v)| v.as_slice()).collect();
    assert_eq!(writers.len(), threads * appends, "no append lost");
}

/// Each of `keys` keys was created by exactly one thread (`wins[t]`: the
/// keys thread `t` created), holds that thread's value, and only the
/// creators wrote their markers.
fn one_creator_each(db: &dyn Backend, ns: &str, wins: &[Vec<usize>], keys: usize) {
    for k in 0..keys {
        let winners: Vec<usize> = (0..wins.len()).filter(|t| wins[*t].contains(&k)).collect();
        assert_eq!(winners.len(), 1, "key {k}: one creator, not {winners:?}");
        let stored = db.get(ns, "t", &format!("k{k:04}")).unwrap();
        assert_eq!(
            stored.as_deref().map(parse),
            Some(winners[0]),
            "key {k}: the winner's value"
        );
    }
    let markers = db.scan(ns, "by", "", "", MAX_SCAN).unwrap();
    assert_eq!(
        markers.len(),
        keys,
        "only the winners wrote their other keys"
    );
}

/// A delete in an open transaction waits for another transaction inserting
/// the same key, as a put does: it is never passed over. A prepared
/// transaction writes `a` and `b` while a third transaction holds `b` (read
/// absent), so it may have written `a` and be waiting; meanwhile an open
/// transaction deletes `a`, then reads `b`. Whichever commits first, the
/// result is one of the two serial orders: if the open transaction saw the
/// prepared one's `b`, it came after it and `a` is gone; if not, it came
/// before and `a` holds the prepared value.
pub fn a_delete_in_a_transaction_is_not_lost_to_a_concurrent_insert(open: Open) {
    use std::sync::mpsc;
    use std::time::Duration;

    let ns = "conf-delete-insert";
    let (holding, preparing, deleting) = (open(), open(), open());
    let mut holder = holding.begin(ns).unwrap();
    assert_eq!(holder.get("t", "b").unwrap(), None);
    std::thread::scope(|s| {
        let prepared =
            s.spawn(|| preparing.apply(ns, vec![], vec![put("t", "a", b"p"), put("t", "b", b"p")]));
        std::thread::sleep(Duration::from_millis(100)); // `a` written, waiting for `b`
        let (sent_tx, sent) = mpsc::channel();
        let deleted = s.spawn(move || {
            let mut tx = deleting.begin(ns)?;
            tx.delete("t", "a")?;
            tx.get("t", "elsewhere")?; // the delete is sent before this read
            let _ = sent_tx.send(());
            // The prepared transaction's chance to commit first.
            for _ in 0..100 {
                if deleting.get(ns, "t", "b")?.is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let seen = tx.get("t", "b")?;
            tx.commit()?;
            Ok::<_, crate::StorageError>(seen)
        });
        let _ = sent.recv_timeout(Duration::from_millis(150));
        holder.commit().unwrap();
        let applied = prepared.join().unwrap();
        assert!(matches!(applied, Ok(true)), "{applied:?}");
        let seen = deleted.join().unwrap().unwrap();
        let a = open().get(ns, "t", "a").unwrap();
        match seen {
            Some(_) => assert_eq!(a, None, "the delete came after the put: it stands"),
            None => assert_eq!(
                a.as_deref(),
                Some(&b"p"[..]),
                "the delete came before the put: the put stands"
            ),
        }
    });
}
