//! Judged subjects written a batch at a time: lines, cases (checked
//! unchanged since read) and the staged rows they consumed, together.

use std::collections::HashSet;

use mmc_books::Category;

use super::*;

/// Judged subjects on their way to storage, a batch at a time.
pub(super) struct Sink<'r, 'a> {
    pub(super) run: &'r Run<'a>,
    /// The ids of every open case: a matched subject's case is read only
    /// when it may have one to close.
    pub(super) open: HashSet<String>,
    pub(super) judged: Vec<Judged>,
    /// Staged rows judged already: deleted with the batch that judged them.
    pub(super) consumed: Vec<String>,
}

impl Sink<'_, '_> {
    pub(super) fn push(&mut self, mut j: Judged, report: &mut Report) -> Result<(), BooksError> {
        j.run = Some(self.run.id.clone());
        self.judged.push(j);
        if self.judged.len() >= JUDGED_BATCH {
            self.flush(report)?;
        }
        Ok(())
    }

    /// The batch's lines, cases and consumed staged rows, in one prepared
    /// transaction; again from its reads if a case changed meanwhile (a
    /// person resolved it).
    pub(super) fn flush(&mut self, report: &mut Report) -> Result<(), BooksError> {
        let judged = std::mem::take(&mut self.judged);
        let consumed = std::mem::take(&mut self.consumed);
        for _ in 0..5 {
            let mut counted = super::super::Counted::new(report.cases.clone());
            let (checks, mut writes) = self.batch(&judged, &mut counted)?;
            writes.extend(consumed.iter().map(|key| Write::Delete {
                table: STAGE.into(),
                key: key.clone(),
            }));
            if self.run.books.storage.apply(NS, checks, writes)? {
                report.cases = counted.commit(self.run.books, self.run.account);
                return Ok(());
            }
        }
        Err(BooksError::Busy)
    }

    pub(super) fn batch(
        &self,
        judged: &[Judged],
        counted: &mut super::super::Counted,
    ) -> Result<(Vec<Check>, Vec<Write>), BooksError> {
        let books = self.run.books;
        let account = self.run.account;
        let date = self.run.day.to_string();
        let now_text = mmc_domain::time::rfc3339(books.now_ms());
        let prefix = self.run.lines_prefix();
        let mut checks = Vec::new();
        let mut writes = Vec::with_capacity(judged.len() + 8);
        for j in judged {
            writes.push(Write::Put {
                table: LINES.into(),
                key: format!("{prefix}{}", j.subject),
                value: serde_json::to_vec(j).expect("lines serialise"),
            });
            let set_right = j.set_right_from.is_some();
            let quiet = !j.category.is_mismatch() && !set_right;
            if quiet && self.open.is_empty() {
                continue; // matched, and no case to close
            }
            let id = cases::case_id(account, &j.subject);
            if quiet && !self.open.contains(&id) {
                continue;
            }
            let (existing, check) = read_case(books, &id)?;
            let was = existing.as_ref().map(|c| c.status);
            let matched_by = match &j.set_right_from {
                Some(before) => {
                    counted.counts.set_right += 1;
                    let now = j.ours.as_ref().map_or("", |o| o.stated.as_str());
                    format!(
                        "set right by the run of {date}: {}",
                        set_right_note(before, now)
                    )
                }
                None => format!("matched by the run of {date}"),
            };
            let fresh = |status| Case {
                id: id.clone(),
                object: "reconciliation_case".into(),
                account: account.to_string(),
                subject: j.subject.clone(),
                category: j.category,
                status,
                merchant_id: j.ours.as_ref().map(|o| o.merchant_id.clone()),
                environment: j.ours.as_ref().map(|o| o.environment.clone()),
                date: date.clone(),
                last_seen: date.clone(),
                opened_at: now_text.clone(),
                updated_at: now_text.clone(),
                ours: j.ours.clone(),
                theirs: j.theirs.clone(),
                expected_fee: j.expected_fee,
                resolution: None,
                wallet: None,
            };
            let closing = Resolution {
                by: "reconciliation".into(),
                note: matched_by,
                at: now_text.clone(),
            };
            let case = match (existing, j.category.is_mismatch()) {
                // Still different: the open case is brought up to date.
                (Some(mut c), true) if c.status == CaseStatus::Open => {
                    c.category = j.category;
                    c.last_seen = date.clone();
                    c.ours = j.ours.clone();
                    c.theirs = j.theirs.clone();
                    c.expected_fee = j.expected_fee;
                    c.updated_at = now_text.clone();
                    Some((c, false))
                }
                // A person settled it, or a later run matched it: not reopened,
                // so that running a day again changes nothing.
                (Some(_), true) => None,
                (None, true) => Some((fresh(CaseStatus::Open), true)),
                // Both books agree now: an open case closes by itself.
                (Some(mut c), false) if c.status == CaseStatus::Open => {
                    c.status = CaseStatus::Closed;
                    c.updated_at = now_text.clone();
                    c.last_seen = date.clone();
                    c.resolution = Some(closing);
                    Some((c, true))
                }
                // Set right by this run at its first sight: the difference
                // was real, so it is a case (opened and closed at once, with
                // both events), never silently gone.
                (None, false) if set_right => {
                    let mut c = fresh(CaseStatus::Open);
                    c.category = Category::StatusDiffers;
                    c.ours = j.set_right_from.clone();
                    writes.extend(counted.announce(books, &c));
                    c.status = CaseStatus::Closed;
                    c.resolution = Some(closing);
                    Some((c, true))
                }
                _ => None,
            };
            if let Some(case) = case {
                checks.push(check);
                writes.extend(counted.case_writes(books, case, was));
            }
        }
        Ok((checks, writes))
    }
}
