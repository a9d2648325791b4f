//! A new batch kept under its Idempotency-Key: a retry of the same request
//! is answered with the batch it made (200, `idempotent_replay`), another
//! request under the same key is a 409, and a key is honoured for 24 hours.

use super::*;
use mmc_api_kit::again_on_conflict;

/// Idempotency keys are honoured for 24 hours, as for payments.
const IDEMPOTENCY_TTL_MS: u64 = 24 * 3600 * 1000;

/// The batch an earlier request under this key created, if the key is known
/// and not expired: `Some` for the same request (a replay), 409
/// `idempotency_key_reused` for another one, `None` for a new or expired key.
fn earlier_batch(
    rec: Option<IdemRecord>,
    request_hash: &str,
    now: u64,
    read_batch: impl FnOnce(&str) -> Result<Option<Batch>, ApiError>,
) -> Result<Option<Batch>, ApiError> {
    let Some(rec) = rec.filter(|r| now.saturating_sub(r.created_ms) < IDEMPOTENCY_TTL_MS) else {
        return Ok(None);
    };
    if rec.request_hash != request_hash {
        return Err(ApiError::idempotency(
            "idempotency_key_reused",
            "This Idempotency-Key was used with a different request body.",
        ));
    }
    read_batch(&rec.batch_id)?
        .map(Some)
        .ok_or_else(|| ApiError::internal("idempotency record without batch"))
}

/// A retry answered from committed data before the request is checked
/// again: the batch exists, so a setting or the catalogue that changed since
/// (an item limit, an operator no longer served) must not turn it into a 400
/// saying nothing was created. [`store_new`] decides again in its
/// transaction, for two requests that race.
pub(super) fn replay_committed(
    caller: &Caller,
    key: &str,
    request_hash: &str,
) -> Result<Option<Response>, ApiError> {
    let (env, merchant) = (caller.environment.as_str(), caller.merchant_id.as_str());
    let earlier = earlier_batch(
        store::read_idem(env, merchant, key)?,
        request_hash,
        clock::now_ms(),
        |id| store::read_batch(env, merchant, id),
    )?;
    Ok(earlier.map(|b| batch_response(200, &b, true)))
}

/// Stores a new batch with its Idempotency-Key (or replays the one made
/// under the same key): 201, or 200 for a replay.
pub(super) fn store_new(caller: &Caller, new: NewBatch, key: String) -> Result<Response, ApiError> {
    let (env, merchant) = (caller.environment.as_str(), caller.merchant_id.as_str());
    let now = clock::now_ms();
    let request_hash = new.request_hash.clone();
    let (batch, items) = new_batch(caller, new, now);
    // The key is stored in the transaction that inserts the batch: neither
    // exists without the other.
    again_on_conflict(|| {
        let tx = Tx::begin()?;
        if let Some(earlier) =
            earlier_batch(tx.idem(env, merchant, &key)?, &request_hash, now, |id| {
                tx.batch(env, merchant, id)
            })?
        {
            return Ok(batch_response(200, &earlier, true));
        }
        tx.put_idem(
            env,
            merchant,
            &key,
            &IdemRecord {
                request_hash: request_hash.clone(),
                batch_id: batch.id.clone(),
                created_ms: now,
            },
        )?;
        tx.insert_batch(&batch, &items)?;
        tx.commit()?;
        Ok(batch_response(201, &batch, false))
    })
}

/// The batch and its items as they are first stored: every item pending; the
/// batch waiting for validation above the merchant's threshold (or where a
/// second approver is required), else processing at once.
fn new_batch(caller: &Caller, new: NewBatch, now: u64) -> (Batch, Vec<Item>) {
    let merchant = caller.merchant_id.as_str();
    let id = uuid::Uuid::new_v4().to_string();
    let threshold = settings::validation_threshold(merchant);
    let total: u64 = new.lines.iter().map(|(_, i)| i.amount).sum();
    // Maker-checker outranks the threshold: with a second approver required,
    // no batch pays out on its creator's key alone, however small.
    let requires_validation = total > threshold || caller.require_second_approver;
    let items: Vec<Item> = new
        .lines
        .into_iter()
        .enumerate()
        .map(|(position, (line, v))| new_item(&id, position as u32, line, v, now))
        .collect();
    // Below the threshold: paid at once, as if validated on creation.
    let start = (!requires_validation).then_some(now);
    let batch = Batch {
        id,
        merchant_id: merchant.into(),
        environment: caller.environment.clone(),
        name: new.name,
        description: new.description,
        source: new.source.into(),
        status: if requires_validation {
            BatchStatus::PendingValidation
        } else {
            BatchStatus::Processing
        },
        currency: items[0].currency.clone(),
        item_count: items.len() as u32,
        total_amount: total,
        counts: Counts {
            pending: items.len() as u32,
            ..Counts::default()
        },
        amount_completed: 0,
        amount_failed: 0,
        validation_threshold: threshold,
        requires_validation,
        cursor: 0,
        created_at_ms: now,
        updated_at_ms: now,
        validated_at_ms: None,
        processing_started_at_ms: start,
        completed_at_ms: None,
        rejected_at_ms: None,
        rejection_reason: None,
        queued_ms: start,
        created_by_key: Some(caller.key_id.clone()),
        validated_by_key: None,
        created_by_person: caller.person.as_ref().map(|p| p.id.clone()),
        validated_by_person: None,
        float_hold: None,
        float_checked_ms: None,
    };
    (batch, items)
}

/// A valid line as a pending item of batch `batch_id`.
/// A UUIDv7 at the host clock's `now_ms`.
fn time_ordered_id(now_ms: u64) -> uuid::Uuid {
    let ts = uuid::Timestamp::from_unix(
        uuid::NoContext,
        now_ms / 1000,
        ((now_ms % 1000) * 1_000_000) as u32,
    );
    uuid::Uuid::new_v7(ts)
}

fn new_item(batch_id: &str, position: u32, line: u32, v: ValidItem, now: u64) -> Item {
    Item {
        // UUIDv7: the id carries its time, so a provider that must be searched
        // for it (FedaPay) is read back only as far as the item's creation.
        id: time_ordered_id(now).to_string(),
        batch_id: batch_id.to_string(),
        position,
        line,
        reference: v.reference,
        beneficiary_name: v.beneficiary_name,
        phone: v.phone,
        country: v.country.into(),
        operator: v.operator,
        amount: v.amount,
        currency: v.currency,
        status: ItemStatus::Pending,
        attempts: 0,
        resent: 0,
        psp_reference: None,
        failure: None,
        created_at_ms: now,
        updated_at_ms: now,
        submitted_at_ms: None,
        completed_at_ms: None,
        next_check_ms: None,
        checks: 0,
        review: None,
        route: None,
        tried: Vec::new(),
        held: None,
        unconfirmed: None,
        expected_fee: None,
    }
}

/// A batch as the API answers it, and whether it is a replay.
pub(super) fn batch_response(status: u16, b: &Batch, replay: bool) -> Response {
    let mut body = wire::batch_json(b);
    body["idempotent_replay"] = Value::Bool(replay);
    json_response(status, &body)
}
