//! A misbehaving operator adapter for isolation tests. It serves `mtn-bj`;
//! the phone's last four digits pick the misbehaviour at initiation:
//! 0101 panics, 0102 loops forever, 0103 allocates without bound,
//! 0104 returns a garbage PSP reference, 0105 a garbage redirect URL.
//! At `status`, what initiation answered picks it: 0106's payment panics,
//! 0107's loops forever, 0108's allocates without bound, 0109's is completed;
//! every other one is pending.

wit_bindgen::generate!({
    path: ["../../../wit/platform", "../../../wit/adapter"],
    world: "mmc:adapter/adapter",
    generate_all,
});

use exports::mmc::adapter::operator::Guest;
use mmc::adapter::types::*;

struct Rogue;

/// Runs until the host's deadline stops it.
fn spin() -> ! {
    let mut n = 0u64;
    loop {
        n = std::hint::black_box(n.wrapping_add(1));
    }
}

/// Allocates until the host's memory cap stops it.
fn hoard() -> ! {
    let mut hoard = Vec::new();
    loop {
        hoard.push(vec![7u8; 1 << 20]);
        std::hint::black_box(&hoard);
    }
}

fn unsupported<T>() -> Result<T, AdapterError> {
    Err(AdapterError::NotSupported("rogue adapter".into()))
}

impl Guest for Rogue {
    fn describe() -> Vec<OperatorInfo> {
        vec![OperatorInfo {
            slug: "mtn-bj".into(),
            name: "Rogue MTN".into(),
            aliases: vec![],
            country: "BJ".into(),
            currency: "XOF".into(),
            requires_otp: false,
            modes: vec!["direct".into()],
            min_amount: 100,
            max_amount: 2_000_000,
            status: "operational".into(),
            approval_window_ms: 0,
            status_per_second: 0,
        }]
    }

    fn initiate(req: InitiateRequest) -> Result<Initiated, AdapterError> {
        let phone = req.phone.unwrap_or_default();
        match &phone[phone.len().saturating_sub(4)..] {
            "0101" => panic!("rogue adapter panics"),
            "0102" => spin(),
            "0103" => hoard(),
            "0104" => Ok(Initiated::AwaitingCustomer("\u{0}".repeat(10_000))),
            "0105" => Ok(Initiated::Redirect(Redirect {
                psp_reference: "r1".into(),
                url: "javascript:alert(1)".into(),
            })),
            "0106" => Ok(Initiated::AwaitingCustomer("status-panics".into())),
            "0107" => Ok(Initiated::AwaitingCustomer("status-loops".into())),
            "0108" => Ok(Initiated::AwaitingCustomer("status-hoards".into())),
            "0109" => Ok(Initiated::AwaitingCustomer("status-completes".into())),
            _ => Ok(Initiated::AwaitingCustomer("rogue-ok".into())),
        }
    }

    fn confirm_otp(_: OperationRef, _: String) -> Result<OtpOutcome, AdapterError> {
        unsupported()
    }
    fn status(payment: OperationRef) -> Result<PspStatus, AdapterError> {
        match payment.psp_reference.as_deref().unwrap_or_default() {
            "status-panics" => panic!("rogue adapter panics at status"),
            "status-loops" => spin(),
            "status-hoards" => hoard(),
            "status-completes" => Ok(PspStatus::Completed(Settled {
                amount: payment.amount.to_string(),
                currency: payment.currency.clone(),
                party: None,
            })),
            _ => Ok(PspStatus::Pending),
        }
    }
    fn cancel(_: OperationRef) -> Result<PspStatus, AdapterError> {
        unsupported()
    }
    fn refund(_: RefundRequest) -> Result<Started, AdapterError> {
        unsupported()
    }
    fn refund_status(_: OperationRef) -> Result<PspStatus, AdapterError> {
        unsupported()
    }
    fn payout(_: PayoutRequest) -> Result<Started, AdapterError> {
        unsupported()
    }
    fn payout_status(_: OperationRef) -> Result<PspStatus, AdapterError> {
        unsupported()
    }
    /// This provider offers no prediction.
    fn predict(_phone: String) -> Result<Option<String>, AdapterError> {
        Ok(None)
    }

    fn parse_callback(_: Inbound) -> Result<Vec<CallbackUpdate>, AdapterError> {
        unsupported()
    }
}

export!(Rogue);
