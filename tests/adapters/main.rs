//! Live operator adapters against faithful fake operator servers, over real HTTP.
//!
//! Two levels: end to end through the real service (`spawn_app_with`, a live
//! key, routing `routing.live.<slug>` to the adapter, the fake's host in the
//! adapter's allow-list), and the adapter alone in the host's sandbox with
//! real outbound HTTP ([`Direct`]) for refunds, payouts and protocol details.
//! Needs `make components`.

#[path = "../support/mod.rs"]
mod support;

mod anonymous;
mod books;
mod cinetpay;
mod failover;
mod fault_matrix;
mod fedapay;
mod hints;
mod momo;
mod money;
mod pawapay;
mod registry;
mod scaffold;
mod trust;
mod wave;

use std::time::{Duration, Instant};

use mmc_common::clock::system_now_ms;
use mmc_config::{ComponentConfig, Config};
use mmc_runtime::AdapterInstance;
use mmc_runtime::bindings::adapter_types::*;
use mmc_runtime::capabilities::outbound_http::{HttpClient, ReqwestClient};
use mmc_runtime::state::HostState;
use mmc_sandbox::{SANDBOX_EPOCH_MS, Sandbox};
use serde_json::{Value, json};
use support::*;

/// One adapter alone in the host's sandbox (`mmc_sandbox`), its
/// outbound HTTP answered for real by the fakes (the sandbox still applies
/// the allow-list), its clock set to now. The `live` environment routes
/// every operator it describes to it.
pub struct Direct {
    sandbox: Sandbox,
    name: String,
}

impl Direct {
    /// Must run inside the test's tokio runtime (the HTTP client uses it).
    pub fn load(name: &str, component: ComponentConfig) -> Direct {
        Direct::load_file(name, &component_file(name), component)
    }

    /// [`Direct::load`] of the component in `path`.
    pub fn load_file(name: &str, path: &std::path::Path, component: ComponentConfig) -> Direct {
        let mut config = mmc_sandbox::adapter_config(name, "live", component);
        config.cache_dir = Some(cache_dir());
        let sandbox = Sandbox::new(&config).unwrap();
        let client = ReqwestClient::new(tokio::runtime::Handle::current());
        sandbox.http.respond_with(move |req| {
            let ms = if req.timeout_ms == 0 {
                20_000
            } else {
                req.timeout_ms
            };
            client.send(req.clone(), Duration::from_millis(ms as u64))
        });
        // The sandbox clock starts at a fixed date: bring it to now so
        // signature timestamps made by the fakes compare.
        sandbox
            .clock
            .advance(Duration::from_millis(system_now_ms() - SANDBOX_EPOCH_MS));
        // Loading asks the adapter to describe itself, which may call its
        // provider (pawaPay's active-conf, FedaPay's currencies): off the workers.
        tokio::task::block_in_place(|| sandbox.load(name, path))
            .unwrap_or_else(|e| panic!("{}: {e}; run `make components`", path.display()));
        Direct {
            sandbox,
            name: name.into(),
        }
    }

    pub fn operators(&self) -> Vec<OperatorInfo> {
        self.sandbox
            .runtime
            .get(&self.name)
            .unwrap()
            .operators
            .clone()
    }

    /// One adapter call, on a blocking thread: the host's HTTP client blocks
    /// on the tokio runtime, as it does for components in the server.
    pub async fn call<R: Send + 'static>(
        &self,
        operator: &str,
        f: impl FnOnce(&mut wasmtime::Store<HostState>, &AdapterInstance) -> wasmtime::Result<R>
        + Send
        + 'static,
    ) -> R {
        let runtime = self.sandbox.runtime.clone();
        let operator = operator.to_string();
        tokio::task::spawn_blocking(move || runtime.call_adapter("live", &operator, f))
            .await
            .unwrap()
            .unwrap()
    }

    pub async fn initiate(&self, req: InitiateRequest) -> Result<Initiated, AdapterError> {
        let op = req.operator.clone();
        self.call(&op, move |s, a| {
            a.mmc_adapter_operator().call_initiate(s, &req)
        })
        .await
    }

    pub async fn status(&self, payment: OperationRef) -> Result<PspStatus, AdapterError> {
        let op = payment.operator.clone();
        self.call(&op, move |s, a| {
            a.mmc_adapter_operator().call_status(s, &payment)
        })
        .await
    }

    pub async fn refund(&self, req: RefundRequest) -> Result<Started, AdapterError> {
        let op = req.payment.operator.clone();
        self.call(&op, move |s, a| {
            a.mmc_adapter_operator().call_refund(s, &req)
        })
        .await
    }

    pub async fn refund_status(&self, refund: OperationRef) -> Result<PspStatus, AdapterError> {
        let op = refund.operator.clone();
        self.call(&op, move |s, a| {
            a.mmc_adapter_operator().call_refund_status(s, &refund)
        })
        .await
    }

    pub async fn payout(&self, req: PayoutRequest) -> Result<Started, AdapterError> {
        let op = req.operator.clone();
        self.call(&op, move |s, a| {
            a.mmc_adapter_operator().call_payout(s, &req)
        })
        .await
    }

    pub async fn payout_status(&self, payout: OperationRef) -> Result<PspStatus, AdapterError> {
        let op = payout.operator.clone();
        self.call(&op, move |s, a| {
            a.mmc_adapter_operator().call_payout_status(s, &payout)
        })
        .await
    }

    pub async fn parse_callback(&self, req: Inbound) -> Result<Vec<CallbackUpdate>, AdapterError> {
        let op = req.operator.clone();
        self.call(&op, move |s, a| {
            a.mmc_adapter_operator().call_parse_callback(s, &req)
        })
        .await
    }

    /// Asks `query` until it stops answering pending (or `within` passes).
    pub async fn settled<F, Fut>(&self, within: Duration, mut query: F) -> PspStatus
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<PspStatus, AdapterError>>,
    {
        let until = Instant::now() + within;
        loop {
            let status = query().await.expect("status query");
            if status != PspStatus::Pending || Instant::now() >= until {
                return status;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

pub fn initiate_request(operator: &str, country: &str, phone: &str) -> InitiateRequest {
    let id = uuid::Uuid::new_v4().to_string();
    InitiateRequest {
        payment_id: id.clone(),
        reference: format!("order-{}", &id[..8]),
        operator: operator.into(),
        environment: "live".into(),
        amount: 1500,
        currency: "XOF".into(),
        country: country.into(),
        phone: Some(phone.into()),
        mode: "direct".into(),
        description: Some("Order 42".into()),
        callback_url: "http://127.0.0.1:9/api/v1/psp/callback".into(),
        return_url: Some(format!("http://127.0.0.1:9/checkout/{id}")),
    }
}

pub fn operation(
    id: &str,
    operator: &str,
    psp_reference: Option<String>,
    phone: &str,
    amount: u64,
) -> OperationRef {
    OperationRef {
        id: id.into(),
        operator: operator.into(),
        environment: "live".into(),
        psp_reference,
        phone: Some(phone.into()),
        amount,
        currency: "XOF".into(),
    }
}

pub fn payout_request(operator: &str, payout_id: &str, phone: &str) -> PayoutRequest {
    PayoutRequest {
        payout_id: payout_id.into(),
        operator: operator.into(),
        environment: "live".into(),
        phone: phone.into(),
        amount: 2500,
        currency: "XOF".into(),
        beneficiary_name: "Awa Koné".into(),
        reference: "salary-june".into(),
    }
}

/// A service whose live environment routes `slugs` to `adapter`. An
/// adapter written in Python (`make python-adapters`) is added to the
/// server's components.
pub async fn app_with_adapter(
    adapter: &str,
    slugs: &[&str],
    component: ComponentConfig,
    adjust: impl FnOnce(&mut Config),
) -> TestApp {
    spawn_app_with(|c| {
        let live = c.routing.entry("live".into()).or_default();
        for slug in slugs {
            live.insert(slug.to_string(), adapter.into());
        }
        c.components.insert(adapter.into(), component);
        if !components_dir().join(format!("{adapter}.wasm")).exists() {
            c.components_dir = Some(components_dir_with(&[adapter]));
        }
        adjust(c);
    })
    .await
}

/// A direct live payment body.
pub fn live_payment(country: &str, operator: &str, phone: &str) -> Value {
    json!({
        "reference": format!("order-{}", uuid::Uuid::new_v4()),
        "amount": 1500,
        "currency": "XOF",
        "country": country,
        "mode": "direct",
        "operator": operator,
        "customer": {"phone": phone, "first_name": "Awa", "last_name": "Koné"},
        "description": "Order 42",
    })
}

/// Creates a payment; asserts the 201 and returns the body.
pub async fn create(app: &TestApp, key: &str, body: &Value) -> Value {
    let (status, p) = app.create(key, &new_key(), body).await;
    assert_eq!(status, 201, "{p}");
    p
}

pub async fn payment(app: &TestApp, key: &str, id: &str) -> Value {
    let (status, p) = app
        .get(key, &format!("/api/v1/collect/payments/{id}"))
        .await;
    assert_eq!(status, 200, "{p}");
    p
}

/// Reads the payment until its status is `want`; panics after `within`.
pub async fn wait_for(app: &TestApp, key: &str, id: &str, want: &str, within: Duration) -> Value {
    let until = Instant::now() + within;
    loop {
        let p = payment(app, key, id).await;
        if p["status"] == want {
            return p;
        }
        if Instant::now() >= until {
            panic!("payment {id} is not {want} after {within:?}: {p}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Sends an operator notification to our service; returns (status, body).
pub async fn notify(
    app: &TestApp,
    operator: &str,
    method: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> (u16, Value) {
    let mut req = app
        .client
        .request(
            reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
            app.url(&format!("/api/v1/psp/{operator}/callback?environment=live")),
        )
        .header("content-type", "application/json")
        .body(body);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// The failure of a failed status, or a panic.
pub fn failed(status: PspStatus) -> Failure {
    match status {
        PspStatus::Failed(f) => f,
        other => panic!("expected a failure, got {other:?}"),
    }
}
