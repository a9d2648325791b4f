//! Changing an endpoint after it is made: disabling it (it receives no new
//! event until enabled again) and rotating its signing secret (the new one
//! signs every delivery from now on, the old one none; shown once).

use mmc_storage::sql_params;

use super::{ENDPOINT_COLUMNS, Endpoint, WebhookError, Webhooks, endpoint_from_row, signature};
use mmc_accounts::Environment;
use mmc_common::clock::system_now_ms;

impl Webhooks {
    /// Runs `update` (an UPDATE of one endpoint of the merchant, its columns
    /// returned) and gives the endpoint as it is now, or NotFound.
    fn update_endpoint(
        &self,
        update: &str,
        params: &[mmc_db::Value],
    ) -> Result<Endpoint, WebhookError> {
        let sql = format!("{update} RETURNING {ENDPOINT_COLUMNS}");
        let changed = self.db.write(|tx| {
            tx.query(&sql, params)?
                .first()
                .map(endpoint_from_row)
                .transpose()
        })?;
        changed.ok_or(WebhookError::NotFound("webhook endpoint"))
    }

    /// Disables (or enables again) an endpoint of the merchant.
    pub fn set_disabled(
        &self,
        merchant_id: &str,
        environment: Environment,
        id: &str,
        disabled: bool,
    ) -> Result<Endpoint, WebhookError> {
        // Disabling keeps the first time it was disabled.
        self.update_endpoint(
            "UPDATE webhook_endpoints SET disabled_ms = CASE WHEN ?4 THEN COALESCE(disabled_ms, ?5) ELSE NULL END
             WHERE id = ?1 AND merchant_id = ?2 AND environment = ?3 AND deleted_ms IS NULL",
            sql_params![id, merchant_id, environment.as_str(), disabled, system_now_ms() as i64],
        )
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
        let endpoint = self.update_endpoint(
            "UPDATE webhook_endpoints SET secret = ?4
             WHERE id = ?1 AND merchant_id = ?2 AND environment = ?3 AND deleted_ms IS NULL",
            sql_params![id, merchant_id, environment.as_str(), &sealed],
        )?;
        Ok(Endpoint {
            secret: Some(secret),
            ..endpoint
        })
    }
}
