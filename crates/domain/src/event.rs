//! The compact form of a payment event as `collect` stores it in the outbox
//! (see its `events` module): a version byte, the envelope's own fields
//! ([`Head`], postcard), then the payment's binary record as it was at that
//! moment ([`crate::record`]). Written here once for the two that read it:
//! `collect`, which builds the JSON body from it, and the host, which counts
//! payment events into the console's overview without building the body.
//! (A payload stored as JSON starts with `{`.)

use serde::{Deserialize, Serialize};

use crate::record::{self, Payment};

/// The first byte of a compact payment event.
pub const PAYMENT_EVENT_V1: u8 = 1;

/// What a payment event says besides the payment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Head {
    pub id: String,
    pub created: u64,
    pub event_type: String,
    pub api_version: String,
}

/// [`Head`] read in place: the same layout, nothing copied.
#[derive(Deserialize)]
struct HeadRef<'a> {
    _id: &'a str,
    _created: u64,
    _event_type: &'a str,
    _api_version: &'a str,
}

/// The stored bytes of the event `head` about `p`.
pub fn compact(head: &Head, p: &Payment) -> Vec<u8> {
    let mut out = Vec::with_capacity(512);
    out.push(PAYMENT_EVENT_V1);
    let mut out = postcard::to_extend(head, out).expect("event heads serialise");
    out.extend_from_slice(&record::encode(p));
    out
}

/// A compact event's head and the payment's record bytes.
pub fn split(payload: &[u8]) -> Result<(Head, &[u8]), String> {
    match payload.split_first() {
        Some((&PAYMENT_EVENT_V1, rest)) => {
            postcard::take_from_bytes::<Head>(rest).map_err(|e| e.to_string())
        }
        _ => Err("not a compact payment event".into()),
    }
}

/// The payment's record bytes in a compact event, its head skipped without
/// being built; None for a payload that is not one.
pub fn record_of(payload: &[u8]) -> Option<&[u8]> {
    match payload.split_first() {
        Some((&PAYMENT_EVENT_V1, rest)) => postcard::take_from_bytes::<HeadRef<'_>>(rest)
            .ok()
            .map(|(_, record)| record),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Status;
    use serde_json::json;

    #[test]
    fn a_compact_event_gives_back_its_head_and_its_payment() {
        let p: Payment = serde_json::from_value(json!({
            "id": "p1", "merchant_id": "m1", "environment": "test", "reference": "r é",
            "status": "completed", "amount": 1500, "currency": "XOF", "country": "BJ",
            "mode": "hosted", "operator": "mtn-bj", "expires_at_ms": 3u64,
            "created_at_ms": 1u64, "updated_at_ms": 2u64, "request_hash": "h",
            "late_success_from": "failed"
        }))
        .unwrap();
        let head = Head {
            id: "evt_1".into(),
            created: 7,
            event_type: "collect.payment.completed".into(),
            api_version: "2026-01-01".into(),
        };
        let stored = compact(&head, &p);
        let (read, rec) = split(&stored).unwrap();
        assert_eq!(read, head);
        assert_eq!(record_of(&stored), Some(rec));
        let back = record::decode(rec).unwrap();
        assert_eq!(
            (back.status, back.late_success_from),
            (Status::Completed, Some(Status::Failed))
        );
        assert!(split(b"{\"id\":1}").is_err() && record_of(b"{\"id\":1}").is_none());
        assert!(record_of(&stored[..4]).is_none(), "cut in its head");
        assert!(record_of(b"").is_none());
    }
}
