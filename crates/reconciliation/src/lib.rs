//! The books: each provider account's statement of a day matched with what
//! we recorded, every record in exactly one category ([`mmc_books`]), every
//! difference a case in front of a person ([`cases`]), and the providers'
//! balances as they state them. Runs by itself for each account's finished
//! days ([`schedule`]) and on demand (`mmc reconcile`, the admin API).
//!
//! The provider's books outrank ours, and nothing here writes ours: a
//! record the provider says moved while ours says failed or in progress (a
//! late arrival) is handed to the component that owns it, which asks the
//! provider again by our id and records the answer by its own rules
//! ([`Runtime::recheck`]); the run then judges it as it stands.

pub mod cases;
mod counted;
mod ours;
mod provider;
mod run;
pub mod schedule;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use mmc_books::{Ours, Tally};

pub use cases::{Case, CaseStatus, Judged, Resolution};
pub use counted::CaseCounts;
use counted::Counted;

use cases::NS;
use mmc_config::BooksConfig;
use mmc_db::{Backend, SqlDb, StorageError, Transaction};
use mmc_runtime::{Kind as ComponentKind, Runtime};

const REPORTS: &str = "reports";
/// `{account}/{date}/{subject}`: what the latest complete run of a day found of each subject.
const LINES: &str = "lines";

#[derive(Debug, thiserror::Error)]
pub enum BooksError {
    #[error("no provider account (adapter) named {0}")]
    UnknownAccount(String),
    #[error("the date must be a day written YYYY-MM-DD, not {0:?}")]
    BadDate(String),
    #[error("{0} is in the future: its statement does not exist yet")]
    FutureDate(String),
    #[error("no reconciliation case {0}")]
    UnknownCase(String),
    #[error("case {0} is {1}: only an open case is resolved")]
    NotOpen(String, &'static str),
    #[error("a note saying how the case was settled is required (1 to 2000 characters)")]
    NoteRequired,
    #[error("a stored record cannot be read: {0}")]
    Corrupt(String),
    #[error(
        "another run of this day is under way, or its cases kept changing while it wrote them: try again in a moment"
    )]
    Busy,
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// A calendar day (UTC), as days since 1970-01-01.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Day(pub i64);

impl Day {
    pub fn parse(s: &str) -> Result<Day, BooksError> {
        let bad = || BooksError::BadDate(s.to_string());
        if s.len() != 10 {
            return Err(bad());
        }
        let day = mmc_domain::time::day_of(s).ok_or_else(bad)?;
        // A 31 February is read as a day in March: only a day that writes back as given is one.
        (Day(day).to_string() == s)
            .then_some(Day(day))
            .ok_or_else(bad)
    }

    pub fn of_ms(ms: u64) -> Day {
        Day((ms / 86_400_000) as i64)
    }

    pub fn start_ms(self) -> u64 {
        self.0.max(0) as u64 * 86_400_000
    }

    pub fn end_ms(self) -> u64 {
        self.start_ms() + 86_400_000
    }

    pub fn contains(self, ms: u64) -> bool {
        (self.start_ms()..self.end_ms()).contains(&ms)
    }

    pub fn before(self) -> Day {
        Day(self.0 - 1)
    }
}

impl std::fmt::Display for Day {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&mmc_domain::time::date_of_day(self.0))
    }
}

/// One account's day, as its latest run found it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub object: String,
    pub account: String,
    pub date: String,
    /// `reconciled`, or `incomplete` (the provider's side could not be read
    /// whole: `reason` says why, and nothing was judged).
    pub status: String,
    pub reason: Option<String>,
    /// Whether the provider calls the day's statement final (a day still
    /// under way, or within the provider's lag, may change).
    #[serde(rename = "final")]
    pub is_final: bool,
    /// `statement`, or `status` (a provider without one: each record read back).
    pub method: String,
    pub ran_at: String,
    #[serde(flatten)]
    pub tally: Tally,
    /// Each wallet's day, where the statement states balances: opening,
    /// closing, net and drift (see [`mmc_books::wallet`]).
    #[serde(default)]
    pub wallets: Vec<mmc_books::wallet::WalletDay>,
    pub cases: CaseCounts,
}

/// A provider account's balances, as the provider states them.
#[derive(Debug, Clone, Serialize)]
pub struct AccountBalances {
    pub account: String,
    pub balances: Vec<BalanceView>,
    /// Why they could not be read, when they could not.
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct BalanceView {
    pub wallet: String,
    pub currency: String,
    pub available: String,
    pub reserved: Option<String>,
}

pub struct Books {
    runtime: Arc<Runtime>,
    storage: Arc<dyn Backend>,
    db: SqlDb,
    config: BooksConfig,
}

impl Books {
    pub fn new(runtime: Arc<Runtime>, db: SqlDb, config: BooksConfig) -> Arc<Books> {
        Arc::new(Books {
            storage: runtime.services.storage.clone(),
            runtime,
            db,
            config,
        })
    }

    pub fn config(&self) -> &BooksConfig {
        &self.config
    }

    fn now_ms(&self) -> u64 {
        self.runtime.services.clock.now_ms()
    }

    /// The provider accounts: the adapters loaded now that a route of
    /// some environment names (an adapter no route names carries nothing).
    pub fn accounts(&self) -> Vec<String> {
        let routes = self.runtime.routes();
        let mut names: Vec<String> = routes
            .environments()
            .iter()
            .flat_map(|env| self.accounts_of(env))
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// The accounts that serve `environment`: the loaded adapters a route
    /// or a rule of it names.
    pub fn accounts_of(&self, environment: &str) -> Vec<String> {
        let named = self.runtime.routes().adapters_named(environment);
        let loaded = |name: &String| {
            self.runtime
                .get(name)
                .is_some_and(|l| l.kind == ComponentKind::Adapter)
        };
        named.into_iter().filter(loaded).collect()
    }

    fn merchants(&self) -> Result<Vec<String>, BooksError> {
        let rows = self
            .db
            .read(|c| c.query("SELECT id FROM merchants ORDER BY id", &[]))?;
        rows.iter()
            .map(|r| r.text(0).map_err(BooksError::Storage))
            .collect()
    }

    /// How the provider's books are read, and after how long a day is final:
    /// a day read by status only once its operations have stopped moving
    /// (`books.status_settle_ms`), since what moves after its read is not seen.
    fn info(&self, account: &str) -> Result<(bool, u64), BooksError> {
        let (statement, lag) = match self
            .runtime
            .call_books(account, |store, b| b.call_info(store))
        {
            Ok(Some(info)) => (info.statement, info.final_after_ms),
            Ok(None) => (false, 0),
            Err(mmc_runtime::CallError::NotLoaded(_)) => {
                return Err(BooksError::UnknownAccount(account.to_string()));
            }
            // The books of an adapter that fails to say are read by status.
            Err(e) => {
                tracing::warn!(account, error = %e, "books: the adapter did not say how its books are read");
                (false, 0)
            }
        };
        if statement {
            return Ok((true, lag));
        }
        Ok((false, lag.max(self.config.status_settle_ms)))
    }

    /// How long after a day ends `account`'s provider calls its statement final.
    pub fn final_after_ms(&self, account: &str) -> Result<u64, BooksError> {
        Ok(self.info(account)?.1)
    }

    /// Reconciles `day` of `account`: stages the provider's side, merges it
    /// with our records in id order, writes the day's lines and cases a
    /// batch at a time and the report last (see [`run`]). Blocking: run it
    /// off the async workers.
    pub fn reconcile(&self, account: &str, day: Day) -> Result<Report, BooksError> {
        let now = self.now_ms();
        if day.start_ms() > now {
            return Err(BooksError::FutureDate(day.to_string()));
        }
        if day.0 < 0 {
            return Err(BooksError::BadDate(day.to_string()));
        }
        let (statement, lag) = self.info(account)?;
        let merchants = self.merchants()?;
        let mut records = ours::Records::new(self.storage.as_ref(), &merchants, account);
        let mut report = Report {
            object: "reconciliation_report".into(),
            account: account.to_string(),
            date: day.to_string(),
            status: "reconciled".into(),
            reason: None,
            is_final: now >= day.end_ms() + lag,
            method: if statement { "statement" } else { "status" }.into(),
            ran_at: mmc_domain::time::rfc3339(now),
            tally: Tally::new(),
            wallets: Vec::new(),
            cases: CaseCounts::default(),
        };
        let run = run::Run {
            books: self,
            account,
            day,
            id: format!("{now:013}"),
            statement,
        };
        run.claim()?;
        let ran = self.run_day(&run, &mut records, &mut report);
        let released = run.release();
        ran?;
        released?;
        Ok(report)
    }

    fn run_day(
        &self,
        run: &run::Run<'_>,
        records: &mut ours::Records<'_>,
        report: &mut Report,
    ) -> Result<(), BooksError> {
        let (account, day) = (run.account, run.day);
        let staging = match run.stage(records, report)? {
            Ok(staging) => staging,
            Err(reason) => {
                tracing::warn!(account, date = %day, %reason, "books: the day could not be read whole");
                report.status = "incomplete".into();
                report.reason = Some(reason);
                report.wallets.clear();
                report.tally = Tally::new();
                let mut tx = self.storage.begin(NS)?;
                put_report(tx.as_mut(), report)?;
                tx.commit()?;
                return Ok(());
            }
        };
        for w in report.wallets.iter().filter(|w| w.drifted()) {
            tracing::warn!(
                account, date = %day, wallet = %w.wallet, drift = ?w.drift,
                "books: the wallet's stated balances do not add up with its movements"
            );
        }
        run.judge(records, &staging, report)
    }

    /// Whether a run of `account`'s `day` wrote lines.
    fn has_lines(&self, account: &str, day: Day) -> Result<bool, BooksError> {
        let prefix = format!("{account}/{day}/");
        let end = format!("{prefix}~");
        Ok(!self.storage.scan(NS, LINES, &prefix, &end, 1)?.is_empty())
    }

    /// Hands `o` to the component that owns it to ask the provider again
    /// (see [`Runtime::recheck`]), and reads it as it stands after; none
    /// when nothing was asked. A failure is logged: the case stays open.
    fn set_right(
        &self,
        account: &str,
        records: &mut ours::Records<'_>,
        o: &Ours,
    ) -> Result<Option<Ours>, BooksError> {
        let owner = match o.kind {
            mmc_books::Kind::Payout => ours::PAYOUTS,
            _ => ours::PAYMENTS,
        };
        let asked = self.runtime.recheck(
            owner,
            (&o.environment, &o.merchant_id),
            &o.id,
            o.batch_id.as_deref(),
        );
        match asked {
            Ok(true) => records.reread(o),
            Ok(false) => Ok(None),
            Err(e) => {
                tracing::warn!(account, record = %o.id, error = %e, "books: the record's owner could not check it again");
                Ok(None)
            }
        }
    }

    fn expected_fee(&self, account: &str, o: &Ours) -> Option<u64> {
        self.rate_card_fee(account, o.operator.as_deref(), o.kind, o.amount)
    }

    /// What the rate card says `account` charges on `amount` of `kind` to
    /// `operator`, if a card applies.
    pub fn rate_card_fee(
        &self,
        account: &str,
        operator: Option<&str>,
        kind: mmc_books::Kind,
        amount: u64,
    ) -> Option<u64> {
        self.runtime
            .expected_fee(account, operator, kind.operation(), amount)
    }

    /// What the latest complete run of `day` found of one record, if it was run.
    pub fn line(
        &self,
        account: &str,
        day: Day,
        subject: &str,
    ) -> Result<Option<Judged>, BooksError> {
        let key = format!("{account}/{day}/{subject}");
        self.storage
            .get(NS, LINES, &key)?
            .map(|v| serde_json::from_slice(&v).map_err(|e| BooksError::Corrupt(e.to_string())))
            .transpose()
    }

    /// Whether a wallet's day is off by more than `books.drift_tolerance`.
    fn drifted(&self, w: &mmc_books::wallet::WalletDay) -> bool {
        let tolerance = i64::try_from(self.config.drift_tolerance)
            .unwrap_or(i64::MAX / 100)
            .saturating_mul(100);
        w.drift
            .as_deref()
            .and_then(mmc_books::Amount::parse_signed)
            .is_some_and(|d| d.unsigned_abs() > tolerance.unsigned_abs())
    }

    /// The stored report of `account`'s `day`, if it was run.
    pub fn report(&self, account: &str, day: Day) -> Result<Option<Report>, BooksError> {
        let key = format!("{account}/{day}");
        self.storage
            .get(NS, REPORTS, &key)?
            .map(|v| serde_json::from_slice(&v).map_err(|e| BooksError::Corrupt(e.to_string())))
            .transpose()
    }

    /// The reports of `day`, one per account that was run.
    pub fn reports(&self, day: Day) -> Result<Vec<Report>, BooksError> {
        let mut out = Vec::new();
        for account in self.accounts() {
            out.extend(self.report(&account, day)?);
        }
        Ok(out)
    }

    /// What the latest complete run of `account`'s `day` found of each subject.
    pub fn lines(&self, account: &str, day: Day) -> Result<Vec<Judged>, BooksError> {
        let prefix = format!("{account}/{day}/");
        let mut out = Vec::new();
        let end = format!("{prefix}~");
        scan_all(self.storage.as_ref(), NS, LINES, &prefix, &end, |_, v| {
            out.push(serde_json::from_slice(v).map_err(|e| BooksError::Corrupt(e.to_string()))?);
            Ok(true)
        })?;
        Ok(out)
    }

    /// What the latest complete run of `account`'s `day` found of `merchant`'s own records.
    pub fn merchant_lines(
        &self,
        account: &str,
        day: Day,
        merchant: &str,
    ) -> Result<Vec<Judged>, BooksError> {
        let mut lines = self.lines(account, day)?;
        lines.retain(|l| l.ours.as_ref().is_some_and(|o| o.merchant_id == merchant));
        Ok(lines)
    }

    /// Cases of one status (all when none), newest first, at most `limit`.
    pub fn cases(&self, status: Option<CaseStatus>, limit: usize) -> Result<Vec<Case>, BooksError> {
        let statuses = match status {
            Some(s) => vec![s],
            None => vec![CaseStatus::Open, CaseStatus::Resolved, CaseStatus::Closed],
        };
        let mut ids = Vec::new();
        for s in statuses {
            let (start, end) = cases::list_key_range(s);
            scan_all(
                self.storage.as_ref(),
                NS,
                cases::STATUS_TABLE,
                &start,
                &end,
                |key, _| {
                    ids.push(key.rsplit('/').next().unwrap_or_default().to_string());
                    Ok(true)
                },
            )?;
        }
        let mut out = Vec::new();
        for id in ids {
            out.extend(self.case(&id)?);
        }
        out.sort_by(|a, b| b.opened_at.cmp(&a.opened_at).then(a.id.cmp(&b.id)));
        out.truncate(limit);
        Ok(out)
    }

    pub fn case(&self, id: &str) -> Result<Option<Case>, BooksError> {
        if id.is_empty() || id.len() > 64 || id.contains('/') {
            return Ok(None);
        }
        self.storage
            .get(NS, cases::TABLE, id)?
            .map(|v| serde_json::from_slice(&v).map_err(|e| BooksError::Corrupt(e.to_string())))
            .transpose()
    }

    /// A person settles an open case with a note saying how.
    pub fn resolve(&self, id: &str, by: &str, note: &str) -> Result<Case, BooksError> {
        let note = note.trim();
        if note.is_empty() || note.chars().count() > 2000 {
            return Err(BooksError::NoteRequired);
        }
        let now = self.now_ms();
        let mut tx = self.storage.begin(NS)?;
        let Some(mut case) = cases::read(tx.as_mut(), id)? else {
            return Err(BooksError::UnknownCase(id.to_string()));
        };
        if case.status != CaseStatus::Open {
            return Err(BooksError::NotOpen(id.to_string(), case.status.as_str()));
        }
        case.status = CaseStatus::Resolved;
        case.updated_at = mmc_domain::time::rfc3339(now);
        case.resolution = Some(Resolution {
            by: by.to_string(),
            note: note.to_string(),
            at: case.updated_at.clone(),
        });
        let mut writes = cases::writes(&case, Some(CaseStatus::Open));
        writes.extend(cases::event(&case, now / 1000));
        cases::write_in(tx.as_mut(), &writes)?;
        tx.commit()?;
        let metrics = &self.runtime.services.metrics;
        metrics.reconciliation_case(&case.account, case.category.as_str(), "resolved");
        Ok(case)
    }

    /// The balances of `accounts`, as each provider states them now (an
    /// account that reads no books is left out).
    pub fn balances_of(&self, accounts: Vec<String>) -> Vec<AccountBalances> {
        let mut out = Vec::new();
        for account in accounts {
            let answer = self
                .runtime
                .call_books(&account, |store, b| b.call_balances(store));
            let (balances, error) = match answer {
                Ok(None) => continue,
                Ok(Some(Ok(list))) => (list, None),
                Ok(Some(Err(e))) => (Vec::new(), Some(provider::describe(&e))),
                Err(e) => (Vec::new(), Some(e.to_string())),
            };
            out.push(AccountBalances {
                account,
                balances: balances
                    .into_iter()
                    .map(|b| BalanceView {
                        wallet: b.wallet,
                        currency: b.currency,
                        available: b.available,
                        reserved: b.reserved,
                    })
                    .collect(),
                error,
            });
        }
        out
    }
}

/// Every row of `[start, end)`, a page at a time, until `each` says stop.
pub(crate) fn scan_all(
    storage: &dyn Backend,
    ns: &str,
    table: &str,
    start: &str,
    end: &str,
    mut each: impl FnMut(&str, &[u8]) -> Result<bool, BooksError>,
) -> Result<(), BooksError> {
    let page = mmc_storage::MAX_SCAN;
    let mut from = start.to_string();
    loop {
        let rows = storage.scan(ns, table, &from, end, page)?;
        for (key, value) in &rows {
            if !each(key, value)? {
                return Ok(());
            }
        }
        match rows.last() {
            Some((key, _)) if rows.len() == page as usize => from = format!("{key}\0"),
            _ => return Ok(()),
        }
    }
}

fn put_report(tx: &mut dyn Transaction, report: &Report) -> Result<(), StorageError> {
    let key = format!("{}/{}", report.account, report.date);
    tx.put(
        REPORTS,
        &key,
        &serde_json::to_vec(report).expect("reports serialise"),
    )
}

#[cfg(test)]
mod tests;
