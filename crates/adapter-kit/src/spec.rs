//! An adapter's operators, declared once: which it can serve, which it serves
//! without an `operators` setting, and what `describe` says of them.

use mmc_domain::Operator;

use crate::exchange::{Endpoint, Provider};
use crate::settings::{self, parsed};
use crate::types::{AdapterError, OperatorInfo};

/// What an adapter declares about its provider.
pub struct Spec {
    /// The provider's name, as errors and messages say it.
    pub provider: &'static str,
    /// Every operator the provider is documented for (slugs of the operator table).
    pub family: &'static [&'static str],
    /// Served without an `operators` setting; `None`: the whole family.
    pub default_served: Option<&'static [&'static str]>,
    /// How long after a request to pay the customer can still approve it
    /// (overridden by the `approval_window_ms` setting, per market).
    pub approval_window_ms: u64,
    /// How many status queries a second the provider allows, 0 when it
    /// states no cap (overridden by `status_per_second`, per market).
    pub status_per_second: u32,
}

impl Spec {
    /// The operators of the family this deployment serves.
    pub fn served(&self) -> Vec<&'static Operator> {
        self.served_with(settings::setting("operators").as_deref())
    }

    /// [`Spec::served`] for the `operators` setting `wanted` (comma-separated slugs).
    pub fn served_with(&self, wanted: Option<&str>) -> Vec<&'static Operator> {
        self.family
            .iter()
            .filter(|slug| match wanted {
                Some(w) => w.split(',').any(|s| s.trim() == **slug),
                None => self.default_served.is_none_or(|d| d.contains(slug)),
            })
            .filter_map(|slug| mmc_domain::operators::find(slug))
            .collect()
    }

    /// The served operator `operator`, or `not-supported` (nothing sent).
    pub fn market(&self, operator: &str) -> Result<Market, AdapterError> {
        self.served()
            .into_iter()
            .find(|o| o.slug == operator)
            .map(|op| Market { op })
            .ok_or_else(|| {
                AdapterError::NotSupported(format!("this adapter does not serve {operator}"))
            })
    }

    /// The first served operator's market: what a call about the provider
    /// account rather than one operator (its balances, its statement) goes
    /// through; `not-sent` when nothing is served.
    pub fn account_market(&self) -> Result<Market, AdapterError> {
        let op = self.served().into_iter().next().ok_or_else(|| {
            AdapterError::NotSent(format!("{} serves no operator here", self.provider))
        })?;
        Ok(Market { op })
    }

    /// What the catalogue says of `op` by default: the operator table's
    /// values, no one-time code, both modes, operational.
    pub fn info(&self, op: &Operator) -> OperatorInfo {
        let setting = |key| settings::market_setting(op.slug, key);
        OperatorInfo {
            slug: op.slug.into(),
            name: op.name.into(),
            aliases: op.aliases.iter().map(|a| a.to_string()).collect(),
            country: op.country.code().into(),
            currency: op.currency().into(),
            requires_otp: false,
            modes: vec!["direct".into(), "hosted".into()],
            min_amount: op.min_amount,
            max_amount: op.max_amount,
            status: "operational".into(),
            approval_window_ms: parsed(setting("approval_window_ms"))
                .unwrap_or(self.approval_window_ms),
            status_per_second: parsed(setting("status_per_second"))
                .unwrap_or(self.status_per_second),
        }
    }

    /// Every served operator, as [`Spec::info`] describes it.
    pub fn describe(&self) -> Vec<OperatorInfo> {
        self.served().into_iter().map(|op| self.info(op)).collect()
    }
}

/// One served operator (a market of the provider), with its settings.
pub struct Market {
    pub op: &'static Operator,
}

impl Market {
    pub fn slug(&self) -> &'static str {
        self.op.slug
    }

    /// `<key>.<slug>` over `<key>`.
    pub fn setting(&self, key: &str) -> Option<String> {
        settings::market_setting(self.op.slug, key)
    }

    /// A secret this operation needs: absent, nothing is sent.
    pub fn secret(&self, key: &str) -> Result<String, AdapterError> {
        settings::required(settings::market_secret(self.op.slug, key), key)
    }

    /// The provider's base URL (`base_url`, required), without a trailing `/`.
    pub fn base_url(&self) -> Result<String, AdapterError> {
        self.setting("base_url")
            .map(|u| u.trim_end_matches('/').to_string())
            .ok_or_else(|| AdapterError::NotSent("base_url not configured".into()))
    }

    /// `timeout_ms`, 0 (the host's default) when unset.
    pub fn timeout_ms(&self) -> u32 {
        parsed(self.setting("timeout_ms")).unwrap_or(0)
    }

    /// The provider's API at this market's `base_url`, authorised by the
    /// secret `token_key` sent as a bearer token.
    pub fn bearer_endpoint(
        &self,
        provider: &'static Provider,
        token_key: &str,
    ) -> Result<Endpoint, AdapterError> {
        let base_url = self.base_url()?;
        let token = self.secret(token_key)?;
        Ok(Endpoint::bearer(
            provider,
            base_url,
            &token,
            self.timeout_ms(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: Spec = Spec {
        provider: "Test",
        family: &["mtn-bj", "moov-bj", "celtiis-bj", "no-such-operator"],
        default_served: Some(&["celtiis-bj"]),
        approval_window_ms: 1,
        status_per_second: 0,
    };

    fn slugs(ops: Vec<&'static Operator>) -> Vec<&'static str> {
        ops.into_iter().map(|o| o.slug).collect()
    }

    #[test]
    fn the_operators_setting_picks_from_the_family_only() {
        assert_eq!(slugs(SPEC.served_with(None)), ["celtiis-bj"]);
        assert_eq!(
            slugs(SPEC.served_with(Some("moov-bj, mtn-bj,orange-ci"))),
            ["mtn-bj", "moov-bj"]
        );
        assert!(SPEC.served_with(Some("no-such-operator")).is_empty());
        let whole = Spec {
            default_served: None,
            ..SPEC
        };
        assert_eq!(
            slugs(whole.served_with(None)),
            ["mtn-bj", "moov-bj", "celtiis-bj"]
        );
    }
}
