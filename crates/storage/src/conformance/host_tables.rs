//! The host tables' rules ([`crate::sql`]): typed round trips, rollback of
//! a failed write, upserts and `RETURNING`, and locked read-then-write.

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
