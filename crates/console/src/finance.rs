//! Finance: the providers' balances now, a day's reconciliation counted
//! over the merchant's records (a table and a chart), its cases with a
//! filter, a case's page with both sides' records side by side, resolving
//! with a note (audited), and the day as CSV, one row per record with its
//! category: what an accountant imports. For the finance and owner roles.

use std::fmt::Write;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::Response;
use mmc_books::{Category, Line, Ours};

use crate::charts::{Bar, Chart, Scale, rows};
use mmc_common::clock::system_now_ms;
use mmc_console_kit::html::{self, esc, t};
use mmc_console_kit::sessions::Session;
use mmc_console_kit::users::Role;
use mmc_console_kit::web::{self, ConsoleError, Req, check_csrf};
use mmc_console_kit::{Console, blocking};
use mmc_console_kit::{format, outcomes};
use mmc_http::App;
use mmc_reconciliation::{Case, CaseStatus, Day, Judged};

type Resp = Response<Full<Bytes>>;

fn finance(s: &Session) -> Result<(), ConsoleError> {
    match s.role {
        Role::Finance | Role::Owner => Ok(()),
        _ => Err(ConsoleError::Forbidden("finance or owner role".into())),
    }
}

fn unavailable(e: mmc_reconciliation::BooksError) -> ConsoleError {
    ConsoleError::Unavailable(e.to_string())
}

/// The day `given` (a query parameter or a form field), else yesterday: the last finished day.
fn day_of(req: &Req, given: Option<String>) -> Result<Day, ConsoleError> {
    match given.filter(|d| !d.is_empty()) {
        Some(d) => Day::parse(&d).map_err(|_| {
            ConsoleError::Refused(
                400,
                mmc_console_kit::html::plain(req.lang, "bad_date", &["date", &d]),
            )
        }),
        None => Ok(Day::of_ms(system_now_ms()).before()),
    }
}

/// The merchant's lines of `day` in this environment, per account that was run.
fn lines_of(app: &App, s: &Session, day: Day) -> Result<Vec<(String, Judged)>, ConsoleError> {
    let books = &app.books;
    let mut out = Vec::new();
    for account in books.accounts_of(s.environment.as_str()) {
        let lines = books.merchant_lines(&account, day, &s.merchant_id);
        out.extend(
            lines
                .map_err(unavailable)?
                .into_iter()
                .map(|l| (account.clone(), l)),
        );
    }
    Ok(out)
}

fn mine(s: &Session, c: &Case) -> bool {
    c.merchant_id.as_deref() == Some(s.merchant_id.as_str())
        && c.environment.as_deref() == Some(s.environment.as_str())
}

fn category_word(l: html::Lang, c: Category) -> &'static str {
    t(l, c.as_str())
}

pub async fn page(app: &Arc<App>, req: &Req, s: &Session) -> Result<Resp, ConsoleError> {
    finance(s)?;
    let l = req.lang;
    let day = day_of(req, req.param("date"))?;
    let wanted = req.param("category").filter(|c| !c.is_empty());
    let wanted = match wanted.as_deref().map(Category::parse) {
        Some(None) => return Err(ConsoleError::Refused(400, t(l, "bad_category").into())),
        Some(Some(c)) => Some(c),
        None => None,
    };
    let env = s.environment.as_str();
    let (balances, reports, lines, cases) = blocking(|| {
        let books = &app.books;
        let accounts = books.accounts_of(env);
        let balances = books.balances_of(accounts.clone());
        let mut reports = Vec::new();
        for a in &accounts {
            reports.extend(books.report(a, day).map_err(unavailable)?);
        }
        let lines = lines_of(app, s, day)?;
        let cases: Vec<Case> = books
            .cases(Some(CaseStatus::Open), usize::MAX)
            .map_err(unavailable)?
            .into_iter()
            .filter(|c| mine(s, c) && wanted.is_none_or(|w| c.category == w))
            .take(200)
            .collect();
        Ok::<_, ConsoleError>((balances, reports, lines, cases))
    })?;
    let mut body = format!("<h1>{}</h1>", t(l, "finance"));
    // Balances now.
    let _ = write!(
        body,
        "<h2>{}</h2><table><thead><tr><th>{}</th><th>{}</th><th>{}</th><th>{}</th></tr></thead><tbody>",
        t(l, "balances"),
        t(l, "account"),
        t(l, "wallet"),
        t(l, "available"),
        t(l, "reserved"),
    );
    for a in &balances {
        if let Some(e) = &a.error {
            let _ = write!(
                body,
                "<tr><td>{}</td><td colspan=\"3\">{}: {}</td></tr>",
                esc(&a.account),
                t(l, "unreadable"),
                esc(e)
            );
        }
        for b in &a.balances {
            let _ = write!(
                body,
                "<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
                esc(&a.account),
                esc(&b.wallet),
                esc(&format::money_text(l, &b.available, &b.currency)),
                esc(&b
                    .reserved
                    .as_deref()
                    .map_or_else(|| "–".into(), |r| format::money_text(l, r, &b.currency))),
            );
        }
    }
    body.push_str("</tbody></table>");
    // The day.
    let _ = write!(
        body,
        "<h2>{title} {day}</h2><form method=\"get\" action=\"/console/finance\" class=\"filters\">\
         <label>{date} <input type=\"date\" name=\"date\" value=\"{day}\"></label> <button>{show}</button> \
         <a href=\"/console/finance.csv?date={day}\">{csv}</a></form>",
        title = t(l, "reconciliation_of"),
        date = t(l, "date"),
        show = t(l, "show"),
        csv = t(l, "export_day"),
    );
    if reports.is_empty() {
        let _ = write!(body, "<p>{}</p>", t(l, "not_reconciled_yet"));
    }
    let _ = write!(
        body,
        "<form method=\"post\" action=\"/console/finance/run\">{}\
         <input type=\"hidden\" name=\"date\" value=\"{day}\"><button>{}</button></form>",
        html::csrf_field(s),
        t(l, "reconcile_now"),
    );
    for r in &reports {
        let state = if r.status == "reconciled" {
            t(l, "reconciled")
        } else {
            t(l, "day_incomplete")
        };
        let _ = write!(
            body,
            "<p><strong>{}</strong>: {state}{}{}</p>",
            esc(&r.account),
            r.reason
                .as_deref()
                .map(|why| format!(" — {}", esc(why)))
                .unwrap_or_default(),
            if r.is_final {
                String::new()
            } else {
                format!(" ({})", t(l, "not_final"))
            },
        );
        for w in &r.wallets {
            let v = |x: &Option<String>| esc(x.as_deref().unwrap_or("–"));
            let _ = write!(
                body,
                "<p>{} {}: {} {} → {} {} ({} {}; {} {})</p>",
                esc(&w.wallet),
                esc(&w.currency),
                t(l, "opening"),
                v(&w.opening),
                t(l, "closing"),
                v(&w.closing),
                t(l, "net"),
                v(&w.net),
                if w.drifted() {
                    t(l, "drift_warn")
                } else {
                    t(l, "drift")
                },
                v(&w.drift),
            );
        }
    }
    let mut counts = mmc_books::Tally::new();
    for (_, line) in &lines {
        counts.count(line.category);
    }
    // The counts and their chart side by side on a wide screen.
    let _ = write!(
        body,
        "<div class=\"sides\"><section><table><thead><tr><th>{}</th><th>{}</th></tr></thead><tbody>",
        t(l, "category"),
        t(l, "count")
    );
    let chart: Vec<Bar> = Category::ALL
        .iter()
        .map(|c| {
            let n = counts.of(*c);
            let _ = write!(
                body,
                "<tr><td><a href=\"/console/finance?date={day}&amp;category={}\">{}</a></td><td>{n}</td></tr>",
                c.as_str(),
                category_word(l, *c)
            );
            Bar {
                label: category_word(l, *c).to_string(),
                value: Some(n as f64),
                previous: None,
                value_text: mmc_console_kit::format::group(l, n as i64),
                says: esc(&format!("{}: {n}", category_word(l, *c))),
            }
        })
        .collect();
    body.push_str("</tbody></table></section><section>");
    let tick = |v: f64| mmc_console_kit::format::group(l, v as i64);
    body.push_str(&rows(&Chart {
        lang: l,
        title: format!("{} {day}", t(l, "records_by_category")),
        summary: chart
            .iter()
            .map(|b| b.says.as_str())
            .collect::<Vec<_>>()
            .join("; "),
        scale: Scale::Fit,
        tick: &tick,
        bars: chart,
        // The table beside it has the same numbers.
        legend: None,
        table: None,
    }));
    body.push_str("</section></div>");
    // Open cases.
    let _ = write!(
        body,
        "<h2>{}{}</h2><table><thead><tr><th>{}</th><th>{}</th><th>{}</th><th>{}</th><th>{}</th></tr></thead><tbody>",
        t(l, "open_cases"),
        wanted
            .map(|c| format!(" — {}", category_word(l, c)))
            .unwrap_or_default(),
        t(l, "opened"),
        t(l, "account"),
        t(l, "category"),
        t(l, "record"),
        t(l, "amount"),
    );
    for c in &cases {
        let amount = c
            .ours
            .as_ref()
            .map(|o| format::money(l, o.amount as i64, &o.currency))
            .unwrap_or_default();
        let _ = write!(
            body,
            "<tr><td>{}</td><td>{}</td><td><a href=\"/console/finance/cases/{id}\">{}</a></td><td>{}</td><td>{}</td></tr>",
            esc(&format::when_text(s.zone, &c.opened_at)),
            esc(&c.account),
            category_word(l, c.category),
            esc(&c.subject),
            esc(&amount),
            id = esc(&c.id),
        );
    }
    if cases.is_empty() {
        let _ = write!(
            body,
            "<tr><td colspan=\"5\">{}</td></tr>",
            t(l, "no_open_cases")
        );
    }
    body.push_str("</tbody></table>");
    Ok(web::page_response(
        200,
        html::page(l, Some(s), t(l, "finance"), &body),
    ))
}

fn ours_table(l: html::Lang, o: Option<&Ours>) -> String {
    let Some(o) = o else {
        return format!("<p>{}</p>", t(l, "no_record_here"));
    };
    format!(
        "<table><tbody><tr><th>{}</th><td>{}</td></tr><tr><th>{}</th><td>{}</td></tr>\
         <tr><th>{}</th><td>{}</td></tr><tr><th>{}</th><td>{}</td></tr><tr><th>{}</th><td>{}</td></tr></tbody></table>",
        t(l, "record"),
        esc(&o.id),
        t(l, "kind"),
        esc(o.kind.as_str()),
        t(l, "amount"),
        esc(&format::money(l, o.amount as i64, &o.currency)),
        t(l, "status"),
        esc(&outcomes::status(l, &o.stated)),
        t(l, "psp_reference"),
        esc(o.psp_reference.as_deref().unwrap_or("–")),
    )
}

fn theirs_table(
    l: html::Lang,
    zone: format::Zone,
    lines: &[Line],
    expected_fee: Option<u64>,
) -> String {
    if lines.is_empty() {
        return format!("<p>{}</p>", t(l, "no_record_there"));
    }
    let mut out = format!(
        "<table><thead><tr><th>{}</th><th>{}</th><th>{}</th><th>{}</th><th>{}</th><th>{}</th></tr></thead><tbody>",
        t(l, "provider_id"),
        t(l, "kind"),
        t(l, "amount"),
        t(l, "fee"),
        t(l, "status"),
        t(l, "when"),
    );
    for line in lines {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td><td>{}</td></tr>",
            esc(&line.provider_id),
            esc(line.kind.as_str()),
            esc(&format::money_text(
                l,
                &line.amount.to_string(),
                &line.currency
            )),
            esc(&line
                .fee
                .map(|f| format::money_text(l, &f.to_major(), &line.currency))
                .unwrap_or_else(|| "–".into())),
            esc(&outcomes::status(l, &line.status)),
            zone.when(line.at_ms),
        );
    }
    out.push_str("</tbody></table>");
    if let Some(fee) = expected_fee {
        let _ = write!(out, "<p>{}: {fee}</p>", t(l, "expected_fee"));
    }
    out
}

fn case_of(app: &App, s: &Session, id: &str) -> Result<Case, ConsoleError> {
    match blocking(|| app.books.case(id)).map_err(unavailable)? {
        Some(c) if mine(s, &c) => Ok(c),
        _ => Err(ConsoleError::NotFound),
    }
}

pub async fn case_page(
    app: &Arc<App>,
    req: &Req,
    s: &Session,
    id: &str,
) -> Result<Resp, ConsoleError> {
    finance(s)?;
    let l = req.lang;
    let c = case_of(app, s, id)?;
    let status = match c.status {
        CaseStatus::Open => t(l, "case_open"),
        CaseStatus::Resolved => t(l, "case_resolved"),
        CaseStatus::Closed => t(l, "case_closed"),
    };
    let mut body = format!(
        "<h1>{} — {}</h1><p>{} · {} {} · {}</p>",
        category_word(l, c.category),
        esc(&c.account),
        status,
        t(l, "found_on"),
        esc(&c.date),
        esc(&c.id),
    );
    let _ = write!(
        body,
        "<div class=\"sides\"><section><h2>{}</h2>{}</section><section><h2>{}</h2>{}</section></div>",
        t(l, "our_books"),
        ours_table(l, c.ours.as_ref()),
        t(l, "provider_books"),
        theirs_table(l, s.zone, &c.theirs, c.expected_fee),
    );
    if let Some(r) = &c.resolution {
        let _ = write!(
            body,
            "<p><strong>{}</strong> {} — {}</p>",
            esc(&r.by),
            esc(&r.at),
            esc(&r.note)
        );
    }
    if c.status == CaseStatus::Open {
        let _ = write!(
            body,
            "<form method=\"post\" action=\"/console/finance/cases/{id}/resolve\">{csrf}\
             <label>{note} <textarea name=\"note\" required maxlength=\"2000\"></textarea></label> \
             <button>{resolve}</button></form>",
            id = esc(&c.id),
            csrf = html::csrf_field(s),
            note = t(l, "resolution_note"),
            resolve = t(l, "resolve"),
        );
    }
    Ok(web::page_response(
        200,
        html::page(l, Some(s), t(l, "finance"), &body),
    ))
}

pub async fn resolve(
    app: &Arc<App>,
    c: &Console,
    req: &Req,
    s: &Session,
    id: &str,
) -> Result<Resp, ConsoleError> {
    finance(s)?;
    check_csrf(req, s)?;
    let case = case_of(app, s, id)?;
    let note = req.field("note").unwrap_or_default();
    let audit = (
        "reconciliation.case.resolve",
        Some(case.id.as_str()),
        req.client.as_deref(),
    );
    let done = blocking(|| {
        c.audit.act(
            s,
            audit,
            || app.books.resolve(&case.id, &s.email, &note),
            |_| (None, Some(note.trim().to_string())),
        )
    })?;
    match done {
        Ok(_) => Ok(web::redirect(&format!(
            "/console/finance/cases/{}",
            case.id
        ))),
        Err(mmc_reconciliation::BooksError::NoteRequired) => Err(ConsoleError::Refused(
            400,
            t(req.lang, "note_required").into(),
        )),
        Err(mmc_reconciliation::BooksError::NotOpen(..)) => Err(ConsoleError::Refused(
            409,
            t(req.lang, "case_not_open").into(),
        )),
        Err(e) => Err(unavailable(e)),
    }
}

/// Reconciles the day asked, now, for every account serving the session's
/// environment (audited): a day still under way gives a report that says so.
pub async fn run(
    app: &Arc<App>,
    c: &Console,
    req: &Req,
    s: &Session,
) -> Result<Resp, ConsoleError> {
    finance(s)?;
    check_csrf(req, s)?;
    let l = req.lang;
    let day = day_of(req, req.field("date"))?;
    let date = day.to_string();
    let audit = (
        "reconciliation.run",
        Some(date.as_str()),
        req.client.as_deref(),
    );
    let accounts = app.books.accounts_of(s.environment.as_str());
    let done = blocking(|| {
        c.audit.act(
            s,
            audit,
            || {
                accounts
                    .iter()
                    .map(|a| app.books.reconcile(a, day))
                    .collect::<Result<Vec<_>, _>>()
            },
            |reports| {
                let said: Vec<String> = reports
                    .iter()
                    .map(|r| format!("{}: {}", r.account, r.status))
                    .collect();
                (None, Some(said.join(", ")))
            },
        )
    })?;
    match done {
        Ok(_) => Ok(web::redirect(&format!("/console/finance?date={date}"))),
        Err(mmc_reconciliation::BooksError::FutureDate(_)) => Err(ConsoleError::Refused(
            400,
            mmc_console_kit::html::plain(l, "bad_date", &["date", &date]),
        )),
        Err(e) => Err(unavailable(e)),
    }
}

/// The day as an accountant imports it: one row per record of the merchant.
pub async fn csv(app: &Arc<App>, req: &Req, s: &Session) -> Result<Resp, ConsoleError> {
    finance(s)?;
    let day = day_of(req, req.param("date"))?;
    let lines = blocking(|| lines_of(app, s, day))?;
    let columns = [
        "date",
        "account",
        "record",
        "kind",
        "category",
        "our_status",
        "amount",
        "currency",
        "provider_ids",
        "provider_amount",
        "provider_fee",
        "expected_fee",
        "net",
    ];
    let mut out = columns.join(",");
    out.push_str("\r\n");
    for (account, line) in &lines {
        let Some(o) = &line.ours else { continue };
        let executed: Vec<&Line> = line.theirs.iter().filter(|t| t.executed()).collect();
        let provider_amount = executed
            .first()
            .map(|t| t.amount.to_major())
            .unwrap_or_default();
        // A fee the statement does not state on the movement is left blank, and so is the net.
        let stated: Option<u64> = (!executed.is_empty())
            .then(|| executed.iter().map(|t| t.fee.map(|f| f.0)).sum())
            .flatten();
        let fee = stated
            .map(|f| mmc_books::Amount(f).to_major())
            .unwrap_or_default();
        let net = executed
            .first()
            .zip(stated)
            .map(|(t, f)| mmc_books::Amount(t.amount.0.saturating_sub(f)).to_major())
            .unwrap_or_default();
        let ids: Vec<&str> = line.theirs.iter().map(|t| t.provider_id.as_str()).collect();
        let row = [
            day.to_string(),
            account.clone(),
            o.id.clone(),
            o.kind.as_str().to_string(),
            line.category.as_str().to_string(),
            o.stated.clone(),
            o.amount.to_string(),
            o.currency.clone(),
            ids.join(" "),
            provider_amount,
            fee,
            line.expected_fee.map(|f| f.to_string()).unwrap_or_default(),
            net,
        ];
        let row: Vec<String> = row.iter().map(|v| crate::payments::csv_field(v)).collect();
        out.push_str(&row.join(","));
        out.push_str("\r\n");
    }
    let mut resp = web::body_response(200, "text/csv; charset=utf-8", out.into_bytes());
    let disposition = format!("attachment; filename=\"reconciliation-{day}.csv\"");
    if let Ok(v) = hyper::header::HeaderValue::from_str(&disposition) {
        resp.headers_mut().insert("content-disposition", v);
    }
    Ok(resp)
}
