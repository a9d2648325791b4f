//! The tallies' tables: `overview_tallies` (the rows), `overview_hosted`
//! (the row each hosted payment in progress is counted in) and
//! `overview_cursor` (the last outbox event counted; no row: the tallies
//! were never built, see [`super::rebuild`]).

use mmc_storage::sql_params;

use super::{Counts, Key, Round};
use mmc_db::{SqlConn, SqlDb, StorageError};

/// Adds `?5..?8` to the row `?1..?4`, created at zero if missing.
const ADD: &str = "INSERT INTO overview_tallies
       (merchant_id, environment, day, operator, payments, succeeded, finished, volume)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
     ON CONFLICT (merchant_id, environment, day, operator) DO UPDATE SET
       payments = overview_tallies.payments + excluded.payments,
       succeeded = overview_tallies.succeeded + excluded.succeeded,
       finished = overview_tallies.finished + excluded.finished,
       volume = overview_tallies.volume + excluded.volume";

/// The last event counted, or None while the tallies were never built.
pub fn cursor(tx: &mut dyn SqlConn) -> Result<Option<i64>, StorageError> {
    tx.query_opt("SELECT seq FROM overview_cursor WHERE id = 1", &[])?
        .map(|r| r.int(0))
        .transpose()
}

pub fn set_cursor(tx: &mut dyn SqlConn, seq: i64) -> Result<(), StorageError> {
    tx.execute(
        "INSERT INTO overview_cursor (id, seq) VALUES (1, ?1)
         ON CONFLICT (id) DO UPDATE SET seq = excluded.seq",
        sql_params![seq],
    )?;
    Ok(())
}

/// The operator row a hosted payment in progress is counted in.
pub fn counted_in(tx: &mut dyn SqlConn, payment_id: &str) -> Result<Option<String>, StorageError> {
    tx.query_opt(
        "SELECT operator FROM overview_hosted WHERE payment_id = ?1",
        sql_params![payment_id],
    )?
    .map(|r| r.text(0))
    .transpose()
}

/// Writes a round's changes: one upsert per row it changed, and what it
/// learnt of hosted payments.
pub fn apply(tx: &mut dyn SqlConn, round: &Round) -> Result<(), StorageError> {
    for (k, by) in round.rows.iter().filter(|(_, by)| !by.is_zero()) {
        add(tx, k, by)?;
    }
    for (id, row) in &round.hosted {
        match row {
            Some(operator) => tx.execute(
                "INSERT INTO overview_hosted (payment_id, operator) VALUES (?1, ?2)
                 ON CONFLICT (payment_id) DO UPDATE SET operator = excluded.operator",
                sql_params![id, operator],
            )?,
            None => tx.execute(
                "DELETE FROM overview_hosted WHERE payment_id = ?1",
                sql_params![id],
            )?,
        };
    }
    Ok(())
}

pub(super) fn add(tx: &mut dyn SqlConn, k: &Key, by: &Counts) -> Result<(), StorageError> {
    tx.execute(
        ADD,
        sql_params![
            &k.merchant_id,
            &k.environment,
            k.day,
            &k.operator,
            by.payments,
            by.succeeded,
            by.finished,
            by.volume
        ],
    )?;
    Ok(())
}

/// A merchant's rows in an environment for the days `from..=to`: (day,
/// operator, counts).
pub fn read(
    db: &SqlDb,
    merchant_id: &str,
    environment: &str,
    (from, to): (i64, i64),
) -> Result<Vec<(i64, String, Counts)>, StorageError> {
    db.read(|c| {
        c.query(
            "SELECT day, operator, payments, succeeded, finished, volume FROM overview_tallies
             WHERE merchant_id = ?1 AND environment = ?2 AND day BETWEEN ?3 AND ?4",
            sql_params![merchant_id, environment, from, to],
        )?
        .iter()
        .map(|r| {
            Ok((
                r.int(0)?,
                r.text(1)?,
                Counts {
                    payments: r.int(2)?,
                    succeeded: r.int(3)?,
                    finished: r.int(4)?,
                    volume: r.int(5)?,
                },
            ))
        })
        .collect()
    })
}
