//! The simulated provider's books: what it executed, journaled when it
//! takes each request (the journal is written behind the call, so a create
//! pays no transaction for it), read back as its statement and balance.
//!
//! Test numbers that make its books differ from ours, one per category:
//!
//! | phone ends | its books say |
//! |---|---|
//! | 0007 | another amount (100 less) |
//! | 0008 | the money moved twice |
//! | 0009 | nothing: no trace of it |
//! | 0010 | it moved, though it told us the payment failed (a late arrival) |
//! | 0011 | it moved, and so did another payment we have no record of |
//! | 0012 | its fee is twice its rate |
//! | 0013 | it moved, though it told us the payment failed; asked again after `late_success_ms`, its status says so too (set right) |

use crate::exports::mmc::adapter::books::{
    Balance, BooksInfo, Guest, Movement, MovementKind, Page, StatementPage,
};
use crate::mmc::adapter::types::AdapterError;
use crate::mmc::platform::{clock, config, journal};

/// A line of the journal: `kind id amount currency fee executed-at`,
/// space-separated (no field holds a space), the kind one letter. Kept
/// short: every create through the simulator writes one.
struct Entry {
    kind: String,
    id: String,
    amount: u64,
    currency: String,
    fee: u64,
    at_ms: u64,
}

const KINDS: [(&str, &str); 4] = [
    ("collection", "c"),
    ("refund", "r"),
    ("payout", "p"),
    ("withdrawn", "w"),
];

impl Entry {
    fn write(&self) -> Vec<u8> {
        let Entry {
            kind,
            id,
            amount,
            currency,
            fee,
            at_ms,
        } = self;
        let letter = KINDS
            .iter()
            .find(|(k, _)| k == kind)
            .map_or("?", |(_, l)| *l);
        let id = if id.is_empty() { "-" } else { id };
        format!("{letter} {id} {amount} {currency} {fee} {at_ms}").into_bytes()
    }

    fn read(bytes: &[u8]) -> Option<Entry> {
        let text = std::str::from_utf8(bytes).ok()?;
        let f: Vec<&str> = text.split(' ').collect();
        let [letter, id, amount, currency, fee, at_ms] = f.as_slice() else {
            return None;
        };
        let kind = KINDS.iter().find(|(_, l)| l == letter)?.0;
        Some(Entry {
            kind: kind.to_string(),
            id: if *id == "-" {
                String::new()
            } else {
                id.to_string()
            },
            amount: amount.parse().ok()?,
            currency: currency.to_string(),
            fee: fee.parse().ok()?,
            at_ms: at_ms.parse().ok()?,
        })
    }
}

fn fee_bp() -> u64 {
    config::get("fee_bp")
        .and_then(|v| v.parse().ok())
        .unwrap_or(100)
}

fn fee(amount: u64, kind: &str) -> u64 {
    match kind {
        "collection" | "payout" => (amount * fee_bp() + 5_000) / 10_000,
        _ => 0,
    }
}

/// The provider executes `kind` of `amount` for our `id` at `at_ms`, as the
/// test number `digits` has its books say it.
pub fn executed(kind: &str, id: &str, (amount, currency): (u64, &str), digits: &str, at_ms: u64) {
    let entry = |kind: &str, id: &str, amount: u64, fee: u64| Entry {
        kind: kind.into(),
        id: id.into(),
        amount,
        currency: currency.into(),
        fee,
        at_ms,
    };
    let normal = fee(amount, kind);
    let entries = match digits {
        "0009" => vec![],
        "0007" => vec![entry(kind, id, amount.saturating_sub(100).max(1), normal)],
        "0008" => vec![
            entry(kind, id, amount, normal),
            entry(kind, id, amount, normal),
        ],
        "0011" => {
            // Another customer's payment, to the merchant's code outside the API.
            let stray = entry(kind, "", amount, normal);
            vec![entry(kind, id, amount, normal), stray]
        }
        "0012" => vec![entry(kind, id, amount, normal * 2)],
        _ => vec![entry(kind, id, amount, normal)],
    };
    for e in entries {
        journal::append(&e.write());
    }
}

/// A request to pay withdrawn before it executed (cancelled while pending).
pub fn withdrawn(id: &str) {
    let e = Entry {
        kind: "withdrawn".into(),
        id: id.into(),
        amount: 0,
        currency: String::new(),
        fee: 0,
        at_ms: clock::now_ms(),
    };
    journal::append(&e.write());
}

fn unavailable(e: crate::mmc::platform::types::CapabilityError) -> AdapterError {
    AdapterError::Unavailable(format!("the simulated provider's journal: {e:?}"))
}

/// Journal entries appended in [from, to), a page of at most 1000 after `after`.
fn page(from: u64, to: u64, after: Option<String>) -> Result<Vec<journal::Entry>, AdapterError> {
    journal::read(from, to, after.as_deref(), 1000).map_err(unavailable)
}

/// How long after it was taken a request may execute (payments complete
/// after `completion_delay_ms`).
fn latest_execution_ms() -> u64 {
    crate::delay_ms() + 60_000
}

/// The books interface, as the simulator exports it.
impl Guest for crate::Simulator {
    fn info() -> BooksInfo {
        BooksInfo {
            statement: true,
            final_after_ms: latest_execution_ms(),
            max_period_ms: 0,
        }
    }

    /// What it started with (`opening_balance`, XOF), plus all it executed.
    fn balances() -> Result<Vec<Balance>, AdapterError> {
        let opening: i64 = config::get("opening_balance")
            .and_then(|v| v.parse().ok())
            .unwrap_or(10_000_000);
        let now = clock::now_ms();
        let mut balance = opening;
        let mut after = None;
        loop {
            let entries = page(0, now + 1, after.clone())?;
            for e in entries.iter().filter_map(|e| Entry::read(&e.value)) {
                let (amount, fee) = (e.amount as i64, e.fee as i64);
                balance += match e.kind.as_str() {
                    "collection" => amount - fee,
                    "payout" | "refund" => -amount - fee,
                    _ => 0,
                };
            }
            match entries.last() {
                Some(last) if entries.len() == 1000 => after = Some(last.key.clone()),
                _ => break,
            }
        }
        Ok(vec![Balance {
            wallet: "simulator".into(),
            currency: "XOF".into(),
            available: balance.to_string(),
            reserved: None,
            // One wallet pays out to every operator it simulates.
            pays_out: mmc_domain::OPERATORS
                .iter()
                .map(|op| op.slug.to_string())
                .collect(),
        }])
    }

    /// What it executed in [from, to): journal pages taken since a
    /// request's longest wait before `from`, a cursor of the last key read.
    fn statement(
        from_ms: u64,
        to_ms: u64,
        cursor: Option<String>,
    ) -> Result<StatementPage, AdapterError> {
        let start = from_ms.saturating_sub(latest_execution_ms());
        let entries = page(start, to_ms, cursor)?;
        let next = (entries.len() == 1000)
            .then(|| entries.last().map(|e| e.key.clone()))
            .flatten();
        let read: Vec<(String, Entry)> = entries
            .into_iter()
            .filter_map(|e| Entry::read(&e.value).map(|v| (e.key, v)))
            .collect();
        let withdrawn: Vec<&str> = read
            .iter()
            .filter(|(_, e)| e.kind == "withdrawn")
            .map(|(_, e)| e.id.as_str())
            .collect();
        let mut movements = Vec::new();
        for (key, e) in &read {
            let executed = (from_ms..to_ms).contains(&e.at_ms) && e.at_ms <= clock::now_ms();
            if e.kind == "withdrawn" || !executed || withdrawn.contains(&e.id.as_str()) {
                continue;
            }
            let kind = match e.kind.as_str() {
                "collection" => MovementKind::Collection,
                "refund" => MovementKind::Refund,
                "payout" => MovementKind::Payout,
                _ => MovementKind::Other,
            };
            let ours = (!e.id.is_empty()).then(|| e.id.clone());
            movements.push(Movement {
                provider_id: format!("simtx-{}", key.replace('/', "-")),
                our_id: ours,
                psp_reference: None,
                kind,
                amount: e.amount.to_string(),
                fee: Some(e.fee.to_string()),
                currency: e.currency.clone(),
                status: "completed".into(),
                operator_transaction_id: None,
                at_ms: e.at_ms,
                wallet: Some("simulator".into()),
                balance_after: None,
            });
        }
        Ok(StatementPage::Page(Page { movements, next }))
    }
}
