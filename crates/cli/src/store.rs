//! `mmc reindex`, `mmc console rebuild-overview`, `mmc backup`, `mmc
//! restore`: the store itself: its payments' index started again, the
//! console overview's tallies counted again, and copies of it taken and put
//! back.

use std::path::Path;

use super::*;

pub fn reindex(config: &Config) {
    let db = open_db(config);
    // collect's `meta` keys: with neither, its job starts each index's
    // backfill from the first payment.
    let mut tx = db
        .backend
        .begin("collect")
        .unwrap_or_else(|e| fail(&e.to_string()));
    for key in [
        mmc_domain::payment::listing_meta::READY,
        mmc_domain::payment::listing_meta::BACKFILL,
        mmc_domain::payment::search_meta::READY,
        mmc_domain::payment::search_meta::BACKFILL,
    ] {
        tx.delete("meta", key)
            .unwrap_or_else(|e| fail(&e.to_string()));
    }
    tx.commit().unwrap_or_else(|e| fail(&e.to_string()));
    println!("{}", json!({"reindex": "started"}));
}

pub fn rebuild_overview(config: &Config) {
    // A count here holds SQLite's write lock for its whole length (about 2 s
    // per million payments), and a server's writes wait at most 10 s for it:
    // a server that has the file open counts at its next dispatch round
    // instead, in its own writer.
    let served = match config.storage_url() {
        Ok(mmc_config::StorageUrl::Sqlite(path)) => {
            mmc_storage_sqlite::backup::in_use(&path).unwrap_or(false)
        }
        _ => false,
    };
    let db = open_db(config);
    if served {
        mmc_tallies::rebuild_at_next_round(&db.sql).unwrap_or_else(|e| fail(&e.to_string()));
        println!(
            "{}",
            json!({"overview": {"counted": "by the running server, at its next dispatch round"}})
        );
        return;
    }
    let rebuilt = mmc_tallies::rebuild(&db.sql).unwrap_or_else(|e| fail(&e.to_string()));
    println!("{}", json!({ "overview": rebuilt }));
}

pub fn backup(config: &Config, to: &Path) {
    let m = mmc_backup::backup(config, to).unwrap_or_else(|e| fail(&e.to_string()));
    println!("{}", json!({"backup": to, "manifest": m}));
}

pub fn restore(config: &Config, from: &Path, force: bool) {
    let m = mmc_backup::restore(config, from, force).unwrap_or_else(|e| fail(&e.to_string()));
    println!(
        "{}",
        json!({"restored": from, "data_dir": config.data_dir, "manifest": m})
    );
}
