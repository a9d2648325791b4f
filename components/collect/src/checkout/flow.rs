//! The customer's way through the page: shown as the payment stands, the
//! operator and phone chosen (and the payment sent), the OTP given.

use mmc_domain::operators::{self, Country};
use mmc_domain::{Mode, Status, phone};

use crate::ApiError;
use crate::mmc::adapter::router;
use crate::mmc::adapter::types::OperatorInfo;
use crate::mmc::api::http_types::{Caller, Request, Response};
use crate::mmc::platform::{cache, clock};
use crate::payments;
use crate::store::{self, Customer, Payment, Tx};

use super::html::{esc, header_html, masked, page};
use super::words::{Lang, lang, t};

/// Finds a hosted payment by id alone (checkout links carry no merchant or
/// environment), reading without the writer: an anonymous page view must
/// not queue behind payments. A direct API payment has no page: its id is
/// not a link to show the customer's data to whoever holds it.
fn load(id: &str) -> Result<Option<Payment>, ApiError> {
    if id.is_empty() || id.len() > 64 || id.contains('/') {
        return Ok(None);
    }
    for env in ["test", "live"] {
        if let Some(m) = store::read_owner(env, id)? {
            return Ok(store::read_payment(env, &m, id)?.filter(|p| p.mode == Mode::Hosted));
        }
    }
    Ok(None)
}

/// How often page views of one payment may ask its operator (a view of a
/// payment in progress asks; a flood of views must not become a flood of
/// operator calls). Reconciliation polls meanwhile anyway.
const VIEW_SYNC_EVERY_MS: u64 = 5_000;

fn caller_for(p: &Payment) -> Caller {
    let base = p
        .checkout_url
        .as_deref()
        .and_then(|u| u.split("/checkout/").next())
        .unwrap_or_default()
        .to_string();
    Caller {
        merchant_id: p.merchant_id.clone(),
        merchant_name: p.merchant_name.clone(),
        environment: p.environment.clone(),
        key_id: String::new(),
        person: None,
        require_second_approver: false,
        request_id: String::new(),
        base_url: base,
    }
}

fn form_fields(body: &[u8]) -> Vec<(String, String)> {
    use mmc_domain::http::decode_component as decode;
    String::from_utf8_lossy(body)
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (decode(k), decode(v)))
        .collect()
}

fn field<'a>(fields: &'a [(String, String)], name: &str) -> &'a str {
    fields
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
        .unwrap_or_default()
}

pub fn handle(req: &Request) -> Result<Response, ApiError> {
    let lang = lang(req);
    let rest = req.path.trim_start_matches("/checkout").trim_matches('/');
    let (id, action) = rest.split_once('/').unwrap_or((rest, ""));
    let Some(p) = load(id)? else {
        return Ok(page(
            lang,
            404,
            &format!(
                r#"<p class="msg err" id="status">{}</p>"#,
                t(lang, "not_found")
            ),
            false,
        ));
    };
    match (req.method.as_str(), action) {
        ("GET", "") => show(lang, p, None),
        ("POST", "") => choose(lang, req, p),
        ("POST", "otp") => otp(lang, req, p),
        _ => Err(ApiError::method_not_allowed(&req.method, "GET, POST")),
    }
}

fn show(lang: Lang, p: Payment, error: Option<&str>) -> Result<Response, ApiError> {
    // Live status: a page load asks the PSP while the payment is in progress,
    // at most once per payment every VIEW_SYNC_EVERY_MS.
    let in_progress = matches!(p.status, Status::Pending | Status::Processing)
        || (p.status == Status::AwaitingPayment && p.psp_reference.is_none());
    let key = format!("checkout-sync:{}", p.id);
    let p = if in_progress && cache::get(&key).is_none() {
        cache::set(&key, b"1", VIEW_SYNC_EVERY_MS);
        payments::sync_with_psp(p)?
    } else {
        p
    };
    let mut body = header_html(lang, &p);
    if let Some(e) = error {
        body.push_str(&format!(r#"<p class="msg err" id="error">{}</p>"#, esc(e)));
    }
    let mut refresh = false;
    match p.status {
        // A request to pay may be live at the operator (its answer was lost): no
        // second form, which could push again, maybe to another operator.
        Status::AwaitingPayment if p.psp_reference.is_none() && p.sent_at().is_some() => {
            body.push_str(&format!(r#"<p class="msg wait" id="status" data-status="processing">{}</p>"#, t(lang, "waiting")));
            refresh = true;
        }
        Status::AwaitingPayment if p.psp_reference.is_some() => {
            // The operator hosts the payment (Wave): send the customer there.
            if let Some(url) = &p.checkout_url {
                body.push_str(&format!(r#"<p><a id="continue" href="{}">{}</a></p>"#, esc(url), t(lang, "continue")));
            }
            refresh = true;
        }
        Status::AwaitingPayment => body.push_str(&choose_form(lang, &p)),
        Status::AwaitingOtp => body.push_str(&format!(
            r#"<form method="post" action="/checkout/{id}/otp?lang={l}"><p>{help}</p><label for="otp">{label}</label>
<input id="otp" name="otp" inputmode="numeric" autocomplete="one-time-code" minlength="4" maxlength="8" required><button id="confirm" type="submit">{c}</button></form>"#,
            id = esc(&p.id),
            l = if lang == Lang::Fr { "fr" } else { "en" },
            help = t(lang, "otp_help"),
            label = t(lang, "otp"),
            c = t(lang, "confirm"),
        )),
        Status::Pending | Status::Processing => {
            body.push_str(&format!(r#"<p class="msg wait" id="status" data-status="processing">{}</p>"#, t(lang, "waiting")));
            refresh = true;
        }
        Status::Completed | Status::Refunded => {
            body.push_str(&format!(r#"<p class="msg ok" id="status" data-status="completed">{}</p>"#, t(lang, "completed")))
        }
        Status::Failed => {
            // The customer's own reasons in their language; never the operator's or
            // the adapter's text, which is for the merchant (and may name our systems).
            let reason = match p.failure.as_ref().map(|f| f.code.as_str()) {
                Some(
                    code @ ("insufficient_funds" | "declined_by_customer" | "approval_expired"
                    | "limit_reached" | "payer_not_found" | "otp_attempts_exceeded"),
                ) => t(lang, code),
                _ => t(lang, "try_later"),
            };
            body.push_str(&format!(r#"<p class="msg err" id="status" data-status="failed">{} {reason}</p>"#, t(lang, "failed")))
        }
        Status::Cancelled => {
            body.push_str(&format!(r#"<p class="msg err" id="status" data-status="cancelled">{}</p>"#, t(lang, "cancelled")))
        }
        Status::Expired => {
            body.push_str(&format!(r#"<p class="msg err" id="status" data-status="expired">{}</p>"#, t(lang, "expired")))
        }
    }
    Ok(page(
        lang,
        if error.is_some() { 400 } else { 200 },
        &body,
        refresh,
    ))
}

/// The form where the customer picks an operator (the merchant's choice, or
/// the one their number belongs to, preselected) and gives their number.
fn choose_form(lang: Lang, p: &Payment) -> String {
    let country = Country::parse(&p.country).unwrap_or(Country::Bj);
    let available = router::catalogue(&p.environment);
    // The merchant's choice, else the operator the number belongs to.
    let predicted = p
        .customer
        .as_ref()
        .and_then(|c| c.phone.as_deref())
        .and_then(|phone| payments::operator_of(&p.environment, phone).0)
        .map(|o| o.slug);
    let preselected = p.operator.as_deref().or(predicted);
    let options: String = available
        .iter()
        .filter(|o| offered(o, p))
        .map(|o| {
            let selected = if preselected == Some(o.slug.as_str()) {
                " selected"
            } else {
                ""
            };
            format!(
                r#"<option value="{}"{selected}>{}</option>"#,
                esc(&o.slug),
                esc(&o.name)
            )
        })
        .collect();
    // A number the merchant gave is shown masked and used when the
    // field is left empty; it is never written into the page.
    let (required, placeholder) = match p.customer.as_ref().and_then(|c| c.phone.as_deref()) {
        Some(known) => ("", masked(known)),
        None => (" required", format!("+{}…", country.dial_code())),
    };
    format!(
        r#"<form method="post" action="/checkout/{id}?lang={l}"><label for="operator">{op}</label><select id="operator" name="operator" required>{options}</select>
<label for="phone">{ph}</label><input id="phone" name="phone" type="tel" inputmode="tel" autocomplete="tel"{required} placeholder="{placeholder}">
<button id="pay" type="submit">{pay}</button></form>"#,
        id = esc(&p.id),
        l = if lang == Lang::Fr { "fr" } else { "en" },
        op = t(lang, "operator"),
        ph = t(lang, "phone"),
        placeholder = esc(&placeholder),
        pay = t(lang, "pay"),
    )
}

fn see_other(p: &Payment, lang: Lang) -> Response {
    Response {
        status: 303,
        headers: vec![(
            "location".into(),
            format!(
                "/checkout/{}?lang={}",
                p.id,
                if lang == Lang::Fr { "fr" } else { "en" }
            ),
        )],
        body: Vec::new(),
    }
}

/// Whether the page offers operator `o` for `p` (and accepts it when chosen):
/// operational in the payment's country, taking hosted payments of this
/// amount, and the one the merchant fixed, if they fixed one.
fn offered(o: &OperatorInfo, p: &Payment) -> bool {
    p.operator.as_deref().is_none_or(|fixed| fixed == o.slug)
        && o.country == p.country
        && o.status == "operational"
        && o.modes.iter().any(|m| m == "hosted")
        && (o.min_amount..=o.max_amount).contains(&p.amount)
}

/// The customer chose an operator and gave a number: record them and initiate.
fn choose(lang: Lang, req: &Request, p: Payment) -> Result<Response, ApiError> {
    if p.status != Status::AwaitingPayment || p.psp_reference.is_some() || p.sent_at().is_some() {
        return Ok(see_other(&p, lang));
    }
    let fields = form_fields(&req.body);
    let country = Country::parse(&p.country).unwrap_or(Country::Bj);
    let available = router::catalogue(&p.environment);
    let op = operators::find(field(&fields, "operator")).filter(|o| {
        o.country == country && available.iter().any(|a| a.slug == o.slug && offered(a, &p))
    });
    let Some(op) = op else {
        return show(lang, p, Some(t(lang, "wrong_operator")));
    };
    let given = field(&fields, "phone").trim();
    let known = p.customer.as_ref().and_then(|c| c.phone.as_deref());
    let typed = if given.is_empty() {
        known.unwrap_or_default()
    } else {
        given
    };
    let Ok(msisdn) = phone::normalize(country, typed) else {
        return show(lang, p, Some(t(lang, "wrong_phone")));
    };
    // Its route, stored with the intent; none free now: the customer may pick
    // another. Chosen once, outside the transaction: the choice may take an
    // open route's one trial, which a transaction run again must not take twice.
    let Ok(route) = crate::routes::choose(
        &p.environment,
        op.slug,
        &p.merchant_id,
        (&p.id, p.amount, None),
    ) else {
        return show(lang, p, Some(t(lang, "operator_unavailable")));
    };
    let now = clock::now_ms();
    // The intent, persisted before the operator is called (or the payment
    // as it is, when a second submit of the form got there first: one
    // request to pay, never two).
    let stored = store::again_on_conflict(|| {
        let tx = Tx::begin()?;
        let Some(mut current) = tx.payment(&p.environment, &p.merchant_id, &p.id)? else {
            return Ok(Err(None));
        };
        if current.status != Status::AwaitingPayment
            || current.psp_reference.is_some()
            || current.sent_at().is_some()
        {
            return Ok(Err(Some(current)));
        }
        current.operator = Some(op.slug.to_string());
        route.clone().apply(&mut current);
        let names = current.customer.clone().unwrap_or(Customer {
            phone: None,
            first_name: None,
            last_name: None,
        });
        current.customer = Some(Customer {
            phone: Some(msisdn.clone()),
            ..names
        });
        let previous_check = current.next_check_ms;
        payments::mark_intent(&mut current, now);
        tx.save_payment(&current, previous_check)?;
        tx.commit()?;
        Ok(Ok(current))
    })?;
    let current = match stored {
        Ok(current) => current,
        Err(moved) => return Ok(see_other(moved.as_ref().unwrap_or(&p), lang)),
    };
    match payments::initiate(&caller_for(&current), current) {
        Ok(after) => Ok(see_other(&after, lang)),
        // Nothing was sent: the customer may submit again.
        Err(e) if e.code == "operator_busy" => {
            let p = load(&p.id)?.unwrap_or(p);
            show(lang, p, Some(t(lang, "busy")))
        }
        Err(e) => Err(e),
    }
}

fn otp(lang: Lang, req: &Request, p: Payment) -> Result<Response, ApiError> {
    let fields = form_fields(&req.body);
    match payments::confirm(&caller_for(&p), &p.id, field(&fields, "otp").trim()) {
        Ok(after) => Ok(see_other(&after, lang)),
        Err(e) if e.code == "invalid_otp" || e.code == "otp_invalid_length" => {
            let p = load(&p.id)?.unwrap_or(p);
            show(lang, p, Some(t(lang, "wrong_otp")))
        }
        Err(e) if e.status == 409 => Ok(see_other(&p, lang)),
        Err(_) => show(lang, p, Some(t(lang, "try_again"))),
    }
}
