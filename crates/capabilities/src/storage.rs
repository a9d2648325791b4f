//! The `storage` capability: the component's own namespace of the backend.
//! The namespace is the component's name, fixed by the host — a component
//! cannot name another's data.

use wasmtime::component::{Resource, ResourceTable};

use crate::bindings::CapabilityError;
use crate::bindings::host::mmc::platform::storage::{self, Entry, Transaction as Handle};
use mmc_common::inline::may_block;
use mmc_db::{Backend, Check, Order, OutboxEvent, StorageError, Transaction, Write};
use mmc_metrics::Metrics;

/// The resource behind a component's `transaction` handle, with the rows it
/// wrote (puts, deletes, outbox events), counted in metrics once committed.
/// It lives in the Store's resource table under the handle's own number.
pub struct TxnHandle(Box<dyn Transaction>, [u64; 3]);

/// The table entry behind a component's handle (borrowed for a call on it).
fn ours(tx: &Resource<Handle>) -> Resource<TxnHandle> {
    Resource::new_borrow(tx.rep())
}

/// What a component is told of a storage failure (noted for the metrics).
fn refused(e: StorageError) -> CapabilityError {
    mmc_storage::failures::note(mmc_storage::failures::By::Components, &e);
    match e {
        StorageError::Unavailable(m) => CapabilityError::Unavailable(m),
        StorageError::Invalid(m) => CapabilityError::Invalid(m),
        StorageError::Finished => CapabilityError::Invalid("transaction already finished".into()),
        // Logged by the component, which runs the transaction again.
        StorageError::Conflict(m) => CapabilityError::Conflict(m),
    }
}

fn entries(rows: Vec<(String, Vec<u8>)>) -> Vec<Entry> {
    rows.into_iter()
        .map(|(key, value)| Entry { key, value })
        .collect()
}

fn outbox_event(event: storage::OutboxEvent) -> OutboxEvent {
    OutboxEvent {
        id: event.id,
        event_type: event.event_type,
        merchant_id: event.merchant_id,
        environment: event.environment,
        subject_id: event.subject_id,
        extra_url: event.extra_url,
        payload: event.payload,
    }
}

/// A job's lease as its node knows it, checked when a write of the job
/// commits: a node that resumes after its lease passed to another (frozen,
/// cut off) writes nothing, so it can neither claim work nor record answers
/// that another node now owns.
pub trait LeaseGuard: Send + Sync {
    fn held(&self) -> bool;
}

pub struct View<'a> {
    /// The namespace: the calling component's name.
    pub component: &'a str,
    pub backend: &'a dyn Backend,
    /// Where rows written and transactions are counted.
    pub metrics: &'a Metrics,
    /// The Store's resource table, which holds open transactions.
    pub table: &'a mut ResourceTable,
    /// An uncommitted transaction is open in this call (it holds the writer).
    pub open_txn: &'a mut bool,
    /// The lease of the background job this call runs for, if any.
    pub lease: Option<&'a dyn LeaseGuard>,
}

/// The marker the runtime links this interface with.
pub type Cap = View<'static>;

impl wasmtime::component::HasData for Cap {
    type Data<'a> = View<'a>;
}

impl View<'_> {
    /// One writer at a time: a call that holds it (an open transaction)
    /// would wait on itself if it began or applied another.
    fn no_open_txn(&self) -> Result<(), CapabilityError> {
        if *self.open_txn {
            return Err(CapabilityError::Invalid(
                "a transaction is already open in this call".into(),
            ));
        }
        Ok(())
    }

    /// A job's write commits only while the job's lease is known to be this
    /// node's (see `LeaseGuard`).
    fn lease_held(&self) -> Result<(), CapabilityError> {
        match self.lease {
            Some(lease) if !lease.held() => {
                tracing::warn!(
                    component = self.component,
                    "write not committed: this node's lease on the job has passed"
                );
                Err(CapabilityError::Denied(
                    "this node's lease on the job has passed: nothing written".into(),
                ))
            }
            _ => Ok(()),
        }
    }
}

impl storage::Host for View<'_> {
    fn apply(
        &mut self,
        checks: Vec<storage::Check>,
        writes: Vec<storage::WriteOp>,
    ) -> wasmtime::Result<Result<bool, CapabilityError>> {
        let _span = tracing::debug_span!("storage", operation = "apply").entered();
        if let Err(e) = self.no_open_txn().and_then(|()| self.lease_held()) {
            return Ok(Err(e));
        }
        let checks: Vec<Check> = checks
            .into_iter()
            .map(|c| Check {
                table: c.table,
                key: c.key,
                value: c.value,
            })
            .collect();
        let writes: Vec<Write> = writes
            .into_iter()
            .map(|w| match w {
                storage::WriteOp::Put(p) => Write::Put {
                    table: p.table,
                    key: p.key,
                    value: p.value,
                },
                storage::WriteOp::Delete(d) => Write::Delete {
                    table: d.table,
                    key: d.key,
                },
                storage::WriteOp::Emit(e) => Write::Emit(outbox_event(e)),
            })
            .collect();
        let mut rows = [0u64; 3];
        for w in &writes {
            rows[match w {
                Write::Put { .. } => 0,
                Write::Delete { .. } => 1,
                Write::Emit(_) => 2,
            }] += 1;
        }
        let (component, metrics) = (self.component, self.metrics);
        // A write waits for its group's fsync: off a worker's core, when inline.
        let applied = may_block(|| self.backend.apply(component, checks, writes));
        match applied {
            Ok(true) => {
                metrics.storage_rows_written(component, rows);
                metrics.storage_transaction(component, "applied");
            }
            Ok(false) => metrics.storage_transaction(component, "refused"),
            Err(_) => {}
        }
        Ok(applied.map_err(refused))
    }

    fn begin(&mut self) -> wasmtime::Result<Result<Resource<Handle>, CapabilityError>> {
        let _span = tracing::debug_span!("storage", operation = "begin").entered();
        if let Err(e) = self.no_open_txn() {
            return Ok(Err(e));
        }
        match may_block(|| self.backend.begin(self.component)) {
            Ok(tx) => {
                *self.open_txn = true;
                (self.metrics).storage_transaction(self.component, "interactive");
                let ours = self.table.push(TxnHandle(tx, [0; 3]))?;
                Ok(Ok(Resource::new_own(ours.rep())))
            }
            Err(e) => Ok(Err(refused(e))),
        }
    }

    fn get(
        &mut self,
        table: String,
        key: String,
    ) -> wasmtime::Result<Result<Option<Vec<u8>>, CapabilityError>> {
        let _span = tracing::debug_span!("storage", operation = "get").entered();
        Ok(self
            .backend
            .get(self.component, &table, &key)
            .map_err(refused))
    }

    fn scan(
        &mut self,
        table: String,
        start: String,
        end: String,
        limit: u32,
    ) -> wasmtime::Result<Result<Vec<Entry>, CapabilityError>> {
        let _span = tracing::debug_span!("storage", operation = "scan").entered();
        Ok(self.committed_scan(&table, (&start, &end), Order::Asc, limit))
    }

    fn scan_desc(
        &mut self,
        table: String,
        start: String,
        end: String,
        limit: u32,
    ) -> wasmtime::Result<Result<Vec<Entry>, CapabilityError>> {
        let _span = tracing::debug_span!("storage", operation = "scan_desc").entered();
        Ok(self.committed_scan(&table, (&start, &end), Order::Desc, limit))
    }
}

impl View<'_> {
    /// A scan of committed data in this component's namespace.
    fn committed_scan(
        &self,
        table: &str,
        range: (&str, &str),
        order: Order,
        limit: u32,
    ) -> Result<Vec<Entry>, CapabilityError> {
        self.backend
            .scan_in(self.component, table, range, order, limit)
            .map(entries)
            .map_err(refused)
    }
}

impl storage::HostTransaction for View<'_> {
    fn get(
        &mut self,
        tx: Resource<Handle>,
        table: String,
        key: String,
    ) -> wasmtime::Result<Result<Option<Vec<u8>>, CapabilityError>> {
        let _span = tracing::debug_span!("storage", operation = "tx.get").entered();
        Ok(self
            .table
            .get_mut(&ours(&tx))?
            .0
            .get(&table, &key)
            .map_err(refused))
    }

    fn put(
        &mut self,
        tx: Resource<Handle>,
        table: String,
        key: String,
        value: Vec<u8>,
    ) -> wasmtime::Result<Result<(), CapabilityError>> {
        let _span = tracing::debug_span!("storage", operation = "tx.put").entered();
        let handle = self.table.get_mut(&ours(&tx))?;
        let done = handle.0.put(&table, &key, &value);
        handle.1[0] += u64::from(done.is_ok());
        Ok(done.map_err(refused))
    }

    fn delete(
        &mut self,
        tx: Resource<Handle>,
        table: String,
        key: String,
    ) -> wasmtime::Result<Result<(), CapabilityError>> {
        let _span = tracing::debug_span!("storage", operation = "tx.delete").entered();
        let handle = self.table.get_mut(&ours(&tx))?;
        let done = handle.0.delete(&table, &key);
        handle.1[1] += u64::from(done.is_ok());
        Ok(done.map_err(refused))
    }

    fn scan(
        &mut self,
        tx: Resource<Handle>,
        table: String,
        start: String,
        end: String,
        limit: u32,
    ) -> wasmtime::Result<Result<Vec<Entry>, CapabilityError>> {
        let _span = tracing::debug_span!("storage", operation = "tx.scan").entered();
        Ok(self
            .table
            .get_mut(&ours(&tx))?
            .0
            .scan(&table, &start, &end, limit)
            .map(entries)
            .map_err(refused))
    }

    fn emit(
        &mut self,
        tx: Resource<Handle>,
        event: storage::OutboxEvent,
    ) -> wasmtime::Result<Result<(), CapabilityError>> {
        let _span = tracing::debug_span!("storage", operation = "tx.emit").entered();
        let event = outbox_event(event);
        let handle = self.table.get_mut(&ours(&tx))?;
        let done = handle.0.emit(&event);
        handle.1[2] += u64::from(done.is_ok());
        Ok(done.map_err(refused))
    }

    fn commit(&mut self, tx: Resource<Handle>) -> wasmtime::Result<Result<(), CapabilityError>> {
        let _span = tracing::debug_span!("storage", operation = "commit").entered();
        // Not committed: the transaction is rolled back when the component
        // drops its handle, as after any failed commit.
        if let Err(e) = self.lease_held() {
            return Ok(Err(e));
        }
        let handle = self.table.get_mut(&ours(&tx))?;
        let result = may_block(|| handle.0.commit());
        // Counted once committed; a second commit of the same handle fails.
        let rows = std::mem::take(&mut handle.1);
        *self.open_txn = false;
        if result.is_ok() {
            (self.metrics).storage_rows_written(self.component, rows);
        }
        Ok(result.map_err(refused))
    }

    fn drop(&mut self, tx: Resource<Handle>) -> wasmtime::Result<()> {
        // Dropping the handle rolls back an uncommitted transaction (and
        // waits until what it read is durable: off a worker's core, when inline).
        let handle = self
            .table
            .delete(Resource::<TxnHandle>::new_own(tx.rep()))?;
        may_block(|| drop(handle));
        *self.open_txn = false;
        Ok(())
    }
}
