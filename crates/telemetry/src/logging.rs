//! The log's shape (`log.format`), in one place for `mmc` and the tests.
//!
//! `text`: one line an event, prefixed by the request's span
//! (`request{request_id=… component=collect merchant_id=…}:`); colour codes
//! only when asked for (a terminal). `json`: one object a line, the event's
//! fields at the top (`timestamp`, `level`, `target`, `message`, …) and the
//! fields of the request it was logged in under `span` (`request_id`,
//! `method`, `path`, `component`, `merchant_id`, `environment`).

use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

use mmc_config::{LogFormat, TracesConfig};

/// The subscriber `mmc` installs, writing to `writer`.
pub fn subscriber<W>(
    format: LogFormat,
    filter: EnvFilter,
    writer: W,
    ansi: bool,
) -> Box<dyn tracing::Subscriber + Send + Sync>
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_ansi(ansi);
    match format {
        LogFormat::Text => Box::new(logs.finish()),
        LogFormat::Json => Box::new(
            logs.json()
                .flatten_event(true)
                .with_current_span(true)
                .with_span_list(false)
                .finish(),
        ),
    }
}

/// [`subscriber`], and OpenTelemetry traces beside the log when
/// `traces.otlp_endpoint` is set (each with its own filter: the log's level
/// does not decide which spans are traced). The provider is returned to be
/// flushed at shutdown.
pub fn subscriber_with_traces<W>(
    format: LogFormat,
    filter: EnvFilter,
    writer: W,
    ansi: bool,
    traces: &TracesConfig,
) -> Result<
    (
        Box<dyn tracing::Subscriber + Send + Sync>,
        Option<opentelemetry_sdk::trace::SdkTracerProvider>,
    ),
    String,
>
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    let Some(t) = crate::traces::layer::<Registry>(traces)? else {
        return Ok((subscriber(format, filter, writer, ansi), None));
    };
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(writer)
        .with_ansi(ansi);
    let logs = match format {
        LogFormat::Text => logs.with_filter(filter).boxed(),
        LogFormat::Json => logs
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .with_filter(filter)
            .boxed(),
    };
    let subscriber = tracing_subscriber::registry().with(t.layer).with(logs);
    Ok((Box::new(subscriber), Some(t.provider)))
}
