//! The hosted checkout page (`checkout_url`): server-rendered HTML for the
//! customer, in French or English, phone-sized, no JavaScript needed (live
//! status is a meta refresh that asks the PSP). Choose the operator, enter
//! the phone, give the OTP when the operator needs one, then watch the
//! status until it is final.

use mmc_domain::operators::{self, Country};
use mmc_domain::{Mode, Status, phone};

use crate::ApiError;
use crate::mmc::adapter::router;
use crate::mmc::adapter::types::OperatorInfo;
use crate::mmc::api::http_types::{Caller, Request, Response};
use crate::mmc::platform::{cache, clock};
use crate::payments;
use crate::store::{self, Customer, Payment, Tx};
use crate::wire;

#[derive(Clone, Copy, PartialEq)]
enum Lang {
    En,
    Fr,
}

fn lang(req: &Request) -> Lang {
    if let Some(l) = wire::query_param(req, "lang") {
        return if l == "fr" { Lang::Fr } else { Lang::En };
    }
    let accept = wire::header(req, "accept-language")
        .unwrap_or_default()
        .to_ascii_lowercase();
    // The first language listed wins; French speakers are most of our customers.
    match accept.split(',').next().map(str::trim) {
        Some(l) if l.starts_with("fr") => Lang::Fr,
        _ => Lang::En,
    }
}

/// The page's words: (key, English, French).
const WORDS: &[(&str, &str, &str)] = &[
    ("title", "Pay with Mobile Money", "Payer par Mobile Money"),
    ("to", "Payment to", "Paiement à"),
    ("amount", "Amount", "Montant"),
    (
        "operator",
        "Mobile Money operator",
        "Opérateur Mobile Money",
    ),
    ("phone", "Mobile Money number", "Numéro Mobile Money"),
    ("pay", "Pay", "Payer"),
    ("otp", "Code received by SMS", "Code reçu par SMS"),
    (
        "otp_help",
        "Enter the one-time code sent to your phone.",
        "Saisissez le code à usage unique envoyé sur votre téléphone.",
    ),
    ("confirm", "Confirm", "Confirmer"),
    (
        "waiting",
        "Approve the payment on your phone. This page updates by itself.",
        "Validez le paiement sur votre téléphone. Cette page se met à jour toute seule.",
    ),
    (
        "completed",
        "Payment completed. Thank you!",
        "Paiement effectué. Merci !",
    ),
    ("failed", "The payment failed.", "Le paiement a échoué."),
    (
        "insufficient_funds",
        "Your balance is too low.",
        "Votre solde est insuffisant.",
    ),
    (
        "declined_by_customer",
        "The payment was declined on the phone.",
        "Le paiement a été refusé sur le téléphone.",
    ),
    (
        "approval_expired",
        "The approval request expired.",
        "La demande de validation a expiré.",
    ),
    (
        "limit_reached",
        "Your Mobile Money limit is reached.",
        "Votre plafond Mobile Money est atteint.",
    ),
    (
        "payer_not_found",
        "This number has no Mobile Money account with this operator.",
        "Ce numéro n'a pas de compte Mobile Money chez cet opérateur.",
    ),
    (
        "otp_attempts_exceeded",
        "Too many wrong codes.",
        "Trop de codes incorrects.",
    ),
    (
        "busy",
        "Too many payments at this moment: nothing was sent. Try again in a moment.",
        "Trop de paiements en ce moment : rien n'a été envoyé. Réessayez dans un instant.",
    ),
    (
        "try_later",
        "Try again later or with another operator.",
        "Réessayez plus tard ou avec un autre opérateur.",
    ),
    (
        "cancelled",
        "This payment was cancelled.",
        "Ce paiement a été annulé.",
    ),
    (
        "expired",
        "This payment link has expired.",
        "Ce lien de paiement a expiré.",
    ),
    (
        "continue",
        "Continue to the operator to pay",
        "Continuer chez l'opérateur pour payer",
    ),
    (
        "wrong_phone",
        "This number is not a valid mobile number for the country.",
        "Ce numéro n'est pas un numéro mobile valide pour ce pays.",
    ),
    (
        "operator_unavailable",
        "This operator cannot take payments right now. Choose another, or try again later.",
        "Cet opérateur ne peut pas recevoir de paiement pour le moment. Choisissez-en un autre ou réessayez plus tard.",
    ),
    (
        "wrong_operator",
        "Choose an operator from the list.",
        "Choisissez un opérateur dans la liste.",
    ),
    (
        "wrong_otp",
        "Wrong code. Try again.",
        "Code incorrect. Réessayez.",
    ),
    (
        "not_found",
        "This payment link is not valid.",
        "Ce lien de paiement n'est pas valide.",
    ),
    ("try_again", "Please try again.", "Veuillez réessayer."),
    (
        "time_left",
        "Time left to pay: {} min",
        "Temps restant pour payer : {} min",
    ),
];

/// The words of `key` in `lang` (empty for an unknown key).
fn t(lang: Lang, key: &str) -> &'static str {
    let (en, fr) = WORDS
        .iter()
        .find(|(k, _, _)| *k == key)
        .map_or(("", ""), |&(_, en, fr)| (en, fr));
    if lang == Lang::Fr { fr } else { en }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// The page's only style sheet. Inline, so the page is one request; allowed
/// by its hash in the Content-Security-Policy (`STYLE_SHA256`, kept equal to
/// it by a unit test), so nothing else inline can run or style the page.
const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:0;background:#f4f5f7;color:#1d2330}main{max-width:420px;margin:0 auto;padding:20px}\
.card{background:#fff;border-radius:12px;padding:20px;box-shadow:0 1px 4px rgba(0,0,0,.1)}h1{font-size:1.2rem}.amount{font-size:1.8rem;font-weight:700}\
label{display:block;margin:14px 0 6px;font-weight:600}select,input,button{width:100%;box-sizing:border-box;font-size:1rem;padding:12px;border-radius:8px;border:1px solid #6b7280}\
button{background:#0b5cad;color:#fff;border:0;margin-top:18px;font-weight:700}.msg{padding:12px;border-radius:8px;margin:12px 0}.ok{background:#e3f6e8}.err{background:#fde8e8}.wait{background:#eef3fb}\
.muted{color:#4b5563}";

/// base64 of the SHA-256 of [`STYLE`].
const STYLE_SHA256: &str = "EJLFp8ALZDsDqSwTH78Su7TEyFBQirmq/KhTzTSbdc8=";

/// A page where customers type their phone number: nothing may frame it
/// (clickjacking), load into it, or learn where the customer came from.
fn security_headers() -> Vec<(String, String)> {
    let csp = format!(
        "default-src 'none'; style-src 'sha256-{STYLE_SHA256}'; form-action 'self'; \
         frame-ancestors 'none'; base-uri 'none'"
    );
    [
        ("content-security-policy", csp.as_str()),
        ("x-frame-options", "DENY"),
        ("referrer-policy", "no-referrer"),
        ("x-content-type-options", "nosniff"),
        ("cache-control", "no-store"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

fn page(lang: Lang, status: u16, body: &str, refresh: bool) -> Response {
    let html = format!(
        r#"<!doctype html><html lang="{l}"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">{r}<title>{title}</title>
<style>{STYLE}</style></head>
<body><main><div class="card">{body}</div></main></body></html>"#,
        l = if lang == Lang::Fr { "fr" } else { "en" },
        r = if refresh {
            r#"<meta http-equiv="refresh" content="2">"#
        } else {
            ""
        },
        title = t(lang, "title"),
    );
    let mut headers = security_headers();
    headers.push(("content-type".into(), "text/html; charset=utf-8".into()));
    headers.push((
        "content-language".into(),
        if lang == Lang::Fr { "fr" } else { "en" }.into(),
    ));
    Response {
        status,
        headers,
        body: html.into_bytes(),
    }
}

fn header_html(lang: Lang, p: &Payment) -> String {
    let description = p
        .description
        .as_deref()
        .filter(|d| !d.trim().is_empty())
        .map(|d| format!(r#"<p id="description">{}</p>"#, esc(d)))
        .unwrap_or_default();
    // Time left only while the customer can still pay.
    let left_ms = p.expires_at_ms.saturating_sub(clock::now_ms());
    let time_left =
        if matches!(p.status, Status::AwaitingPayment | Status::AwaitingOtp) && left_ms > 0 {
            let minutes = left_ms.div_ceil(60_000);
            format!(
                r#"<p class="muted" id="time-left" data-expires-at-ms="{}">{}</p>"#,
                p.expires_at_ms,
                t(lang, "time_left").replace("{}", &minutes.to_string())
            )
        } else {
            String::new()
        };
    format!(
        r#"<h1>{}</h1><p>{} <strong id="merchant">{}</strong></p>{description}<p>{}<br><span class="amount" id="amount">{} {}</span></p>{time_left}"#,
        t(lang, "title"),
        t(lang, "to"),
        esc(&p.merchant_name),
        t(lang, "amount"),
        group_thousands(p.amount),
        esc(&p.currency)
    )
}

fn group_thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push('\u{202f}');
        }
        out.push(c);
    }
    out
}

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

/// The number with all but its country code and last two digits hidden:
/// the page is reachable by anyone holding the link.
fn masked(e164: &str) -> String {
    let digits: Vec<char> = e164.chars().filter(char::is_ascii_digit).collect();
    if digits.len() < 6 {
        return "•".repeat(digits.len());
    }
    let (head, rest) = digits.split_at(3);
    let (hidden, tail) = rest.split_at(rest.len() - 2);
    format!(
        "+{}{}{}",
        head.iter().collect::<String>(),
        "•".repeat(hidden.len()),
        tail.iter().collect::<String>()
    )
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
    let tx = Tx::begin()?;
    let Some(mut current) = tx.payment(&p.environment, &p.merchant_id, &p.id)? else {
        return Ok(see_other(&p, lang));
    };
    // Already chosen and on its way to the operator (a second submit of the
    // form): one request to pay, never two.
    let now = clock::now_ms();
    if current.status != Status::AwaitingPayment
        || current.psp_reference.is_some()
        || current.sent_at().is_some()
    {
        return Ok(see_other(&current, lang));
    }
    // Its route, stored with the intent; none free now: the customer may pick another.
    let Ok(route) =
        crate::routes::choose(&p.environment, op.slug, &p.merchant_id, (&p.id, p.amount))
    else {
        return show(lang, p, Some(t(lang, "operator_unavailable")));
    };
    current.operator = Some(op.slug.to_string());
    current.route = Some(route);
    let names = current.customer.clone().unwrap_or(Customer {
        phone: None,
        first_name: None,
        last_name: None,
    });
    current.customer = Some(Customer {
        phone: Some(msisdn),
        ..names
    });
    // The intent, persisted before the operator is called.
    let previous_check = current.next_check_ms;
    payments::mark_intent(&mut current, now);
    tx.save_payment(&current, previous_check)?;
    tx.commit()?;
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

#[cfg(test)]
mod tests {
    use base64::Engine;
    use sha2::Digest;

    use super::*;

    #[test]
    fn the_policy_allows_exactly_the_pages_style() {
        let digest = sha2::Sha256::digest(STYLE.as_bytes());
        assert_eq!(
            base64::engine::general_purpose::STANDARD.encode(digest),
            STYLE_SHA256,
            "STYLE changed: put its new hash in STYLE_SHA256"
        );
        let csp = security_headers()
            .into_iter()
            .find(|(k, _)| k == "content-security-policy")
            .unwrap()
            .1;
        assert!(csp.starts_with("default-src 'none'") && csp.contains("frame-ancestors 'none'"));
    }
}
