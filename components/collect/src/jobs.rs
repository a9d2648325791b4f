//! Background work the host schedules: expiry and reconciliation. Both walk
//! time-ordered indexes in storage, so they survive restarts.

use mmc_domain::Status;

use crate::mmc::platform::{clock, log};
use crate::payments::{
    FIRST_CHECK_MS, MAX_CHECK_INTERVAL_MS, PspAnswer, apply_psp_status, ask_psp_many, move_to,
    sync_with_psp,
};
use crate::store::{self, Tx};

/// Payments past `expires_at` that are not final: one last PSP query, then `expired`.
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
    // Last chance: the customer may have paid a moment ago.
    if let Err(e) = sync_with_psp(p) {
        log::log(
            log::Level::Warn,
            &format!("last status query of {id} failed: {}", e.message),
        );
    }
    let tx = Tx::begin()?;
    let Some(mut p) = tx.payment(env, merchant, id)? else {
        return Ok(());
    };
    let previous_check = p.next_check_ms;
    move_to(&tx, &mut p, Status::Expired, now)?;
    // Whatever happened, this payment leaves the expiry index.
    tx.delete(
        "expiry",
        &store::time_key(p.expires_at_ms, env, merchant, id),
    )?;
    tx.save_payment(&p, previous_check)?;
    tx.commit()
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
        match store::read_payment(&d.env, &d.merchant, &d.id) {
            Ok(Some(p)) => found.push((d, p)),
            Ok(None) => {
                if let Err(e) = store::drop_index_entry("active", &d.key) {
                    reconcile_failed(&d.id, &e);
                }
            }
            Err(e) => reconcile_failed(&d.id, &e),
        }
    }
    let answers = ask_psp_many(&found.iter().map(|(_, p)| p).collect::<Vec<_>>());
    let polled = || found.iter().zip(&answers).map(|((d, p), a)| (*d, p, a));
    let batch = store::transact(|tx| {
        for (d, p, answer) in polled() {
            tx.assume_payment(p); // as read above
            record_poll(tx, d, answer)?;
        }
        Ok(())
    });
    if batch.is_err() {
        // One payment that cannot be recorded must not hold back the others.
        for (d, p, answer) in polled() {
            let one = store::transact(|tx| {
                tx.assume_payment(p);
                record_poll(tx, d, answer)
            });
            if let Err(e) = one {
                reconcile_failed(&d.id, &e);
            }
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

/// Records one poll: the PSP's answer if there is one, then the next poll
/// (later, doubling) while the payment is in progress.
fn record_poll(tx: &Tx, d: &store::Due, answer: &Option<PspAnswer>) -> Result<(), crate::ApiError> {
    // The entry that brought the payment here goes whatever the payment says
    // (it is the current one unless the index and the record disagree).
    tx.delete("active", &d.key)?;
    let Some(mut p) = tx.payment(&d.env, &d.merchant, &d.id)? else {
        return Ok(());
    };
    let previous = p.next_check_ms;
    if let Some(Ok(status)) = answer {
        apply_psp_status(tx, &mut p, status.clone())?;
    }
    if !p.status.is_terminal() {
        p.checks += 1;
        let interval = (FIRST_CHECK_MS << p.checks.min(10)).min(MAX_CHECK_INTERVAL_MS);
        p.next_check_ms = if p.status == Status::AwaitingOtp {
            None
        } else {
            Some(clock::now_ms() + interval)
        };
    }
    tx.save_payment(&p, previous)
}
