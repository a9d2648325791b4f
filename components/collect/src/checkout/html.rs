//! The page's HTML frame: escaping, the style and the security headers that
//! allow exactly it, the payment's header, amounts and masked numbers.

use mmc_domain::Status;

use crate::mmc::api::http_types::Response;
use crate::mmc::platform::clock;
use crate::store::Payment;

use super::words::{Lang, t};

pub(super) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// The page's only style sheet. Inline, so the page is one request; allowed
/// by its hash in the Content-Security-Policy (`STYLE_SHA256`, kept equal to
/// it by a unit test), so nothing else inline can run or style the page.
pub(super) const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:0;background:#f4f5f7;color:#1d2330}main{max-width:420px;margin:0 auto;padding:20px}\
.card{background:#fff;border-radius:12px;padding:20px;box-shadow:0 1px 4px rgba(0,0,0,.1)}h1{font-size:1.2rem}.amount{font-size:1.8rem;font-weight:700}\
label{display:block;margin:14px 0 6px;font-weight:600}select,input,button{width:100%;box-sizing:border-box;font-size:1rem;padding:12px;border-radius:8px;border:1px solid #6b7280}\
button{background:#0b5cad;color:#fff;border:0;margin-top:18px;font-weight:700}.msg{padding:12px;border-radius:8px;margin:12px 0}.ok{background:#e3f6e8}.err{background:#fde8e8}.wait{background:#eef3fb}\
.muted{color:#4b5563}";

/// base64 of the SHA-256 of [`STYLE`].
pub(super) const STYLE_SHA256: &str = "EJLFp8ALZDsDqSwTH78Su7TEyFBQirmq/KhTzTSbdc8=";

/// A page where customers type their phone number: nothing may frame it
/// (clickjacking), load into it, or learn where the customer came from.
pub(super) fn security_headers() -> Vec<(String, String)> {
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

pub(super) fn page(lang: Lang, status: u16, body: &str, refresh: bool) -> Response {
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

pub(super) fn header_html(lang: Lang, p: &Payment) -> String {
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

pub(super) fn group_thousands(n: u64) -> String {
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

/// The number with all but its country code and last two digits hidden:
/// the page is reachable by anyone holding the link.
pub(super) fn masked(e164: &str) -> String {
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
