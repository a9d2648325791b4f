//! The tallies counted again from the payments themselves (`collect`'s
//! records, read in place): for a store from before them, or one whose
//! payments were written some other way (a seeded benchmark store, a
//! restore of payments alone). The outbox cursor of the tallies is set to
//! the last event the payments read reflect, so that the dispatcher counts
//! exactly the events after it.

use std::time::{Duration, Instant};

use mmc_domain::{Mode, record};
use mmc_storage::sql::Value;

use super::{DAY_MS, Key, NOT_CHOSEN, Round, Standing, store};
use mmc_db::{SqlConn, SqlDb, StorageError};

/// What a rebuild counted.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Rebuilt {
    pub payments: u64,
    /// Records this version cannot read (left out, and logged).
    pub unreadable: u64,
    pub rows: usize,
    /// The last outbox event the payments read reflect.
    pub through_seq: i64,
    pub ms: u64,
}

/// Has the dispatcher (of whichever node rounds next) count every stored
/// payment again at its next round, as for a store that never had tallies.
pub fn rebuild_at_next_round(db: &SqlDb) -> Result<(), StorageError> {
    db.write(|tx| {
        tx.lock("outbox_dispatch")?;
        tx.execute("DELETE FROM overview_cursor", &[])?;
        Ok(())
    })
}

/// Payments read per query.
const PAGE: i64 = 1000;

/// Counts every stored payment into new tallies, replacing the old ones, in
/// one transaction with the dispatcher's lock held (on SQLite, the writer
/// is held meanwhile: about 2 s per million payments).
pub fn rebuild(db: &SqlDb) -> Result<Rebuilt, StorageError> {
    let postgres = db.engine_name() == "postgres";
    let started = Instant::now();
    let mut tries = 0;
    loop {
        tries += 1;
        match db.write(|tx| rebuild_in(tx, postgres, mmc_db::kv_key(db, String::new()))) {
            Ok(Some(mut r)) => {
                r.ms = started.elapsed().as_millis() as u64;
                tracing::info!(
                    payments = r.payments,
                    unreadable = r.unreadable,
                    rows = r.rows,
                    ms = r.ms,
                    "console overview counted from the payments"
                );
                return Ok(r);
            }
            // Another node is dispatching: after its round.
            Ok(None) if tries < 100 => {}
            Ok(None) => {
                return Err(StorageError::Unavailable(
                    "the outbox dispatcher's lock stayed taken".into(),
                ));
            }
            // On PostgreSQL, a round that committed while this one read
            // makes its writes fail: read again.
            Err(e) if tries < 5 => {
                tracing::info!(error = %e, "console overview count tried again");
            }
            Err(e) => return Err(e),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `first`: the smallest key, as the engine types keys.
fn rebuild_in(
    tx: &mut dyn SqlConn,
    postgres: bool,
    first: Value,
) -> Result<Option<Rebuilt>, StorageError> {
    if postgres {
        // One snapshot for the payments and the outbox's last event.
        tx.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ", &[])?;
    }
    if !tx.try_lock("outbox_dispatch")? {
        return Ok(None);
    }
    // Every event committed in this snapshot numbered, as the dispatcher
    // would: the payments read below include their changes, so the cursor
    // must pass them (a later one is counted by dispatch).
    tx.number_outbox(i64::MAX)?;
    let last = tx
        .query_one("SELECT COALESCE(MAX(seq), 0) FROM outbox", &[])?
        .int(0)?;
    let fanned = tx
        .query_one("SELECT seq FROM outbox_cursor WHERE id = 1", &[])?
        .int(0)?;
    let mut round = Round::default();
    let (mut payments, mut unreadable) = (0, 0);
    let mut after = first;
    loop {
        let page = tx.query(
            "SELECT k, v FROM kv WHERE ns = 'collect' AND tbl = 'payments' AND k > ?1
             ORDER BY k LIMIT ?2",
            &[after.clone(), Value::Int(PAGE)],
        )?;
        for r in &page {
            if count(&mut round, &r.blob(1)?) {
                payments += 1;
            } else {
                unreadable += 1;
                tracing::warn!(key = ?r.0[0], "a payment record this version cannot read is left out of the console overview");
            }
        }
        match page.last() {
            Some(r) if page.len() as i64 == PAGE => after = r.0[0].clone(),
            _ => break,
        }
    }
    tx.execute("DELETE FROM overview_tallies", &[])?;
    tx.execute("DELETE FROM overview_hosted", &[])?;
    store::apply(tx, &round)?;
    let through_seq = last.max(fanned);
    store::set_cursor(tx, through_seq)?;
    Ok(Some(Rebuilt {
        payments,
        unreadable,
        rows: round.rows.len(),
        through_seq,
        ms: 0,
    }))
}

/// Counts one stored payment record as it stands; false if it cannot be read.
pub fn count(round: &mut Round, stored: &[u8]) -> bool {
    let Ok(p) = record::summary(stored) else {
        return false;
    };
    let standing = Standing::of(p.status);
    let operator = p.operator.as_deref().unwrap_or(NOT_CHOSEN);
    let key = Key {
        merchant_id: p.merchant_id.into_owned(),
        environment: p.environment.into_owned(),
        day: (p.created_at_ms / DAY_MS) as i64,
        operator: operator.to_string(),
    };
    if p.mode == Mode::Hosted && standing == Standing::InProgress {
        round
            .hosted
            .insert(p.id.into_owned(), Some(operator.to_string()));
    }
    round
        .rows
        .entry(key)
        .or_default()
        .add(&standing.counts(p.amount));
    true
}
