//! The provider's side of a run: its lines staged as they are read, then
//! read back in tie order.
//!
//! Staged as an external sort: lines are held in memory up to
//! `books.staged_lines_in_memory`, sorted by tie, and written as one
//! *sorted run* in packs of [`PACK`] lines a row where the store packs
//! cheaply (PostgreSQL), a line a row where it does not (SQLite, see
//! [`mmc_db::Backend::packs_cheaply`]); reading merges the runs. So on
//! PostgreSQL a record costs a fraction of a row to stage and to delete,
//! where a row per line cost one write and one delete each (most of a
//! day's writes there, beside the line itself). Lines tied only by the
//! provider's reference stay a row each, keyed by it: a record that names
//! that reference looks them up out of order.

use mmc_books::Line;
use serde::{Deserialize, Serialize};

use super::*;

/// Lines a row of a sorted run where the store packs cheaply: enough that
/// staging is a few thousand rows a million lines, few enough that the
/// merge holds one pack per run.
const PACK: usize = 250;
/// Lines written per prepared transaction, some 400 KB: larger writes grew
/// each pooled PostgreSQL connection's buffers to their size for good
/// (10,000 lines a write: 96 MiB more at the peak).
const LINES_PER_WRITE: usize = 1000;
/// Lines read at a time from each sorted run (the merge holds as many).
const LINES_PER_READ: usize = 250;
/// Where the sorted runs' packs are: `{run prefix}{RUNS}{n:06}/{pack:09}`,
/// before the rows keyed by a reference (`~ref:` sorts after it).
const RUNS: &str = "runs/";

/// One staged line: the tie it is merged on, and its place in the
/// statement (lines of one tie are judged in that order).
#[derive(Serialize, Deserialize)]
struct Packed {
    tie: String,
    seq: u64,
    line: Line,
}

/// How a run's lines were staged: how many sorted runs, of how many lines
/// a row.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Staging {
    runs: usize,
    per_row: usize,
}

/// The provider's lines, staged as they are read.
pub(super) struct Stager<'r, 'a> {
    run: &'r Run<'a>,
    /// Lines tied by a reference only, a row each, not written yet.
    pending: Vec<Write>,
    /// Lines held for the next sorted run.
    held: Vec<Packed>,
    /// Lines held before a sorted run is written.
    in_memory: usize,
    staging: Staging,
    seq: u64,
    pub(super) wallets: mmc_books::wallet::Days,
}

impl<'r, 'a> Stager<'r, 'a> {
    pub(super) fn new(run: &'r Run<'a>) -> Self {
        let in_memory = run.books.config.staged_lines_in_memory.max(1);
        let per_row = if run.books.storage.packs_cheaply() {
            PACK
        } else {
            1
        };
        Stager {
            run,
            pending: Vec::new(),
            held: Vec::with_capacity(in_memory.min(BATCH)),
            in_memory,
            staging: Staging { runs: 0, per_row },
            seq: 0,
            wallets: mmc_books::wallet::Days::default(),
        }
    }

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
            self.seq += 1;
            match (&line.our_id, &line.psp_reference) {
                (Some(id), _) if !id.starts_with('~') && !id.contains('/') => {
                    self.hold(id.clone(), line)?
                }
                (_, Some(r)) if !r.contains('/') => {
                    let key = format!("{}{BY_REFERENCE}{r}/{:012}", self.run.prefix(), self.seq);
                    let value = serde_json::to_vec(&line).expect("lines serialise");
                    self.pending.push(Write::Put {
                        table: STAGE.into(),
                        key,
                        value,
                    });
                    if self.pending.len() >= BATCH {
                        self.run.write(std::mem::take(&mut self.pending))?;
                    }
                }
                _ => self.hold(format!("{UNTIED}{}", self.seq), line)?,
            }
        }
        Ok(())
    }

    fn hold(&mut self, tie: String, line: Line) -> Result<(), BooksError> {
        let seq = self.seq;
        self.held.push(Packed { tie, seq, line });
        if self.held.len() >= self.in_memory {
            self.write_sorted_run()?;
        }
        Ok(())
    }

    /// The held lines, sorted by tie, written as the next sorted run.
    fn write_sorted_run(&mut self) -> Result<(), BooksError> {
        if self.held.is_empty() {
            return Ok(());
        }
        self.held
            .sort_unstable_by(|a, b| (&a.tie, a.seq).cmp(&(&b.tie, b.seq)));
        let (n, per_row) = (self.staging.runs, self.staging.per_row);
        let per_write = (LINES_PER_WRITE / per_row).max(1);
        let mut writes = Vec::with_capacity(per_write);
        for (i, pack) in self.held.chunks(per_row).enumerate() {
            writes.push(Write::Put {
                table: STAGE.into(),
                key: pack_key(self.run, n, i),
                value: serde_json::to_vec(pack).expect("lines serialise"),
            });
            if writes.len() == per_write {
                self.run.write(std::mem::take(&mut writes))?;
            }
        }
        self.run.write(writes)?;
        // Emptied, not dropped: the next run reuses its room.
        self.held.clear();
        self.staging.runs += 1;
        Ok(())
    }

    /// Writes what is still held; what was staged, as it was staged.
    pub(super) fn finish(&mut self) -> Result<Staging, BooksError> {
        self.write_sorted_run()?;
        self.run.write(std::mem::take(&mut self.pending))?;
        Ok(self.staging)
    }
}

fn pack_key(run: &Run<'_>, n: usize, pack: usize) -> String {
    format!("{}{RUNS}{n:06}/{pack:09}", run.prefix())
}

/// One sorted run (or the rows keyed by a reference), read a row at a time.
struct Source {
    /// Lines read and not taken yet, each with the row its taking consumes
    /// (a pack's last line, or a referenced line's own row).
    page: VecDeque<(Packed, Option<String>)>,
    /// Rows read at a time.
    per_read: u32,
    /// From where the source's rows are scanned, up to `end`.
    from: String,
    end: String,
    /// Whether its rows are packs of a sorted run (or lines keyed by a reference).
    packed: bool,
    done: bool,
}

/// The staged lines of a run, merged in tie order.
pub(super) struct Staged<'r, 'a> {
    pub(super) run: &'r Run<'a>,
    sources: Vec<Source>,
    /// Lines staged under the provider's reference only (looked up by it).
    pub(super) by_reference: u64,
}

impl<'r, 'a> Staged<'r, 'a> {
    pub(super) fn new(run: &'r Run<'a>, staging: &Staging) -> Result<Self, BooksError> {
        let prefix = run.prefix();
        let start = format!("{prefix}{BY_REFERENCE}");
        let by_reference = run
            .books
            .storage
            .scan(NS, STAGE, &start, &format!("{start}~"), 1)?
            .len() as u64;
        let runs = (0..staging.runs).map(|n| {
            let from = format!("{prefix}{RUNS}{n:06}/");
            Source {
                page: VecDeque::new(),
                per_read: (LINES_PER_READ / staging.per_row).max(1) as u32,
                end: format!("{from}~"),
                from,
                packed: true,
                done: false,
            }
        });
        let referenced = Source {
            page: VecDeque::new(),
            per_read: mmc_storage::MAX_SCAN,
            end: format!("{start}~"),
            from: start,
            packed: false,
            done: by_reference == 0,
        };
        Ok(Staged {
            run,
            sources: runs.chain([referenced]).collect(),
            by_reference,
        })
    }

    /// A staged row keyed by a reference, as a packed line.
    fn row(&self, key: &str, value: &[u8]) -> Result<Packed, BooksError> {
        let rest = &key[self.run.prefix().len()..];
        let (tie, seq) = rest.rsplit_once('/').unwrap_or((rest, "0"));
        let line = serde_json::from_slice(value).map_err(|e| BooksError::Corrupt(e.to_string()))?;
        Ok(Packed {
            tie: tie.to_string(),
            seq: seq.parse().unwrap_or(0),
            line,
        })
    }

    /// Reads the next rows of source `i` if its page is empty.
    fn fill(&mut self, i: usize) -> Result<(), BooksError> {
        let s = &self.sources[i];
        if !s.page.is_empty() || s.done {
            return Ok(());
        }
        let storage = &self.run.books.storage;
        let rows = storage.scan(NS, STAGE, &s.from, &s.end, s.per_read)?;
        let mut page = VecDeque::new();
        for (key, value) in &rows {
            if s.packed {
                let pack: Vec<Packed> = serde_json::from_slice(value)
                    .map_err(|e| BooksError::Corrupt(format!("staged pack {key}: {e}")))?;
                let last = pack.len().saturating_sub(1);
                page.extend(
                    pack.into_iter()
                        .enumerate()
                        .map(|(j, p)| (p, (j == last).then(|| key.clone()))),
                );
            } else {
                page.push_back((self.row(key, value)?, Some(key.clone())));
            }
        }
        let s = &mut self.sources[i];
        s.done = rows.len() < s.per_read as usize;
        if let Some((last, _)) = rows.last() {
            s.from = format!("{last}\0");
        }
        s.page = page;
        Ok(())
    }

    /// The smallest tie at the head of any source.
    pub(super) fn peek_tie(&mut self) -> Result<Option<String>, BooksError> {
        for i in 0..self.sources.len() {
            self.fill(i)?;
        }
        let least = self
            .sources
            .iter()
            .filter_map(|s| s.page.front().map(|(p, _)| p.tie.as_str()))
            .min();
        Ok(least.map(str::to_string))
    }

    /// Every line of `tie`, the next tie ([`Staged::peek_tie`]), in the
    /// statement's order (the rows taking them consumed added to `consumed`).
    pub(super) fn take(
        &mut self,
        tie: &str,
        consumed: &mut Vec<String>,
    ) -> Result<Vec<Line>, BooksError> {
        let mut out: Vec<Packed> = Vec::new();
        for i in 0..self.sources.len() {
            loop {
                self.fill(i)?;
                let s = &mut self.sources[i];
                match s.page.front() {
                    Some((head, _)) if head.tie == tie => {
                        let (line, row) = s.page.pop_front().expect("peeked");
                        consumed.extend(row);
                        out.push(line);
                    }
                    _ => break,
                }
            }
        }
        out.sort_by_key(|p| p.seq);
        Ok(out.into_iter().map(|p| p.line).collect())
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
            out.push(self.row(&key, &value)?.line);
            consumed.push(key);
        }
        Ok(out)
    }
}
