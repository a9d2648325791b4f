//! `POST /bulk-payments/{id}/validate/`: the maker-checker step. A batch
//! above its threshold waits in `pending_validation` until a key with
//! `bulk:approve` approves it (it is then paid) or rejects it. Where a
//! second approver is required, the approver is another key and another
//! person: a key made in the console counts as the person who made it.

use super::*;
use mmc_api_kit::again_on_conflict;

/// Approves a batch waiting for validation (it is then paid), or rejects it
/// with `{"action":"reject","reason":…}`.
pub fn validate(caller: &Caller, req: &Request, id: &str) -> Result<Response, ApiError> {
    let body = wire::body_object(req, true)?;
    wire::reject_unknown(&body, &["action", "reason"])?;
    let reject = match wire::opt_string(&body, "action", 20)?.as_deref() {
        None | Some("approve") => false,
        Some("reject") => true,
        Some(_) => {
            return Err(ApiError::invalid(
                "parameter_invalid",
                "action",
                "action must be approve (the default) or reject.",
            ));
        }
    };
    let reason = wire::opt_string(&body, "reason", MAX_DESCRIPTION)?;
    if reason.is_some() && !reject {
        return Err(ApiError::invalid(
            "parameter_invalid",
            "reason",
            "reason goes with action reject.",
        ));
    }
    let (env, merchant) = (caller.environment.as_str(), caller.merchant_id.as_str());
    let now = clock::now_ms();
    again_on_conflict(|| {
        let tx = Tx::begin()?;
        let mut b = tx
            .batch(env, merchant, id)?
            .ok_or_else(|| ApiError::batch_not_found(id))?;
        if b.status != BatchStatus::PendingValidation {
            return Err(not_awaiting_validation(&b));
        }
        if !reject {
            may_approve(caller, &b, now)?;
        }
        let previous_queue = b.queued_ms;
        b.updated_at_ms = now;
        if reject {
            b.status = BatchStatus::Rejected;
            b.rejected_at_ms = Some(now);
            b.rejection_reason = reason.clone();
            events::emit(&tx, &b)?;
        } else {
            b.status = BatchStatus::Processing;
            b.validated_at_ms = Some(now);
            b.validated_by_key = Some(caller.key_id.clone());
            b.validated_by_person = caller.person.as_ref().map(|p| p.id.clone());
            b.processing_started_at_ms = Some(now);
            b.queued_ms = Some(now);
        }
        tx.save_batch(&b, previous_queue)?;
        tx.commit()?;
        Ok(json_response(200, &wire::batch_json(&b)))
    })
}

/// Maker-checker: paying out takes a second key and a second person;
/// rejecting moves no money, so the creator may withdraw their batch. A
/// person whose access was just reset approves nothing until the hold ends
/// (the new sign-in link may have reached someone else).
fn may_approve(caller: &Caller, b: &Batch, now: u64) -> Result<(), ApiError> {
    let person = caller.person.as_ref();
    if let Some(p) = person.filter(|p| p.approvals_held_until_ms > now) {
        return Err(ApiError::forbidden(
            "approval_on_hold",
            format!(
                "This person's console access was reset; they may approve payouts again from {}.",
                mmc_domain::time::rfc3339(p.approvals_held_until_ms)
            ),
        ));
    }
    if !caller.require_second_approver {
        return Ok(());
    }
    if let (Some(p), Some(creator)) = (person, b.creator())
        && p.id == creator
    {
        return Err(ApiError::forbidden(
            "second_approver_required",
            format!(
                "Bulk payment {} was created by the same person, in the console or with a key they made there; another person must approve it.",
                b.id
            ),
        ));
    }
    if b.created_by_key.as_deref() == Some(caller.key_id.as_str()) {
        return Err(ApiError::forbidden(
            "second_approver_required",
            format!(
                "Bulk payment {} was created with this API key; another key (with scope bulk:approve) must approve it.",
                b.id
            ),
        ));
    }
    Ok(())
}

/// The 409 for a batch that is past validation, saying why.
fn not_awaiting_validation(b: &Batch) -> ApiError {
    let status = b.status.as_str();
    if let Some(at) = b.validated_at_ms {
        return ApiError::state(
            "batch_already_validated",
            format!(
                "Bulk payment {} was already validated at {}; it is {status}.",
                b.id,
                mmc_domain::time::rfc3339(at)
            ),
        );
    }
    match b.status {
        BatchStatus::Rejected => ApiError::state(
            "batch_rejected",
            format!(
                "Bulk payment {} was rejected; it cannot be validated.",
                b.id
            ),
        ),
        BatchStatus::Processing => ApiError::state(
            "batch_already_processing",
            format!(
                "Bulk payment {} is already processing: its total {} is within the validation threshold {}, so it needed no validation.",
                b.id, b.total_amount, b.validation_threshold
            ),
        ),
        _ => ApiError::state(
            "batch_not_pending_validation",
            format!(
                "Bulk payment {} is {status}; only a batch in pending_validation can be validated.",
                b.id
            ),
        ),
    }
}
