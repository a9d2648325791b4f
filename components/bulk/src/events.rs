//! The batch events of the outbox: `bulk.batch.<status>`, written in the
//! transaction that made the change.

use serde_json::{Value, json};

use crate::mmc::platform::{clock, storage};
use crate::store::{Batch, Item, Tx};
use crate::{API_VERSION, ApiError, wire};

/// `bulk.batch.<status>` with the batch as `data.object`, in the
/// transaction that made the change.
pub fn emit(tx: &Tx, b: &Batch) -> Result<(), ApiError> {
    let event_type = format!("bulk.batch.{}", b.status.as_str());
    emit_event(tx, b, event_type, wire::batch_json(b))
}

/// `bulk.item.review_required` with the item as `data.object`: a payout a
/// person must look at (its batch is the event's subject).
pub fn emit_review(tx: &Tx, b: &Batch, item: &Item) -> Result<(), ApiError> {
    let event_type = "bulk.item.review_required".to_string();
    emit_event(tx, b, event_type, wire::item_json(item))
}

fn emit_event(tx: &Tx, b: &Batch, event_type: String, object: Value) -> Result<(), ApiError> {
    let id = format!("evt_{}", uuid::Uuid::new_v4().simple());
    let body = json!({
        "id": id,
        "object": "event",
        "api_version": API_VERSION,
        "type": event_type,
        "created": clock::now_ms() / 1000,
        "environment": b.environment,
        "merchant_id": b.merchant_id,
        "data": {"object": object},
    });
    tx.emit(&storage::OutboxEvent {
        id,
        event_type,
        merchant_id: b.merchant_id.clone(),
        environment: b.environment.clone(),
        subject_id: b.id.clone(),
        extra_url: None,
        payload: serde_json::to_vec(&body).expect("JSON values serialise"),
    })
}
