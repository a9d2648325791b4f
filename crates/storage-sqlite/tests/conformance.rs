//! The storage contract shared by every engine (`mmc_storage::conformance`).

use std::sync::Arc;

use mmc_storage::Backend;
use mmc_storage::conformance;
use mmc_storage_sqlite::Sqlite;

fn outbox_ids(db: &Sqlite) -> Vec<String> {
    db.read(|c| {
        let mut stmt = c.prepare("SELECT id FROM outbox ORDER BY seq")?;
        let ids = stmt.query_map([], |r| r.get(0))?;
        Ok(ids.collect::<Result<_, _>>()?)
    })
    .unwrap()
}

#[test]
fn keeps_the_storage_contract() {
    let dir = tempfile::tempdir().unwrap();
    let db = Sqlite::open(&dir.path().join("c.db")).unwrap();
    conformance::run(&db, &|| outbox_ids(&db));
    conformance::names_are_checked(&db);
}

#[test]
fn concurrent_applies_count_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    // One instance: a SQLite file has one server process.
    let db: Arc<dyn Backend> = Arc::new(Sqlite::open(&dir.path().join("q.db")).unwrap());
    conformance::concurrent_applies_count_exactly_once(&|| db.clone(), 8, 50);
    conformance::concurrent_transactions_serialise(&|| db.clone(), 8, 50);
    conformance::absent_checks_admit_one_creator(&|| db.clone(), 6, 60);
    conformance::transactions_and_applies_exclude_each_other(&|| db.clone(), 6, 30);
    conformance::absent_reads_in_transactions_admit_one_creator(&|| db.clone(), 6, 40);
    conformance::scans_in_transactions_see_no_phantom(&|| db.clone(), 6, 20);
    conformance::a_delete_in_a_transaction_is_not_lost_to_a_concurrent_insert(&|| db.clone());
}

#[test]
fn host_tables_keep_the_sql_rules() {
    let dir = tempfile::tempdir().unwrap();
    let db =
        mmc_storage::sql::SqlDb::new(Arc::new(Sqlite::open(&dir.path().join("s.db")).unwrap()));
    conformance::sql_rules(&|| db.clone(), 6, 30);
}
