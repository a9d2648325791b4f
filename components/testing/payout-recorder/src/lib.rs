//! A test adapter that makes payouts observable from outside the service:
//! `payout` POSTs `{payout_id, phone, amount}` to `<url>/payouts` (setting
//! `url`, a server the test runs) and reports the payout completed;
//! `payout-status` asks `GET <url>/payouts/<id>`: 200 → completed, 404 →
//! failed `payout_not_found` (the request never arrived). Every operator is
//! described, so a test can route a whole environment here.

wit_bindgen::generate!({
    path: ["../../../wit/platform", "../../../wit/adapter"],
    world: "mmc:adapter/adapter",
    generate_all,
});

use exports::mmc::adapter::operator::Guest;
use mmc::adapter::types::*;
use mmc::platform::{config, outbound_http};

struct Recorder;

fn url() -> Result<String, AdapterError> {
    config::get("url")
        .map(|u| u.trim_end_matches('/').to_string())
        .ok_or_else(|| AdapterError::Rejected("setting `url` is missing".into()))
}

fn send(method: &str, url: String, body: Vec<u8>) -> Result<u16, AdapterError> {
    outbound_http::send(&outbound_http::Request {
        method: method.into(),
        url,
        headers: vec![("content-type".into(), "application/json".into())],
        body,
        timeout_ms: 5_000,
    })
    .map(|r| r.status)
    .map_err(|e| AdapterError::Unavailable(format!("{e:?}")))
}

fn not_supported<T>(what: &str) -> Result<T, AdapterError> {
    Err(AdapterError::NotSupported(format!(
        "the payout recorder does no {what}"
    )))
}

impl Guest for Recorder {
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
                modes: vec!["direct".into()],
                min_amount: op.min_amount,
                max_amount: op.max_amount,
                status: "operational".into(),
                approval_window_ms: 0,
                status_per_second: 0,
            })
            .collect()
    }

    fn initiate(_req: InitiateRequest) -> Result<Initiated, AdapterError> {
        not_supported("collections")
    }

    fn confirm_otp(_p: OperationRef, _otp: String) -> Result<OtpOutcome, AdapterError> {
        not_supported("collections")
    }

    fn status(_p: OperationRef) -> Result<PspStatus, AdapterError> {
        not_supported("collections")
    }

    fn cancel(_p: OperationRef) -> Result<PspStatus, AdapterError> {
        not_supported("collections")
    }

    fn refund(_req: RefundRequest) -> Result<Started, AdapterError> {
        not_supported("refunds")
    }

    fn refund_status(_r: OperationRef) -> Result<PspStatus, AdapterError> {
        not_supported("refunds")
    }

    fn payout(req: PayoutRequest) -> Result<Started, AdapterError> {
        let body = serde_json::json!({
            "payout_id": req.payout_id,
            "phone": req.phone,
            "amount": req.amount,
        });
        match send(
            "POST",
            format!("{}/payouts", url()?),
            serde_json::to_vec(&body).expect("JSON values serialise"),
        )? {
            200..=299 => Ok(Started {
                psp_reference: format!("rec-{}", req.payout_id),
                status: PspStatus::Completed(Settled {
                    amount: req.amount.to_string(),
                    currency: req.currency.clone(),
                    party: Some(req.phone.clone()),
                }),
            }),
            s => Err(AdapterError::Unavailable(format!("recorder answered {s}"))),
        }
    }

    fn payout_status(payout: OperationRef) -> Result<PspStatus, AdapterError> {
        match send(
            "GET",
            format!("{}/payouts/{}", url()?, payout.id),
            Vec::new(),
        )? {
            200..=299 => Ok(PspStatus::Completed(Settled {
                amount: payout.amount.to_string(),
                currency: payout.currency.clone(),
                party: payout.phone.clone(),
            })),
            404 => Ok(PspStatus::Failed(Failure {
                code: "payout_not_found".into(),
                message: "The operator never received this payout.".into(),
            })),
            s => Err(AdapterError::Unavailable(format!("recorder answered {s}"))),
        }
    }

    /// This provider offers no prediction.
    fn predict(_phone: String) -> Result<Option<String>, AdapterError> {
        Ok(None)
    }

    fn parse_callback(_req: Inbound) -> Result<Vec<CallbackUpdate>, AdapterError> {
        not_supported("callbacks")
    }
}

export!(Recorder);
