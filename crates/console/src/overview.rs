//! The overview: the last 30 days against the 30 before, today's and the
//! last 30 days' payments per operator and per day (count, volume
//! collected, success rate), drawn as SVG charts by [`crate::charts`] with
//! the previous period beside, and each operator's status from the
//! catalogue. The figures are the tallies the outbox dispatcher keeps
//! ([`mmc_tallies`]): at most 60 days of rows per operator are read,
//! whatever the number of payments, for the session's merchant and
//! environment, by a person whose role may list payments (the scope a
//! key's list needs).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::Response;

use crate::charts::{Bar, Chart, Scale, Table, columns, percent, rows};
use mmc_common::clock::system_now_ms;
use mmc_console_kit::Console;
use mmc_console_kit::api::{self, Reading};
use mmc_console_kit::format;
use mmc_console_kit::html::{self, esc, t, text, tf};
use mmc_console_kit::sessions::Session;
use mmc_console_kit::web::{self, ConsoleError, Req};
use mmc_http::App;
use mmc_tallies::{Counts, DAY_MS, NOT_CHOSEN};

#[cfg(test)]
mod tests;
mod words;

pub use words::WORDS;

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

fn rate_text(l: html::Lang, r: Option<f64>) -> String {
    r.map(|r| percent(l, r)).unwrap_or_else(|| "–".into())
}

/// A day (days since the epoch, UTC) as a short label: `Dec 5`, `5 déc.`.
fn day_label(l: html::Lang, day: i64) -> String {
    let date = mmc_domain::time::rfc3339(day.max(0) as u64 * DAY_MS);
    let month: usize = date[5..7].parse().unwrap_or(1);
    let d: u32 = date[8..10].parse().unwrap_or(1);
    let month = t(l, &format!("ov_month_{month}"));
    match l {
        html::Lang::Fr => format!("{d} {month}"),
        html::Lang::En => format!("{month} {d}"),
    }
}

/// `n payments`, singular for one.
fn payments_text(l: html::Lang, n: i64) -> String {
    let key = if n == 1 {
        "ov_one_payment"
    } else {
        "ov_payments"
    };
    t(l, key).replace("{}", &format::group(l, n))
}

/// How much a figure moved, relative to the previous period: `+150%`,
/// `−20 %`; nothing to compare with when it was 0.
fn change(l: html::Lang, now: i64, before: i64) -> String {
    if before == 0 {
        return "–".into();
    }
    signed(percent(l, (now - before) as f64 * 100.0 / before as f64))
}

/// A rate's move in percentage points: `+30 pts`.
fn change_points(l: html::Lang, now: Option<f64>, before: Option<f64>) -> String {
    match (now, before) {
        (Some(now), Some(before)) => {
            t(l, "ov_points").replace("{}", &signed(format::number(l, now - before, 1)))
        }
        _ => "–".into(),
    }
}

/// A change with its sign: `+` for a rise, a true minus for a fall.
fn signed(text: String) -> String {
    match text.strip_prefix('-') {
        Some(fall) => format!("\u{2212}{fall}"),
        None if text.starts_with('0') => text,
        None => format!("+{text}"),
    }
}

/// One day of the period: its counts, and those of the day 30 days
/// earlier, which its chart shows beside it.
pub struct Day {
    pub day: i64,
    pub counts: Counts,
    pub before: Counts,
}

/// What the page shows: per day (oldest first) and per operator, today,
/// the 30 days, and the 30 days before them.
pub struct Figures {
    pub days: Vec<Day>,
    pub today: BTreeMap<String, Counts>,
    pub month: BTreeMap<String, Counts>,
    pub before: BTreeMap<String, Counts>,
}

impl Figures {
    fn total(by: &BTreeMap<String, Counts>) -> Counts {
        let mut total = Counts::default();
        by.values().for_each(|c| total.add(c));
        total
    }
}

/// The 30 days (UTC) ending with the day of `now_ms`: (first, last).
fn period(now_ms: u64) -> (i64, i64) {
    let today = (now_ms / DAY_MS) as i64;
    (today - (DAYS - 1), today)
}

/// The days read: the period and the 30 days before it.
fn read_days(now_ms: u64) -> (i64, i64) {
    let (first, today) = period(now_ms);
    (first - DAYS, today)
}

/// Adds up tally `rows` (day, operator, counts) into the 30 days ending with
/// the day of `now_ms` and the 30 days before. An operator none of whose
/// payments is left in a period (a hosted payment's row once its customer
/// chose) is not shown for it.
pub fn figures(rows: &[(i64, String, Counts)], now_ms: u64) -> Figures {
    let (first, today) = period(now_ms);
    let mut days: Vec<Day> = (first..=today)
        .map(|day| Day {
            day,
            counts: Counts::default(),
            before: Counts::default(),
        })
        .collect();
    let (mut by_today, mut month, mut before) = (BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
    for (day, operator, c) in rows {
        let by = if (first..=today).contains(day) {
            days[(day - first) as usize].counts.add(c);
            &mut month
        } else if (first - DAYS..first).contains(day) {
            days[(day - first + DAYS) as usize].before.add(c);
            &mut before
        } else {
            continue;
        };
        by.entry(operator.clone())
            .or_insert_with(Counts::default)
            .add(c);
        if *day == today {
            by_today
                .entry(operator.clone())
                .or_insert_with(Counts::default)
                .add(c);
        }
    }
    for by in [&mut by_today, &mut month, &mut before] {
        by.retain(|_, c: &mut Counts| c.payments != 0);
    }
    Figures {
        days,
        today: by_today,
        month,
        before,
    }
}

/// The 30 days beside the 30 before: payments, volume and success rate,
/// with how each moved.
fn comparison(l: html::Lang, f: &Figures, currency: &str) -> String {
    let (now, before) = (Figures::total(&f.month), Figures::total(&f.before));
    let mut out = format!(
        "<table><caption>{}</caption><thead><tr><th>{}</th><th>{}</th><th>{}</th><th>{}</th></tr></thead><tbody>",
        t(l, "ov_compare"),
        t(l, "ov_measure"),
        t(l, "last_30"),
        t(l, "ov_before"),
        t(l, "ov_change"),
    );
    let rows = [
        (
            t(l, "count"),
            format::group(l, now.payments),
            format::group(l, before.payments),
            change(l, now.payments, before.payments),
        ),
        (
            t(l, "volume"),
            format::money(l, now.volume, currency),
            format::money(l, before.volume, currency),
            change(l, now.volume, before.volume),
        ),
        (
            t(l, "success_rate"),
            rate_text(l, now.rate()),
            rate_text(l, before.rate()),
            change_points(l, now.rate(), before.rate()),
        ),
    ];
    for (what, now, before, moved) in rows {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(what),
            esc(&now),
            esc(&before),
            esc(&moved)
        );
    }
    out.push_str("</tbody></table>");
    out
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
    for (op, tally) in by {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&operator_label(l, op)),
            format::group(l, tally.payments),
            esc(&format::money(l, tally.volume, currency)),
            esc(&rate_text(l, tally.rate()))
        );
    }
    let total = Figures::total(by);
    let _ = write!(
        out,
        "</tbody><tfoot><tr><th>{}</th><td>{}</td><td>{}</td><td>{}</td></tr></tfoot></table>",
        t(l, "total"),
        format::group(l, total.payments),
        esc(&format::money(l, total.volume, currency)),
        esc(&rate_text(l, total.rate()))
    );
    out
}

/// The currency as the language names it beside an amount: `XOF`, `FCFA`.
fn unit(l: html::Lang, currency: &str) -> String {
    format::money(l, 0, currency)
        .trim_start_matches('0')
        .trim()
        .to_string()
}

/// The three charts, side by side on a wide screen: volume and success
/// rate per day, volume per operator; each beside the previous period.
fn charts(l: html::Lang, f: &Figures, currency: &str) -> String {
    let money = |v: i64| format::money(l, v, currency);
    let legend = || Some([t(l, "last_30").to_string(), t(l, "ov_before").to_string()]);
    let group = |v: f64| format::group(l, v as i64);
    let rate_tick = |v: f64| percent(l, v);
    let (now, before) = (Figures::total(&f.month), Figures::total(&f.before));
    let earlier = |d: &Day| day_label(l, d.day - DAYS);

    let best = f
        .days
        .iter()
        .filter(|d| d.counts.volume > 0)
        .max_by_key(|d| (d.counts.volume, d.day));
    let volume = columns(&Chart {
        lang: l,
        title: format!("{} ({})", t(l, "ov_volume_per_day"), unit(l, currency)),
        summary: tf(
            l,
            "ov_volume_summary",
            &[&money(now.volume), &money(before.volume)],
        ) + &best
            .map(|d| {
                format!(
                    " {}",
                    tf(
                        l,
                        "ov_best_day",
                        &[&day_label(l, d.day), &money(d.counts.volume)]
                    )
                )
            })
            .unwrap_or_default(),
        scale: Scale::Fit,
        tick: &group,
        bars: f
            .days
            .iter()
            .map(|d| Bar {
                label: day_label(l, d.day),
                value: Some(d.counts.volume as f64),
                previous: Some(d.before.volume as f64),
                value_text: money(d.counts.volume),
                says: tf(
                    l,
                    "ov_says_volume",
                    &[
                        &day_label(l, d.day),
                        &money(d.counts.volume),
                        &payments_text(l, d.counts.payments),
                        &earlier(d),
                        &money(d.before.volume),
                    ],
                ),
            })
            .collect(),
        legend: legend(),
        table: Some(Table {
            caption: t(l, "ov_volume_per_day").to_string(),
            head: vec![
                t(l, "ov_day").into(),
                t(l, "count").into(),
                t(l, "volume").into(),
                t(l, "ov_volume_earlier").into(),
            ],
            rows: f
                .days
                .iter()
                .map(|d| {
                    vec![
                        day_label(l, d.day),
                        format::group(l, d.counts.payments),
                        money(d.counts.volume),
                        money(d.before.volume),
                    ]
                })
                .collect(),
        }),
    });

    let rate = columns(&Chart {
        lang: l,
        title: format!("{} (%)", t(l, "ov_rate_per_day")),
        summary: tf(
            l,
            "ov_rate_summary",
            &[&rate_text(l, now.rate()), &rate_text(l, before.rate())],
        ),
        scale: Scale::Percent,
        tick: &rate_tick,
        bars: f
            .days
            .iter()
            .map(|d| Bar {
                label: day_label(l, d.day),
                value: d.counts.rate(),
                previous: d.before.rate(),
                value_text: rate_text(l, d.counts.rate()),
                says: tf(
                    l,
                    "ov_says_rate",
                    &[
                        &day_label(l, d.day),
                        &rate_text(l, d.counts.rate()),
                        &format::group(l, d.counts.succeeded),
                        &format::group(l, d.counts.finished),
                        &earlier(d),
                        &rate_text(l, d.before.rate()),
                    ],
                ),
            })
            .collect(),
        legend: legend(),
        table: Some(Table {
            caption: t(l, "ov_rate_per_day").to_string(),
            head: vec![
                t(l, "ov_day").into(),
                t(l, "success_rate").into(),
                t(l, "ov_paid").into(),
                t(l, "ov_known").into(),
                t(l, "ov_rate_earlier").into(),
            ],
            rows: f
                .days
                .iter()
                .map(|d| {
                    vec![
                        day_label(l, d.day),
                        rate_text(l, d.counts.rate()),
                        format::group(l, d.counts.succeeded),
                        format::group(l, d.counts.finished),
                        rate_text(l, d.before.rate()),
                    ]
                })
                .collect(),
        }),
    });

    // Every operator of either period, the largest this period first.
    let mut operators: Vec<(&String, Counts, Counts)> = f
        .month
        .keys()
        .chain(f.before.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .map(|op| {
            let of = |by: &BTreeMap<String, Counts>| by.get(op).copied().unwrap_or_default();
            (op, of(&f.month), of(&f.before))
        })
        .collect();
    operators.sort_by_key(|(op, now, before)| (-now.volume, -before.volume, (*op).clone()));
    let per_operator = rows(&Chart {
        lang: l,
        title: format!("{} ({})", t(l, "ov_volume_per_operator"), unit(l, currency)),
        summary: match operators.first() {
            Some((op, now, _)) => tf(
                l,
                "ov_operator_summary",
                &[
                    &operators.len().to_string(),
                    &operator_label(l, op),
                    &money(now.volume),
                ],
            ),
            None => String::new(),
        },
        scale: Scale::Fit,
        tick: &group,
        bars: operators
            .iter()
            .map(|(op, now, before)| Bar {
                label: operator_label(l, op),
                value: Some(now.volume as f64),
                previous: Some(before.volume as f64),
                value_text: money(now.volume),
                says: tf(
                    l,
                    "ov_says_operator",
                    &[
                        &operator_label(l, op),
                        &money(now.volume),
                        &money(before.volume),
                    ],
                ),
            })
            .collect(),
        legend: legend(),
        table: Some(Table {
            caption: t(l, "ov_volume_per_operator").to_string(),
            head: vec![
                t(l, "operator").into(),
                t(l, "volume").into(),
                t(l, "ov_before").into(),
                t(l, "ov_change").into(),
            ],
            rows: operators
                .iter()
                .map(|(op, now, before)| {
                    vec![
                        operator_label(l, op),
                        money(now.volume),
                        money(before.volume),
                        change(l, now.volume, before.volume),
                    ]
                })
                .collect(),
        }),
    });
    format!(
        "<div class=\"sides\"><section>{volume}</section><section>{rate}</section><section>{per_operator}</section></div>"
    )
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
    for country in answer.value()["data"].as_array().into_iter().flatten() {
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
    let rows = mmc_console_kit::blocking(|| {
        mmc_tallies::read(
            &c.tallies,
            &s.merchant_id,
            s.environment.as_str(),
            read_days(now),
        )
    })?;
    let f = figures(&rows, now);
    // Every supported country pays in XOF.
    let currency = "XOF";
    // At a glance first: the period against the one before, the charts;
    // then the figures per operator.
    let mut body = comparison(l, &f, currency);
    body.push_str(&charts(l, &f, currency));
    body.push_str(&operator_table(l, t(l, "today"), &f.today, currency));
    body.push_str(&operator_table(l, t(l, "last_30"), &f.month, currency));
    body.push_str(&operators(app, req, s).await?);
    Ok(web::page_response(
        200,
        html::page(l, Some(s), t(l, "overview"), &body),
    ))
}
