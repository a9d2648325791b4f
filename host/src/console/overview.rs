//! The overview: today's and the last 30 days' payments per operator and
//! per day (count, volume collected, success rate), drawn as SVG bar charts
//! by [`super::charts`], and each operator's status from the catalogue. The
//! figures are the tallies the outbox dispatcher keeps ([`crate::tallies`]):
//! at most 30 days of rows per operator are read, whatever the number of
//! payments, for the session's merchant and environment, by a person whose
//! role may list payments (the scope a key's list needs).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::Response;

use super::Console;
use super::api;
use super::charts::{Bar, bars};
use super::html::{self, esc, t, text};
use super::sessions::Session;
use super::web::{self, ConsoleError, Req};
use crate::clock::system_now_ms;
use crate::http::App;
use crate::tallies::{Counts, DAY_MS, NOT_CHOSEN};

type Resp = Response<Full<Bytes>>;

const DAYS: i64 = 30;

/// An operator's row label, in the page's language for [`NOT_CHOSEN`].
fn operator_label(l: html::Lang, op: &str) -> String {
    if op == NOT_CHOSEN {
        t(l, "not_chosen").to_string()
    } else {
        op.to_string()
    }
}

fn rate_text(r: Option<f64>) -> String {
    r.map(|r| format!("{r:.0} %")).unwrap_or_else(|| "–".into())
}

/// What the page shows: per day (oldest first) and per operator, today and 30 days.
pub struct Figures {
    pub days: Vec<(String, Counts)>,
    pub today: BTreeMap<String, Counts>,
    pub month: BTreeMap<String, Counts>,
}

/// The 30 days (UTC) ending with the day of `now_ms`: (first, last).
fn period(now_ms: u64) -> (i64, i64) {
    let today = (now_ms / DAY_MS) as i64;
    (today - (DAYS - 1), today)
}

/// Adds up tally `rows` (day, operator, counts) into the 30 days ending with
/// the day of `now_ms`. An operator none of whose payments is left in a
/// period (a hosted payment's row once its customer chose) is not shown.
pub fn figures(rows: &[(i64, String, Counts)], now_ms: u64) -> Figures {
    let (first, today) = period(now_ms);
    let mut days: Vec<(String, Counts)> = (first..=today)
        .map(|d| {
            (
                mmc_domain::time::rfc3339(d as u64 * DAY_MS)[..10].to_string(),
                Counts::default(),
            )
        })
        .collect();
    let (mut by_today, mut month) = (BTreeMap::new(), BTreeMap::new());
    for (day, operator, c) in rows {
        if !(first..=today).contains(day) {
            continue;
        }
        days[(day - first) as usize].1.add(c);
        month
            .entry(operator.clone())
            .or_insert_with(Counts::default)
            .add(c);
        if *day == today {
            by_today
                .entry(operator.clone())
                .or_insert_with(Counts::default)
                .add(c);
        }
    }
    by_today.retain(|_, c: &mut Counts| c.payments != 0);
    month.retain(|_, c: &mut Counts| c.payments != 0);
    Figures {
        days,
        today: by_today,
        month,
    }
}

fn operator_table(
    l: html::Lang,
    caption: &str,
    by: &BTreeMap<String, Counts>,
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
    let mut total = Counts::default();
    for (op, tally) in by {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{} {currency}</td><td>{}</td></tr>",
            esc(&operator_label(l, op)),
            tally.payments,
            tally.volume,
            rate_text(tally.rate())
        );
        total.add(tally);
    }
    let _ = write!(
        out,
        "</tbody><tfoot><tr><th>{}</th><td>{}</td><td>{} {currency}</td><td>{}</td></tr></tfoot></table>",
        t(l, "total"),
        total.payments,
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
                tally.payments,
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
pub async fn page(
    app: &Arc<App>,
    c: &Console,
    req: &Req,
    s: &Session,
) -> Result<Resp, ConsoleError> {
    let l = req.lang;
    // The figures are a summary of the payments: for those who may list them.
    s.role
        .scopes()
        .allow("GET", "/api/v1/collect/payments")
        .map_err(api::forbidden)?;
    let now = system_now_ms();
    let rows = super::blocking(|| {
        crate::tallies::read(
            &c.tallies,
            &s.merchant_id,
            s.environment.as_str(),
            period(now),
        )
    })?;
    let f = figures(&rows, now);
    // Every supported country pays in XOF.
    let currency = "XOF";
    let mut body = String::new();
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

    fn counts(payments: i64, succeeded: i64, finished: i64, volume: i64) -> Counts {
        Counts {
            payments,
            succeeded,
            finished,
            volume,
        }
    }

    #[test]
    fn rows_count_in_their_day_and_operator_and_rates_leave_out_the_unfinished() {
        // An hour into a day, in milliseconds since the epoch.
        let now = 1_780_272_000_000 + 3_600_000;
        let (today, first) = (20_605, 20_605 - 29);
        let row = |day: i64, op: &str, c: Counts| (day, op.to_string(), c);
        let f = figures(
            &[
                row(today, "mtn-bj", counts(2, 1, 2, 1000)),
                row(today, "moov-bj", counts(1, 0, 0, 0)),
                row(first, "mtn-bj", counts(1, 1, 1, 2000)),
                row(first - 1, "mtn-bj", counts(1, 1, 1, 9999)), // 31 days ago: out
                // A hosted payment's row once its customer chose: empty.
                row(today, NOT_CHOSEN, counts(0, 0, 0, 0)),
                row(first, NOT_CHOSEN, counts(1, 0, 1, 0)),
            ],
            now,
        );
        assert_eq!(
            (f.days[0].0.as_str(), f.days[29].0.as_str()),
            ("2026-05-03", "2026-06-01")
        );
        assert_eq!(f.days[29].1, counts(3, 1, 2, 1000));
        assert_eq!(f.days[29].1.rate(), Some(50.0));
        assert_eq!(f.days[0].1, counts(2, 1, 2, 2000));
        assert_eq!(f.month["mtn-bj"].volume, 3000);
        assert_eq!(f.today["moov-bj"].rate(), None, "nothing finished yet");
        assert!(
            !f.today.contains_key(NOT_CHOSEN),
            "no payment left there today"
        );
        assert_eq!(f.month[NOT_CHOSEN], counts(1, 0, 1, 0));
        assert_eq!(f.days.iter().map(|d| d.1.payments).sum::<i64>(), 5);
    }
}
