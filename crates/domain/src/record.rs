//! The stored form of a payment record (`collect`'s `payments` table): a
//! version byte, then its fields in order in postcard's compact binary layout
//! (varint numbers, length-prefixed strings, no field names). A payment is
//! written three times and read several times per create, and read once per
//! GET; as JSON (~650 bytes with its field names) decoding it was ~5% of a
//! GET's CPU. Records written before this form (JSON, which starts
//! with `{`) are read as they are and rewritten in it at their next change.
//!
//! The layout is positional. Adding, removing or moving a field of
//! [`Payment`] (or of what it holds), or a variant of `Status`, `Mode` or
//! [`Generation`], changes it: such a change needs a new version byte and a
//! decoder kept for the old layout. The test `v2_layout_is_pinned` fails
//! first. (An older build cannot read this form: roll back past it only to a
//! build that reads it.)
//!
//! Version 2 is version 1 with `review` at the end, version 3 is version 2
//! with `route` at the end, version 4 is version 3 with `resent` and
//! `base_url` at the end, and version 5 is version 4 with `expected_fee` at
//! the end: an older record is read as version 5 with none of those (each
//! absent field is one zero byte).

use std::borrow::Cow;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::{Mode, Status};

const V1: u8 = 1;
const V2: u8 = 2;
const V3: u8 = 3;
const V4: u8 = 4;
const V5: u8 = 5;

pub fn encode(p: &Payment) -> Vec<u8> {
    let mut out = Vec::with_capacity(384);
    out.push(V5);
    postcard::to_extend(p, out).expect("payments serialise")
}

pub fn decode(stored: &[u8]) -> Result<Payment, String> {
    let whole = |bytes: &[u8]| match postcard::take_from_bytes(bytes) {
        Ok((p, [])) => Ok(p),
        // Bytes left over: not this layout (a change without a new version).
        Ok(_) => Err("bytes left over after the record".to_string()),
        Err(e) => Err(e.to_string()),
    };
    match stored.first() {
        Some(&V5) => whole(&stored[1..]),
        // Older versions lack trailing fields, each absent one a zero byte
        // (`None`, or `resent` 0): version 1 `review`, `route`, `resent`,
        // `base_url` and `expected_fee`; version 2 the last four; version 3
        // the last three; version 4 the last one.
        Some(&v @ (V1 | V2 | V3 | V4)) => {
            let missing = [5, 4, 3, 1][usize::from(v - V1)];
            let mut v5 = Vec::with_capacity(stored.len() + missing);
            v5.extend_from_slice(&stored[1..]);
            v5.resize(v5.len() + missing, 0);
            whole(&v5)
        }
        Some(b'{') => serde_json::from_slice(stored).map_err(|e| e.to_string()),
        _ => Err("not a payment record".into()),
    }
}

/// What a payment is counted by (the console's overview): the leading
/// fields of its record, read in place from any version of the stored form
/// without decoding the rest.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary<'a> {
    pub id: Cow<'a, str>,
    pub merchant_id: Cow<'a, str>,
    pub environment: Cow<'a, str>,
    pub status: Status,
    pub amount: u64,
    pub mode: Mode,
    pub operator: Option<Cow<'a, str>>,
    pub created_at_ms: u64,
}

pub fn summary(stored: &[u8]) -> Result<Summary<'_>, String> {
    match stored.first() {
        // Every version begins with the same fields: what follows is left unread.
        Some(&(V1 | V2 | V3 | V4 | V5)) => {
            let (f, _) =
                postcard::take_from_bytes::<Front<'_>>(&stored[1..]).map_err(|e| e.to_string())?;
            Ok(Summary {
                id: Cow::Borrowed(f.id),
                merchant_id: Cow::Borrowed(f.merchant_id),
                environment: Cow::Borrowed(f.environment),
                status: f.status,
                amount: f.amount,
                mode: f.mode,
                operator: f.operator.map(Cow::Borrowed),
                created_at_ms: f.created_at_ms,
            })
        }
        Some(b'{') => {
            let f: JsonFront<'_> = serde_json::from_slice(stored).map_err(|e| e.to_string())?;
            Ok(Summary {
                id: f.id,
                merchant_id: f.merchant_id,
                environment: f.environment,
                status: f.status,
                amount: f.amount,
                mode: f.mode,
                operator: f.operator,
                created_at_ms: f.created_at_ms,
            })
        }
        _ => Err("not a payment record".into()),
    }
}

/// The fields of [`Payment`] up to `created_at_ms`, in its order, borrowed
/// (the binary layout is positional: each must be read to reach the next).
#[derive(Deserialize)]
struct Front<'a> {
    id: &'a str,
    merchant_id: &'a str,
    environment: &'a str,
    _reference: &'a str,
    status: Status,
    amount: u64,
    _currency: &'a str,
    _country: &'a str,
    mode: Mode,
    operator: Option<&'a str>,
    _customer: Option<(Option<&'a str>, Option<&'a str>, Option<&'a str>)>,
    _description: Option<&'a str>,
    _callback_url: Option<&'a str>,
    _external_merchant_id: Option<&'a str>,
    _metadata: Option<&'a str>,
    _psp_reference: Option<&'a str>,
    _checkout_url: Option<&'a str>,
    _expires_at_ms: u64,
    created_at_ms: u64,
}

/// The same from a JSON record (named fields: the others are skipped).
#[derive(Deserialize)]
struct JsonFront<'a> {
    #[serde(borrow)]
    id: Cow<'a, str>,
    #[serde(borrow)]
    merchant_id: Cow<'a, str>,
    #[serde(borrow)]
    environment: Cow<'a, str>,
    status: Status,
    amount: u64,
    mode: Mode,
    #[serde(default, borrow)]
    operator: Option<Cow<'a, str>>,
    created_at_ms: u64,
}

/// `metadata` (free-form JSON): itself in a JSON record, its JSON text in the
/// binary one, whose decoder cannot read a value of unknown shape.
mod json_text {
    use super::*;

    pub fn serialize<S: Serializer>(v: &Option<Value>, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            return v.serialize(s);
        }
        v.as_ref().map(|v| v.to_string()).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
        if d.is_human_readable() {
            return Option::<Value>::deserialize(d);
        }
        Option::<&str>::deserialize(d)?
            .map(|t| serde_json::from_str(t).map_err(serde::de::Error::custom))
            .transpose()
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Customer {
    pub phone: Option<String>,
    pub first_name: Option<String>,
    pub last_name: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Failure {
    pub code: String,
    pub message: String,
}

/// Stored in the binary form above (~300 bytes: a B-tree leaf cell, no
/// overflow page). `default` on a field is for records stored as
/// JSON before that form, which left out their empty fields.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Payment {
    pub id: String,
    pub merchant_id: String,
    pub environment: String,
    pub reference: String,
    pub status: Status,
    pub amount: u64,
    pub currency: String,
    pub country: String,
    pub mode: Mode,
    #[serde(default)]
    pub operator: Option<String>,
    #[serde(default)]
    pub customer: Option<Customer>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub callback_url: Option<String>,
    #[serde(default)]
    pub external_merchant_id: Option<String>,
    #[serde(default, with = "json_text")]
    pub metadata: Option<Value>,
    #[serde(default)]
    pub psp_reference: Option<String>,
    #[serde(default)]
    pub checkout_url: Option<String>,
    pub expires_at_ms: u64,
    pub created_at_ms: u64,
    pub updated_at_ms: u64,
    #[serde(default)]
    pub completed_at_ms: Option<u64>,
    #[serde(default)]
    pub failure: Option<Failure>,
    #[serde(default)]
    pub otp_attempts: u32,
    #[serde(default)]
    pub refunded_amount: u64,
    /// Hash of the creating request's canonical body (reference replays compare it).
    pub request_hash: String,
    #[serde(default)]
    pub refund_reserved: u64,
    #[serde(default)]
    pub generation: Generation,
    #[serde(default)]
    pub cancel_reason: Option<String>,
    /// Shown on the hosted checkout page.
    #[serde(default)]
    pub merchant_name: String,
    /// Next PSP poll, when the payment is in `active`.
    #[serde(default)]
    pub next_check_ms: Option<u64>,
    #[serde(default)]
    pub checks: u32,
    /// When a request to pay (or a one-time code) was sent on its way (set
    /// with the pending record, when the customer picks an operator on the
    /// checkout page, or before a confirmation), cleared with the operator's
    /// answer. Meanwhile a replay of the Idempotency-Key is told to retry
    /// (while the node running it lives: `initiating_on`), a second
    /// confirmation and a cancel are refused, and expiry waits.
    #[serde(default)]
    pub initiating_since_ms: Option<u64>,
    /// The node (process) that sent it on its way, set and cleared with
    /// `initiating_since_ms`: once that node has stopped, nothing of ours is
    /// still running the request (see `payments::initiation_running`).
    #[serde(default)]
    pub initiating_on: Option<String>,
    /// When a request to pay was first put on its way to the operator (the
    /// intent persisted before the call). Never cleared: from then on the
    /// operator may hold a request under our id, so cancel and expiry ask it.
    #[serde(default)]
    pub sent_at_ms: Option<u64>,
    /// A direct payment whose initiation found every adapter instance busy:
    /// nothing was sent, and the merchant's retry sends it. (Without it, a
    /// direct payment with no `sent_at_ms` is a record from before that
    /// field, counted as sent at creation.)
    #[serde(default)]
    pub unsent: bool,
    /// The status a payment had when the operator reported the money taken
    /// after all (a late success): kept for audit.
    #[serde(default)]
    pub late_success_from: Option<Status>,
    /// Why an operator's success was not believed (it named another amount
    /// or currency than the payment's): the payment stays in progress, is
    /// listed under `review=required` and has its own event, until someone
    /// looks. Kept once set, for audit.
    #[serde(default)]
    pub review: Option<Failure>,
    /// The provider route its request to pay was sent through, and why:
    /// everything about it afterwards (status, cancel, callbacks, refunds)
    /// goes through that route. None: sent before routes were recorded, or
    /// not sent yet (a hosted payment before the customer chose).
    #[serde(default)]
    pub route: Option<Route>,
    /// How many times its request to pay was sent again under its id: the
    /// operator did not know it once nothing of ours could still be on its
    /// way (see `collect`'s reconciliation).
    #[serde(default)]
    pub resent: u32,
    /// The service's public address its request to pay named (its callback
    /// and return URLs), so that a request sent again names the same.
    #[serde(default)]
    pub base_url: Option<String>,
    /// What its route's provider charges on it by the rate card in force
    /// when the route was chosen (major units); none when no card applies.
    #[serde(default)]
    pub expected_fee: Option<u64>,
}

/// The route a payment took (see the host's routing).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Route {
    /// The adapter it was sent through.
    pub adapter: String,
    /// Why that one, as the host explained it (JSON: the rule, the
    /// candidates and what each was judged).
    pub explanation: String,
    /// The routes tried before it, each of which answered that nothing was
    /// done, in order.
    #[serde(default)]
    pub tried: Vec<TriedRoute>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TriedRoute {
    pub adapter: String,
    /// What it answered (`operator_rejected`, `operator_unavailable`, …).
    pub code: String,
    pub message: String,
}

impl Route {
    /// `adapter`, `explanation` (the host's JSON, parsed) and `tried`: a
    /// payment's route as the APIs show it (null and empty for a record
    /// from before routes were recorded).
    pub fn fields(route: Option<&Route>) -> serde_json::Map<String, Value> {
        let tried: Vec<Value> = route
            .map(|r| r.tried.as_slice())
            .unwrap_or_default()
            .iter()
            .map(
                |t| serde_json::json!({"adapter": t.adapter, "code": t.code, "message": t.message}),
            )
            .collect();
        let mut out = serde_json::Map::new();
        out.insert("adapter".into(), route.map(|r| r.adapter.clone()).into());
        out.insert(
            "explanation".into(),
            route
                .and_then(|r| serde_json::from_str::<Value>(&r.explanation).ok())
                .unwrap_or(Value::Null),
        );
        out.insert("tried".into(), tried.into());
        out
    }
}

impl Payment {
    /// The amount less the fee its route's rate card says: what the
    /// merchant keeps; none without an expected fee.
    pub fn net_amount(&self) -> Option<u64> {
        self.expected_fee.map(|fee| self.amount.saturating_sub(fee))
    }

    /// A request to pay (or a one-time code) goes on its way now, from `node`.
    pub fn start_initiating(&mut self, now: u64, node: String) {
        self.initiating_since_ms = Some(now);
        self.initiating_on = Some(node);
    }

    /// The operator's answer to it is recorded (or it never left).
    pub fn end_initiating(&mut self) {
        self.initiating_since_ms = None;
        self.initiating_on = None;
    }

    /// When a request to pay may have reached the operator. Records from before
    /// `sent_at_ms` existed: a direct payment is initiated as it is created.
    pub fn sent_at(&self) -> Option<u64> {
        if self.unsent {
            return None;
        }
        self.sent_at_ms.or_else(|| {
            (self.mode == Mode::Direct || self.psp_reference.is_some())
                .then_some(self.created_at_ms)
        })
    }
}

/// The order of the variants is in stored records: add at the end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Generation {
    #[default]
    Current,
    Legacy,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn payment() -> Payment {
        serde_json::from_value(json!({
            "id": "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
            "merchant_id": "7f3e2d1c-0b9a-4876-a5b4-c3d2e1f0a9b8",
            "environment": "test",
            "reference": "order 1 é",
            "status": "processing",
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
            "request_hash": "ab12",
            "merchant_name": "Shop",
            "next_check_ms": 1764239101020u64,
            "sent_at_ms": 1764239100000u64,
            "late_success_from": "expired"
        }))
        .unwrap()
    }

    fn as_json(p: &Payment) -> Value {
        serde_json::to_value(p).unwrap()
    }

    #[test]
    fn a_payment_comes_back_as_it_was_stored() {
        let p = payment();
        let stored = encode(&p);
        assert_eq!(stored[0], V5);
        assert!(stored.len() < serde_json::to_vec(&p).unwrap().len() / 2 + 40);
        assert_eq!(as_json(&decode(&stored).unwrap()), as_json(&p));
        let mut bare = p.clone();
        (bare.metadata, bare.customer, bare.operator) = (None, None, None);
        assert_eq!(as_json(&decode(&encode(&bare)).unwrap()), as_json(&bare));
    }

    /// Records from before the binary form, JSON without their empty fields,
    /// are read as they are.
    #[test]
    fn a_json_record_from_before_is_read() {
        let old = br#"{"id":"p1","merchant_id":"m1","environment":"live","reference":"r","status":"pending","amount":5,"currency":"XOF","country":"TG","mode":"hosted","metadata":{"a":"b"},"expires_at_ms":3,"created_at_ms":1,"updated_at_ms":2,"request_hash":"h"}"#;
        let p = decode(old).unwrap();
        assert_eq!(
            (p.status, p.mode, p.amount),
            (Status::Pending, Mode::Hosted, 5)
        );
        assert_eq!(p.metadata, Some(json!({"a": "b"})));
        assert_eq!(
            (p.generation, p.unsent, p.checks),
            (Generation::Current, false, 0)
        );
        assert!(decode(b"").is_err());
        assert!(
            decode(&[6, 0]).is_err(),
            "an unknown version is refused, not misread"
        );
        assert!(
            decode(&encode(&p)[..10]).is_err(),
            "a cut record is refused"
        );
        let mut longer = encode(&p);
        longer.push(0);
        assert!(
            decode(&longer).is_err(),
            "a record with bytes left over is refused"
        );
    }

    fn pinned() -> Payment {
        let mut p = payment();
        (p.id, p.merchant_id, p.reference) = ("p".into(), "m".into(), "r".into());
        p.status = Status::Refunded;
        p.mode = Mode::Hosted;
        p.generation = Generation::Legacy;
        p.metadata = Some(json!({"a": 1}));
        p.request_hash = "h".into();
        p.merchant_name = "S".into();
        (p.expires_at_ms, p.created_at_ms, p.updated_at_ms) = (3, 1, 2);
        (p.next_check_ms, p.sent_at_ms) = (Some(4), Some(5));
        p.customer = Some(Customer {
            phone: Some("+1".into()),
            first_name: None,
            last_name: None,
        });
        p
    }

    const V1_HEX: &str = "010170016d0474657374017208dc0b03584f4602424a0101066d746e2d626a0101022b3100000000\
             0001077b2261223a317d010573696d5f3100030102000000000168000100015301040000000105000107";

    fn hex(p: &Payment) -> String {
        hex::encode(encode(p))
    }

    fn bytes(hex: &str) -> Vec<u8> {
        (0..hex.len() / 2)
            .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
            .collect()
    }

    /// The bytes of one record in version 5. A change to `Payment` or to the
    /// order of an enum's variants changes them: then records already stored
    /// would be misread, so the change needs a new version (module docs).
    #[test]
    fn v5_layout_is_pinned() {
        let mut p = pinned();
        assert_eq!(hex(&p), format!("05{}0000000000", &V1_HEX[2..]));
        p.review = Some(Failure {
            code: "a".into(),
            message: "b".into(),
        });
        assert_eq!(hex(&p), format!("05{}010161016200000000", &V1_HEX[2..]));
        p.route = Some(Route {
            adapter: "m".into(),
            explanation: "{}".into(),
            tried: vec![TriedRoute {
                adapter: "p".into(),
                code: "c".into(),
                message: "d".into(),
            }],
        });
        p.resent = 2;
        p.base_url = Some("h".into());
        p.expected_fee = Some(300);
        assert_eq!(
            hex(&p),
            format!("05{}0101610162" /* review */, &V1_HEX[2..])
                + "01016d027b7d" // route: adapter, explanation
                + "01017001630164" // tried: one
                + "02" // resent
                + "010168" // base_url
                + "01ac02" // expected_fee: 300, a varint
        );
        assert_eq!(as_json(&decode(&encode(&p)).unwrap()), as_json(&p));
    }

    /// A summary says what the whole record says of those fields, in every
    /// stored form.
    #[test]
    fn a_summary_reads_the_fields_it_names_from_every_form() {
        let full = |p: &Payment| Summary {
            id: Cow::Owned(p.id.clone()),
            merchant_id: Cow::Owned(p.merchant_id.clone()),
            environment: Cow::Owned(p.environment.clone()),
            status: p.status,
            amount: p.amount,
            mode: p.mode,
            operator: p.operator.clone().map(Cow::Owned),
            created_at_ms: p.created_at_ms,
        };
        let mut p = pinned();
        p.route = Some(Route {
            adapter: "m".into(),
            explanation: "{}".into(),
            tried: Vec::new(),
        });
        let v1 = bytes(V1_HEX);
        for stored in [encode(&p), encode(&payment()), v1.clone()] {
            assert_eq!(summary(&stored).unwrap(), full(&decode(&stored).unwrap()));
        }
        assert_eq!(summary(&v1).unwrap().created_at_ms, 1);
        let mut bare = payment();
        (bare.operator, bare.customer, bare.metadata) = (None, None, None);
        assert_eq!(summary(&encode(&bare)).unwrap(), full(&bare));
        let json = br#"{"id":"p1","merchant_id":"m\u0031","environment":"live","reference":"r","status":"expired","amount":5,"currency":"XOF","country":"TG","mode":"hosted","metadata":{"a":"b"},"expires_at_ms":3,"created_at_ms":1,"updated_at_ms":2,"request_hash":"h"}"#;
        assert_eq!(summary(json).unwrap(), full(&decode(json).unwrap()));
        assert_eq!(summary(json).unwrap().merchant_id, "m1");
        assert!(summary(&encode(&p)[..12]).is_err() && summary(b"").is_err());
    }

    /// Records stored in versions 1 to 4 are read, without the fields they lack.
    #[test]
    fn v1_to_v4_records_are_read() {
        let v1 = bytes(V1_HEX);
        let p = decode(&v1).unwrap();
        assert_eq!(as_json(&p), as_json(&pinned()));
        assert_eq!((p.review, p.route), (None, None));
        assert!(decode(&v1[..v1.len() - 1]).is_err(), "a cut record");
        let v2 = bytes(&format!("02{}0101610162", &V1_HEX[2..]));
        let p = decode(&v2).unwrap();
        assert_eq!(p.review.map(|r| r.code), Some("a".to_string()));
        assert_eq!(p.route, None);
        let v3 = bytes(&format!("03{}000101610000", &V1_HEX[2..]));
        let p = decode(&v3).unwrap();
        assert_eq!(p.route.map(|r| r.adapter), Some("a".to_string()));
        assert_eq!((p.resent, p.base_url, p.expected_fee), (0, None, None));
        let v4 = bytes(&format!("04{}00000200", &V1_HEX[2..]));
        let p = decode(&v4).unwrap();
        assert_eq!((p.resent, p.base_url, p.expected_fee), (2, None, None));
    }
}
