//! Refund (full or partial) and cancel, each behind a confirmation step,
//! carried out by the API ([`mmc_console_kit::api`]) with its Idempotency-Key. A live
//! refund above `console.refund_code_above` also asks for a fresh code from
//! the person's authenticator ([`mmc_console_kit::step_up`]).

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::Response;
use serde_json::json;

use crate::payment::{RefundTotals, get_payment, payment_with_refunds};
use mmc_console_kit::api::{self, Reading};
use mmc_console_kit::html::plain;
use mmc_console_kit::html::{self, esc, t, tf};
use mmc_console_kit::sessions::Session;
use mmc_console_kit::web::{self, ConsoleError, Req, check_csrf};
use mmc_console_kit::{Console, blocking};
use mmc_console_kit::{format, outcomes};
use mmc_http::App;

type Resp = Response<Full<Bytes>>;

fn reason_select(l: html::Lang, chosen: &str) -> String {
    let options: String = outcomes::REFUND_REASONS
        .iter()
        .map(|r| {
            format!(
                "<option value=\"{r}\"{}>{}</option>",
                if *r == chosen { " selected" } else { "" },
                esc(&outcomes::refund_reason(l, r))
            )
        })
        .collect();
    format!(
        "<label>{}<select name=\"reason\">{options}</select></label>",
        t(l, "reason")
    )
}

/// An amount as a person types it: digits, grouped or not (`2 000`,
/// `2,000` in English), whole units. None when it is anything else.
pub(super) fn typed_amount(l: html::Lang, text: &str) -> Option<u64> {
    let digits: String = text
        .trim()
        .chars()
        .filter(|c| !(c.is_whitespace() || l == html::Lang::En && *c == ','))
        .collect();
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|n| *n >= 1)
}

/// The payment and what may still be refunded of it.
async fn payment_and_totals(
    app: &Arc<App>,
    req: &Req,
    s: &Session,
    id: &str,
) -> Result<(serde_json::Value, RefundTotals), ConsoleError> {
    let (p, list) = payment_with_refunds(app, req, s, id).await?;
    let totals = RefundTotals::of(&p, &list);
    Ok((p, totals))
}

/// `GET /console/payments/{id}/refund`: the amount (what remains, unless
/// the person says less) and the reason, with what was refunded so far.
pub async fn refund_form(
    app: &Arc<App>,
    req: &Req,
    s: &Session,
    id: &str,
    error: Option<(u16, &str)>,
) -> Result<Resp, ConsoleError> {
    let l = req.lang;
    let (p, totals) = payment_and_totals(app, req, s, id).await?;
    let currency = p["currency"].as_str().unwrap_or_default();
    let money = |a: u64| format::money(l, a as i64, currency);
    let summary = format!(
        "<dl class=\"totals\"><dt>{}</dt><dd>{}</dd><dt>{}</dt><dd>{}</dd><dt>{}</dt><dd>{}</dd><dt>{}</dt><dd>{}</dd></dl>",
        t(l, "amount"),
        esc(&format::money_of(l, &p)),
        t(l, "refunded_total"),
        esc(&money(totals.refunded)),
        t(l, "refund_in_progress"),
        esc(&money(totals.in_progress)),
        t(l, "refund_remaining"),
        esc(&money(totals.remaining)),
    );
    let status = p["status"].as_str().unwrap_or_default();
    let back = format!(
        "<p><a href=\"/console/payments/{}\">{}</a></p>",
        esc(id),
        t(l, "back")
    );
    if status != "completed" || totals.remaining == 0 {
        let why = if status == "completed" {
            t(l, "nothing_to_refund").to_string()
        } else {
            plain(l, "not_refundable", &[&outcomes::status(l, status)])
        };
        let body = format!("{}{summary}{back}", html::notice(&why, true));
        return Ok(web::page_response(
            409,
            html::page(l, Some(s), t(l, "refund"), &body),
        ));
    }
    let typed = req
        .field("amount")
        .unwrap_or_else(|| format::group(l, totals.remaining as i64));
    let body = format!(
        "{msg}{summary}<form method=\"post\" action=\"/console/payments/{id}/refund\">{csrf}<input type=\"hidden\" name=\"step\" value=\"review\">\
         <label>{amount}<input name=\"amount\" value=\"{a}\" inputmode=\"numeric\" required></label>{reason}<button>{refund}</button></form>{back}",
        msg = error
            .map(|(_, m)| html::notice(m, true))
            .unwrap_or_default(),
        id = esc(id),
        csrf = html::csrf_field(s),
        amount = esc(&plain(l, "amount_at_most", &[&money(totals.remaining)])),
        a = esc(&typed),
        reason = reason_select(l, &req.field("reason").unwrap_or_default()),
        refund = t(l, "refund"),
    );
    Ok(web::page_response(
        error.map_or(200, |(st, _)| st),
        html::page(l, Some(s), t(l, "refund"), &body),
    ))
}

/// Whether a refund of `amount` (None: the whole payment, counted as the
/// payment's `amount`) asks for a fresh second-factor code: in live, above
/// the console's `refund_code_above`.
fn needs_code(c: &Console, s: &Session, amount: Option<u64>, payment: &serde_json::Value) -> bool {
    let counted = amount.unwrap_or_else(|| payment["amount"].as_u64().unwrap_or(u64::MAX));
    s.environment == mmc_accounts::Environment::Live && counted > c.refund_code_above
}

/// The confirmation: what will be refunded, with a fresh Idempotency-Key
/// that the confirming form carries (twice, if it is submitted twice).
async fn review(
    app: &Arc<App>,
    c: &Console,
    req: &Req,
    s: &Session,
    id: &str,
    amount: Option<u64>,
    reason: &str,
) -> Result<Resp, ConsoleError> {
    let l = req.lang;
    let p = get_payment(app, req, s, id).await?;
    let shown = match amount {
        Some(a) => format::money(l, a as i64, p["currency"].as_str().unwrap_or_default()),
        None => t(l, "all_remaining").to_string(),
    };
    let body = format!(
        "<p>{q}</p><form method=\"post\" action=\"/console/payments/{ide}/refund\">{csrf}\
         <input type=\"hidden\" name=\"step\" value=\"confirm\"><input type=\"hidden\" name=\"idempotency_key\" value=\"{key}\">\
         <input type=\"hidden\" name=\"amount\" value=\"{a}\"><input type=\"hidden\" name=\"reason\" value=\"{r}\">\
         {code}<button class=\"danger\">{confirm}</button> <a href=\"/console/payments/{ide}\">{back}</a></form>",
        q = tf(
            l,
            "confirm_refund",
            &[&shown, p["reference"].as_str().unwrap_or(id)]
        ),
        ide = esc(id),
        csrf = html::csrf_field(s),
        key = uuid::Uuid::new_v4(),
        a = amount.map(|a| a.to_string()).unwrap_or_default(),
        r = esc(reason),
        code = if needs_code(c, s, amount, &p) {
            mmc_console_kit::step_up::field(l)
        } else {
            String::new()
        },
        confirm = t(l, "confirm"),
        back = t(l, "back"),
    );
    Ok(web::page_response(
        200,
        html::page(l, Some(s), t(l, "refund"), &body),
    ))
}

/// `POST /console/payments/{id}/refund`: `step=review` shows what will be
/// refunded, with a fresh Idempotency-Key in the form; `step=confirm` sends
/// it. A double submit carries the same key, so it is one refund.
pub async fn refund(
    app: &Arc<App>,
    c: &Console,
    req: &Req,
    s: &Session,
    id: &str,
) -> Result<Resp, ConsoleError> {
    check_csrf(req, s)?;
    let path = format!("/api/v1/collect/payments/{id}/refunds");
    // Refused before the confirmation, by the check the action itself passes.
    api::permitted(
        app,
        c,
        req,
        s,
        ("POST", &path),
        ("payment.refund", Some(id)),
    )
    .await?;
    let amount = match req.field("amount").filter(|a| !a.trim().is_empty()) {
        None => None,
        Some(a) => match typed_amount(req.lang, &a) {
            Some(n) => Some(n),
            None => {
                return refund_form(app, req, s, id, Some((400, t(req.lang, "bad_amount")))).await;
            }
        },
    };
    let reason = req
        .field("reason")
        .filter(|r| outcomes::REFUND_REASONS.contains(&r.as_str()))
        .unwrap_or_else(|| "requested_by_customer".into());
    if req.field("step").as_deref() != Some("confirm") {
        // Checked before the confirmation, not only by the API after it.
        let (p, totals) = payment_and_totals(app, req, s, id).await?;
        if let Some(a) = amount.filter(|a| *a > totals.remaining) {
            let currency = p["currency"].as_str().unwrap_or_default();
            let why = plain(
                req.lang,
                "refund_too_much",
                &[
                    &format::money(req.lang, a as i64, currency),
                    &format::money(req.lang, totals.remaining as i64, currency),
                ],
            );
            return refund_form(app, req, s, id, Some((400, &why))).await;
        }
        return review(app, c, req, s, id, amount, &reason).await;
    }
    if s.environment == mmc_accounts::Environment::Live {
        let payment = match amount {
            Some(_) => serde_json::Value::Null,
            None => get_payment(app, req, s, id).await?,
        };
        // Bound to the refund's Idempotency-Key: a double submit carries
        // the same code and replays the same refund.
        let purpose = format!(
            "payment.refund {}",
            req.field("idempotency_key").unwrap_or_default()
        );
        if needs_code(c, s, amount, &payment)
            && let Err(refused) =
                mmc_console_kit::step_up::check_audited(c, req, s, ("payment.refund", id), &purpose)
        {
            let why = refused.to_string();
            return refund_form(app, req, s, id, Some((403, &why))).await;
        }
    }
    let key = req
        .field("idempotency_key")
        .ok_or_else(|| ConsoleError::Refused(400, t(req.lang, "incomplete").into()))?;
    let mut payload = json!({"reason": reason});
    if let Some(a) = amount {
        payload["amount"] = json!(a);
    }
    // Written before the refund is asked for, finished once per refund: a
    // replay (a double submit, or a retry after the answer was lost) is the
    // same refund, and its entry goes.
    let asked = match amount {
        Some(a) => format!("amount {a} reason {reason}"),
        None => format!("whole payment reason {reason}"),
    };
    let request = api::call(
        app,
        s,
        "POST",
        &path,
        Some(&payload),
        Some(&key),
        &req.request_id,
    );
    let audit = ("payment.refund", Some(id), Some(asked.as_str()));
    let (entry, answer) = match api::audited(app, c, req, s, audit, request).await? {
        Ok(accepted) => accepted,
        Err(refused) => {
            let err = refused.refusal(req.lang);
            return refund_form(app, req, s, id, Some((refused.status, &err.to_string()))).await;
        }
    };
    let r = answer.value();
    let refund_id = r["id"].as_str().unwrap_or_default().to_string();
    let detail = format!("refund {refund_id} amount {} reason {reason}", r["amount"]);
    blocking(|| c.audit.finish_once(entry, id, &detail))?;
    Ok(web::redirect(&format!(
        "/console/payments/{id}?done={refund_id}"
    )))
}

/// `GET /console/payments/{id}/cancel`: the confirmation.
pub async fn cancel_form(
    app: &Arc<App>,
    req: &Req,
    s: &Session,
    id: &str,
) -> Result<Resp, ConsoleError> {
    let l = req.lang;
    let p = get_payment(app, req, s, id).await?;
    let status = p["status"].as_str().unwrap_or_default();
    // A payment that ended cannot be cancelled: saying so here beats an
    // error after the click.
    if !crate::payment::cancellable(status) {
        let mut why = plain(l, "not_cancellable", &[&outcomes::status(l, status)]);
        if status == "completed" {
            why.push(' ');
            why.push_str(t(l, "refund_instead"));
        }
        let body = format!(
            "{}<p><a href=\"/console/payments/{}\">{}</a></p>",
            html::notice(&why, true),
            esc(id),
            t(l, "back")
        );
        return Ok(web::page_response(
            409,
            html::page(l, Some(s), t(l, "cancel"), &body),
        ));
    }
    let body = format!(
        "<p>{q}</p><form method=\"post\" action=\"/console/payments/{ide}/cancel\">{csrf}\
         <button class=\"danger\">{confirm}</button> <a href=\"/console/payments/{ide}\">{back}</a></form>",
        q = tf(
            l,
            "confirm_cancel",
            &[p["reference"].as_str().unwrap_or(id)]
        ),
        ide = esc(id),
        csrf = html::csrf_field(s),
        confirm = t(l, "confirm"),
        back = t(l, "back"),
    );
    Ok(web::page_response(
        200,
        html::page(l, Some(s), t(l, "cancel"), &body),
    ))
}

pub async fn cancel(
    app: &Arc<App>,
    c: &Console,
    req: &Req,
    s: &Session,
    id: &str,
) -> Result<Resp, ConsoleError> {
    let action = api::Action {
        method: "POST",
        target: &format!("/api/v1/collect/payments/{id}/cancel"),
        body: Some(&json!({})),
        audit: "payment.cancel",
        subject: Some(id),
    };
    api::perform(app, c, req, s, action, |_| None).await?;
    Ok(web::redirect(&format!(
        "/console/payments/{id}?done=cancelled"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_are_read_as_people_type_them() {
        assert_eq!(typed_amount(html::Lang::Fr, "2 000"), Some(2000));
        assert_eq!(typed_amount(html::Lang::Fr, "2\u{202f}000"), Some(2000));
        assert_eq!(typed_amount(html::Lang::En, "12,500"), Some(12_500));
        assert_eq!(typed_amount(html::Lang::En, " 15000 "), Some(15_000));
        assert_eq!(typed_amount(html::Lang::Fr, "2,5"), None);
        assert_eq!(typed_amount(html::Lang::En, "2.5"), None);
        assert_eq!(typed_amount(html::Lang::En, "0"), None);
        assert_eq!(typed_amount(html::Lang::En, "-5"), None);
    }
}
