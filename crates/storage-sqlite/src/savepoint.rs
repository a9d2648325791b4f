//! Savepoints on the writer: a transaction inside its group, a batch inside
//! a transaction, each kept or rolled back alone.

use super::*;

/// The writer's savepoints: one per batch of prepared transactions, or one
/// per transaction (an interactive one, or a prepared one applied alone).
#[derive(Clone, Copy)]
pub(crate) enum Savepoint {
    Batch,
    Txn,
}

impl Savepoint {
    /// (open, keep, undo) statements.
    pub(crate) fn sql(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Savepoint::Batch => (
                "SAVEPOINT batch",
                "RELEASE batch",
                "ROLLBACK TO batch; RELEASE batch",
            ),
            Savepoint::Txn => (
                "SAVEPOINT txn",
                "RELEASE txn",
                "ROLLBACK TO txn; RELEASE txn",
            ),
        }
    }
}

/// Opens the group's outer transaction if needed and savepoint `sp` in it.
pub(crate) fn enter(w: &mut Writer, sp: Savepoint) -> Result<(), StorageError> {
    if !w.open {
        begin_group(w)?;
    }
    w.conn.prepare_cached(sp.sql().0)?.execute([])?;
    Ok(())
}

/// Opens the group's outer transaction.
pub(crate) fn begin_group(w: &mut Writer) -> Result<(), StorageError> {
    // IMMEDIATE: take the write lock up front, so a read-then-write cannot
    // fail with SQLITE_BUSY when another process (the CLI) writes meanwhile.
    w.conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
    w.open = true;
    Ok(())
}

/// What a batch is undone by: rolling back the group it opened (nothing
/// before it to keep, and no savepoint, so SQLite copies none of its pages
/// into a savepoint journal), or its savepoint in a group holding earlier work.
#[derive(Clone, Copy)]
pub(crate) enum BatchScope {
    OwnGroup,
    Savepoint,
}

pub(crate) fn open_batch(w: &mut Writer) -> Result<BatchScope, StorageError> {
    if w.open {
        enter(w, Savepoint::Batch)?;
        Ok(BatchScope::Savepoint)
    } else {
        begin_group(w)?;
        Ok(BatchScope::OwnGroup)
    }
}

/// Ends a batch: kept, or undone. An undone group of its own is rolled back
/// whole; nothing was handed over from it, so its number is reused.
pub(crate) fn close_batch(
    w: &mut Writer,
    scope: BatchScope,
    keep: bool,
) -> Result<(), StorageError> {
    match (scope, keep) {
        (BatchScope::OwnGroup, true) => Ok(()), // committed with its group
        (BatchScope::OwnGroup, false) => {
            let r = w.conn.execute_batch("ROLLBACK");
            w.open = false;
            Ok(r?)
        }
        (BatchScope::Savepoint, keep) => leave(w, Savepoint::Batch, keep),
    }
}

/// Ends savepoint `sp`: kept (`RELEASE`) or undone.
pub(crate) fn leave(w: &mut Writer, sp: Savepoint, keep: bool) -> Result<(), StorageError> {
    let (_, release, undo) = sp.sql();
    if keep {
        if let Err(e) = w.conn.prepare_cached(release)?.execute([]) {
            let _ = w.conn.execute_batch(undo);
            return Err(e.into());
        }
        Ok(())
    } else {
        Ok(w.conn.execute_batch(undo)?)
    }
}
