//! Events: written in the transaction of the change they report (the
//! outbox), delivered by the host as webhooks and listed by its events API.
//!
//! A payment's events are stored in a compact form, not as their JSON body:
//! a version byte, the envelope's own fields (postcard), then the payment as
//! its record is stored ([`mmc_domain::event`], read by the host too, which
//! counts payment events into the console's overview). The body — the payment's
//! API view in the envelope — is built when the event is read, by
//! [`render`] (this component's `events` export, which the host calls for
//! every stored payload that is not JSON). Building ~1.3 KB of JSON per event
//! and writing it to the outbox, three events per payment, was ~8% of a
//! create's CPU (docs/benchmarks.md). The body is the same bytes as the
//! JSON form would have been: what the payment was when the event happened.
//! It is built by the `collect` loaded when it is read, so a change to the
//! payment's API view changes stored events' bodies too: such a change must
//! keep rendering a stored `api_version` as it was.
//! Under the setting `payment_records = json` (a fleet rolled from a version
//! that reads only JSON) events are stored as JSON, as before.
//!
//! Refund events (their `data` carries the refund too) stay JSON: rare.

use mmc_domain::event::{self as compact_form, Head};
use serde::Serialize;
use serde_json::Value;

use crate::mmc::platform::{clock, storage};
use crate::store::{self, Generation, Payment, Tx};
use crate::{API_VERSION, ApiError, wire};

/// Writes the event in the same transaction as the change it reports.
/// Payments created through the legacy generation get legacy names and the
/// legacy Collection as `data.object`.
pub fn emit(tx: &Tx, p: &Payment, event_type: &str) -> Result<(), ApiError> {
    let (event_type, api_version) = match p.generation {
        Generation::Current => (event_type, API_VERSION),
        Generation::Legacy => match mmc_domain::legacy::event_type(event_type) {
            Some(t) => (t, "legacy"),
            None => return Ok(()),
        },
    };
    let head = Head {
        id: format!("evt_{}", crate::ids::new().simple()),
        created: clock::now_ms() / 1000,
        event_type: event_type.into(),
        api_version: api_version.into(),
    };
    let payload = if store::binary_records() {
        compact_form::compact(&head, p)
    } else {
        payment_body(&head, p)
    };
    tx.emit(&storage::OutboxEvent {
        id: head.id,
        event_type: head.event_type,
        merchant_id: p.merchant_id.clone(),
        environment: p.environment.clone(),
        subject_id: p.id.clone(),
        extra_url: p.callback_url.clone(),
        payload,
    })
}

/// Writes an event whose body is built now (JSON), with `data` as given.
#[allow(clippy::too_many_arguments)]
pub fn emit_event<T: Serialize + ?Sized>(
    tx: &Tx,
    event_type: &str,
    merchant_id: &str,
    environment: &str,
    subject_id: &str,
    extra_url: Option<String>,
    data: EventData<'_, T>,
    api_version: &str,
) -> Result<(), ApiError> {
    let id = format!("evt_{}", crate::ids::new().simple());
    let payload = body(&Envelope {
        api_version,
        created: clock::now_ms() / 1000,
        data,
        environment,
        id: &id,
        merchant_id,
        object: "event",
        event_type,
    });
    tx.emit(&storage::OutboxEvent {
        id,
        event_type: event_type.into(),
        merchant_id: merchant_id.into(),
        environment: environment.into(),
        subject_id: subject_id.into(),
        extra_url,
        payload,
    })
}

/// The JSON body of each stored payload (the `events` export): none where
/// a payload is not a compact event this build reads.
pub fn render_all(payloads: Vec<Vec<u8>>) -> Vec<Option<Vec<u8>>> {
    payloads.iter().map(|p| render(p).ok()).collect()
}

/// The JSON body of a compact payment event.
pub fn render(payload: &[u8]) -> Result<Vec<u8>, String> {
    let (head, record) = compact_form::split(payload)?;
    let p = mmc_domain::record::decode(record)?;
    Ok(payment_body(&head, &p))
}

/// The JSON body of a payment event: the generation's view of the payment.
fn payment_body(head: &Head, p: &Payment) -> Vec<u8> {
    match p.generation {
        // Serialised straight from the view: no JSON map built on the way.
        Generation::Current => head_body(head, p, &wire::PaymentView::new(p, false)),
        Generation::Legacy => head_body(head, p, &wire::legacy_collection(p, false)),
    }
}

fn head_body<T: Serialize + ?Sized>(head: &Head, p: &Payment, object: &T) -> Vec<u8> {
    body(&Envelope {
        api_version: &head.api_version,
        created: head.created,
        data: EventData::of(object),
        environment: &p.environment,
        id: &head.id,
        merchant_id: &p.merchant_id,
        object: "event",
        event_type: &head.event_type,
    })
}

fn body<T: Serialize + ?Sized>(envelope: &Envelope<'_, T>) -> Vec<u8> {
    serde_json::to_vec(envelope).expect("event bodies serialise")
}

/// The event envelope of the webhook body; fields in alphabetical order.
#[derive(Serialize)]
struct Envelope<'a, T: Serialize + ?Sized> {
    api_version: &'a str,
    created: u64,
    data: EventData<'a, T>,
    environment: &'a str,
    id: &'a str,
    merchant_id: &'a str,
    object: &'static str,
    #[serde(rename = "type")]
    event_type: &'a str,
}

/// `data` of an event: what it is about, as it was when it happened.
#[derive(Serialize)]
pub struct EventData<'a, T: Serialize + ?Sized> {
    pub object: &'a T,
    /// `collect.refund.*`: the refund. Their `object` is the payment, as in
    /// every current-generation event (the contract's envelope).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refund: Option<&'a Value>,
}

impl<'a, T: Serialize + ?Sized> EventData<'a, T> {
    pub fn of(object: &'a T) -> Self {
        EventData {
            object,
            refund: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mmc_domain::event::{PAYMENT_EVENT_V1, compact};
    use serde_json::json;

    fn payment(generation: &str) -> Payment {
        serde_json::from_value(json!({
            "id": "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
            "merchant_id": "7f3e2d1c-0b9a-4876-a5b4-c3d2e1f0a9b8",
            "environment": "test",
            "reference": "order \"1\" é",
            "status": "completed",
            "amount": 1500,
            "currency": "XOF",
            "country": "BJ",
            "mode": "direct",
            "operator": "mtn-bj",
            "customer": {"phone": "+2290166001234", "first_name": "Ama", "last_name": null},
            "metadata": {"cart": [1, 2], "note": "x"},
            "psp_reference": "sim_1",
            "expires_at_ms": 1764240000000u64,
            "created_at_ms": 1764239100000u64,
            "updated_at_ms": 1764239100020u64,
            "completed_at_ms": 1764239100020u64,
            "request_hash": "ab12",
            "merchant_name": "Shop",
            "generation": generation,
        }))
        .unwrap()
    }

    fn head(event_type: &str, api_version: &str) -> Head {
        Head {
            id: "evt_0193a1b2c3d47e5f8a9b0c1d2e3f4a5c".into(),
            created: 1764239100,
            event_type: event_type.into(),
            api_version: api_version.into(),
        }
    }

    #[test]
    fn a_compact_event_renders_as_the_body_it_replaces() {
        for (generation, event_type, api_version) in [
            ("current", "collect.payment.completed", API_VERSION),
            ("legacy", "collection.succeeded", "legacy"),
        ] {
            let (p, h) = (payment(generation), head(event_type, api_version));
            let stored = compact(&h, &p);
            assert_eq!(stored[0], PAYMENT_EVENT_V1);
            let json = payment_body(&h, &p).len();
            assert!(
                stored.len() < json,
                "{generation}: compact {} bytes, JSON {json}",
                stored.len()
            );
            let rendered = render(&stored).unwrap();
            assert_eq!(rendered, payment_body(&h, &p), "{generation}");
            let body: Value = serde_json::from_slice(&rendered).unwrap();
            assert_eq!(body["id"], h.id);
            assert_eq!(body["type"], event_type);
            assert_eq!(body["api_version"], api_version);
            assert_eq!(body["created"], 1764239100);
            assert_eq!(body["object"], "event");
            assert_eq!(body["merchant_id"], p.merchant_id);
        }
        let body: Value = serde_json::from_slice(
            &render(&compact(
                &head("collect.payment.completed", API_VERSION),
                &payment("current"),
            ))
            .unwrap(),
        )
        .unwrap();
        assert_eq!(body["data"]["object"]["status"], "completed");
        assert_eq!(body["data"]["object"]["reference"], "order \"1\" é");
        assert_eq!(body["data"]["object"]["metadata"]["cart"], json!([1, 2]));
    }

    #[test]
    fn what_is_not_a_compact_event_is_refused() {
        let stored = compact(
            &head("collect.payment.completed", API_VERSION),
            &payment("current"),
        );
        assert!(render(b"{\"id\":\"evt_1\"}").is_err());
        assert!(render(b"").is_err());
        assert!(render(&stored[..stored.len() - 3]).is_err(), "truncated");
        assert!(render(&stored[..10]).is_err(), "truncated in its head");
        assert_eq!(
            render_all(vec![stored.clone(), b"{}".to_vec()]),
            vec![Some(render(&stored).unwrap()), None]
        );
    }
}
