//! The provider's side of a run: its lines staged as they are read, then
//! read back in id order.

use mmc_books::Line;

use super::*;

/// The provider's lines, staged as they are read.
pub(super) struct Stager<'r, 'a> {
    pub(super) run: &'r Run<'a>,
    pub(super) pending: Vec<Write>,
    pub(super) seq: u64,
    pub(super) wallets: mmc_books::wallet::Days,
}

impl Stager<'_, '_> {
    pub(super) fn lines(
        &mut self,
        lines: Vec<Line>,
        tally: &mut mmc_books::Tally,
    ) -> Result<(), BooksError> {
        for line in lines {
            tally.movement(&line);
            self.wallets.add(&line);
            if !line.kind.is_operation() {
                continue;
            }
            let tie = match (&line.our_id, &line.psp_reference) {
                (Some(id), _) if !id.starts_with('~') && !id.contains('/') => id.clone(),
                (_, Some(r)) if !r.contains('/') => format!("{BY_REFERENCE}{r}"),
                _ => format!("{UNTIED}{}", self.seq),
            };
            self.seq += 1;
            let key = format!("{}{tie}/{:012}", self.run.prefix(), self.seq);
            let value = serde_json::to_vec(&line).expect("lines serialise");
            self.pending.push(Write::Put {
                table: STAGE.into(),
                key,
                value,
            });
            if self.pending.len() >= BATCH {
                self.flush()?;
            }
        }
        Ok(())
    }

    pub(super) fn flush(&mut self) -> Result<(), BooksError> {
        let writes = std::mem::take(&mut self.pending);
        self.run.write(writes)
    }
}

/// The staged lines of a run, read in key order a page at a time.
pub(super) struct Staged<'r, 'a> {
    pub(super) run: &'r Run<'a>,
    pub(super) page: VecDeque<(String, String, Line)>,
    pub(super) from: String,
    pub(super) end: String,
    pub(super) done: bool,
    /// Lines staged under the provider's reference only (looked up by it).
    pub(super) by_reference: u64,
}

impl<'r, 'a> Staged<'r, 'a> {
    pub(super) fn new(run: &'r Run<'a>) -> Result<Self, BooksError> {
        let prefix = run.prefix();
        let by_reference = run
            .books
            .storage
            .scan(
                NS,
                STAGE,
                &format!("{prefix}{BY_REFERENCE}"),
                &format!("{prefix}{BY_REFERENCE}~"),
                1,
            )?
            .len() as u64;
        Ok(Staged {
            run,
            page: VecDeque::new(),
            end: format!("{prefix}~~"),
            from: prefix,
            done: false,
            by_reference,
        })
    }

    /// A staged row as (key, tie, line).
    pub(super) fn row(
        &self,
        key: String,
        value: &[u8],
    ) -> Result<(String, String, Line), BooksError> {
        let rest = &key[self.run.prefix().len()..];
        let tie = rest.rsplit_once('/').map_or(rest, |(t, _)| t).to_string();
        let line = serde_json::from_slice(value).map_err(|e| BooksError::Corrupt(e.to_string()))?;
        Ok((key, tie, line))
    }

    pub(super) fn fill(&mut self) -> Result<(), BooksError> {
        if !self.page.is_empty() || self.done {
            return Ok(());
        }
        let limit = mmc_storage::MAX_SCAN;
        let rows = self
            .run
            .books
            .storage
            .scan(NS, STAGE, &self.from, &self.end, limit)?;
        if rows.len() < limit as usize {
            self.done = true;
        }
        if let Some((last, _)) = rows.last() {
            self.from = format!("{last}\0");
        }
        for (key, value) in rows {
            let row = self.row(key, &value)?;
            self.page.push_back(row);
        }
        Ok(())
    }

    pub(super) fn peek_tie(&mut self) -> Result<Option<String>, BooksError> {
        self.fill()?;
        Ok(self.page.front().map(|(_, tie, _)| tie.clone()))
    }

    /// Every line of the next tie (their keys added to `consumed`).
    pub(super) fn take(&mut self, consumed: &mut Vec<String>) -> Result<Vec<Line>, BooksError> {
        let Some(tie) = self.peek_tie()? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        while self.peek_tie()?.as_ref() == Some(&tie) {
            let (key, _, line) = self.page.pop_front().expect("peeked");
            consumed.push(key);
            out.push(line);
        }
        Ok(out)
    }

    /// The lines staged under `tie`, read out of order (a line the provider
    /// tied to our record by its reference only).
    pub(super) fn lookup(
        &self,
        tie: &str,
        consumed: &mut Vec<String>,
    ) -> Result<Vec<Line>, BooksError> {
        let prefix = format!("{}{tie}/", self.run.prefix());
        let rows = self.run.books.storage.scan(
            NS,
            STAGE,
            &prefix,
            &format!("{prefix}~"),
            mmc_storage::MAX_SCAN,
        )?;
        let mut out = Vec::with_capacity(rows.len());
        for (key, value) in rows {
            let (key, _, line) = self.row(key, &value)?;
            consumed.push(key);
            out.push(line);
        }
        Ok(out)
    }
}
