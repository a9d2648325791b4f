//! The books over HTTP. On the admin API (`/admin/v1`): run a day, read
//! reports, a day's lines, cases, and resolve a case. On the public API, for
//! a merchant's key (`/api/v1/balances`, `/api/v1/reconciliation/…`): the
//! providers' balances, and the reports and cases of its own records.

use serde_json::{Value, json};

use super::errors::{self, ApiError};
use super::native::{NativeRequest, NativeResponse};
use mmc_reconciliation::{Books, BooksError, CaseStatus, Day, Judged, Report};

/// What a books error means to the client.
fn refused(e: BooksError) -> ApiError {
    match &e {
        BooksError::UnknownAccount(_) => ApiError::no_such("account_not_found", e.to_string()),
        BooksError::BadDate(_) | BooksError::FutureDate(_) => {
            ApiError::invalid("parameter_invalid", "date", e.to_string())
        }
        BooksError::UnknownCase(_) => ApiError::no_such("resource_not_found", e.to_string()),
        BooksError::NotOpen(..) => ApiError::state("case_not_open", e.to_string()),
        BooksError::NoteRequired => ApiError::invalid("parameter_invalid", "note", e.to_string()),
        BooksError::Corrupt(_) => ApiError::internal(e.to_string()),
        BooksError::Busy => ApiError::unavailable(e.to_string()),
        BooksError::Storage(
            mmc_db::StorageError::Unavailable(_) | mmc_db::StorageError::Conflict(_),
        ) => ApiError::unavailable(e.to_string()),
        BooksError::Storage(_) => ApiError::internal(e.to_string()),
    }
}

fn date_param(req: &NativeRequest) -> Result<Day, ApiError> {
    match req.query("date") {
        Some(d) => Day::parse(&d).map_err(refused),
        None => Err(ApiError::invalid(
            "parameter_missing",
            "date",
            "date is required: the day, written YYYY-MM-DD.",
        )),
    }
}

fn status_param(req: &NativeRequest) -> Result<Option<CaseStatus>, ApiError> {
    match req.query("status") {
        None => Ok(None),
        Some(s) => CaseStatus::parse(&s).map(Some).ok_or_else(|| {
            ApiError::invalid(
                "parameter_invalid",
                "status",
                "status must be open, resolved or closed.",
            )
        }),
    }
}

fn limit_param(req: &NativeRequest) -> Result<usize, ApiError> {
    match req.query("limit") {
        None => Ok(100),
        Some(l) => l
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=1000).contains(n))
            .ok_or_else(|| {
                ApiError::invalid(
                    "parameter_invalid",
                    "limit",
                    "limit must be a number from 1 to 1000.",
                )
            }),
    }
}

fn list(data: impl serde::Serialize) -> NativeResponse {
    NativeResponse::json(200, json!({"object": "list", "data": data}))
}

fn segments(path: &str) -> Vec<&str> {
    path.trim_end_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .skip(2)
        .collect()
}

/// `/admin/v1/reconciliation/…` and `/admin/v1/balances`.
pub async fn admin(books: &Books, req: NativeRequest) -> Result<NativeResponse, ApiError> {
    let segments = segments(&req.path);
    match (req.method.as_str(), segments.as_slice()) {
        ("GET", ["balances"]) => Ok(list(req.blocking(|| books.balances_of(books.accounts())))),
        ("POST", ["reconciliation", "runs"]) => {
            let body = req.json_object()?;
            let date = body.get("date").and_then(Value::as_str).ok_or_else(|| {
                ApiError::invalid(
                    "parameter_missing",
                    "date",
                    "date is required: the day, written YYYY-MM-DD.",
                )
            })?;
            let day = Day::parse(date).map_err(refused)?;
            let accounts = match body.get("account") {
                None | Some(Value::Null) => books.accounts(),
                Some(Value::String(a)) => vec![a.clone()],
                Some(_) => {
                    return Err(ApiError::invalid(
                        "parameter_invalid",
                        "account",
                        "account must be a string.",
                    ));
                }
            };
            let reports = req
                .blocking(|| {
                    accounts
                        .iter()
                        .map(|a| books.reconcile(a, day))
                        .collect::<Result<Vec<Report>, BooksError>>()
                })
                .map_err(refused)?;
            Ok(list(reports))
        }
        ("GET", ["reconciliation", "reports"]) => {
            let day = date_param(&req)?;
            Ok(list(req.blocking(|| books.reports(day)).map_err(refused)?))
        }
        ("GET", ["reconciliation", "reports", account, date, "lines"]) => {
            let day = Day::parse(date).map_err(refused)?;
            if !books.accounts().iter().any(|a| a == account) {
                return Err(refused(BooksError::UnknownAccount(account.to_string())));
            }
            Ok(list(
                req.blocking(|| books.lines(account, day))
                    .map_err(refused)?,
            ))
        }
        ("GET", ["reconciliation", "cases"]) => {
            let (status, limit) = (status_param(&req)?, limit_param(&req)?);
            Ok(list(
                req.blocking(|| books.cases(status, limit))
                    .map_err(refused)?,
            ))
        }
        ("GET", ["reconciliation", "cases", id]) => {
            match req.blocking(|| books.case(id)).map_err(refused)? {
                Some(case) => Ok(NativeResponse::json(200, json!(case))),
                None => Err(refused(BooksError::UnknownCase(id.to_string()))),
            }
        }
        ("POST", ["reconciliation", "cases", id, "resolve"]) => {
            let body = req.json_object()?;
            let note = body.get("note").and_then(Value::as_str).unwrap_or_default();
            let case = req
                .blocking(|| books.resolve(id, "admin", note))
                .map_err(refused)?;
            Ok(NativeResponse::json(200, json!(case)))
        }
        (_, ["balances"] | ["reconciliation", ..]) => Err(errors::method_not_allowed(&req.method)),
        _ => Err(ApiError::no_such(
            "resource_not_found",
            format!("No such endpoint: {} {}", req.method, req.path),
        )),
    }
}

/// A report as one merchant sees it: counted over its own records only
/// (`lines`, from [`Books::merchant_lines`]).
pub fn merchant_report(report: &Report, lines: &[Judged]) -> Value {
    let mut tally = mmc_books::Tally::new();
    for line in lines {
        tally.count(line.category);
        tally.our_records += 1;
    }
    json!({
        "object": "reconciliation_report",
        "account": report.account,
        "date": report.date,
        "status": report.status,
        "reason": report.reason,
        "final": report.is_final,
        "method": report.method,
        "ran_at": report.ran_at,
        "counts": tally.counts,
        "our_records": tally.our_records,
    })
}

/// `/api/v1/balances` and `/api/v1/reconciliation/…` for a merchant's key
/// in `environment`: the balances of the accounts serving that environment,
/// the merchant's own records and cases.
pub async fn public(
    books: &Books,
    (merchant, environment): (&str, &str),
    req: NativeRequest,
) -> Result<NativeResponse, ApiError> {
    let segments = segments(&req.path);
    let mine = |c: &mmc_reconciliation::Case| {
        c.merchant_id.as_deref() == Some(merchant) && c.environment.as_deref() == Some(environment)
    };
    match (req.method.as_str(), segments.as_slice()) {
        ("GET", ["balances"]) => {
            let accounts = books.accounts_of(environment);
            Ok(list(req.blocking(|| books.balances_of(accounts))))
        }
        ("GET", ["reconciliation", "reports"]) => {
            let day = date_param(&req)?;
            let views = req
                .blocking(|| {
                    let mut views = Vec::new();
                    for account in books.accounts_of(environment) {
                        let Some(report) = books.report(&account, day)? else {
                            continue;
                        };
                        let lines = books.merchant_lines(&account, day, merchant)?;
                        views.push(merchant_report(&report, &lines));
                    }
                    Ok::<_, BooksError>(views)
                })
                .map_err(refused)?;
            Ok(list(views))
        }
        ("GET", ["reconciliation", "cases"]) => {
            let (status, limit) = (status_param(&req)?, limit_param(&req)?);
            let cases = req
                .blocking(|| books.cases(status, usize::MAX))
                .map_err(refused)?;
            Ok(list(
                cases
                    .into_iter()
                    .filter(mine)
                    .take(limit)
                    .collect::<Vec<_>>(),
            ))
        }
        ("GET", ["reconciliation", "cases", id]) => {
            match req.blocking(|| books.case(id)).map_err(refused)? {
                Some(case) if mine(&case) => Ok(NativeResponse::json(200, json!(case))),
                _ => Err(refused(BooksError::UnknownCase(id.to_string()))),
            }
        }
        // Every public endpoint of the books only reads.
        (
            _,
            ["balances"] | ["reconciliation", "reports" | "cases"] | ["reconciliation", "cases", _],
        ) => Err(ApiError::method_not_allowed(&req.method, "GET, HEAD")),
        _ => Err(ApiError::no_such(
            "resource_not_found",
            format!("No such endpoint: {} {}", req.method, req.path),
        )),
    }
}
