//! The contract every engine keeps, as test functions each engine's own tests
//! call on a fresh store (feature `conformance`). Components run unchanged on
//! any engine only if these hold on all of them.
//!
//! Each function uses its own namespace, so they may share one store. They
//! panic (assert) on a broken rule, as a test does.

mod concurrency;
mod helpers;
mod host_tables;
mod scans;
mod transactions;

pub use concurrency::{
    Open, a_delete_in_a_transaction_is_not_lost_to_a_concurrent_insert,
    absent_checks_admit_one_creator, absent_reads_in_transactions_admit_one_creator,
    concurrent_applies_count_exactly_once, concurrent_transactions_serialise,
    scans_in_transactions_see_no_phantom, transactions_and_applies_exclude_each_other,
};
pub use host_tables::{OpenSql, sql_rules};
pub use scans::{
    names_are_checked, namespaces_and_tables_are_isolated, scan_is_ordered_bounded_and_ranged,
};
pub use transactions::{
    Events, apply_writes_only_when_every_check_holds, dropped_transaction_rolls_back,
    emit_is_written_only_when_committed, finished_transaction_is_refused,
    reads_outside_an_open_transaction_see_committed_data, transaction_reads_its_own_writes,
};

use crate::Backend;

/// Every single-instance rule, in one call.
pub fn run(db: &dyn Backend, events: Events) {
    dropped_transaction_rolls_back(db);
    transaction_reads_its_own_writes(db);
    reads_outside_an_open_transaction_see_committed_data(db);
    finished_transaction_is_refused(db);
    scan_is_ordered_bounded_and_ranged(db);
    namespaces_and_tables_are_isolated(db);
    apply_writes_only_when_every_check_holds(db);
    emit_is_written_only_when_committed(db, events);
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::Memory;

    #[test]
    fn memory_keeps_the_contract() {
        let db = Memory::default();
        let events = || db.events().into_iter().map(|e| e.id).collect();
        // Memory checks no names (the sandbox's components are trusted to);
        // everything else is the whole contract.
        run(&db, &events);
    }

    #[test]
    fn memory_counts_concurrent_applies_exactly_once() {
        let db: Arc<dyn Backend> = Arc::new(Memory::default());
        concurrent_applies_count_exactly_once(&|| db.clone(), 8, 100);
        concurrent_transactions_serialise(&|| db.clone(), 8, 100);
        absent_reads_in_transactions_admit_one_creator(&|| db.clone(), 6, 40);
        scans_in_transactions_see_no_phantom(&|| db.clone(), 6, 20);
    }
}
