//! The overview: today's and the last 30 days' payments per operator and
//! per day (count, volume collected, success rate), drawn as SVG bar charts
//! by [`super::charts`], and each operator's status from the catalogue. The
//! payments are read through the API's list, as a key with `payments:read`
//! would, at most [`MAX_PAYMENTS`] of them (the page says when it stopped).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::Response;
use serde_json::Value;

use super::api;
use super::charts::{Bar, bars};
use super::html::{self, esc, t, text};
use super::sessions::Session;
use super::web::{self, ConsoleError, Req};
use crate::clock::system_now_ms;
use crate::http::App;

type Resp = Response<Full<Bytes>>;

const DAYS: u64 = 30;
/// The row of hosted payments whose customer has not chosen an operator yet.
const NOT_CHOSEN: &str = "";

/// An operator's row label, in the page's language for [`NOT_CHOSEN`].
fn operator_label(l: html::Lang, op: &str) -> String {
    if op == NOT_CHOSEN {
        t(l, "not_chosen").to_string()
    } else {
        op.to_string()
    }
}
const DAY_MS: u64 = 86_400_000;
/// Payments read at most for one overview (100 pages of the API's list).
pub const MAX_PAYMENTS: usize = 10_000;

/// Payments of a day or an operator, by outcome.
#[derive(Default, Clone, Copy)]
pub struct Tally {
    pub count: u64,
    /// Completed (refunded ones too: they were paid).
    pub succeeded: u64,
    /// Succeeded, failed or expired: the payments whose outcome is known
    /// (cancelled ones were the merchant's choice, and count in neither).
    pub finished: u64,
    /// Amount collected by the succeeded ones.
    pub volume: u64,
}

impl Tally {
    pub fn add(&mut self, p: &Value) {
        self.count += 1;
        match p["status"].as_str().unwrap_or_default() {
            "completed" | "refunded" => {
                self.succeeded += 1;
                self.finished += 1;
                self.volume += p["amount"].as_u64().unwrap_or(0);
            }
            "failed" | "expired" => self.finished += 1,
            _ => {}
        }
    }

    /// Success rate in percent, None while nothing has finished.
    pub fn rate(&self) -> Option<f64> {
        (self.finished > 0).then(|| self.succeeded as f64 * 100.0 / self.finished as f64)
    }
}

fn rate_text(r: Option<f64>) -> String {
    r.map(|r| format!("{r:.0} %")).unwrap_or_else(|| "–".into())
}

/// The payments created since `since_ms`, newest first, and whether the
/// read stopped at [`MAX_PAYMENTS`].
async fn payments_since(
    app: &Arc<App>,
    req: &Req,
    s: &Session,
    since_ms: u64,
) -> Result<(Vec<Value>, bool), ConsoleError> {
    let mut out = Vec::new();
    let mut after: Option<String> = None;
    while out.len() < MAX_PAYMENTS {
        let mut target = format!(
            "/api/v1/collect/payments?limit=100&created%5Bgte%5D={}",
            since_ms / 1000
        );
        if let Some(a) = &after {
            target.push_str(&format!("&starting_after={a}"));
        }
        let answer = api::call(app, s, "GET", &target, None, None, &req.request_id).await?;
        if !answer.ok() {
            return Err(answer.refusal(req.lang));
        }
        let body = answer.json();
        let data = body["data"].as_array().cloned().unwrap_or_default();
        after = data
            .last()
            .and_then(|p| p["id"].as_str())
            .map(str::to_string);
        out.extend(data);
        if !body["has_more"].as_bool().unwrap_or(false) || after.is_none() {
            return Ok((out, false));
        }
    }
    Ok((out, true))
}

/// What the page shows: per day (oldest first) and per operator, today and 30 days.
pub struct Figures {
    pub days: Vec<(String, Tally)>,
    pub today: BTreeMap<String, Tally>,
    pub month: BTreeMap<String, Tally>,
}

/// Counts `payments` into the 30 days ending with the day of `now_ms` (UTC).
pub fn figures(payments: &[Value], now_ms: u64) -> Figures {
    let first = now_ms - now_ms % DAY_MS - (DAYS - 1) * DAY_MS;
    let mut days: Vec<(String, Tally)> = (0..DAYS)
        .map(|i| {
            (
                mmc_domain::time::rfc3339(first + i * DAY_MS)[..10].to_string(),
                Tally::default(),
            )
        })
        .collect();
    let today_label = days[days.len() - 1].0.clone();
    let (mut today, mut month) = (BTreeMap::new(), BTreeMap::new());
    for p in payments {
        let day = p["created_at"]
            .as_str()
            .unwrap_or_default()
            .get(..10)
            .unwrap_or_default();
        let Some(slot) = days.iter_mut().find(|(d, _)| d == day) else {
            continue;
        };
        slot.1.add(p);
        // A hosted payment's operator is the customer's choice, once made.
        let operator = p["operator"].as_str().unwrap_or(NOT_CHOSEN).to_string();
        month
            .entry(operator.clone())
            .or_insert_with(Tally::default)
            .add(p);
        if day == today_label {
            today.entry(operator).or_insert_with(Tally::default).add(p);
        }
    }
    Figures { days, today, month }
}

fn operator_table(
    l: html::Lang,
    caption: &str,
    by: &BTreeMap<String, Tally>,
    currency: &str,
) -> String {
    let mut out = format!(
        "<table><caption>{}</caption><thead><tr><th>{}</th><th>{}</th><th>{}</th><th>{}</th></tr></thead><tbody>",
        esc(caption),
        t(l, "operator"),
        t(l, "count"),
        t(l, "volume"),
        t(l, "success_rate"),
    );
    let mut total = Tally::default();
    for (op, tally) in by {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{} {currency}</td><td>{}</td></tr>",
            esc(&operator_label(l, op)),
            tally.count,
            tally.volume,
            rate_text(tally.rate())
        );
        total.count += tally.count;
        total.succeeded += tally.succeeded;
        total.finished += tally.finished;
        total.volume += tally.volume;
    }
    let _ = write!(
        out,
        "</tbody><tfoot><tr><th>{}</th><td>{}</td><td>{} {currency}</td><td>{}</td></tr></tfoot></table>",
        t(l, "total"),
        total.count,
        total.volume,
        rate_text(total.rate())
    );
    out
}

fn charts(l: html::Lang, f: &Figures, currency: &str) -> String {
    let label = |i: usize, d: &str| {
        if i % 5 == 4 || i == 0 {
            d[5..].to_string()
        } else {
            String::new()
        }
    };
    let volume: Vec<Bar> = f
        .days
        .iter()
        .enumerate()
        .map(|(i, (d, tally))| Bar {
            label: label(i, d),
            value: tally.volume as f64,
            says: format!(
                "{d}: {} {currency}, {} {}",
                tally.volume,
                tally.count,
                t(l, "count")
            ),
        })
        .collect();
    let rate: Vec<Bar> = f
        .days
        .iter()
        .enumerate()
        .map(|(i, (d, tally))| Bar {
            label: label(i, d),
            value: tally.rate().unwrap_or(0.0),
            says: format!("{d}: {}", rate_text(tally.rate())),
        })
        .collect();
    let per_operator: Vec<Bar> = f
        .month
        .iter()
        .map(|(op, tally)| Bar {
            label: operator_label(l, op),
            value: tally.volume as f64,
            says: format!(
                "{}: {} {currency}, {}",
                operator_label(l, op),
                tally.volume,
                rate_text(tally.rate())
            ),
        })
        .collect();
    [
        bars(
            &format!("{}, {} ({currency})", t(l, "volume"), t(l, "per_day")),
            &volume,
            None,
        ),
        bars(
            &format!("{}, {} (%)", t(l, "success_rate"), t(l, "per_day")),
            &rate,
            Some(100.0),
        ),
        bars(
            &format!(
                "{}, {}, {} ({currency})",
                t(l, "volume"),
                t(l, "per_operator"),
                t(l, "last_30")
            ),
            &per_operator,
            None,
        ),
    ]
    .concat()
}

/// Each operator's status in the catalogue of the session's environment.
async fn operators(app: &Arc<App>, req: &Req, s: &Session) -> Result<String, ConsoleError> {
    let l = req.lang;
    let answer = api::call(
        app,
        s,
        "GET",
        "/api/v1/collect/payments/operators/",
        None,
        None,
        &req.request_id,
    )
    .await?;
    if !answer.ok() {
        return Err(answer.refusal(req.lang));
    }
    let mut out = format!(
        "<h2>{}</h2><table><thead><tr><th>{}</th><th>{}</th><th>{}</th></tr></thead><tbody>",
        t(l, "operators_now"),
        t(l, "country"),
        t(l, "operator"),
        t(l, "status"),
    );
    for country in answer.json()["data"].as_array().into_iter().flatten() {
        for o in country["operators"].as_array().into_iter().flatten() {
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{} ({})</td><td>{}</td></tr>",
                esc(&text(&country["country"])),
                esc(&text(&o["name"])),
                esc(&text(&o["slug"])),
                esc(&text(&o["status"])),
            );
        }
    }
    out.push_str("</tbody></table>");
    Ok(out)
}

/// `GET /console/overview`.
pub async fn page(app: &Arc<App>, req: &Req, s: &Session) -> Result<Resp, ConsoleError> {
    let l = req.lang;
    let now = system_now_ms();
    let since = now - now % DAY_MS - (DAYS - 1) * DAY_MS;
    let (payments, cut) = payments_since(app, req, s, since).await?;
    let f = figures(&payments, now);
    // Every supported country pays in XOF.
    let currency = "XOF";
    let mut body = String::new();
    if cut {
        let _ = write!(
            body,
            "<p>{}</p>",
            html::tf(l, "overview_cut", &[&MAX_PAYMENTS.to_string()])
        );
    }
    body.push_str(&operator_table(l, t(l, "today"), &f.today, currency));
    body.push_str(&operator_table(l, t(l, "last_30"), &f.month, currency));
    body.push_str(&charts(l, &f, currency));
    body.push_str(&operators(app, req, s).await?);
    Ok(web::page_response(
        200,
        html::page(l, Some(s), t(l, "overview"), &body),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn payments_count_in_their_day_and_operator_and_rates_leave_out_the_unfinished() {
        // An hour into a day, in milliseconds since the epoch.
        let now = 1_780_272_000_000 + 3_600_000;
        let p = |day: &str, op: &str, status: &str, amount: u64| json!({"created_at": format!("{day}T00:30:00.000Z"), "operator": op, "status": status, "amount": amount});
        let f = figures(
            &[
                p("2026-06-01", "mtn-bj", "completed", 1000),
                p("2026-06-01", "mtn-bj", "failed", 500),
                p("2026-06-01", "moov-bj", "processing", 700),
                p("2026-05-03", "mtn-bj", "refunded", 2000),
                p("2026-05-02", "mtn-bj", "completed", 9999), // 31 days ago: out
            ],
            now,
        );
        assert_eq!(
            (f.days[0].0.as_str(), f.days[29].0.as_str()),
            ("2026-05-03", "2026-06-01")
        );
        let today = &f.days[29].1;
        assert_eq!(
            (today.count, today.succeeded, today.finished, today.volume),
            (3, 1, 2, 1000)
        );
        assert_eq!(today.rate(), Some(50.0));
        assert_eq!(f.days[0].1.volume, 2000, "a refunded payment was paid");
        assert_eq!(f.month["mtn-bj"].volume, 3000);
        assert_eq!(f.today["moov-bj"].rate(), None, "nothing finished yet");
        assert!(!f.month.values().any(|t| t.volume == 9999 + 3000));
    }
}
