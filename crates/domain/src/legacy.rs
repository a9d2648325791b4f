//! The legacy generation's view of a payment, written once and used by both
//! the legacy facade (responses) and collect (legacy events).

use serde_json::{Value, json};

/// Uppercase legacy status: `EXPIRED` shows as `CANCELLED`, `REFUNDED` as
/// `COMPLETED`, and a hosted payment waiting for the customer as `PENDING`.
pub fn status(current: &str) -> &'static str {
    match current {
        "processing" => "PROCESSING",
        "awaiting_otp" => "AWAITING_OTP",
        "completed" | "refunded" => "COMPLETED",
        "failed" => "FAILED",
        "cancelled" | "expired" => "CANCELLED",
        _ => "PENDING",
    }
}

/// Legacy event name for a current event type, if the legacy generation has one.
pub fn event_type(current: &str) -> Option<&'static str> {
    Some(match current {
        "collect.payment.created" => "collect.initiated",
        "collect.payment.processing" | "collect.payment.awaiting_otp" => "collect.updated",
        "collect.payment.completed" => "collect.completed",
        "collect.payment.failed" => "collect.failed",
        "collect.payment.cancelled" | "collect.payment.expired" => "collect.cancelled",
        _ => return None,
    })
}

pub struct Collection<'a> {
    pub id: &'a str,
    pub reference: &'a str,
    pub status: &'a str,
    /// Major units; the legacy body carries hundredths.
    pub amount: u64,
    pub currency: &'a str,
    pub country: &'a str,
    pub operator: Option<&'a str>,
    pub phone: Option<&'a str>,
    pub psp_reference: Option<&'a str>,
    pub failure_message: Option<&'a str>,
}

fn message(status: &str, failure: Option<&str>) -> String {
    match status {
        "AWAITING_OTP" => {
            "OTP sent to the customer; confirm it with POST /collect/mobile-money/confirm/.".into()
        }
        "PROCESSING" => "Waiting for the customer to approve the payment on their phone.".into(),
        "COMPLETED" => "Payment completed.".into(),
        "FAILED" => failure
            .map(str::to_string)
            .unwrap_or_else(|| "Payment failed.".into()),
        "CANCELLED" => "Payment cancelled or expired.".into(),
        _ => "Payment initiated.".into(),
    }
}

/// The legacy Collection object.
pub fn collection_json(c: &Collection<'_>, replay: bool) -> Value {
    let s = status(c.status);
    let mut v = json!({
        "id": c.id,
        "reference": c.reference,
        "status": s,
        "amount": c.amount * 100,
        "currency": c.currency,
        "country": c.country,
        "operator": c.operator.unwrap_or_default(),
        "phone": c.phone.unwrap_or_default(),
        "psp_reference": c.psp_reference.unwrap_or_default(),
        "message": message(s, c.failure_message),
        "idempotent_replay": replay,
    });
    if s == "AWAITING_OTP" {
        v["next_action"] = json!("confirm");
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_fold_as_designed() {
        assert_eq!(status("expired"), "CANCELLED");
        assert_eq!(status("refunded"), "COMPLETED");
        assert_eq!(status("awaiting_payment"), "PENDING");
        assert_eq!(
            event_type("collect.payment.expired"),
            Some("collect.cancelled")
        );
        assert_eq!(event_type("collect.refund.completed"), None);
    }

    #[test]
    fn otp_collections_carry_next_action_confirm() {
        let c = Collection {
            id: "i",
            reference: "r",
            status: "awaiting_otp",
            amount: 150,
            currency: "XOF",
            country: "BJ",
            operator: Some("coris-bj"),
            phone: Some("+2290166000001"),
            psp_reference: None,
            failure_message: None,
        };
        let v = collection_json(&c, false);
        assert_eq!(v["amount"], 15000);
        assert_eq!(v["status"], "AWAITING_OTP");
        assert_eq!(v["next_action"], "confirm");
    }
}
