//! Changing an endpoint after it is made: disabling it (it receives no new
//! event until enabled again) and rotating its signing secret (the new one
//! signs every delivery from now on, the old one none; shown once).

use mmc_storage::sql_params;

use super::{Endpoint, WebhookError, Webhooks, signature};
use crate::accounts::Environment;
use crate::clock::system_now_ms;

impl Webhooks {
    fn endpoint(
        &self,
        merchant_id: &str,
        environment: Environment,
        id: &str,
    ) -> Result<Endpoint, WebhookError> {
        self.list_endpoints(merchant_id, environment)?
            .into_iter()
            .find(|e| e.id == id)
            .ok_or(WebhookError::NotFound("webhook endpoint"))
    }

    /// Disables (or enables again) an endpoint of the merchant.
    pub fn set_disabled(
        &self,
        merchant_id: &str,
        environment: Environment,
        id: &str,
        disabled: bool,
    ) -> Result<Endpoint, WebhookError> {
        let changed = self.db.write(|tx| {
            // Disabling keeps the first time it was disabled.
            tx.execute(
                "UPDATE webhook_endpoints SET disabled_ms = CASE WHEN ?4 THEN COALESCE(disabled_ms, ?5) ELSE NULL END
                 WHERE id = ?1 AND merchant_id = ?2 AND environment = ?3 AND deleted_ms IS NULL",
                sql_params![id, merchant_id, environment.as_str(), disabled, system_now_ms() as i64],
            )
        })?;
        if changed == 0 {
            return Err(WebhookError::NotFound("webhook endpoint"));
        }
        self.endpoint(merchant_id, environment, id)
    }

    /// A new signing secret for an endpoint, returned this once.
    pub fn rotate_secret(
        &self,
        merchant_id: &str,
        environment: Environment,
        id: &str,
    ) -> Result<Endpoint, WebhookError> {
        let secret = signature::new_secret();
        let sealed = self.sealer.seal(id, &secret);
        let changed = self.db.write(|tx| {
            tx.execute(
                "UPDATE webhook_endpoints SET secret = ?4
                 WHERE id = ?1 AND merchant_id = ?2 AND environment = ?3 AND deleted_ms IS NULL",
                sql_params![id, merchant_id, environment.as_str(), &sealed],
            )
        })?;
        if changed == 0 {
            return Err(WebhookError::NotFound("webhook endpoint"));
        }
        Ok(Endpoint {
            secret: Some(secret),
            ..self.endpoint(merchant_id, environment, id)?
        })
    }
}
