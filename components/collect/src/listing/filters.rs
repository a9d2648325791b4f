//! The list's filters (`status`, `operator`, `country`): parsed, checked on
//! a record, and turned into the `listing` index's prefixes.

use mmc_domain::{Status, operators};

use crate::ApiError;
use crate::mmc::api::http_types::Request;
use crate::store::{self, Payment};

use super::params::{invalid, param};

pub(super) const STATUSES: [Status; 9] = [
    Status::Pending,
    Status::Processing,
    Status::AwaitingOtp,
    Status::AwaitingPayment,
    Status::Completed,
    Status::Failed,
    Status::Cancelled,
    Status::Expired,
    Status::Refunded,
];

pub struct Filters {
    status: Option<Status>,
    operator: Option<&'static str>,
    country: Option<String>,
}

impl Filters {
    pub(super) fn is_empty(&self) -> bool {
        self.status.is_none() && self.operator.is_none() && self.country.is_none()
    }

    /// The `listing` prefixes holding every payment these filters keep:
    /// each status (as keyed: [`store::listed_status`]), country and
    /// operator (or none chosen yet) they allow.
    pub(super) fn prefixes(&self, env: &str, merchant: &str) -> Vec<String> {
        let mut statuses: Vec<Status> = match self.status {
            Some(s) => vec![s],
            None => STATUSES.to_vec(),
        };
        statuses
            .iter_mut()
            .for_each(|s| *s = store::listed_status(*s));
        statuses.dedup(); // in progress first in STATUSES: one `pending`
        let mut routes: Vec<(&str, Option<&str>)> = Vec::new();
        for country in operators::Country::ALL {
            let code = country.code();
            if self.country.as_deref().is_some_and(|c| c != code) {
                continue;
            }
            if self.operator.is_none() {
                routes.push((code, None));
            }
            for op in operators::OPERATORS.iter().filter(|o| o.country == country) {
                if self.operator.is_none_or(|want| want == op.slug) {
                    routes.push((code, Some(op.slug)));
                }
            }
        }
        let mut out = Vec::with_capacity(statuses.len() * routes.len());
        for &status in &statuses {
            for &(country, operator) in &routes {
                out.push(store::listing_prefix(
                    env, merchant, status, country, operator,
                ));
            }
        }
        out
    }

    pub(super) fn keep(&self, p: &Payment) -> bool {
        self.status.is_none_or(|s| p.status == s)
            && self
                .operator
                .is_none_or(|o| p.operator.as_deref() == Some(o))
            && self.country.as_deref().is_none_or(|c| p.country == c)
    }
}

pub fn filters(req: &Request) -> Result<Filters, ApiError> {
    let status = match param(req, "status") {
        None => None,
        Some(v) => Some(
            STATUSES
                .into_iter()
                .find(|s| s.as_str() == v)
                .ok_or_else(|| {
                    invalid(
                        "status",
                        format!(
                            "status must be one of {}.",
                            STATUSES.map(Status::as_str).join(", ")
                        ),
                    )
                })?,
        ),
    };
    let operator = match param(req, "operator") {
        None => None,
        Some(v) => Some(
            operators::find(&v)
                .map(|o| o.slug)
                .ok_or_else(|| invalid("operator", format!("Unknown operator '{v}'.")))?,
        ),
    };
    let country = match param(req, "country") {
        None => None,
        Some(v) => Some(
            operators::Country::parse(&v)
                .map(|_| v.to_ascii_uppercase())
                .ok_or_else(|| {
                    ApiError::invalid(
                        "country_not_supported",
                        "country",
                        "country must be one of BJ, TG, CI.",
                    )
                })?,
        ),
    };
    Ok(Filters {
        status,
        operator,
        country,
    })
}
