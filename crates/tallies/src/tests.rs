//! What events change in the tallies, round by round, over payloads stored
//! as `collect` stores them; and that counting the final records gives the
//! same rows.

use std::collections::HashMap;

use mmc_domain::event::{Head, compact};
use mmc_domain::record::{self, Payment};
use mmc_domain::{Mode, Status};
use serde_json::json;

use super::rebuild::count;
use super::*;

/// A day, in days since 1970-01-01, and the one before.
const DAY: i64 = 20_605;
const OTHER_DAY: i64 = 20_604;

fn payment(id: &str, mode: Mode, operator: Option<&str>, amount: u64) -> Payment {
    serde_json::from_value(json!({
        "id": id, "merchant_id": "m1", "environment": "test", "reference": id,
        "status": "pending", "amount": amount, "currency": "XOF", "country": "BJ",
        "mode": mode, "operator": operator, "expires_at_ms": 0u64,
        "created_at_ms": DAY as u64 * DAY_MS + 3_600_000, "updated_at_ms": 0u64,
        "request_hash": "h",
    }))
    .unwrap()
}

/// The tables, as rounds leave them.
#[derive(Default)]
struct Tables {
    rows: HashMap<Key, Counts>,
    hosted: HashMap<String, String>,
}

impl Tables {
    /// One dispatch round over events stored in their compact form.
    fn round(&mut self, events: &[(&str, &Payment)]) {
        let stored: Vec<(String, Vec<u8>, String)> = events
            .iter()
            .map(|(t, p)| (t.to_string(), payload(t, p), p.id.clone()))
            .collect();
        self.round_of(&stored);
    }

    fn round_of(&mut self, events: &[(String, Vec<u8>, String)]) {
        let mut round = Round::default();
        for (event_type, payload, id) in events {
            if let Some(f) = fact(event_type, (id, "m1", "test"), payload) {
                round
                    .add(&f, |id| Ok::<_, ()>(self.hosted.get(id).cloned()))
                    .unwrap();
            }
        }
        for (k, by) in round.rows {
            self.rows.entry(k).or_default().add(&by);
        }
        for (id, row) in round.hosted {
            match row {
                Some(op) => self.hosted.insert(id, op),
                None => self.hosted.remove(&id),
            };
        }
    }

    /// (payments, succeeded, finished, volume) of an operator's row on `DAY`.
    fn of(&self, operator: &str) -> (i64, i64, i64, i64) {
        let c = self
            .rows
            .get(&key(DAY, operator))
            .copied()
            .unwrap_or_default();
        (c.payments, c.succeeded, c.finished, c.volume)
    }

    /// The rows with something in them.
    fn nonzero(&self) -> HashMap<Key, Counts> {
        self.rows
            .iter()
            .filter(|(_, c)| !c.is_zero())
            .map(|(k, c)| (k.clone(), *c))
            .collect()
    }
}

fn key(day: i64, operator: &str) -> Key {
    Key {
        merchant_id: "m1".into(),
        environment: "test".into(),
        day,
        operator: operator.into(),
    }
}

fn payload(event_type: &str, p: &Payment) -> Vec<u8> {
    let head = Head {
        id: format!("evt_{}", p.id),
        created: 1,
        event_type: event_type.into(),
        api_version: "2026-01-01".into(),
    };
    compact(&head, p)
}

fn with(p: &Payment, status: Status) -> Payment {
    let mut p = p.clone();
    p.status = status;
    p
}

#[test]
fn a_direct_payment_counts_once_created_and_once_more_when_it_ends() {
    let mut t = Tables::default();
    let p = payment("p1", Mode::Direct, Some("mtn-bj"), 1000);
    t.round(&[("collect.payment.created", &p)]);
    assert_eq!(
        t.of("mtn-bj"),
        (1, 0, 0, 0),
        "in progress: counted, no outcome"
    );
    t.round(&[
        ("collect.payment.processing", &with(&p, Status::Processing)),
        ("collect.payment.completed", &with(&p, Status::Completed)),
    ]);
    assert_eq!(t.of("mtn-bj"), (1, 1, 1, 1000));
    assert!(t.hosted.is_empty(), "nothing remembered of direct payments");
}

#[test]
fn failed_and_expired_payments_finish_unpaid_and_cancelled_ones_finish_neither() {
    let mut t = Tables::default();
    for (id, last, status) in [
        ("f", "collect.payment.failed", Status::Failed),
        ("e", "collect.payment.expired", Status::Expired),
        ("c", "collect.payment.cancelled", Status::Cancelled),
    ] {
        let p = payment(id, Mode::Direct, Some("moov-bj"), 500);
        t.round(&[("collect.payment.created", &p), (last, &with(&p, status))]);
    }
    assert_eq!(t.of("moov-bj"), (3, 0, 2, 0));
    assert_eq!(t.of("moov-bj").0, 3);
}

#[test]
fn a_refund_after_completion_and_repeated_news_change_nothing() {
    let mut t = Tables::default();
    let p = payment("p1", Mode::Direct, Some("mtn-bj"), 1000);
    t.round(&[
        ("collect.payment.created", &p),
        ("collect.payment.processing", &with(&p, Status::Processing)),
        (
            "collect.payment.review_required",
            &with(&p, Status::Processing),
        ),
        (
            "collect.payment.awaiting_otp",
            &with(&p, Status::AwaitingOtp),
        ),
        ("collect.payment.processing", &with(&p, Status::Processing)),
        ("collect.payment.completed", &with(&p, Status::Completed)),
    ]);
    let done = t.of("mtn-bj");
    assert_eq!(done, (1, 1, 1, 1000));
    // A refund: its payment event, the refund's own (JSON, the payment in it), a review.
    let refund = serde_json::to_vec(&json!({
        "api_version": "2026-01-01", "type": "collect.refund.completed",
        "data": {"object": {"status": "completed", "amount": 1000, "mode": "direct",
                            "operator": "mtn-bj", "created_at": "2026-06-01T01:00:00.000Z"},
                 "refund": {"amount": 400}}
    }))
    .unwrap();
    t.round_of(&[("collect.refund.completed".into(), refund, "p1".into())]);
    t.round(&[
        ("collect.payment.refunded", &with(&p, Status::Refunded)),
        (
            "collect.payment.review_required",
            &with(&p, Status::Refunded),
        ),
    ]);
    assert_eq!(t.of("mtn-bj"), done, "a refunded payment was paid");
}

#[test]
fn a_late_success_turns_an_ended_payment_into_a_paid_one_once() {
    let mut t = Tables::default();
    for (id, ended, status) in [
        ("f", "collect.payment.failed", Status::Failed),
        ("e", "collect.payment.expired", Status::Expired),
        ("c", "collect.payment.cancelled", Status::Cancelled),
    ] {
        let p = payment(id, Mode::Direct, Some("mtn-bj"), 100);
        t.round(&[("collect.payment.created", &p), (ended, &with(&p, status))]);
        let mut late = with(&p, Status::Completed);
        late.late_success_from = Some(status);
        t.round(&[("collect.payment.completed", &late)]);
    }
    assert_eq!(t.of("mtn-bj"), (3, 3, 3, 300));
}

#[test]
fn a_hosted_payment_counts_as_not_chosen_until_an_event_names_the_customers_choice() {
    let mut t = Tables::default();
    let p = payment("h1", Mode::Hosted, None, 2000);
    t.round(&[
        ("collect.payment.created", &p),
        (
            "collect.payment.awaiting_payment",
            &with(&p, Status::AwaitingPayment),
        ),
    ]);
    assert_eq!(t.of(NOT_CHOSEN), (1, 0, 0, 0));
    assert_eq!(t.hosted["h1"], NOT_CHOSEN);
    // The customer picks Moov: the next event names it; it moves there once.
    let mut chosen = with(&p, Status::AwaitingOtp);
    chosen.operator = Some("moov-bj".into());
    t.round(&[("collect.payment.awaiting_otp", &chosen)]);
    assert_eq!(
        (t.of(NOT_CHOSEN), t.of("moov-bj")),
        ((0, 0, 0, 0), (1, 0, 0, 0))
    );
    t.round(&[
        (
            "collect.payment.processing",
            &with(&chosen, Status::Processing),
        ),
        (
            "collect.payment.completed",
            &with(&chosen, Status::Completed),
        ),
    ]);
    assert_eq!(
        (t.of(NOT_CHOSEN), t.of("moov-bj")),
        ((0, 0, 0, 0), (1, 1, 1, 2000))
    );
    assert!(t.hosted.is_empty(), "forgotten once it ended");
    t.round(&[("collect.payment.refunded", &with(&chosen, Status::Refunded))]);
    assert_eq!(t.of("moov-bj"), (1, 1, 1, 2000));

    // Chosen and ended in the round it was created in; and one never chosen, expired.
    let q = payment("h2", Mode::Hosted, None, 300);
    let mut failed = with(&q, Status::Failed);
    failed.operator = Some("mtn-bj".into());
    let r = payment("h3", Mode::Hosted, None, 50);
    t.round(&[
        ("collect.payment.created", &q),
        ("collect.payment.created", &r),
        ("collect.payment.failed", &failed),
    ]);
    t.round(&[("collect.payment.expired", &with(&r, Status::Expired))]);
    assert_eq!(t.of("mtn-bj"), (1, 0, 1, 0));
    assert_eq!(t.of(NOT_CHOSEN), (1, 0, 1, 0));
    assert!(t.hosted.is_empty());
}

#[test]
fn a_hosted_payment_whose_merchant_named_the_operator_counts_there_from_the_start() {
    let mut t = Tables::default();
    let p = payment("h1", Mode::Hosted, Some("wave-sn"), 700);
    t.round(&[("collect.payment.created", &p)]);
    t.round(&[("collect.payment.completed", &with(&p, Status::Completed))]);
    assert_eq!(t.of("wave-sn"), (1, 1, 1, 700));
    assert_eq!(t.of(NOT_CHOSEN), (0, 0, 0, 0));
}

#[test]
fn legacy_event_names_count_as_their_current_ones() {
    let mut t = Tables::default();
    let legacy = |id: &str| {
        let mut p = payment(id, Mode::Direct, Some("mtn-bj"), 100);
        p.generation = record::Generation::Legacy;
        p
    };
    let (a, b, c, d) = (legacy("a"), legacy("b"), legacy("c"), legacy("d"));
    t.round(&[
        ("collect.initiated", &a),
        ("collect.initiated", &b),
        ("collect.initiated", &c),
        ("collect.initiated", &d),
        ("collect.updated", &with(&a, Status::Processing)),
        ("collect.completed", &with(&a, Status::Completed)),
        ("collect.failed", &with(&b, Status::Failed)),
        // One legacy name for both: the record says which.
        ("collect.cancelled", &with(&c, Status::Expired)),
        ("collect.cancelled", &with(&d, Status::Cancelled)),
    ]);
    assert_eq!(t.of("mtn-bj"), (4, 1, 3, 100));
}

#[test]
fn a_current_body_stored_as_json_counts_and_a_legacy_one_does_not() {
    let body = |api_version: &str, status: &str, amount: u64| {
        serde_json::to_vec(&json!({
            "api_version": api_version,
            "data": {"object": {"status": status, "amount": amount, "mode": "direct",
                                "operator": "mtn-bj", "created_at": "2026-05-31T23:59:59.999Z"}}
        }))
        .unwrap()
    };
    let f = fact(
        "collect.payment.completed",
        ("p1", "m1", "test"),
        &body("2026-01-01", "completed", 900),
    )
    .unwrap();
    assert_eq!(
        (f.day, f.status, f.amount),
        (OTHER_DAY, Status::Completed, 900)
    );
    assert_eq!((f.hosted, f.operator.as_deref()), (false, Some("mtn-bj")));
    let legacy = body("legacy", "COMPLETED", 90000);
    assert_eq!(
        fact("collect.completed", ("p1", "m1", "test"), &legacy),
        None
    );
    assert_eq!(
        fact(
            "collect.payment.completed",
            ("p1", "m1", "test"),
            b"\x01\x02"
        ),
        None
    );
    assert_eq!(
        fact("bulk.batch.completed", ("b1", "m1", "test"), b"{}"),
        None
    );
}

#[test]
fn counting_the_records_gives_the_rows_their_events_gave() {
    let mut t = Tables::default();
    let mut finals = Vec::new();
    let direct = payment("d", Mode::Direct, Some("mtn-bj"), 1000);
    t.round(&[
        ("collect.payment.created", &direct),
        (
            "collect.payment.completed",
            &with(&direct, Status::Completed),
        ),
    ]);
    finals.push(with(&direct, Status::Refunded));
    t.round(&[("collect.payment.refunded", &finals[0])]);
    let mut late = payment("l", Mode::Direct, Some("moov-bj"), 40);
    late.created_at_ms -= DAY_MS;
    t.round(&[
        ("collect.payment.created", &late),
        ("collect.payment.expired", &with(&late, Status::Expired)),
    ]);
    let mut paid = with(&late, Status::Completed);
    paid.late_success_from = Some(Status::Expired);
    t.round(&[("collect.payment.completed", &paid)]);
    finals.push(paid);
    let waiting = payment("w", Mode::Hosted, None, 5);
    t.round(&[("collect.payment.created", &waiting)]);
    finals.push(with(&waiting, Status::AwaitingPayment));
    let mut chose = with(&payment("x", Mode::Hosted, None, 7), Status::Processing);
    t.round(&[(
        "collect.payment.created",
        &payment("x", Mode::Hosted, None, 7),
    )]);
    chose.operator = Some("mtn-bj".into());
    t.round(&[("collect.payment.processing", &chose)]);
    finals.push(chose);
    let cancelled = payment("c", Mode::Direct, Some("mtn-bj"), 9);
    t.round(&[
        ("collect.payment.created", &cancelled),
        (
            "collect.payment.cancelled",
            &with(&cancelled, Status::Cancelled),
        ),
    ]);
    finals.push(with(&cancelled, Status::Cancelled));

    let mut rebuilt = Round::default();
    for p in &finals {
        assert!(count(&mut rebuilt, &record::encode(p)));
    }
    assert!(!count(&mut rebuilt, b"not a record"));
    let rows: HashMap<Key, Counts> = rebuilt
        .rows
        .into_iter()
        .filter(|(_, c)| !c.is_zero())
        .collect();
    assert_eq!(rows, t.nonzero());
    assert_eq!(
        t.rows[&key(OTHER_DAY, "moov-bj")],
        Counts {
            payments: 1,
            succeeded: 1,
            finished: 1,
            volume: 40
        }
    );
    let remembered: HashMap<String, String> = rebuilt
        .hosted
        .into_iter()
        .map(|(id, op)| (id, op.unwrap()))
        .collect();
    assert_eq!(remembered, t.hosted);
}
