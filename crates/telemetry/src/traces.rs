//! OpenTelemetry traces, off unless `monitoring.traces.otlp_endpoint` is set:
//! the request's span, the component call, each capability call (storage,
//! outbound HTTP, signing) and the provider's request become spans sent over
//! OTLP/HTTP by a batch processor on its own thread. A W3C `traceparent` on
//! an incoming request makes its span a child of the caller's; webhook
//! deliveries carry their own.
//!
//! Spans below the request's are made at `debug` level, so that with traces
//! off they are never built (the log's filter is `info` by default), and
//! with traces on only the traces' layer takes them. No span carries a
//! secret, a key, a request body or a phone number: outbound requests name
//! their host and method, not their path (a provider's path can hold a
//! phone number); storage spans name the operation, not the key.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::registry::LookupSpan;

use mmc_config::TracesConfig;

/// On once a traces layer is installed: the per-request work (reading a
/// `traceparent`) is skipped otherwise.
static ON: AtomicBool = AtomicBool::new(false);

pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// What was built from the configuration: the layer to add to the
/// subscriber, and the provider to flush at shutdown.
pub struct Traces<S> {
    pub layer: Box<dyn Layer<S> + Send + Sync>,
    pub provider: SdkTracerProvider,
}

/// The traces' layer for `config`, or None when no endpoint is set.
pub fn layer<S>(config: &TracesConfig) -> Result<Option<Traces<S>>, String>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    let Some(endpoint) = &config.otlp_endpoint else {
        return Ok(None);
    };
    let protocol = match config.protocol.as_str() {
        "http/json" => Protocol::HttpJson,
        _ => Protocol::HttpBinary,
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(protocol)
        // Set in code, the endpoint is used as it is: the signal's path is ours to add.
        .with_endpoint(format!("{}/v1/traces", endpoint.trim_end_matches('/')))
        .with_timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| format!("monitoring.traces: {e}"))?;
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        // A caller's choice (its traceparent's sampled flag) is followed.
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
            config.sample_ratio,
        ))))
        .with_resource(
            Resource::builder()
                .with_service_name(config.service_name.clone())
                .build(),
        )
        .build();
    let tracer = provider.tracer("mmc");
    // Our spans, to debug (every crate of ours is `mmc…`: a target matches
    // by prefix); the exporter's own HTTP client never (its spans would be
    // exported in turn).
    let targets = Targets::new()
        .with_default(tracing::Level::WARN)
        .with_target("mmc", tracing::Level::DEBUG);
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_location(false)
        .with_threads(false)
        .with_tracked_inactivity(false)
        .with_filter(targets);
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    ON.store(true, Ordering::Relaxed);
    Ok(Some(Traces {
        layer: Box::new(layer),
        provider,
    }))
}

/// Makes `span` a child of the caller's trace when `headers` carry a valid
/// `traceparent` (before the span is first entered).
pub fn follow_caller(span: &tracing::Span, headers: &http::HeaderMap) {
    if !on() || !headers.contains_key("traceparent") {
        return;
    }
    let parent =
        TraceContextPropagator::new().extract(&opentelemetry_http::HeaderExtractor(headers));
    let _ = span.set_parent(parent);
}

/// The `traceparent` (and `tracestate`) of `span`, to send with a request.
pub fn inject(span: &tracing::Span, headers: &mut http::HeaderMap) {
    if !on() {
        return;
    }
    let cx = span.context();
    TraceContextPropagator::new()
        .inject_context(&cx, &mut opentelemetry_http::HeaderInjector(headers));
}

/// The host and method of an outbound request, never its path or query.
pub fn outbound_span(method: &str, url: &str) -> tracing::Span {
    if !on() {
        return tracing::Span::none();
    }
    let host = reqwest::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_default();
    tracing::debug_span!(
        "http.client",
        otel.kind = "client",
        http.request.method = %method,
        server.address = %host,
        http.response.status_code = tracing::field::Empty,
    )
}
