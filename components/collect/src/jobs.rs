//! Background work the host schedules: expiry and reconciliation. Both walk
//! time-ordered indexes in storage, so they survive restarts.

use std::collections::HashMap;

use crate::mmc::adapter::router;
use crate::mmc::adapter::types::PspStatus;
use crate::mmc::platform::{clock, log};
use crate::payments::{
    FIRST_CHECK_MS, MAX_CHECK_INTERVAL_MS, PspAnswer, apply_psp_status, approval_window_ms,
    ask_psp_many, operation_ref, resend, settle_overdue, to_send_again, waits_for_code,
    worth_asking,
};
use crate::store::{self, Tx};

/// Payments past `expires_at` that are not final: the operator is asked (see
/// [`settle_overdue`]); only its answer may expire them.
pub fn expire_due(limit: u32) -> u32 {
    let now = clock::now_ms();
    let due = match store::due("expiry", now, limit) {
        Ok(d) => d,
        Err(_) => return 0,
    };
    let mut done = 0;
    for d in due {
        if let Err(e) = expire_one(&d, now) {
            log::log(
                log::Level::Error,
                &format!("expiry of {} failed: {}", d.id, e.message),
            );
        }
        done += 1;
    }
    done
}

fn expire_one(d: &store::Due, now: u64) -> Result<(), crate::ApiError> {
    let (env, merchant, id) = (d.env.as_str(), d.merchant.as_str(), d.id.as_str());
    let Some(p) = store::read_payment(env, merchant, id)? else {
        return store::drop_index_entry("expiry", &d.key);
    };
    // The operator is asked to withdraw the request where it can (Wave expires the
    // session), else says where it stands; the customer may have paid a moment ago.
    let answer = (worth_asking(&p) && !p.status.is_terminal())
        .then(|| router::cancel(crate::routes::via(&p).as_deref(), &operation_ref(&p)));
    let window = approval_window_ms(&p);
    store::again_on_conflict(|| {
        let tx = Tx::begin()?;
        let Some(mut p) = tx.payment(env, merchant, id)? else {
            return Ok(());
        };
        let previous_check = p.next_check_ms;
        if let Some(Ok(paid @ PspStatus::Completed(_))) = &answer {
            apply_psp_status(&tx, &mut p, paid.clone())?;
        }
        settle_overdue(&tx, &mut p, answer.as_ref(), window, now)?;
        // This payment leaves the expiry index: if it is still in progress,
        // reconciliation keeps asking the operator until it can be settled.
        tx.delete("expiry", &d.key)?;
        tx.delete(
            "expiry",
            &store::time_key(p.expires_at_ms, env, merchant, id),
        )?;
        tx.save_payment(&p, previous_check)?;
        tx.commit()
    })
}

/// Polls the PSP for payments in progress whose next check is due, with
/// backoff, because some operators send a callback once and never again.
/// Every operator is asked first, concurrently (no transaction held), then
/// every answer is recorded in one transaction: one durable commit per batch, not one per
/// payment (which capped reconciliation at a few hundred payments a second).
pub fn reconcile_due(limit: u32) -> u32 {
    let now = clock::now_ms();
    let due = match store::due("active", now, limit) {
        Ok(d) => d,
        Err(_) => return 0,
    };
    let mut found = Vec::with_capacity(due.len());
    for d in &due {
        match store::read_stored_payment(&d.env, &d.merchant, &d.id) {
            Ok(Some((p, stored))) => found.push((d, p, stored)),
            Ok(None) => {
                if let Err(e) = store::drop_index_entry("active", &d.key) {
                    reconcile_failed(&d.id, &e);
                }
            }
            Err(e) => reconcile_failed(&d.id, &e),
        }
    }
    let answers = ask_psp_many(&found.iter().map(|(_, p, _)| p).collect::<Vec<_>>());
    // Overdue payments need their operator's approval window, asked outside the transaction.
    let mut windows: HashMap<(String, Option<String>), u64> = HashMap::new();
    let windows: Vec<u64> = found
        .iter()
        .map(|(_, p, _)| {
            if now < p.expires_at_ms {
                return 0;
            }
            *windows
                .entry((p.environment.clone(), p.operator.clone()))
                .or_insert_with(|| approval_window_ms(p))
        })
        .collect();
    let polled = || {
        found
            .iter()
            .zip(&answers)
            .zip(&windows)
            .map(|(((d, p, stored), a), w)| (*d, p, stored, a, *w))
    };
    let batch = store::transact(|tx| {
        for (d, p, stored, answer, window) in polled() {
            tx.assume_stored_payment(p, stored); // as read above
            record_poll(tx, d, answer, window)?;
        }
        Ok(())
    });
    if batch.is_err() {
        // One payment that cannot be recorded must not hold back the others.
        for (d, p, stored, answer, window) in polled() {
            let one = store::transact(|tx| {
                tx.assume_stored_payment(p, stored);
                record_poll(tx, d, answer, window)
            });
            if let Err(e) = one {
                reconcile_failed(&d.id, &e);
            }
        }
    }
    // Not found is not never: a request the operator does not know once
    // nothing of ours can be on its way is sent again under its id, one at
    // a time (rare, and each call may take the adapter's deadline).
    let now = clock::now_ms();
    for (d, p, _, answer, _) in polled() {
        if matches!(answer, Some(Ok(PspStatus::NotFound)))
            && to_send_again(p, now)
            && let Err(e) = resend(&d.env, &d.merchant, &d.id, p.sent_at())
        {
            reconcile_failed(&d.id, &e);
        }
    }
    due.len() as u32
}

fn reconcile_failed(id: &str, e: &crate::ApiError) {
    log::log(
        log::Level::Error,
        &format!("reconciliation of {id} failed: {}", e.message),
    );
}

/// Records one poll: the PSP's answer if there is one, the expiry rule for a
/// payment past `expires_at`, then the next poll (later, doubling) while the
/// payment is in progress.
fn record_poll(
    tx: &Tx,
    d: &store::Due,
    answer: &Option<PspAnswer>,
    approval_window_ms: u64,
) -> Result<(), crate::ApiError> {
    // The entry that brought the payment here goes whatever the payment says
    // (it is the current one unless the index and the record disagree).
    tx.delete("active", &d.key)?;
    let Some(mut p) = tx.payment(&d.env, &d.merchant, &d.id)? else {
        return Ok(());
    };
    // `save_payment` deletes the entry of the check the record had: passed
    // only where that is another entry, not the one deleted just above.
    let previous = p
        .next_check_ms
        .filter(|&at| store::time_key(at, &d.env, &d.merchant, &d.id) != d.key);
    if let Some(Ok(status)) = answer {
        apply_psp_status(tx, &mut p, status.clone())?;
    }
    let now = clock::now_ms();
    let overdue = now >= p.expires_at_ms;
    if overdue {
        settle_overdue(tx, &mut p, answer.as_ref(), approval_window_ms, now)?;
    }
    // The next poll, while there is something to ask.
    p.next_check_ms = if p.status.is_terminal() || !worth_asking(&p) || waits_for_code(&p, now) {
        None
    } else {
        p.checks += 1;
        Some(now + (FIRST_CHECK_MS << p.checks.min(10)).min(MAX_CHECK_INTERVAL_MS))
    };
    tx.save_payment(&p, previous)
}

/// Puts payments stored before the `listing` index existed into it, `limit`
/// per round in key order, then marks it ready (`meta/listing`); until then
/// the list checks its filters on the payments table instead. A payment
/// saved meanwhile indexes itself: putting its key again changes nothing,
/// and this round's transaction reads the record it indexes.
pub fn build_listing_index(limit: u32) -> u32 {
    match index_some(limit) {
        Ok(n) => n,
        Err(e) => {
            log::log(
                log::Level::Error,
                &format!("listing index backfill failed: {}", e.message),
            );
            0
        }
    }
}

fn index_some(limit: u32) -> Result<u32, crate::ApiError> {
    if store::listing_ready()? {
        return Ok(0);
    }
    store::again_on_conflict(|| {
        let tx = crate::mmc::platform::storage::begin()?;
        let done_up_to = tx
            .get("meta", store::LISTING_BACKFILL)?
            .map(|k| String::from_utf8_lossy(&k).into_owned());
        let start = done_up_to.map(|k| format!("{k}\u{1}")).unwrap_or_default();
        let limit = limit.min(1000); // the storage's largest scan
        let rows = tx.scan("payments", &start, "", limit)?;
        for row in &rows {
            match store::decode_payment(&row.value) {
                Ok(p) => {
                    let listed = store::Listed::of(&p);
                    // Keyed by its own status before `listed_status` (a store
                    // indexed by an older version): that entry goes.
                    if listed.status != p.status {
                        let old = store::Listed {
                            status: p.status,
                            ..listed
                        };
                        tx.delete("listing", &store::listing_key(&old))?;
                    }
                    tx.put("listing", &store::listing_key(&listed), b"")?
                }
                // Said, and passed over: one bad record must not stop the index.
                Err(e) => log::log(
                    log::Level::Error,
                    &format!("listing backfill: {}: {}", row.key, e.message),
                ),
            }
        }
        match rows.last() {
            Some(last) if rows.len() as u32 == limit => {
                tx.put("meta", store::LISTING_BACKFILL, last.key.as_bytes())?
            }
            _ => tx.put("meta", store::LISTING_READY, b"ready")?,
        }
        tx.commit()?;
        Ok(rows.len() as u32)
    })
}
