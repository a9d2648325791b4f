//! The log's shape (`log.format`), in one place for `mmc` and the tests.
//!
//! `text`: one line an event, prefixed by the request's span
//! (`request{request_id=… component=collect merchant_id=…}:`); colour codes
//! only when asked for (a terminal). `json`: one object a line, the event's
//! fields at the top (`timestamp`, `level`, `target`, `message`, …) and the
//! fields of the request it was logged in under `span` (`request_id`,
//! `method`, `path`, `component`, `merchant_id`, `environment`).

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

use crate::config::LogFormat;

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
