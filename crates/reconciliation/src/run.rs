//! One run of an account's day, streamed so that a day of a million
//! records is reconciled in bounded memory:
//!
//! 1. **The provider's side is staged**: its statement page by page (or,
//!    for a provider without one, each of our records read back by status),
//!    each movement of ours staged in the `stage` table under the id it
//!    ties to (our id as echoed, else the provider's reference resolved
//!    later) — sorted by it in memory a bounded number at a time and
//!    written in packs ([`stage`]) — its kind's totals and each wallet's
//!    day counted as it goes.
//!    A statement that cannot be read whole stops here: the staged rows go,
//!    the day is `incomplete`, no line is written.
//! 2. **Both sides are merged in id order**: our records of the day (UUIDv7
//!    key ranges per merchant, merged; the day's payouts sorted) against the
//!    staged lines, each subject judged once ([`mmc_books::judge`]).
//! 3. **Lines and cases are written in batches**, each one prepared
//!    transaction (cases checked unchanged since read): the staged rows they
//!    consumed go in the same batch. The report goes last; lines of an
//!    earlier run of the day this one did not find are swept.
//!
//! Nothing holds the day: a batch of judged lines, a page of each source,
//! the wallets' running totals and the account's open cases (ids only).

use std::collections::{HashSet, VecDeque};
use std::time::Duration;

use mmc_books::{Category, Line, OurStatus, Ours, judge};

use super::cases::{self, Case, CaseStatus, Judged, Resolution};
use super::ours::Records;
use super::provider::{self, Read};
use super::{Books, BooksError, Day, LINES, NS, Report, scan_all};
use mmc_db::{Check, Write};

mod sink;
mod stage;

use sink::Sink;
pub(super) use stage::Staging;
use stage::{Staged, Stager};

/// Staged provider lines: `{account}/{date}/{run}/…` (see [`stage`]).
pub(super) const STAGE: &str = "stage";
/// Rows written per prepared transaction.
const BATCH: usize = 1000;
/// Judged subjects written per prepared transaction (each with its line,
/// its case when it has one, and the staged rows it consumed).
const JUDGED_BATCH: usize = 500;
/// The tie of a line that names none of our ids, only the provider's
/// reference of the operation: resolved when its record is judged.
const BY_REFERENCE: &str = "~ref:";
/// The tie of a line that names neither.
const UNTIED: &str = "~provider:";
/// `{account}/{date}`: the run under way of a day (its id and start, ms).
const RUNNING: &str = "running";
/// A run's claim older than this is a run that died: taken over.
const CLAIM_MS: u64 = 30 * 60 * 1000;

/// What one run is about.
pub(super) struct Run<'a> {
    pub books: &'a Books,
    pub account: &'a str,
    pub day: Day,
    /// This run's id (its start, ms): staged rows and lines carry it.
    pub id: String,
    pub statement: bool,
}

impl Run<'_> {
    fn prefix(&self) -> String {
        format!("{}/{}/{}/", self.account, self.day, self.id)
    }

    fn lines_prefix(&self) -> String {
        format!("{}/{}/", self.account, self.day)
    }

    /// Takes the day for this run: none other of the same account and day
    /// runs meanwhile, on this node or another (their lines would mix).
    pub fn claim(&self) -> Result<(), BooksError> {
        let key = format!("{}/{}", self.account, self.day);
        let now = self.books.now_ms();
        let current = self.books.storage.get(NS, RUNNING, &key)?;
        let stale = current.as_deref().is_none_or(|v| {
            std::str::from_utf8(v)
                .ok()
                .and_then(|v| v.split_once(' '))
                .and_then(|(_, at)| at.parse::<u64>().ok())
                .is_none_or(|at| at + CLAIM_MS < now)
        });
        let check = Check {
            table: RUNNING.into(),
            key: key.clone(),
            value: current,
        };
        let claim = Write::Put {
            table: RUNNING.into(),
            key,
            value: format!("{} {now}", self.id).into_bytes(),
        };
        if !stale || !self.books.storage.apply(NS, vec![check], vec![claim])? {
            return Err(BooksError::Busy);
        }
        Ok(())
    }

    /// Gives the day back.
    pub fn release(&self) -> Result<(), BooksError> {
        let key = format!("{}/{}", self.account, self.day);
        self.write(vec![Write::Delete {
            table: RUNNING.into(),
            key,
        }])
    }

    /// Applies `writes` as one prepared transaction with no checks.
    fn write(&self, writes: Vec<Write>) -> Result<(), BooksError> {
        if writes.is_empty() {
            return Ok(());
        }
        self.books.storage.apply(NS, Vec::new(), writes)?;
        Ok(())
    }

    /// Step 1: the provider's side, staged. `Err(reason)` inside: the day
    /// could not be read whole (what was staged is gone again).
    pub fn stage(
        &self,
        records: &mut Records<'_>,
        report: &mut Report,
    ) -> Result<Result<Staging, String>, BooksError> {
        // What a run that died left staged.
        let day = format!("{}/{}/", self.account, self.day);
        sweep(self.books, STAGE, (&day, &format!("{day}~")), |_| true)?;
        let mut stager = Stager::new(self);
        let read = if self.statement {
            let wait = Duration::from_millis(self.books.config.statement_wait_ms);
            let span = (self.day.start_ms(), self.day.end_ms());
            provider::statement(&self.books.runtime, self.account, span, wait, |lines| {
                stager.lines(lines, &mut report.tally)
            })?
        } else {
            // Each of our records of the day read back by our id, a chunk at a time.
            let mut stream = records.day_stream(self.day)?;
            let mut chunk = Vec::with_capacity(200);
            let mut read = Read::Whole;
            loop {
                let next = records.next_of_day(&mut stream)?;
                let last = next.is_none();
                chunk.extend(next);
                if chunk.len() == 200 || (last && !chunk.is_empty()) {
                    match provider::by_status(&self.books.runtime, self.account, &chunk) {
                        Ok(lines) => stager.lines(lines, &mut report.tally)?,
                        Err(why) => {
                            read = Read::Incomplete(why);
                            break;
                        }
                    }
                    chunk.clear();
                }
                if last {
                    break;
                }
            }
            read
        };
        let staging = stager.finish()?;
        report.wallets = std::mem::take(&mut stager.wallets).finish();
        match read {
            Read::Whole => Ok(Ok(staging)),
            Read::Incomplete(why) => {
                self.drop_stage()?;
                Ok(Err(why))
            }
        }
    }

    /// Deletes this run's staged rows (a day that could not be read whole).
    fn drop_stage(&self) -> Result<(), BooksError> {
        let (start, end) = (self.prefix(), format!("{}~~", self.prefix()));
        sweep(self.books, STAGE, (&start, &end), |_| true)
    }

    /// Steps 2 and 3: both sides merged and judged, lines and cases written
    /// in batches, the report last, an earlier run's leftover lines swept.
    pub fn judge(
        &self,
        records: &mut Records<'_>,
        staging: &Staging,
        report: &mut Report,
    ) -> Result<(), BooksError> {
        let open = open_cases(self.books)?;
        let had_lines = self.books.has_lines(self.account, self.day)?;
        let mut sink = Sink {
            run: self,
            open,
            judged: Vec::with_capacity(JUDGED_BATCH),
            consumed: Vec::new(),
        };
        let mut theirs = Staged::new(self, staging)?;
        let mut stream = records.day_stream(self.day)?;
        let mut by_reference_taken: HashSet<String> = HashSet::new();
        let mut ours_next = records.next_of_day(&mut stream)?;
        loop {
            let tie = theirs.peek_tie()?;
            let take_ours = match (&ours_next, &tie) {
                (None, None) => break,
                (Some(o), Some(t)) => o.id.as_str() <= t.as_str(),
                (Some(_), None) => true,
                (None, Some(_)) => false,
            };
            if take_ours {
                let o = ours_next.take().expect("checked above");
                report.tally.our_records += 1;
                let mut lines = match &tie {
                    Some(t) if *t == o.id => theirs.take(t, &mut sink.consumed)?,
                    _ => Vec::new(),
                };
                if let Some(r) = o.psp_reference.as_ref().filter(|_| theirs.by_reference > 0) {
                    let tie = format!("{BY_REFERENCE}{r}");
                    lines.extend(theirs.lookup(&tie, &mut sink.consumed)?);
                    by_reference_taken.insert(tie);
                }
                let j = self.judge_record(records, o, lines, &mut report.tally)?;
                sink.push(j, report)?;
                ours_next = records.next_of_day(&mut stream)?;
                continue;
            }
            let tie = tie.expect("checked above");
            let lines = theirs.take(&tie, &mut sink.consumed)?;
            if by_reference_taken.contains(&tie) {
                continue;
            }
            let found = if tie.starts_with('~') {
                None
            } else {
                // A record of another day that the provider moved today.
                records.by_id(&tie)?
            };
            match found {
                Some(o) => {
                    let j = self.judge_record(records, o, lines, &mut report.tally)?;
                    sink.push(j, report)?;
                }
                None => {
                    for line in lines {
                        let category = judge(None, &[&line], None);
                        report.tally.count(category);
                        let j = Judged {
                            subject: format!("provider:{}", line.provider_id),
                            category,
                            ours: None,
                            theirs: vec![line],
                            expected_fee: None,
                            note: None,
                            set_right_from: None,
                            run: None,
                        };
                        sink.push(j, report)?;
                    }
                }
            }
        }
        sink.flush(report)?;
        self.wallet_cases(report)?;
        let mut tx = self.books.storage.begin(NS)?;
        super::put_report(tx.as_mut(), report)?;
        tx.commit()?;
        if had_lines {
            // Lines an earlier run of the day wrote about subjects this one no longer found.
            let run = self.id.clone();
            let (start, end) = (self.lines_prefix(), format!("{}~", self.lines_prefix()));
            sweep(self.books, LINES, (&start, &end), |v| {
                serde_json::from_slice::<RunOf>(v)
                    .map_or(true, |r| r.run.as_deref() != Some(run.as_str()))
            })?;
        }
        Ok(())
    }

    /// One of our records and the provider's lines for it, judged: read back
    /// by status when it is missing from a statement near midnight, and set
    /// right by its owner when the provider says it moved and ours does not.
    fn judge_record(
        &self,
        records: &mut Records<'_>,
        mut o: Ours,
        theirs: Vec<Line>,
        tally: &mut mmc_books::Tally,
    ) -> Result<Judged, BooksError> {
        let books = self.books;
        let account = self.account;
        // A provider read by status states no fee to compare.
        let expected_fee = books.expected_fee(account, &o).filter(|_| self.statement);
        let refs: Vec<&Line> = theirs.iter().collect();
        let mut category = judge(Some(&o), &refs, expected_fee);
        let mut note = None;
        let near_midnight = o
            .settled_at_ms
            .is_none_or(|at| at + books.config.missing_grace_ms >= self.day.end_ms());
        if category == Category::MissingAtProvider && self.statement && near_midnight {
            // Settled here within the grace of the day's end: the provider
            // may have executed it after midnight and list it on the next
            // day's statement. Its own read, by our id, says.
            if let Ok(read) = provider::by_status(&books.runtime, account, std::slice::from_ref(&o))
            {
                let read_refs: Vec<&Line> = read.iter().collect();
                if !read.is_empty() && judge(Some(&o), &read_refs, None) == Category::Matched {
                    category = Category::Matched;
                    note = Some(
                        "not on the day's statement; the provider's status read back confirms it"
                            .into(),
                    );
                }
            }
        }
        let mut set_right_from = None;
        if category == Category::StatusDiffers && o.status != OurStatus::Completed {
            // The provider says it moved; ours says failed or in progress.
            if let Some(now) = books.set_right(account, records, &o)? {
                let again = judge(Some(&now), &refs, expected_fee);
                if again != category {
                    note = Some(format!("set right: {}", set_right_note(&o, &now.stated)));
                    category = again;
                    set_right_from = Some(std::mem::replace(&mut o, now));
                }
            }
        }
        tally.count(category);
        Ok(Judged {
            subject: o.id.clone(),
            category,
            ours: Some(o),
            theirs,
            expected_fee,
            note,
            set_right_from,
            run: None,
        })
    }

    /// Each wallet whose day does not add up beyond the tolerance: a case
    /// of its own, closed by itself once a later run finds it adding up.
    fn wallet_cases(&self, report: &mut Report) -> Result<(), BooksError> {
        let books = self.books;
        let now = books.now_ms();
        let now_text = mmc_domain::time::rfc3339(now);
        let date = self.day.to_string();
        let mut checks = Vec::new();
        let mut writes = Vec::new();
        let mut counted = super::Counted::new(report.cases.clone());
        for w in report.wallets.clone() {
            let subject = format!("wallet:{}:{date}", w.wallet);
            let id = cases::case_id(self.account, &subject);
            let (existing, check) = read_case(books, &id)?;
            let was = existing.as_ref().map(|c| c.status);
            let case = match (existing, books.drifted(&w)) {
                (Some(mut c), true) if c.status == CaseStatus::Open => {
                    c.wallet = Some(w);
                    c.updated_at = now_text.clone();
                    Some((c, false))
                }
                (None, true) => Some((
                    Case {
                        id,
                        object: "reconciliation_case".into(),
                        account: self.account.to_string(),
                        subject,
                        category: Category::BalanceDrift,
                        status: CaseStatus::Open,
                        // The provider account's, not a merchant's: on the admin API.
                        merchant_id: None,
                        environment: None,
                        date: date.clone(),
                        last_seen: date.clone(),
                        opened_at: now_text.clone(),
                        updated_at: now_text.clone(),
                        ours: None,
                        theirs: Vec::new(),
                        expected_fee: None,
                        resolution: None,
                        wallet: Some(w),
                    },
                    true,
                )),
                (Some(mut c), false) if c.status == CaseStatus::Open => {
                    c.status = CaseStatus::Closed;
                    c.wallet = Some(w);
                    c.updated_at = now_text.clone();
                    c.resolution = Some(Resolution {
                        by: "reconciliation".into(),
                        note: format!("the wallet's day adds up by the run of {date}"),
                        at: now_text.clone(),
                    });
                    Some((c, true))
                }
                _ => None,
            };
            if let Some(case) = case {
                checks.push(check);
                writes.extend(counted.case_writes(books, case, was));
            }
        }
        if !writes.is_empty() && !books.storage.apply(NS, checks, writes)? {
            return Err(BooksError::Busy);
        }
        report.cases = counted.commit(books, self.account);
        Ok(())
    }
}

/// A line's run, read without the rest of it.
#[derive(serde::Deserialize)]
struct RunOf {
    run: Option<String>,
}

/// What setting a record right did: its status before, and after.
fn set_right_note(before: &Ours, now: impl AsRef<str>) -> String {
    format!(
        "our record said {}; its owner asked the provider again by our id and recorded {}",
        before.stated,
        now.as_ref()
    )
}

/// A case as stored now, and the check that it is still so when written.
fn read_case(books: &Books, id: &str) -> Result<(Option<Case>, Check), BooksError> {
    let stored = books.storage.get(NS, cases::TABLE, id)?;
    let case = stored
        .as_deref()
        .map(|v| cases::decode(id, v))
        .transpose()?;
    let check = Check {
        table: cases::TABLE.into(),
        key: id.to_string(),
        value: stored,
    };
    Ok((case, check))
}

/// The ids of every open case (a few: each is in front of a person).
fn open_cases(books: &Books) -> Result<HashSet<String>, BooksError> {
    let (start, end) = cases::list_key_range(CaseStatus::Open);
    let mut open = HashSet::new();
    scan_all(
        books.storage.as_ref(),
        NS,
        cases::STATUS_TABLE,
        &start,
        &end,
        |key, _| {
            open.insert(key["open/".len()..].to_string());
            Ok(true)
        },
    )?;
    Ok(open)
}

/// Deletes the rows of `range` in `table` that `stale` says, a batch at a time.
fn sweep(
    books: &Books,
    table: &str,
    (start, end): (&str, &str),
    stale: impl Fn(&[u8]) -> bool,
) -> Result<(), BooksError> {
    let mut from = start.to_string();
    let limit = mmc_storage::MAX_SCAN;
    loop {
        let rows = books.storage.scan(NS, table, &from, end, limit)?;
        let writes: Vec<Write> = rows
            .iter()
            .filter(|(_, v)| stale(v))
            .map(|(key, _)| Write::Delete {
                table: table.into(),
                key: key.clone(),
            })
            .collect();
        if !writes.is_empty() {
            books.storage.apply(NS, Vec::new(), writes)?;
        }
        match rows.last() {
            Some((key, _)) if rows.len() == limit as usize => from = format!("{key}\0"),
            _ => return Ok(()),
        }
    }
}
