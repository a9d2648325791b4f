//! A merchant's webhook endpoints, as the API makes, lists and deletes them,
//! and the secret that signs a payment's `callback_url` deliveries.

use mmc_storage::sql_params;

use super::{
    ENDPOINT_COLUMNS, EVENT_TYPES, Endpoint, MAX_DESCRIPTION, MAX_ENDPOINTS, WebhookError,
    Webhooks, callback_row, destination, endpoint_from_row, signature,
};
use mmc_accounts::Environment;
use mmc_common::clock::system_now_ms;
use mmc_db::{SqlConn, StorageError};

impl Webhooks {
    /// A description is a line of text a person reads in a dashboard: bounded,
    /// and without control characters (a NUL is no text PostgreSQL stores).
    pub fn validate_description(description: Option<&str>) -> Result<(), WebhookError> {
        let Some(d) = description else { return Ok(()) };
        if d.chars().count() > MAX_DESCRIPTION {
            return Err(WebhookError::Invalid(
                format!("description must be at most {MAX_DESCRIPTION} characters."),
                "description",
            ));
        }
        if d.chars().any(char::is_control) {
            return Err(WebhookError::Invalid(
                "description must be text without control characters.".into(),
                "description",
            ));
        }
        Ok(())
    }

    pub fn validate_events(events: &[String]) -> Result<(), WebhookError> {
        if events.is_empty() {
            return Err(WebhookError::Invalid(
                "enabled_events must list at least one event type, or \"*\"".into(),
                "enabled_events",
            ));
        }
        match events
            .iter()
            .find(|e| *e != "*" && !EVENT_TYPES.contains(&e.as_str()))
        {
            Some(bad) => Err(WebhookError::Invalid(
                format!("unknown event type '{bad}'"),
                "enabled_events",
            )),
            None => Ok(()),
        }
    }

    /// Registers an endpoint after checking its destination. The secret is returned once.
    pub async fn create_endpoint(
        &self,
        merchant_id: &str,
        environment: Environment,
        url: &str,
        enabled_events: Vec<String>,
        description: Option<String>,
    ) -> Result<Endpoint, WebhookError> {
        Self::validate_events(&enabled_events)?;
        Self::validate_description(description.as_deref())?;
        destination::check(url, environment, self.config.allow_private_destinations)
            .await
            .map_err(|e| WebhookError::Invalid(e.to_string(), "url"))?;
        let e = Endpoint {
            id: format!("we_{}", uuid::Uuid::new_v4().simple()),
            object: "webhook_endpoint",
            url: url.to_string(),
            enabled_events,
            description,
            environment: environment.as_str().into(),
            created: system_now_ms() / 1000,
            disabled: false,
            secret: Some(signature::new_secret()),
        };
        let sealed = self
            .sealer
            .seal(&e.id, e.secret.as_deref().expect("made just above"));
        let events_json = serde_json::to_string(&e.enabled_events).expect("strings serialise");
        // Counted and inserted under the writer: parallel creates cannot pass the bound.
        let created = self.db.write(|tx| {
            tx.lock(&format!("webhook_endpoints:{merchant_id}:{}", e.environment))?;
            let existing = tx.query_one(
                "SELECT COUNT(*) FROM webhook_endpoints WHERE merchant_id = ?1 AND environment = ?2 AND deleted_ms IS NULL",
                sql_params![merchant_id, &e.environment],
            )?.int(0)?;
            if existing >= MAX_ENDPOINTS {
                return Ok(false);
            }
            tx.execute(
                "INSERT INTO webhook_endpoints (id, merchant_id, environment, url, secret, enabled_events, description, created_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                sql_params![&e.id, merchant_id, &e.environment, &e.url, sealed, events_json, &e.description, (e.created * 1000) as i64],
            )?;
            Ok(true)
        })?;
        if !created {
            return Err(WebhookError::TooManyEndpoints);
        }
        Ok(e)
    }

    pub fn list_endpoints(
        &self,
        merchant_id: &str,
        environment: Environment,
    ) -> Result<Vec<Endpoint>, WebhookError> {
        Ok(self.db.read(|c| {
            c.query(
                &format!(
                    "SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints
                     WHERE merchant_id = ?1 AND environment = ?2 AND deleted_ms IS NULL ORDER BY created_ms, id"
                ),
                sql_params![merchant_id, environment.as_str()],
            )?
            .iter()
            .map(endpoint_from_row)
            .collect::<Result<Vec<_>, StorageError>>()
        })?)
    }

    pub fn delete_endpoint(
        &self,
        merchant_id: &str,
        environment: Environment,
        id: &str,
    ) -> Result<(), WebhookError> {
        let changed = self.db.write(|tx| {
            tx.execute(
                "UPDATE webhook_endpoints SET deleted_ms = ?4 WHERE id = ?1 AND merchant_id = ?2 AND environment = ?3 AND deleted_ms IS NULL",
                sql_params![id, merchant_id, environment.as_str(), system_now_ms() as i64],
            )
        })?;
        if changed == 0 {
            return Err(WebhookError::NotFound("webhook endpoint"));
        }
        Ok(())
    }

    /// The secret that signs deliveries to payments' `callback_url`s (created on first use).
    pub fn callback_secret(
        &self,
        merchant_id: &str,
        environment: &str,
    ) -> Result<String, WebhookError> {
        let row = callback_row(merchant_id, environment);
        let read = |c: &mut dyn SqlConn| -> Result<Option<String>, StorageError> {
            c.query_opt(
                "SELECT secret FROM callback_secrets WHERE merchant_id = ?1 AND environment = ?2",
                sql_params![merchant_id, environment],
            )?
            .map(|r| r.text(0))
            .transpose()
        };
        // Made once per merchant and environment: later reads skip the writer.
        let stored = match self.db.read(read)? {
            Some(s) => s,
            None => {
                let fresh = self.sealer.seal(&row, &signature::new_secret());
                self.db.write(|tx| {
                    tx.execute(
                        "INSERT INTO callback_secrets (merchant_id, environment, secret) VALUES (?1, ?2, ?3)
                         ON CONFLICT DO NOTHING",
                        sql_params![merchant_id, environment, &fresh],
                    )?;
                    Ok(read(tx)?.expect("inserted or already there"))
                })?
            }
        };
        Ok(self.sealer.open(&row, &stored)?)
    }
}
