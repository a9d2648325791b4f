//! Traces over OTLP/HTTP from the real binary to a local receiver: one
//! create's spans, children of the caller's `traceparent`, from the request
//! through the component call and its capability calls to the provider's
//! request; the webhook it causes carries a `traceparent` of its own trace.

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::process::{ServerProcess, cli_merchant, post_json};
use crate::receiver::Receiver;
use crate::support::*;

/// The spans a receiver got, by span id.
fn spans(collector: &Receiver) -> HashMap<String, Value> {
    let mut out = HashMap::new();
    for r in collector.events() {
        for rs in r.json()["resourceSpans"]
            .as_array()
            .cloned()
            .unwrap_or_default()
        {
            let service = rs["resource"]["attributes"]
                .as_array()
                .and_then(|a| a.iter().find(|kv| kv["key"] == "service.name"))
                .map(|kv| kv["value"]["stringValue"].clone());
            assert_eq!(service, Some(json!("mmc-traced")), "{rs}");
            for ss in rs["scopeSpans"].as_array().cloned().unwrap_or_default() {
                for span in ss["spans"].as_array().cloned().unwrap_or_default() {
                    out.insert(span["spanId"].as_str().unwrap().to_string(), span);
                }
            }
        }
    }
    out
}

fn attr<'a>(span: &'a Value, key: &str) -> Option<&'a Value> {
    span["attributes"]
        .as_array()?
        .iter()
        .find(|kv| kv["key"] == key)
        .map(|kv| {
            let v = &kv["value"];
            v.get("stringValue").or(v.get("intValue")).unwrap_or(v)
        })
}

/// `hooks` subscribed to `collect.payment.created` for `key`'s merchant.
async fn subscribe_to_created(
    client: &reqwest::Client,
    server: &ServerProcess,
    key: &str,
    hooks: &Receiver,
) {
    let (status, e) = post_json(
        client,
        &format!("{}/api/v1/webhook-endpoints", server.base),
        key,
        None,
        &json!({"url": hooks.url(), "enabled_events": ["collect.payment.created"]}),
    )
    .await;
    assert_eq!(status, 201, "{e}");
}

#[tokio::test(flavor = "multi_thread")]
async fn one_create_is_one_trace_from_the_callers_traceparent_to_the_providers_request() {
    let collector = Receiver::start().await;
    let hooks = Receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (_, key) = cli_merchant(dir.path(), "Traced", "test");
    let endpoint = format!("http://{}", collector.addr);
    let server = ServerProcess::start(
        dir.path(),
        &[
            ("MMC_MONITORING__TRACES__OTLP_ENDPOINT", &endpoint),
            ("MMC_MONITORING__TRACES__PROTOCOL", "http/json"),
            ("MMC_MONITORING__TRACES__SERVICE_NAME", "mmc-traced"),
            // The batch processor's wait before it sends (5 s by default).
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
            ("MMC_WEBHOOKS__RETRY_SCHEDULE_MS", "[100]"),
        ],
    );
    let client = reqwest::Client::new();
    subscribe_to_created(&client, &server, &key, &hooks).await;

    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let caller_span = "00f067aa0ba902b7";
    let phone = "0197000001";
    let resp = client
        .post(format!("{}/api/v1/collect/payments", server.base))
        .bearer_auth(&key)
        .header("traceparent", format!("00-{trace_id}-{caller_span}-01"))
        .header("Idempotency-Key", uuid::Uuid::new_v4().to_string())
        .json(&direct_payment(phone))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    let payment: Value = resp.json().await.unwrap();
    let payment_id = id_of(&payment);

    // The create's spans: the request, collect's call, simulator's call
    // through the router, and capability calls under them.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let (all, ours) = loop {
        let all = spans(&collector);
        let ours: Vec<Value> = all
            .values()
            .filter(|s| s["traceId"] == trace_id)
            .cloned()
            .collect();
        let has = |name: &str| ours.iter().any(|s| s["name"] == name);
        if has("request") && has("operator") && has("storage") {
            break (all, ours);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the create's spans did not arrive: {ours:#?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    let named = |name: &str| -> Vec<&Value> { ours.iter().filter(|s| s["name"] == name).collect() };
    let request = named("request")
        .into_iter()
        .find(|s| attr(s, "path") == Some(&json!("/api/v1/collect/payments")))
        .expect("the request's span");
    assert_eq!(
        request["parentSpanId"], caller_span,
        "a child of the caller's span"
    );
    let components = named("component");
    let collect = components
        .iter()
        .find(|s| attr(s, "component") == Some(&json!("collect")))
        .expect("collect's call");
    assert_eq!(collect["parentSpanId"], request["spanId"]);
    let operator = named("operator")
        .into_iter()
        .find(|s| attr(s, "operation") == Some(&json!("initiate")))
        .expect("the provider's request");
    assert_eq!(operator["parentSpanId"], collect["spanId"]);
    assert_eq!(attr(operator, "subject_id"), Some(&json!(payment_id)));
    assert_eq!(attr(operator, "operator"), Some(&json!("mtn-bj")));
    assert_eq!(attr(operator, "adapter"), Some(&json!("simulator")));
    assert_eq!(attr(operator, "outcome"), Some(&json!("ok")));
    let simulator = components
        .iter()
        .find(|s| attr(s, "component") == Some(&json!("simulator")))
        .expect("the adapter's call");
    assert_eq!(simulator["parentSpanId"], operator["spanId"]);
    assert!(
        named("storage")
            .iter()
            .any(|s| s["parentSpanId"] == collect["spanId"]),
        "collect's storage calls are its children"
    );

    // No secret and no phone number in any span of any trace.
    let everything = serde_json::to_string(&all).unwrap();
    for secret in [&key[..], phone, "97000001", "Awa"] {
        assert!(!everything.contains(secret), "{secret} leaked into a span");
    }

    // The webhook carries the trace context of its delivery's span.
    let got = hooks.wait_for(20, |r| !r.is_empty()).await;
    let parts: Vec<&str> = got[0].traceparent.split('-').collect();
    assert_eq!(parts.len(), 4, "a traceparent: {:?}", got[0].traceparent);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let all = spans(&collector);
        if let Some(webhook) = all.get(parts[2]) {
            assert_eq!(webhook["name"], "webhook");
            assert_eq!(webhook["traceId"], parts[1]);
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the delivery's span did not arrive"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    server.terminate();
}

#[tokio::test(flavor = "multi_thread")]
async fn with_traces_off_nothing_is_sent_and_no_traceparent_goes_out() {
    let hooks = Receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (_, key) = cli_merchant(dir.path(), "Untraced", "test");
    let server = ServerProcess::start(dir.path(), &[]);
    let client = reqwest::Client::new();
    subscribe_to_created(&client, &server, &key, &hooks).await;
    let (status, _) = post_json(
        &client,
        &format!("{}/api/v1/collect/payments", server.base),
        &key,
        Some(&uuid::Uuid::new_v4().to_string()),
        &direct_payment("0197000001"),
    )
    .await;
    assert_eq!(status, 201);
    let got = hooks.wait_for(20, |r| !r.is_empty()).await;
    assert_eq!(got[0].traceparent, "", "no trace context without traces");
    server.terminate();
}
