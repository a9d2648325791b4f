//! The batch events of the outbox: `bulk.batch.<status>`, written in the
//! transaction that made the change.

use serde_json::json;

use crate::mmc::platform::{clock, storage};
use crate::store::{Batch, Tx};
use crate::{API_VERSION, ApiError, wire};

/// `bulk.batch.<status>` with the batch as `data.object`, in the
/// transaction that made the change.
pub fn emit(tx: &Tx, b: &Batch) -> Result<(), ApiError> {
    let id = format!("evt_{}", uuid::Uuid::new_v4().simple());
    let event_type = format!("bulk.batch.{}", b.status.as_str());
    let body = json!({
        "id": id,
        "object": "event",
        "api_version": API_VERSION,
        "type": event_type,
        "created": clock::now_ms() / 1000,
        "environment": b.environment,
        "merchant_id": b.merchant_id,
        "data": {"object": wire::batch_json(b)},
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
