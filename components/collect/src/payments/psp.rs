//! Asking the PSP where payments stand (outside any transaction) and
//! applying its answer.

use mmc_domain::Status;

use crate::ApiError;
use crate::mmc::adapter::router::{self, Routed};
use crate::mmc::adapter::types::{AdapterError, OperationRef, PspStatus};
use crate::mmc::platform::log;
use crate::store::{self, Payment};

use super::transitions::{PspAnswer, apply_psp_status};

pub fn operation_ref(p: &Payment) -> OperationRef {
    OperationRef {
        id: p.id.clone(),
        operator: p.operator.clone().unwrap_or_default(),
        environment: p.environment.clone(),
        psp_reference: p.psp_reference.clone(),
        phone: p.customer.as_ref().and_then(|c| c.phone.clone()),
        amount: p.amount,
        currency: p.currency.clone(),
    }
}

/// Whether the PSP has something to say about `p`: not before a request
/// may have reached it, nor once the money is known to be taken. A failed,
/// cancelled or expired payment still is (a late success), but it is asked
/// only when something prompts it (a callback), never polled on a schedule.
pub fn worth_asking(p: &Payment) -> bool {
    p.operator.is_some()
        && p.sent_at().is_some()
        && !matches!(p.status, Status::Completed | Status::Refunded)
}

fn log_failed_query(p: &Payment, answer: &PspAnswer) {
    if let Err(e) = answer {
        log::log(
            log::Level::Warn,
            &format!("payment {}: status query failed: {e:?}", p.id),
        );
    }
}

/// Asks the PSP where `p` stands (never inside a transaction). `None`: there
/// is nothing to ask.
pub fn ask_psp(p: &Payment) -> Option<PspAnswer> {
    ask_psp_many(&[p]).pop().flatten()
}

/// [`ask_psp`] for each of `payments`, the operators asked concurrently by
/// the host. Answers in the same order.
pub fn ask_psp_many(payments: &[&Payment]) -> Vec<Option<PspAnswer>> {
    let asked: Vec<Routed> = payments
        .iter()
        .filter(|p| worth_asking(p))
        .map(|p| Routed {
            via: crate::routes::via(p),
            op: operation_ref(p),
        })
        .collect();
    let mut answers = router::status_many(&asked).into_iter();
    payments
        .iter()
        .map(|p| {
            if !worth_asking(p) {
                return None;
            }
            let answer = answers.next().unwrap_or_else(|| {
                Err(AdapterError::Unavailable("the host gave no answer".into()))
            });
            log_failed_query(p, &answer);
            Some(answer)
        })
        .collect()
}

/// Asks the PSP (outside a transaction) and applies the answer (inside one).
/// Returns the payment as stored afterwards.
pub fn sync_with_psp(p: Payment) -> Result<Payment, ApiError> {
    if p.status.is_terminal() {
        return Ok(p); // a read asks only about payments in progress
    }
    let Some(answer) = ask_psp(&p) else {
        return Ok(p);
    };
    store::transact(|tx| {
        tx.assume_payment(&p);
        let mut current = tx
            .payment(&p.environment, &p.merchant_id, &p.id)?
            .ok_or_else(|| ApiError::internal("payment vanished"))?;
        let Ok(status) = &answer else {
            return Ok(current);
        };
        let previous_check = current.next_check_ms;
        apply_psp_status(tx, &mut current, status.clone())?;
        tx.save_payment(&current, previous_check)?;
        Ok(current)
    })
}

/// Asks the PSP again about `p` because the books found the provider's
/// statement saying otherwise (see the `recheck` export), and records its
/// answer. A final payment takes only a success (a late success, or a
/// success for another amount flagged for review); one in progress takes
/// any answer, as a poll does. False when there was nothing to ask.
pub fn recheck(p: Payment, stored: Vec<u8>) -> Result<bool, ApiError> {
    let Some(answer) = ask_psp(&p) else {
        return Ok(false);
    };
    let Ok(status) = answer else {
        return Ok(true); // asked, not answered: unchanged, asked again by the next run
    };
    if p.status.is_terminal() && !matches!(status, PspStatus::Completed(_)) {
        return Ok(true);
    }
    store::transact(|tx| {
        tx.assume_stored_payment(&p, &stored);
        let Some(mut current) = tx.payment(&p.environment, &p.merchant_id, &p.id)? else {
            return Ok(());
        };
        let previous_check = current.next_check_ms;
        apply_psp_status(tx, &mut current, status.clone())?;
        tx.save_payment(&current, previous_check)
    })?;
    Ok(true)
}
