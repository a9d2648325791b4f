//! The audit trail of adapter calls: which adapter version handled which
//! operation of which payment, with outcome and duration. Records are
//! buffered and written in batches (one commit per batch, not per call, so
//! the hot path pays no extra fsync); a crash can lose the last batch.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio::sync::mpsc;

use mmc_db::{SqlDb, StorageError};
use mmc_storage::sql_params;

#[derive(Debug, Clone, Serialize)]
pub struct AdapterCall {
    pub subject_id: String,
    pub environment: String,
    pub operator: String,
    pub adapter: Option<String>,
    /// SHA-256 of the component version that served the call.
    pub version: Option<String>,
    pub operation: String,
    /// `ok`, or the error kind (`timeout`, `unavailable`, `trap`…).
    pub outcome: String,
    pub duration_ms: f64,
    pub at_ms: u64,
}

pub struct Audit {
    tx: Option<mpsc::UnboundedSender<AdapterCall>>,
    db: Option<SqlDb>,
}

impl Audit {
    /// No trail (the sandbox).
    pub fn disabled() -> Arc<Audit> {
        Arc::new(Audit { tx: None, db: None })
    }

    /// Starts the batch writer. Must run inside a tokio runtime.
    pub fn start(db: SqlDb) -> Result<Arc<Audit>, StorageError> {
        let (tx, mut rx) = mpsc::unbounded_channel::<AdapterCall>();
        let writer = db.clone();
        tokio::spawn(async move {
            let mut batch = Vec::new();
            while let Some(first) = rx.recv().await {
                batch.push(first);
                // Gather what arrives in the next moment into the same commit.
                tokio::time::sleep(Duration::from_millis(50)).await;
                while let Ok(more) = rx.try_recv() {
                    batch.push(more);
                }
                let records = std::mem::take(&mut batch);
                let w = writer.clone();
                let _ = tokio::task::spawn_blocking(move || {
                    w.write(|t| {
                        for r in &records {
                            t.execute(
                                "INSERT INTO adapter_calls (subject_id, environment, operator, adapter, version, operation, outcome, duration_ms, at_ms)
                                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                                sql_params![
                                    &r.subject_id, &r.environment, &r.operator, &r.adapter, &r.version,
                                    &r.operation, &r.outcome, r.duration_ms, r.at_ms as i64
                                ],
                            )?;
                        }
                        Ok(())
                    })
                })
                .await;
            }
        });
        Ok(Arc::new(Audit {
            tx: Some(tx),
            db: Some(db),
        }))
    }

    pub fn record(&self, call: AdapterCall) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(call);
        }
    }

    /// The calls made for a payment (or refund, payout), oldest first.
    pub fn calls_for(&self, subject_id: &str) -> Result<Vec<AdapterCall>, StorageError> {
        let Some(db) = &self.db else {
            return Ok(Vec::new());
        };
        db.read(|c| {
            c.query(
                "SELECT subject_id, environment, operator, adapter, version, operation, outcome, duration_ms, at_ms
                 FROM adapter_calls WHERE subject_id = ?1 ORDER BY id",
                sql_params![subject_id],
            )?
            .iter()
            .map(|r| {
                Ok(AdapterCall {
                    subject_id: r.text(0)?,
                    environment: r.text(1)?,
                    operator: r.text(2)?,
                    adapter: r.opt_text(3)?,
                    version: r.opt_text(4)?,
                    operation: r.text(5)?,
                    outcome: r.text(6)?,
                    duration_ms: r.real(7)?,
                    at_ms: r.int(8)? as u64,
                })
            })
            .collect()
        })
    }
}
