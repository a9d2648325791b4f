//! Events as the API reads them (a list, one with its deliveries and their
//! attempts) and sends them again.

use mmc_storage::sql_params;
use serde_json::{Value, json};

use super::{INSERT_DELIVERY, WebhookError, Webhooks, matches, subscriptions};
use crate::accounts::Environment;
use crate::clock::system_now_ms;
use crate::db::StorageError;

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
        let page = self.db.read(|c| {
            let after_seq = match starting_after {
                Some(id) => match c
                    .query_opt(
                        "SELECT seq FROM outbox WHERE id = ?1 AND merchant_id = ?2 AND environment = ?3",
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
                "SELECT payload FROM outbox WHERE merchant_id = ?1 AND environment = ?2 AND seq < ?3
                 AND (CAST(?4 AS TEXT) IS NULL OR event_type = ?4) AND (CAST(?5 AS TEXT) IS NULL OR subject_id = ?5)
                 ORDER BY seq DESC LIMIT ?6",
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

    /// One event with its deliveries and their attempts.
    pub fn event(
        &self,
        merchant_id: &str,
        environment: Environment,
        id: &str,
    ) -> Result<Value, WebhookError> {
        let found = self
            .db
            .read(|c| {
                let payload = c.query_opt(
                    "SELECT payload FROM outbox WHERE id = ?1 AND merchant_id = ?2 AND environment = ?3",
                    sql_params![id, merchant_id, environment.as_str()],
                )?;
                let Some(payload) = payload else { return Ok(None) };
                let payload = payload.blob(0)?;
                let deliveries = c.query(
                    "SELECT id, endpoint_id, url, status, attempts, next_attempt_ms, delivered_ms, last_error FROM deliveries WHERE event_id = ?1 ORDER BY id",
                    sql_params![id],
                )?;
                let mut out = Vec::new();
                for r in deliveries {
                    let attempts = c
                        .query(
                            "SELECT at_ms, status_code, latency_ms, error FROM delivery_attempts WHERE delivery_id = ?1 ORDER BY id",
                            sql_params![r.int(0)?],
                        )?
                        .iter()
                        .map(|a| {
                            Ok(json!({"at_ms": a.int(0)?, "status_code": a.opt_int(1)?,
                                      "latency_ms": a.int(2)?, "error": a.opt_text(3)?}))
                        })
                        .collect::<Result<Vec<Value>, StorageError>>()?;
                    out.push(json!({
                        "endpoint_id": r.opt_text(1)?,
                        "url": r.text(2)?,
                        "status": r.text(3)?,
                        "attempt_count": r.int(4)?,
                        "next_attempt_ms": r.int(5)?,
                        "delivered_ms": r.opt_int(6)?,
                        "last_error": r.opt_text(7)?,
                        "attempts": attempts,
                    }));
                }
                Ok(Some((payload, out)))
            })?
            .ok_or(WebhookError::NotFound("event"))?;
        let (payload, deliveries) = found;
        let mut event: Value = serde_json::from_slice(&self.body(payload)?).unwrap_or(Value::Null);
        event["deliveries"] = Value::Array(deliveries);
        Ok(event)
    }
}
