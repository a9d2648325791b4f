//! Our side of the books: the payments, refunds and payouts a provider
//! account carried, read from the components' own tables (`collect`'s
//! payments and refunds, `bulk`'s payout items) as the books need them.
//!
//! A day's records are found without walking the tables: payment and
//! refund ids are UUIDv7, so a day is a key range per merchant; payouts
//! are found through the merchant's newest batches.

use std::collections::{HashMap, VecDeque};

use serde_json::Value;

use mmc_books::{Kind, OurStatus, Ours};
use mmc_domain::Status;

use super::Day;
use super::{BooksError, scan_all};
use mmc_db::Backend;

const ENVIRONMENTS: [&str; 2] = ["live", "test"];
/// The components that own our records (and the storage namespaces they keep them in).
pub(super) const PAYMENTS: &str = mmc_runtime::PAYMENTS_COMPONENT;
pub(super) const PAYOUTS: &str = "bulk";
/// How far back a batch may have been made and still send a payout today.
const BATCH_LOOKBACK_MS: u64 = 31 * 86_400_000;

/// The lowest UUIDv7 (as text) made at `ms` or later.
fn uuid7_floor(ms: u64) -> String {
    format!("{:08x}-{:04x}", ms >> 16, ms & 0xffff)
}

fn payment_status(s: Status) -> OurStatus {
    match s {
        // A refunded payment's money was collected (its refund is a record of its own).
        Status::Completed | Status::Refunded => OurStatus::Completed,
        Status::Failed | Status::Cancelled | Status::Expired => OurStatus::Failed,
        _ => OurStatus::InProgress,
    }
}

fn payment(p: &mmc_domain::record::Payment) -> Ours {
    Ours {
        id: p.id.clone(),
        kind: Kind::Collection,
        merchant_id: p.merchant_id.clone(),
        environment: p.environment.clone(),
        operator: p.operator.clone(),
        amount: p.amount,
        currency: p.currency.clone(),
        status: payment_status(p.status),
        stated: p.status.as_str().to_string(),
        psp_reference: p.psp_reference.clone(),
        created_at_ms: p.created_at_ms,
        settled_at_ms: p
            .completed_at_ms
            .or((payment_status(p.status) == OurStatus::Failed).then_some(p.updated_at_ms)),
        batch_id: None,
    }
}

fn text(v: &Value, field: &str) -> Option<String> {
    v.get(field).and_then(Value::as_str).map(str::to_string)
}

fn number(v: &Value, field: &str) -> u64 {
    v.get(field).and_then(Value::as_u64).unwrap_or_default()
}

/// A refund or payout item (both JSON, with the same names for what counts here).
fn movement(v: &Value, kind: Kind, operator: Option<String>) -> Option<Ours> {
    let stated = text(v, "status")?;
    let status = match stated.as_str() {
        "completed" => OurStatus::Completed,
        "failed" => OurStatus::Failed,
        _ => OurStatus::InProgress,
    };
    Some(Ours {
        id: text(v, "id")?,
        kind,
        merchant_id: text(v, "merchant_id").unwrap_or_default(),
        environment: text(v, "environment").unwrap_or_default(),
        operator: operator.or_else(|| text(v, "operator")),
        amount: number(v, "amount"),
        currency: text(v, "currency")?,
        status,
        stated,
        psp_reference: text(v, "psp_reference"),
        created_at_ms: number(v, "created_at_ms"),
        settled_at_ms: (status != OurStatus::InProgress)
            .then(|| v.get("completed_at_ms").and_then(Value::as_u64))
            .flatten()
            .or_else(|| (status != OurStatus::InProgress).then(|| number(v, "updated_at_ms"))),
        batch_id: (kind == Kind::Payout)
            .then(|| text(v, "batch_id"))
            .flatten(),
    })
}

/// One account's records of a day, read in id order ([`Records::next_of_day`]).
pub(super) struct DayStream {
    sources: Vec<Source>,
}

/// One range of our records, a page at a time: a merchant's payments or
/// refunds in an environment, or the day's payouts (held whole).
struct Source {
    kind: Kind,
    env: &'static str,
    merchant: String,
    from: String,
    end: String,
    done: bool,
    buf: VecDeque<Ours>,
}

/// Our records, as read for one account and day.
pub(super) struct Records<'a> {
    storage: &'a dyn Backend,
    merchants: &'a [String],
    account: &'a str,
    /// Payments read for their refunds' route: (env, merchant, id) → (route, operator).
    routes: HashMap<String, Option<(String, Option<String>)>>,
    /// The day being read, and this account's payout items of the batches
    /// of the month before it by id, read at the first line that needs them
    /// (a payout sent one day and executed the next).
    day: Option<Day>,
    payouts: Option<HashMap<String, Ours>>,
    /// Where each payout item read was stored (its id → its key), to read it again.
    payout_keys: HashMap<String, String>,
}

impl<'a> Records<'a> {
    pub(super) fn new(storage: &'a dyn Backend, merchants: &'a [String], account: &'a str) -> Self {
        Records {
            storage,
            merchants,
            account,
            routes: HashMap::new(),
            day: None,
            payouts: None,
            payout_keys: HashMap::new(),
        }
    }

    /// The route (adapter) a payment went through, and its operator.
    fn payment_route(
        &mut self,
        env: &str,
        merchant: &str,
        id: &str,
    ) -> Result<Option<(String, Option<String>)>, BooksError> {
        let key = format!("{env}/{merchant}/{id}");
        if let Some(known) = self.routes.get(&key) {
            return Ok(known.clone());
        }
        let found = match self.storage.get(PAYMENTS, "payments", &key)? {
            Some(stored) => {
                let p = mmc_domain::record::decode(&stored).map_err(BooksError::Corrupt)?;
                p.route.map(|r| (r.adapter, p.operator))
            }
            None => None,
        };
        self.routes.insert(key, found.clone());
        Ok(found)
    }

    /// Our records of `day` this account carried, in id order: each
    /// merchant's payments and refunds of the day (UUIDv7 key ranges, read a
    /// page at a time and merged) and the payouts sent that day (read whole
    /// and sorted: a day's payouts come through its batches, not by id).
    pub(super) fn day_stream(&mut self, day: Day) -> Result<DayStream, BooksError> {
        self.day = Some(day);
        let (from, to) = (uuid7_floor(day.start_ms()), uuid7_floor(day.end_ms()));
        let mut sources = Vec::new();
        let mut payouts = Vec::new();
        for env in ENVIRONMENTS {
            for m in self.merchants {
                for kind in [Kind::Collection, Kind::Refund] {
                    sources.push(Source {
                        kind,
                        env,
                        merchant: m.clone(),
                        from: format!("{env}/{m}/{from}"),
                        end: format!("{env}/{m}/{to}"),
                        done: false,
                        buf: VecDeque::new(),
                    });
                }
                let sent_that_day = |at: Option<u64>| at.is_some_and(|at| day.contains(at));
                self.payout_items(env, m, day, sent_that_day, &mut payouts)?;
            }
        }
        payouts.sort_by(|a, b| a.id.cmp(&b.id));
        sources.push(Source {
            kind: Kind::Payout,
            env: "",
            merchant: String::new(),
            from: String::new(),
            end: String::new(),
            done: true,
            buf: payouts.into(),
        });
        Ok(DayStream { sources })
    }

    /// The next of `stream`'s records, in id order; none after the last.
    pub(super) fn next_of_day(
        &mut self,
        stream: &mut DayStream,
    ) -> Result<Option<Ours>, BooksError> {
        for source in stream.sources.iter_mut() {
            while source.buf.is_empty() && !source.done {
                self.fill(source)?;
            }
        }
        let next = stream
            .sources
            .iter_mut()
            .filter(|s| !s.buf.is_empty())
            .min_by(|a, b| a.buf[0].id.cmp(&b.buf[0].id));
        Ok(next.and_then(|s| s.buf.pop_front()))
    }

    /// A page of `source`'s range, this account's records kept.
    fn fill(&mut self, source: &mut Source) -> Result<(), BooksError> {
        let limit = mmc_storage::MAX_SCAN;
        let table = match source.kind {
            Kind::Collection => "payments",
            _ => "refunds",
        };
        let rows = self
            .storage
            .scan(PAYMENTS, table, &source.from, &source.end, limit)?;
        source.done = rows.len() < limit as usize;
        if let Some((last, _)) = rows.last() {
            source.from = format!("{last}\0");
        }
        for (_, v) in rows {
            let ours = if source.kind == Kind::Collection {
                let p = mmc_domain::record::decode(&v).map_err(BooksError::Corrupt)?;
                p.route
                    .as_ref()
                    .is_some_and(|r| r.adapter == self.account)
                    .then(|| payment(&p))
            } else {
                let r: Value = serde_json::from_slice(&v).map_err(corrupt)?;
                self.refund(source.env, &source.merchant, &r)?
            };
            source.buf.extend(ours);
        }
        Ok(())
    }

    fn refund(&mut self, env: &str, merchant: &str, r: &Value) -> Result<Option<Ours>, BooksError> {
        let payment_id = text(r, "payment_id").unwrap_or_default();
        let route = self.payment_route(env, merchant, &payment_id)?;
        Ok(match route {
            Some((adapter, operator)) if adapter == self.account => {
                movement(r, Kind::Refund, operator)
            }
            _ => None,
        })
    }

    /// This account's payout items whose sending time `sent` keeps, from the
    /// merchant's batches of the month before `day` on, newest first.
    fn payout_items(
        &mut self,
        env: &str,
        merchant: &str,
        day: Day,
        sent: impl Fn(Option<u64>) -> bool,
        found: &mut Vec<Ours>,
    ) -> Result<(), BooksError> {
        let oldest = day.start_ms().saturating_sub(BATCH_LOOKBACK_MS);
        let mut batches = Vec::new();
        let (start, end) = (format!("{env}/{merchant}/"), format!("{env}/{merchant}/~"));
        scan_all(
            self.storage,
            PAYOUTS,
            "batch_list",
            &start,
            &end,
            |_, id| {
                let id = String::from_utf8_lossy(id).into_owned();
                let key = format!("{env}/{merchant}/{id}");
                let Some(batch) = self.storage.get(PAYOUTS, "batches", &key)? else {
                    return Ok(true);
                };
                let batch: Value = serde_json::from_slice(&batch).map_err(corrupt)?;
                if number(&batch, "created_at_ms") < oldest {
                    return Ok(false);
                }
                batches.push(id);
                Ok(true)
            },
        )?;
        let account = self.account;
        let keys = &mut self.payout_keys;
        for batch in batches {
            let (start, end) = (
                format!("{env}/{merchant}/{batch}/"),
                format!("{env}/{merchant}/{batch}/~"),
            );
            scan_all(self.storage, PAYOUTS, "items", &start, &end, |key, v| {
                let item: Value = serde_json::from_slice(v).map_err(corrupt)?;
                let at = item.get("submitted_at_ms").and_then(Value::as_u64);
                let through = text(&item, "route").is_some_and(|r| r == account);
                if through && sent(at) {
                    let ours = payout(item, env, merchant);
                    if let Some(o) = &ours {
                        keys.insert(o.id.clone(), key.to_string());
                    }
                    found.extend(ours);
                }
                Ok(true)
            })?;
        }
        Ok(())
    }

    /// `o` as stored now (after its owner checked it again with the provider).
    pub(super) fn reread(&mut self, o: &Ours) -> Result<Option<Ours>, BooksError> {
        let key = format!("{}/{}/{}", o.environment, o.merchant_id, o.id);
        let now = match o.kind {
            Kind::Collection => match self.storage.get(PAYMENTS, "payments", &key)? {
                Some(v) => Some(payment(
                    &mmc_domain::record::decode(&v).map_err(BooksError::Corrupt)?,
                )),
                None => None,
            },
            Kind::Refund => match self.storage.get(PAYMENTS, "refunds", &key)? {
                Some(v) => {
                    let r: Value = serde_json::from_slice(&v).map_err(corrupt)?;
                    self.refund(&o.environment, &o.merchant_id, &r)?
                }
                None => None,
            },
            Kind::Payout => match self.payout_keys.get(&o.id) {
                Some(key) => match self.storage.get(PAYOUTS, "items", key)? {
                    Some(v) => {
                        let item = serde_json::from_slice(&v).map_err(corrupt)?;
                        payout(item, &o.environment, &o.merchant_id)
                    }
                    None => None,
                },
                None => None,
            },
            _ => None,
        };
        if let (Some(now), Some(payouts)) = (&now, self.payouts.as_mut())
            && payouts.contains_key(&now.id)
        {
            payouts.insert(now.id.clone(), now.clone());
        }
        Ok(now)
    }

    /// A payment, refund or payout of ours by its id, made on any day (a
    /// provider line of today about an older record).
    pub(super) fn by_id(&mut self, id: &str) -> Result<Option<Ours>, BooksError> {
        if id.is_empty() || id.contains('/') {
            return Ok(None);
        }
        for env in ENVIRONMENTS {
            for m in self.merchants {
                let key = format!("{env}/{m}/{id}");
                if let Some(v) = self.storage.get(PAYMENTS, "payments", &key)? {
                    let p = mmc_domain::record::decode(&v).map_err(BooksError::Corrupt)?;
                    let ours_route = p.route.as_ref().is_some_and(|r| r.adapter == self.account);
                    return Ok(ours_route.then(|| payment(&p)));
                }
                if let Some(v) = self.storage.get(PAYMENTS, "refunds", &key)? {
                    let r: Value = serde_json::from_slice(&v).map_err(corrupt)?;
                    return self.refund(env, m, &r);
                }
            }
        }
        if self.payouts.is_none() {
            let day = self
                .day
                .unwrap_or(Day::of_ms(mmc_common::clock::system_now_ms()));
            let mut all = Vec::new();
            for env in ENVIRONMENTS {
                for m in self.merchants {
                    self.payout_items(env, m, day, |at| at.is_some(), &mut all)?;
                }
            }
            self.payouts = Some(all.into_iter().map(|o| (o.id.clone(), o)).collect());
        }
        Ok(self.payouts.as_ref().and_then(|p| p.get(id)).cloned())
    }
}

/// A payout item (stored without its merchant and environment: its key says them).
fn payout(mut item: Value, env: &str, merchant: &str) -> Option<Ours> {
    item["merchant_id"] = merchant.into();
    item["environment"] = env.into();
    movement(&item, Kind::Payout, None)
}

fn corrupt(e: serde_json::Error) -> BooksError {
    BooksError::Corrupt(e.to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_day_is_a_range_of_uuid7_ids() {
        let ms = 1_780_315_200_123u64;
        let id = uuid::Uuid::new_v7(uuid::Timestamp::from_unix(
            uuid::NoContext,
            ms / 1000,
            (ms % 1000) as u32 * 1_000_000,
        ))
        .to_string();
        assert!(super::uuid7_floor(ms) <= id);
        assert!(id < super::uuid7_floor(ms + 1));
    }
}
