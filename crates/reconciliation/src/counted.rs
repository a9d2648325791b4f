//! What a run does to the cases, counted: the report's figures and the
//! metric, each case opened or closed counted once.

use serde::{Deserialize, Serialize};

use mmc_books::Category;

use super::{Books, Case, CaseStatus, cases};

/// What a run did to the cases.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaseCounts {
    pub opened: u64,
    pub closed: u64,
    /// Open after the run, of this account and day.
    pub open: u64,
    /// Records the run set right: the provider said they moved, their owner
    /// asked it again and recorded the answer (each also a case, closed).
    #[serde(default)]
    pub set_right: u64,
}

/// What a batch of a run does to the cases, counted once it is stored:
/// the report's counts and the metric.
pub(super) struct Counted {
    pub counts: CaseCounts,
    events: Vec<(Category, &'static str)>,
}

impl Counted {
    pub(super) fn new(counts: CaseCounts) -> Counted {
        Counted {
            counts,
            events: Vec::new(),
        }
    }

    /// The writes that store a case a run opened, updated or closed
    /// (`news`: opened or closed now: its event, its count).
    pub(super) fn case_writes(
        &mut self,
        books: &Books,
        (case, news): (Case, bool),
        was: Option<CaseStatus>,
    ) -> Vec<mmc_db::Write> {
        let mut writes = cases::writes(&case, was);
        if news {
            writes.extend(cases::event(&case, books.now_ms() / 1000));
            let event = if case.status == CaseStatus::Open {
                self.counts.opened += 1;
                "opened"
            } else {
                self.counts.closed += 1;
                "closed"
            };
            self.events.push((case.category, event));
        }
        if case.status == CaseStatus::Open {
            self.counts.open += 1;
        }
        writes
    }

    /// The opening of `case` announced (its event, its count) without
    /// storing it open: a case a run opens and closes at once.
    pub(super) fn announce(&mut self, books: &Books, case: &Case) -> Option<mmc_db::Write> {
        self.counts.opened += 1;
        self.events.push((case.category, "opened"));
        cases::event(case, books.now_ms() / 1000)
    }

    /// Once stored: the metric, and the counts.
    pub(super) fn commit(self, books: &Books, account: &str) -> CaseCounts {
        let metrics = &books.runtime.services.metrics;
        for (category, event) in self.events {
            metrics.reconciliation_case(account, category.as_str(), event);
        }
        self.counts
    }
}
