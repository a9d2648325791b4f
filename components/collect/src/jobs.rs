//! Background work the host schedules: expiry and reconciliation. Both walk
//! time-ordered indexes in storage, so they survive restarts.

use mmc_domain::Status;

use crate::mmc::platform::{clock, log};
use crate::payments::{FIRST_CHECK_MS, MAX_CHECK_INTERVAL_MS, move_to, sync_with_psp};
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
pub fn reconcile_due(limit: u32) -> u32 {
    let now = clock::now_ms();
    let due = match store::due("active", now, limit) {
        Ok(d) => d,
        Err(_) => return 0,
    };
    let mut done = 0;
    for d in due {
        let (env, merchant, id) = (&d.env, &d.merchant, &d.id);
        let result = (|| -> Result<(), crate::ApiError> {
            let Some(p) = store::read_payment(env, merchant, id)? else {
                return store::drop_index_entry("active", &d.key);
            };
            let after = sync_with_psp(p)?;
            if after.status.is_terminal() {
                return Ok(());
            }
            // Still in progress: next poll later, doubling.
            let tx = Tx::begin()?;
            let Some(mut p) = tx.payment(env, merchant, id)? else {
                return Ok(());
            };
            let previous = p.next_check_ms;
            p.checks += 1;
            let interval = (FIRST_CHECK_MS << p.checks.min(10)).min(MAX_CHECK_INTERVAL_MS);
            p.next_check_ms = if p.status.is_terminal() || p.status == Status::AwaitingOtp {
                None
            } else {
                Some(clock::now_ms() + interval)
            };
            tx.save_payment(&p, previous)?;
            tx.commit()
        })();
        if let Err(e) = result {
            log::log(
                log::Level::Error,
                &format!("reconciliation of {id} failed: {}", e.message),
            );
        }
        done += 1;
    }
    done
}
