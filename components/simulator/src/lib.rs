//! The test environment's operators. Stateless: the outcome is decided by the
//! last four digits of the phone, and the PSP reference carries those digits
//! and the initiation time, so `status` needs no memory.
//!
//! | phone ends | outcome |
//! |---|---|
//! | 0001 | completes |
//! | 0002 | fails: insufficient funds |
//! | 0003 | fails: declined by the customer |
//! | 0004 | stays in progress until expiry |
//! | 0005 | operator error at initiation |
//! | 0006 | accepted, its status never readable |
//! | 0007 0008 0009 0011 0012 | completes; its books differ from ours ([`books`]) |
//! | 0010 | fails; its books say it moved ([`books`]) |
//! | 0013 | fails; its books, and its status asked again later, say it moved |
//! | other | completes after `completion_delay_ms` (default 2000) |
//!
//! OTP (coris-bj): `123456` is right.

wit_bindgen::generate!({
    path: ["../../wit/platform", "../../wit/adapter"],
    world: "mmc:adapter/simulated-provider",
    generate_all,
});

mod books;

use exports::mmc::adapter::operator::Guest;
use mmc::adapter::types::*;
use mmc::platform::{clock, config};

pub const TEST_OTP: &str = "123456";

pub struct Simulator;

fn failure(code: &str, message: &str) -> Failure {
    Failure {
        code: code.into(),
        message: message.into(),
    }
}

fn last4(phone: Option<&str>) -> String {
    let digits: String = phone
        .unwrap_or_default()
        .chars()
        .filter(|c| c.is_ascii_digit())
        .collect();
    digits[digits.len().saturating_sub(4)..].to_string()
}

fn delay_ms() -> u64 {
    config::get("completion_delay_ms")
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000)
}

/// How long test number `0013` says failed before its status says it moved.
fn late_success_ms() -> u64 {
    config::get("late_success_ms")
        .and_then(|v| v.parse().ok())
        .unwrap_or(5000)
}

/// `sim-<last4>-<initiated ms>-<our id>`.
fn psp_reference(prefix: &str, phone: Option<&str>, id: &str) -> String {
    format!("{prefix}-{}-{}-{id}", last4(phone), clock::now_ms())
}

fn parse_reference(r: &str) -> Option<(String, u64)> {
    let mut parts = r.splitn(4, '-');
    let _prefix = parts.next()?;
    let digits = parts.next()?.to_string();
    let at = parts.next()?.parse().ok()?;
    Some((digits, at))
}

/// What the simulated operator moved: what it was asked (it is the operator).
fn settled(amount: u64, currency: &str, party: Option<&str>) -> Settled {
    Settled {
        amount: amount.to_string(),
        currency: currency.into(),
        party: party.map(|p| p.chars().filter(char::is_ascii_digit).collect()),
    }
}

/// What the simulated operator says about an operation started at `at`,
/// `paid` being what it moved when it succeeds.
fn outcome(digits: &str, at: u64, paid: Settled) -> PspStatus {
    match digits {
        "0001" | "0007" | "0008" | "0009" | "0011" | "0012" => PspStatus::Completed(paid),
        "0002" | "0010" => PspStatus::Failed(failure(
            "insufficient_funds",
            "The customer's balance is too low.",
        )),
        // An operator that changes its mind: failed when first asked, moved
        // when asked again later (set right by reconciliation).
        "0013" if clock::now_ms() < at + late_success_ms() => PspStatus::Failed(failure(
            "insufficient_funds",
            "The customer's balance is too low.",
        )),
        "0013" => PspStatus::Completed(paid),
        "0003" => PspStatus::Failed(failure(
            "declined_by_customer",
            "The customer declined the payment.",
        )),
        "0004" | UNREADABLE => PspStatus::Pending,
        _ if clock::now_ms() >= at + delay_ms() => PspStatus::Completed(paid),
        _ => PspStatus::Pending,
    }
}

/// The test number whose status can never be read: every status query
/// fails, as an operator's does while it is down.
const UNREADABLE: &str = "0006";

/// What the simulated provider will have executed for a request to pay,
/// and when: journaled now, while the request is in hand.
fn journal_collection(req: &InitiateRequest, digits: &str, reference: &str) {
    let at = parse_reference(reference)
        .map(|(_, at)| at)
        .unwrap_or_default();
    let paid = settled(req.amount, &req.currency, None);
    let executes_at = match outcome(digits, at, paid) {
        PspStatus::Completed(_) => Some(at),
        PspStatus::Pending if !matches!(digits, "0004" | UNREADABLE) => Some(at + delay_ms()),
        // Failed here, executed in its books: a late arrival.
        _ if matches!(digits, "0010" | "0013") => Some(at),
        _ => None,
    };
    if let Some(x) = executes_at {
        let amount = (req.amount, req.currency.as_str());
        books::executed("collection", &req.payment_id, amount, digits, x);
    }
}

fn status_of(op: &OperationRef) -> Result<PspStatus, AdapterError> {
    let r = op
        .psp_reference
        .as_deref()
        .ok_or_else(|| AdapterError::Rejected("no psp reference".into()))?;
    let (digits, at) = parse_reference(r)
        .ok_or_else(|| AdapterError::Rejected(format!("unknown psp reference {r}")))?;
    if digits == UNREADABLE {
        return Err(AdapterError::Unavailable(
            "simulated operator: its status cannot be read (test number ending 0006)".into(),
        ));
    }
    Ok(outcome(
        &digits,
        at,
        settled(op.amount, &op.currency, op.phone.as_deref()),
    ))
}

impl Guest for Simulator {
    fn describe() -> Vec<OperatorInfo> {
        mmc_domain::OPERATORS
            .iter()
            .map(|op| OperatorInfo {
                slug: op.slug.into(),
                name: op.name.into(),
                aliases: op.aliases.iter().map(|a| a.to_string()).collect(),
                country: op.country.code().into(),
                currency: op.currency().into(),
                requires_otp: op.requires_otp,
                modes: vec!["direct".into(), "hosted".into()],
                min_amount: op.min_amount,
                max_amount: op.max_amount,
                status: "operational".into(),
                // The simulator withdraws any pending request on cancel.
                approval_window_ms: 0,
                status_per_second: 0,
            })
            .collect()
    }

    fn initiate(req: InitiateRequest) -> Result<Initiated, AdapterError> {
        let digits = last4(req.phone.as_deref());
        if digits == "0005" {
            // An explicit refusal: a simulated error we know performed nothing.
            return Err(AdapterError::Rejected(
                "simulated operator error (test number ending 0005)".into(),
            ));
        }
        let reference = psp_reference("sim", req.phone.as_deref(), &req.payment_id);
        journal_collection(&req, &digits, &reference);
        let requires_otp =
            mmc_domain::operators::find(&req.operator).is_some_and(|o| o.requires_otp);
        Ok(if requires_otp {
            Initiated::OtpRequired(reference)
        } else {
            Initiated::AwaitingCustomer(reference)
        })
    }

    fn confirm_otp(payment: OperationRef, otp: String) -> Result<OtpOutcome, AdapterError> {
        if otp != TEST_OTP {
            return Ok(OtpOutcome::WrongCode);
        }
        Ok(OtpOutcome::Accepted(status_of(&payment)?))
    }

    fn status(payment: OperationRef) -> Result<PspStatus, AdapterError> {
        status_of(&payment)
    }

    fn cancel(payment: OperationRef) -> Result<PspStatus, AdapterError> {
        Ok(match status_of(&payment)? {
            PspStatus::Completed(paid) => PspStatus::Completed(paid),
            PspStatus::Failed(f) => PspStatus::Failed(f),
            PspStatus::Pending | PspStatus::NotFound => {
                books::withdrawn(&payment.id);
                PspStatus::Failed(failure("cancelled", "Cancelled at the merchant's request."))
            }
        })
    }

    fn refund(req: RefundRequest) -> Result<Started, AdapterError> {
        let reference = psp_reference("simrf", req.payment.phone.as_deref(), &req.refund_id);
        let amount = (req.amount, req.payment.currency.as_str());
        books::executed("refund", &req.refund_id, amount, "", clock::now_ms());
        Ok(Started {
            psp_reference: reference,
            status: PspStatus::Completed(settled(req.amount, &req.payment.currency, None)),
        })
    }

    fn refund_status(refund: OperationRef) -> Result<PspStatus, AdapterError> {
        Ok(PspStatus::Completed(settled(
            refund.amount,
            &refund.currency,
            None,
        )))
    }

    fn payout(req: PayoutRequest) -> Result<Started, AdapterError> {
        let digits = last4(Some(&req.phone));
        if digits == "0005" {
            // An explicit refusal: a simulated error we know performed nothing.
            return Err(AdapterError::Rejected(
                "simulated operator error (test number ending 0005)".into(),
            ));
        }
        let reference = psp_reference("simpo", Some(&req.phone), &req.payout_id);
        let (_, at) = parse_reference(&reference).unwrap_or_default();
        // A payout is not waited on by a customer: settle at once except for the failing numbers.
        let paid = settled(req.amount, &req.currency, Some(&req.phone));
        let status = match outcome(&digits, at, paid.clone()) {
            PspStatus::Pending if digits != "0004" && digits != UNREADABLE => {
                PspStatus::Completed(paid)
            }
            s => s,
        };
        if matches!(status, PspStatus::Completed(_)) || matches!(digits.as_str(), "0010" | "0013") {
            let amount = (req.amount, req.currency.as_str());
            books::executed("payout", &req.payout_id, amount, &digits, at);
        }
        Ok(Started {
            psp_reference: reference,
            status,
        })
    }

    fn payout_status(payout: OperationRef) -> Result<PspStatus, AdapterError> {
        status_of(&payout)
    }

    /// This provider offers no prediction.
    fn predict(_phone: String) -> Result<Option<String>, AdapterError> {
        Ok(None)
    }

    fn parse_callback(_req: Inbound) -> Result<Vec<CallbackUpdate>, AdapterError> {
        Err(AdapterError::NotSupported(
            "the simulator sends no callbacks".into(),
        ))
    }
}

export!(Simulator);
