//! Events as the API reads them (a list, one with its deliveries and their
//! attempts) and sends them again.

use std::collections::HashMap;

use mmc_storage::sql::Value as SqlValue;
use mmc_storage::sql_params;
use serde_json::{Value, json};

use super::{INSERT_DELIVERY, WebhookError, Webhooks, matches, subscriptions};
use mmc_accounts::Environment;
use mmc_common::clock::system_now_ms;
use mmc_db::{SqlConn, StorageError};

impl Webhooks {
    /// Queues every current destination of an event again (manual resend).
    pub fn resend(
        &self,
        merchant_id: &str,
        environment: Environment,
        event_id: &str,
    ) -> Result<usize, WebhookError> {
        let now = system_now_ms() as i64;
        let count = self.db.write(|tx| {
            // A pruning round in progress could otherwise delete the event
            // read here, or the delivery queued here once committed (its
            // delete reads the deliveries again); one that starts while this
            // is held skips its round.
            tx.lock(super::outbox::PRUNE_LOCK)?;
            let event = tx.query_opt(
                "SELECT event_type, extra_url FROM outbox WHERE id = ?1 AND merchant_id = ?2 AND environment = ?3",
                sql_params![event_id, merchant_id, environment.as_str()],
            )?;
            let Some(event) = event else { return Ok(None) };
            let (event_type, extra_url) = (event.text(0)?, event.opt_text(1)?);
            let mut n = 0;
            for (eid, url, enabled) in subscriptions(tx, merchant_id, environment.as_str())? {
                if matches(&enabled, &event_type) {
                    tx.execute(
                        INSERT_DELIVERY,
                        sql_params![event_id, eid, url, environment.as_str(), merchant_id, now],
                    )?;
                    n += 1;
                }
            }
            if let Some(url) = extra_url {
                tx.execute(
                    INSERT_DELIVERY,
                    sql_params![event_id, Option::<String>::None, url, environment.as_str(), merchant_id, now],
                )?;
                n += 1;
            }
            Ok(Some(n))
        })?;
        count.ok_or(WebhookError::NotFound("event"))
    }

    /// Events of a merchant and environment, newest first.
    pub fn list_events(
        &self,
        merchant_id: &str,
        environment: Environment,
        event_type: Option<&str>,
        subject: Option<&str>,
        starting_after: Option<&str>,
        limit: u32,
    ) -> Result<(Vec<Value>, bool), WebhookError> {
        // Newest first in the order events were written, which every event
        // has once committed: on PostgreSQL `seq` is given later, by the
        // dispatcher (see `SqlConn::number_outbox`), `ins` at once.
        let order = match self.db.engine_name() {
            "postgres" => "ins",
            _ => "seq",
        };
        let page = self.db.read(|c| {
            let after_seq = match starting_after {
                Some(id) => match c
                    .query_opt(
                        &format!("SELECT {order} FROM outbox WHERE id = ?1 AND merchant_id = ?2 AND environment = ?3"),
                        sql_params![id, merchant_id, environment.as_str()],
                    )?
                    .map(|r| r.int(0))
                    .transpose()?
                {
                    Some(seq) => seq,
                    None => return Ok(None),
                },
                None => i64::MAX,
            };
            let rows = c.query(
                &format!("SELECT payload FROM outbox WHERE merchant_id = ?1 AND environment = ?2 AND {order} < ?3
                 AND (CAST(?4 AS TEXT) IS NULL OR event_type = ?4) AND (CAST(?5 AS TEXT) IS NULL OR subject_id = ?5)
                 ORDER BY {order} DESC LIMIT ?6"),
                sql_params![merchant_id, environment.as_str(), after_seq, event_type, subject, limit as i64 + 1],
            )?;
            let mut payloads: Vec<Vec<u8>> =
                rows.iter().filter_map(|r| r.blob(0).ok()).collect();
            let more = payloads.len() > limit as usize;
            payloads.truncate(limit as usize);
            Ok(Some((payloads, more)))
        })?;
        // An id this merchant has no event under is refused, not read as
        // "from the newest": a mistyped cursor would restart the walk.
        let (payloads, more) = page.ok_or_else(|| {
            WebhookError::Invalid(
                format!(
                    "starting_after: no event {} in this environment.",
                    starting_after.unwrap_or_default()
                ),
                "starting_after",
            )
        })?;
        let events = self
            .bodies(payloads)?
            .into_iter()
            .flatten()
            .filter_map(|b| serde_json::from_slice(&b).ok())
            .collect();
        Ok((events, more))
    }

    /// One event with its deliveries and their attempts, in one read.
    pub fn event(
        &self,
        merchant_id: &str,
        environment: Environment,
        id: &str,
    ) -> Result<Value, WebhookError> {
        let (payload, mut deliveries) = self
            .db
            .read(|c| {
                let Some(row) = c.query_opt(
                    "SELECT payload FROM outbox WHERE id = ?1 AND merchant_id = ?2 AND environment = ?3",
                    sql_params![id, merchant_id, environment.as_str()],
                )?
                else {
                    return Ok(None);
                };
                Ok(Some((row.blob(0)?, deliveries_in(c, merchant_id, &[id])?)))
            })?
            .ok_or(WebhookError::NotFound("event"))?;
        let mut event: Value = serde_json::from_slice(&self.body(payload)?).unwrap_or(Value::Null);
        event["deliveries"] = Value::Array(deliveries.remove(id).unwrap_or_default());
        Ok(event)
    }

    /// The deliveries of each of a merchant's events, oldest first, with
    /// their attempts: two queries however many events (a payment's
    /// timeline shows them all).
    pub fn deliveries_of(
        &self,
        merchant_id: &str,
        event_ids: &[&str],
    ) -> Result<HashMap<String, Vec<Value>>, WebhookError> {
        Ok(self.db.read(|c| deliveries_in(c, merchant_id, event_ids))?)
    }
}

/// [`Webhooks::deliveries_of`] on an open connection.
fn deliveries_in(
    c: &mut dyn SqlConn,
    merchant_id: &str,
    event_ids: &[&str],
) -> Result<HashMap<String, Vec<Value>>, StorageError> {
    if event_ids.is_empty() {
        return Ok(HashMap::new());
    }
    let list = (2..event_ids.len() + 2)
        .map(|i| format!("?{i}"))
        .collect::<Vec<_>>()
        .join(", ");
    let params: Vec<SqlValue> = std::iter::once(merchant_id)
        .chain(event_ids.iter().copied())
        .map(SqlValue::from)
        .collect();
    let deliveries = c.query(
        &format!(
            "SELECT id, event_id, endpoint_id, url, status, attempts, next_attempt_ms, delivered_ms, last_error
             FROM deliveries WHERE merchant_id = ?1 AND event_id IN ({list}) ORDER BY id"
        ),
        &params,
    )?;
    let attempts = c.query(
        &format!(
            "SELECT a.delivery_id, a.at_ms, a.status_code, a.latency_ms, a.error
             FROM delivery_attempts a JOIN deliveries d ON d.id = a.delivery_id
             WHERE d.merchant_id = ?1 AND d.event_id IN ({list}) ORDER BY a.id"
        ),
        &params,
    )?;
    let mut by_delivery: HashMap<i64, Vec<Value>> = HashMap::new();
    for a in attempts {
        by_delivery.entry(a.int(0)?).or_default().push(json!({
            "at_ms": a.int(1)?, "status_code": a.opt_int(2)?,
            "latency_ms": a.int(3)?, "error": a.opt_text(4)?,
        }));
    }
    let mut out: HashMap<String, Vec<Value>> = HashMap::new();
    for r in deliveries {
        out.entry(r.text(1)?).or_default().push(json!({
            "endpoint_id": r.opt_text(2)?,
            "url": r.text(3)?,
            "status": r.text(4)?,
            "attempt_count": r.int(5)?,
            "next_attempt_ms": r.int(6)?,
            "delivered_ms": r.opt_int(7)?,
            "last_error": r.opt_text(8)?,
            "attempts": by_delivery.remove(&r.int(0)?).unwrap_or_default(),
        }));
    }
    Ok(out)
}
