//! The provider's side of the books, as its adapter reads it: its
//! statement of a period page by page (waiting while the provider prepares
//! it), or, for a provider that publishes none, each of our records read
//! back by status. Anything short of the whole period read is an
//! incomplete read, with its reason: never half a day taken for a day.

use std::sync::Arc;
use std::time::{Duration, Instant};

use mmc_books::{Amount, Kind, Line, Ours};

use mmc_runtime::bindings::adapter_types::{AdapterError, OperationRef, PspStatus};
use mmc_runtime::bindings::provider_books::{Movement, MovementKind, StatementPage};
use mmc_runtime::{CallError, Runtime};

/// Whether the provider's side was read whole.
pub(super) enum Read {
    /// Every movement of the period went to the reader.
    Whole,
    /// Not all of it: why.
    Incomplete(String),
}

/// Most pages one statement may take (a provider that never says "last"
/// must not keep a run going for ever).
const MAX_PAGES: u32 = 100_000;

/// What an adapter's error says, for a report's reason.
pub(super) fn describe(e: &AdapterError) -> String {
    match e {
        AdapterError::Timeout(m) => format!("the provider did not answer in time: {m}"),
        AdapterError::Unavailable(m) => format!("the provider is unavailable: {m}"),
        AdapterError::InvalidResponse(m) => format!("the provider's answer is unreadable: {m}"),
        AdapterError::Rejected(m) => format!("the provider refused: {m}"),
        AdapterError::NotSent(m) => format!("nothing was sent: {m}"),
        AdapterError::NotSupported(m) => format!("not supported: {m}"),
        AdapterError::Unauthenticated(m) => format!("unauthenticated: {m}"),
        AdapterError::Busy(m) => format!("the adapter is busy: {m}"),
    }
}

fn call_error(e: &CallError) -> String {
    format!("the adapter failed: {e}")
}

fn kind(k: MovementKind) -> Kind {
    match k {
        MovementKind::Collection => Kind::Collection,
        MovementKind::Refund => Kind::Refund,
        MovementKind::Payout => Kind::Payout,
        MovementKind::Fee => Kind::Fee,
        MovementKind::Adjustment => Kind::Adjustment,
        MovementKind::TopUp => Kind::TopUp,
        MovementKind::Settlement => Kind::Settlement,
        MovementKind::Other => Kind::Other,
    }
}

/// A statement movement as a line of the books, or why it cannot be one.
fn line(m: Movement) -> Result<Line, String> {
    let amount = |field: &str, v: &str| {
        Amount::parse(v).ok_or_else(|| {
            format!(
                "movement {} has {field} {v:?}, which is not an amount",
                m.provider_id
            )
        })
    };
    const STATUSES: [&str; 4] = ["completed", "failed", "pending", "reversed"];
    if !STATUSES.contains(&m.status.as_str()) {
        return Err(format!(
            "movement {} has an unknown status {:?}",
            m.provider_id, m.status
        ));
    }
    Ok(Line {
        amount: amount("amount", &m.amount)?,
        fee: m.fee.as_deref().map(|f| amount("fee", f)).transpose()?,
        provider_id: m.provider_id.clone(),
        our_id: m.our_id.filter(|s| !s.is_empty()),
        psp_reference: m.psp_reference,
        kind: kind(m.kind),
        currency: m.currency,
        status: m.status,
        operator_transaction_id: m.operator_transaction_id,
        at_ms: m.at_ms,
        balance_after: match m.balance_after.as_deref() {
            Some(b) => Some(Amount::parse_signed(b).ok_or_else(|| {
                format!(
                    "movement {} states a balance {b:?}, which is not one",
                    m.provider_id
                )
            })?),
            None => None,
        },
        wallet: m.wallet,
    })
}

/// The provider's statement of [from, to), every page of it, each page's
/// lines handed to `read` as it comes (a page with a movement that cannot be
/// read is not handed over: the read is incomplete).
pub(super) fn statement<E>(
    runtime: &Arc<Runtime>,
    account: &str,
    (from_ms, to_ms): (u64, u64),
    wait: Duration,
    mut read: impl FnMut(Vec<Line>) -> Result<(), E>,
) -> Result<Read, E> {
    let started = Instant::now();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let asked = cursor.clone();
        let answer = runtime.call_books(account, |store, books| {
            books.call_statement(store, from_ms, to_ms, asked.as_deref())
        });
        let page = match answer {
            Ok(Some(Ok(page))) => page,
            Ok(Some(Err(e))) => return Ok(Read::Incomplete(describe(&e))),
            Ok(None) => return Ok(Read::Incomplete(format!("{account} reads no statement"))),
            Err(e) => return Ok(Read::Incomplete(call_error(&e))),
        };
        match page {
            StatementPage::Page(page) => {
                let mut lines = Vec::with_capacity(page.movements.len());
                for m in page.movements {
                    match line(m) {
                        Ok(l) => lines.push(l),
                        Err(why) => return Ok(Read::Incomplete(why)),
                    }
                }
                read(lines)?;
                match page.next {
                    None => return Ok(Read::Whole),
                    Some(next) if Some(&next) == cursor.as_ref() => {
                        return Ok(Read::Incomplete(format!(
                            "the provider gave the page cursor {next:?} twice in a row"
                        )));
                    }
                    next => cursor = next,
                }
            }
            StatementPage::Preparing(p) => {
                let pause = Duration::from_millis(p.retry_after_ms.clamp(100, 60_000));
                if started.elapsed() + pause > wait {
                    return Ok(Read::Incomplete(format!(
                        "the provider had not prepared its statement after {} s",
                        wait.as_secs()
                    )));
                }
                std::thread::sleep(pause);
                cursor = Some(p.cursor);
            }
        }
    }
    Ok(Read::Incomplete(format!(
        "the statement ran past {MAX_PAGES} pages"
    )))
}

/// For a provider that publishes no statement: each of `ours` read back
/// by our id, its answer taken as its line (none when the provider does
/// not know it); `Err(why)` when one cannot be read. A provider's cap on
/// status queries is kept.
pub(super) fn by_status(
    runtime: &Arc<Runtime>,
    account: &str,
    ours: &[Ours],
) -> Result<Vec<Line>, String> {
    let mut lines = Vec::new();
    for o in ours {
        let Some(operator) = o.operator.clone() else {
            continue;
        };
        let pace = runtime
            .get(account)
            .and_then(|l| {
                l.operators
                    .iter()
                    .find(|i| i.slug == operator)
                    .map(|i| i.status_per_second)
            })
            .filter(|&n| n > 0)
            .map(|n| Duration::from_millis(1000 / u64::from(n)));
        let op = OperationRef {
            id: o.id.clone(),
            operator: operator.clone(),
            environment: o.environment.clone(),
            psp_reference: o.psp_reference.clone(),
            phone: None,
            amount: o.amount,
            currency: o.currency.clone(),
        };
        let (answer, _) = runtime.call_adapter_waiting(
            (&o.environment, &operator),
            Some(account),
            None,
            |store, adapter| {
                let operator = adapter.mmc_adapter_operator();
                match o.kind {
                    Kind::Refund => operator.call_refund_status(store, &op),
                    Kind::Payout => operator.call_payout_status(store, &op),
                    _ => operator.call_status(store, &op),
                }
            },
        );
        let status = match answer {
            Ok(Ok(status)) => status,
            Ok(Err(e)) => return Err(format!("{}: {}", o.id, describe(&e))),
            Err(e) => return Err(format!("{}: {}", o.id, call_error(&e))),
        };
        let (state, amount, currency) = match status {
            PspStatus::NotFound => continue,
            PspStatus::Pending => ("pending", Amount::whole(o.amount), o.currency.clone()),
            PspStatus::Failed(_) => ("failed", Amount::whole(o.amount), o.currency.clone()),
            PspStatus::Completed(settled) => match Amount::parse(&settled.amount) {
                Some(a) => ("completed", a, settled.currency),
                None => {
                    return Err(format!(
                        "{}: the provider's amount {:?} is not an amount",
                        o.id, settled.amount
                    ));
                }
            },
        };
        lines.push(Line {
            provider_id: o.psp_reference.clone().unwrap_or_else(|| o.id.clone()),
            our_id: Some(o.id.clone()),
            psp_reference: o.psp_reference.clone(),
            kind: o.kind,
            amount,
            fee: None,
            currency,
            status: state.into(),
            operator_transaction_id: None,
            at_ms: o.created_at_ms,
            wallet: None,
            balance_after: None,
        });
        if let Some(pace) = pace {
            std::thread::sleep(pace);
        }
    }
    Ok(lines)
}
