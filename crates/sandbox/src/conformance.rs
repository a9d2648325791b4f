//! The adapter conformance kit (`mmc adapters test FILE`): the adapter
//! contract, checked on a component alone in the sandbox (scripted HTTP, fake
//! clock). What a platform team runs before deploying an adapter.

use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::{Sandbox, adapter_config};
use mmc_config::ComponentConfig;
use mmc_runtime::bindings::CapabilityError;
use mmc_runtime::bindings::adapter_types::*;
use mmc_runtime::bindings::host::mmc::platform::outbound_http::Response;
use mmc_runtime::{CallError, Kind};

#[derive(Debug, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub passed: bool,
    pub detail: String,
}

const NAME: &str = "candidate";
const OPERATOR_HOST: &str = "operator.test";

/// Settings and secrets given to the adapter under test (`--setting`, `--secret`).
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    pub settings: Vec<(String, String)>,
    pub secrets: Vec<(String, String)>,
}

fn sandbox(cache_dir: &Path, allowed: bool, inputs: &Inputs) -> anyhow::Result<Sandbox> {
    let mut component = ComponentConfig::default();
    if allowed {
        component.allowed_hosts = vec![OPERATOR_HOST.into()];
    }
    for key in ["base_url", "callback_base_url"] {
        component
            .settings
            .insert(key.into(), format!("https://{OPERATOR_HOST}"));
    }
    for key in [
        "api_key",
        "api_user",
        "subscription_key",
        "token",
        "webhook_secret",
        "secret",
    ] {
        component
            .secrets
            .insert(key.into(), "conformance-secret".into());
    }
    component.settings.extend(inputs.settings.iter().cloned());
    component.secrets.extend(inputs.secrets.iter().cloned());
    let mut config = adapter_config(NAME, "test", component);
    config
        .routing
        .insert("live".into(), [("*".to_string(), NAME.into())].into());
    config.cache_dir = Some(cache_dir.to_path_buf());
    config.limits.adapter_deadline_ms = 5_000;
    Sandbox::new(&config)
}

fn initiate_request(op: &OperatorInfo) -> InitiateRequest {
    let phone = match op.country.as_str() {
        "BJ" => "+2290166000001",
        "TG" => "+22890000001",
        _ => "+2250700000001",
    };
    InitiateRequest {
        payment_id: "3f6c1a52-8d0e-4c1e-9a57-3f4f2c8b9d10".into(),
        reference: "conformance-1".into(),
        operator: op.slug.clone(),
        environment: "live".into(),
        amount: 1500,
        currency: "XOF".into(),
        country: op.country.clone(),
        phone: Some(phone.into()),
        mode: "direct".into(),
        description: None,
        callback_url: "https://merchant.test/api/v1/psp/x/callback".into(),
        return_url: Some("https://merchant.test/checkout/x".into()),
    }
}

fn op_ref(op: &OperatorInfo) -> OperationRef {
    OperationRef {
        id: "3f6c1a52-8d0e-4c1e-9a57-3f4f2c8b9d10".into(),
        operator: op.slug.clone(),
        environment: "live".into(),
        psp_reference: Some("psp-ref-1".into()),
        phone: Some("+2290166000001".into()),
        amount: 1500,
        currency: "XOF".into(),
    }
}

fn trapped(e: &CallError) -> String {
    format!("the adapter failed instead of returning an error value: {e}")
}

/// Runs the suite on `file`.
pub fn run(file: &Path, cache_dir: &Path, inputs: &Inputs) -> anyhow::Result<Vec<Check>> {
    let bytes = std::fs::read(file)?;
    let mut checks = Vec::new();
    let mut check = |name: &'static str, result: Result<String, String>| {
        let (passed, detail) = match result {
            Ok(d) => (true, d),
            Err(d) => (false, d),
        };
        checks.push(Check {
            name,
            passed,
            detail,
        });
    };

    let sb = sandbox(cache_dir, true, inputs)?;
    let loaded = match sb.runtime.prepare(NAME, &bytes) {
        Ok(l) if l.kind == Kind::Adapter => l,
        Ok(_) => {
            check(
                "loads",
                Err("the component does not export mmc:adapter/operator".into()),
            );
            return Ok(checks);
        }
        Err(e) => {
            check("loads", Err(e.to_string()));
            return Ok(checks);
        }
    };
    check(
        "loads",
        Ok("compiles and links against the adapter world only".into()),
    );
    let ops = loaded.operators.clone();
    sb.runtime.install(loaded);

    check(
        "describe",
        (|| {
            if ops.is_empty() {
                return Err("describe returned no operator".to_string());
            }
            for op in &ops {
                let known = mmc_domain::operators::find(&op.slug).filter(|k| k.slug == op.slug);
                let Some(known) = known else {
                    return Err(format!("{} is not a known operator slug", op.slug));
                };
                if known.country.code() != op.country || op.currency != "XOF" {
                    return Err(format!(
                        "{} is in {} ({}), not {} ({})",
                        op.slug,
                        known.country.code(),
                        "XOF",
                        op.country,
                        op.currency
                    ));
                }
                // `requires_otp` is not checked against the operator table:
                // whether a payment takes a one-time code is the provider's
                // fact (pawaPay's PREAUTH providers, FedaPay's page for Coris).
                if op.min_amount > op.max_amount
                    || op.modes.is_empty()
                    || op.modes.iter().any(|m| m != "direct" && m != "hosted")
                {
                    return Err(format!("{}: inconsistent limits or modes", op.slug));
                }
            }
            Ok(format!(
                "{} operator(s): {}",
                ops.len(),
                ops.iter()
                    .map(|o| o.slug.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })(),
    );
    let Some(op) = ops.first().cloned() else {
        return Ok(checks);
    };
    let initiate = |sb: &Sandbox| {
        let req = initiate_request(&op);
        let started = Instant::now();
        let r = sb.runtime.call_adapter("live", &op.slug, |s, a| {
            a.mmc_adapter_operator().call_initiate(s, &req)
        });
        (r, started.elapsed())
    };
    let used_network = |sb: &Sandbox| !sb.http.requests.lock().is_empty();

    // The operator answers 5xx: never a success.
    sb.http.respond_with(|_| {
        Ok(Response {
            status: 503,
            headers: vec![],
            body: b"{\"error\":\"down\"}".to_vec(),
        })
    });
    let (r, _) = initiate(&sb);
    check(
        "operator_5xx",
        match r {
            Err(e) => Err(trapped(&e)),
            Ok(_) if !used_network(&sb) => Ok("not exercised: no request was made (a simulator, or settings missing: see --setting)".into()),
            // A 5xx does not say the request was not performed: the outcome is unknown.
            Ok(Err(
                AdapterError::Unavailable(_)
                | AdapterError::Timeout(_)
                | AdapterError::InvalidResponse(_)
                | AdapterError::NotSent(_),
            )) => Ok("reported as an unknown outcome (or nothing sent)".into()),
            Ok(other) => Err(format!("a 503 from the operator was reported as {other:?}: the payment may still go through")),
        },
    );

    // The network times out: the outcome is unknown, so it must say timeout
    // (or not-sent, when the call that timed out came before the creating one).
    let sb = sandbox(cache_dir, true, inputs)?;
    sb.runtime.install(sb.runtime.prepare(NAME, &bytes)?);
    sb.http
        .respond_with(|_| Err(CapabilityError::Timeout("conformance: no answer".into())));
    let (r, _) = initiate(&sb);
    check(
        "network_timeout",
        match r {
            Err(e) => Err(trapped(&e)),
            Ok(_) if !used_network(&sb) => Ok("not exercised: no request was made (a simulator, or settings missing: see --setting)".into()),
            Ok(Err(AdapterError::Timeout(_))) => Ok("reported as timeout (outcome unknown)".into()),
            Ok(Err(AdapterError::NotSent(_))) => Ok("reported as not sent (a call before the creating one timed out)".into()),
            Ok(other) => Err(format!("a timeout must be reported as adapter-error::timeout, not {other:?}: the payment may still go through")),
        },
    );

    // Garbage bodies: no trap, an answer within the deadline.
    let sb = sandbox(cache_dir, true, inputs)?;
    sb.runtime.install(sb.runtime.prepare(NAME, &bytes)?);
    sb.http.respond_with(|_| {
        Ok(Response {
            status: 200,
            headers: vec![],
            body: b"<html>\x00\xffnot json".to_vec(),
        })
    });
    let (r, took) = initiate(&sb);
    check(
        "malformed_body",
        match r {
            Err(e) => Err(trapped(&e)),
            Ok(_) if took > Duration::from_secs(2) => {
                Err(format!("took {took:?} with an instant fake operator"))
            }
            Ok(Ok(Initiated::Completed(_))) => {
                Err("a garbage answer was reported as a completed payment".into())
            }
            Ok(_) => Ok("no trap, no success claimed".into()),
        },
    );

    // No allowed host: the refusal comes back as a value.
    let sb = sandbox(cache_dir, false, inputs)?;
    sb.runtime.install(sb.runtime.prepare(NAME, &bytes)?);
    let (r, _) = initiate(&sb);
    check(
        "denied_host",
        match r {
            Err(e) => Err(trapped(&e)),
            Ok(Ok(Initiated::Completed(_))) => {
                Err("reported success without reaching the operator".into())
            }
            Ok(_) => Ok("handled as an error value".into()),
        },
    );

    // Every other operation survives a failing operator.
    let sb = sandbox(cache_dir, true, inputs)?;
    sb.runtime.install(sb.runtime.prepare(NAME, &bytes)?);
    sb.http.respond_with(|_| {
        Ok(Response {
            status: 500,
            headers: vec![],
            body: b"oops".to_vec(),
        })
    });
    let r = op_ref(&op);
    let results: Vec<(&str, Result<(), CallError>)> = vec![
        (
            "status",
            sb.runtime
                .call_adapter("live", &op.slug, |s, a| {
                    a.mmc_adapter_operator().call_status(s, &r)
                })
                .map(drop),
        ),
        (
            "confirm-otp",
            sb.runtime
                .call_adapter("live", &op.slug, |s, a| {
                    a.mmc_adapter_operator().call_confirm_otp(s, &r, "123456")
                })
                .map(drop),
        ),
        (
            "cancel",
            sb.runtime
                .call_adapter("live", &op.slug, |s, a| {
                    a.mmc_adapter_operator().call_cancel(s, &r)
                })
                .map(drop),
        ),
        (
            "refund",
            sb.runtime
                .call_adapter("live", &op.slug, |s, a| {
                    a.mmc_adapter_operator().call_refund(
                        s,
                        &RefundRequest {
                            refund_id: "r1".into(),
                            payment: r.clone(),
                            amount: 100,
                            reason: "other".into(),
                        },
                    )
                })
                .map(drop),
        ),
        (
            "refund-status",
            sb.runtime
                .call_adapter("live", &op.slug, |s, a| {
                    a.mmc_adapter_operator().call_refund_status(s, &r)
                })
                .map(drop),
        ),
        (
            "payout",
            sb.runtime
                .call_adapter("live", &op.slug, |s, a| {
                    a.mmc_adapter_operator().call_payout(
                        s,
                        &PayoutRequest {
                            payout_id: "po1".into(),
                            operator: op.slug.clone(),
                            environment: "live".into(),
                            phone: "+2290166000001".into(),
                            amount: 100,
                            currency: "XOF".into(),
                            beneficiary_name: "Test".into(),
                            reference: "po-ref".into(),
                        },
                    )
                })
                .map(drop),
        ),
        (
            "payout-status",
            sb.runtime
                .call_adapter("live", &op.slug, |s, a| {
                    a.mmc_adapter_operator().call_payout_status(s, &r)
                })
                .map(drop),
        ),
        (
            "predict",
            sb.runtime
                .call_adapter("live", &op.slug, |s, a| {
                    a.mmc_adapter_operator().call_predict(s, "+2290166000001")
                })
                .map(drop),
        ),
    ];
    let failed: Vec<String> = results
        .iter()
        .filter_map(|(n, r)| r.as_ref().err().map(|e| format!("{n}: {e}")))
        .collect();
    check(
        "operations_fail_cleanly",
        if failed.is_empty() {
            Ok(
                "status, confirm-otp, cancel, refund(-status), payout(-status), predict: error values"
                    .into(),
            )
        } else {
            Err(failed.join("; "))
        },
    );

    // An unauthenticated garbage notification is never believed.
    let inbound = Inbound {
        operator: op.slug.clone(),
        environment: "live".into(),
        method: "POST".into(),
        headers: vec![("content-type".into(), "application/json".into())],
        body: br#"{"status":"SUCCESSFUL","referenceId":"3f6c1a52-8d0e-4c1e-9a57-3f4f2c8b9d10"}"#
            .to_vec(),
    };
    let garbage = Inbound {
        body: b"\x00\x01garbage".to_vec(),
        ..inbound.clone()
    };
    let forged = sb.runtime.call_adapter("live", &op.slug, |s, a| {
        a.mmc_adapter_operator().call_parse_callback(s, &inbound)
    });
    let junk = sb.runtime.call_adapter("live", &op.slug, |s, a| {
        a.mmc_adapter_operator().call_parse_callback(s, &garbage)
    });
    check(
        "callbacks",
        match (forged, junk) {
            (Err(e), _) | (_, Err(e)) => Err(trapped(&e)),
            (_, Ok(Ok(u))) if !u.is_empty() => Err("a garbage notification produced status updates".into()),
            (Ok(Ok(u)), _) if u.iter().any(|x| matches!(x.status, PspStatus::Completed(_))) => {
                Err("an unsigned notification claiming success was believed without checking with the operator".into())
            }
            _ => Ok("garbage refused; unsigned success not believed".into()),
        },
    );
    Ok(checks)
}

/// The pass/fail table.
pub fn table(checks: &[Check]) -> String {
    let mut out = format!("{:<26} {:<6} {}\n", "CHECK", "RESULT", "DETAIL");
    for c in checks {
        out.push_str(&format!(
            "{:<26} {:<6} {}\n",
            c.name,
            if c.passed { "pass" } else { "FAIL" },
            c.detail
        ));
    }
    let failed = checks.iter().filter(|c| !c.passed).count();
    out.push_str(&format!("\n{} checks, {} failed\n", checks.len(), failed));
    out
}
