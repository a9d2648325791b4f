//! A request's span and its one log line: every line logged while it is
//! served carries its id, method, path (cut, without the query) and, once
//! known, its merchant and environment.

use super::*;

/// Longest path a log line carries (a client chooses its length).
pub(super) const MAX_LOGGED_PATH: usize = 256;

pub(super) fn logged_path(path: &str) -> &str {
    if path.len() <= MAX_LOGGED_PATH {
        return path;
    }
    let mut cut = MAX_LOGGED_PATH;
    while !path.is_char_boundary(cut) {
        cut -= 1;
    }
    &path[..cut]
}

/// The span of one request: every line logged while it is served (the
/// components' included) carries its fields; `merchant_id` and
/// `environment` are recorded once the key is authenticated
/// ([`record_principal`]). The path has no query string: no secret or
/// customer data from it reaches the log.
pub fn request_span(
    quiet: bool,
    request_id: &str,
    method: &hyper::Method,
    path: &str,
    component: &str,
) -> tracing::Span {
    macro_rules! span {
        ($level:expr) => {
            tracing::span!(
                $level,
                "request",
                request_id = %request_id,
                method = %method,
                path = %logged_path(path),
                component = %component,
                merchant_id = tracing::field::Empty,
                environment = tracing::field::Empty,
            )
        };
    }
    if quiet {
        span!(tracing::Level::DEBUG)
    } else {
        span!(tracing::Level::INFO)
    }
}

/// The request's merchant and environment, on its span.
pub fn record_principal(merchant_id: &str, environment: &str) {
    let span = tracing::Span::current();
    span.record("merchant_id", tracing::field::display(merchant_id));
    span.record("environment", tracing::field::display(environment));
}

/// A request's end, on either listener: its id on the response, its
/// metrics under `label`, its one log line.
pub fn finish<B>(
    app: &App,
    resp: &mut Response<B>,
    request_id: &str,
    label: &str,
    span: &tracing::Span,
    quiet: bool,
    started: Instant,
) {
    resp.headers_mut().insert(
        "x-request-id",
        HeaderValue::from_str(request_id).expect("ascii id"),
    );
    let elapsed = started.elapsed();
    app.runtime
        .services
        .metrics
        .request(label, resp.status().as_u16(), elapsed);
    log_request_end(span, quiet, resp.status(), elapsed);
}

/// The one line a request logs, at its end (when its response's head is
/// ready; a streamed body goes on after it), in its span.
pub(super) fn log_request_end(
    span: &tracing::Span,
    quiet: bool,
    status: StatusCode,
    elapsed: std::time::Duration,
) {
    let status = status.as_u16();
    let duration_ms = elapsed.as_micros() as f64 / 1000.0;
    span.in_scope(|| {
        if quiet {
            tracing::debug!(status, duration_ms, "request");
        } else {
            tracing::info!(status, duration_ms, "request");
        }
    });
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::Mutex;
    use std::time::Duration;

    use serde_json::Value;

    use super::*;
    use mmc_config::LogFormat;
    use mmc_runtime::bindings::host::mmc::platform::log::{Host, Level};

    /// What a subscriber under test wrote.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
        type Writer = Captured;
        fn make_writer(&'a self) -> Captured {
            self.clone()
        }
    }

    /// A request as `handle_get` logs it, a component logging through its
    /// capability in it, then a probe; what `mmc` writes in `format`.
    fn logs_of_a_request(format: LogFormat) -> String {
        let out = Captured::default();
        let subscriber = mmc_telemetry::logging::subscriber(
            format,
            tracing_subscriber::EnvFilter::new("info"),
            out.clone(),
            false,
        );
        let metrics = mmc_metrics::Metrics::default();
        let mut component = mmc_runtime::capabilities::log::View {
            component: "collect",
            metrics: &metrics,
        };
        tracing::subscriber::with_default(subscriber, || {
            let span = request_span(
                false,
                "req_1",
                &hyper::Method::POST,
                "/api/v1/collect/payments",
                "collect",
            );
            span.in_scope(|| {
                record_principal("m_1", "test");
                component
                    .log(Level::Warn, "said by the component".into())
                    .unwrap();
            });
            log_request_end(
                &span,
                false,
                StatusCode::CREATED,
                Duration::from_micros(12_345),
            );
            // Probes are logged at debug: not at info.
            let probe = request_span(true, "req_2", &hyper::Method::GET, "/healthz", "healthz");
            log_request_end(&probe, true, StatusCode::OK, Duration::from_millis(1));
        });
        String::from_utf8(out.0.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn a_requests_lines_carry_its_id_merchant_and_component_in_json() {
        let text = logs_of_a_request(LogFormat::Json);
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        assert_eq!(lines.len(), 2, "{text}");
        let said = &lines[0];
        assert_eq!(said["target"], "component", "{said}");
        assert_eq!(said["component"], "collect", "{said}");
        assert_eq!(said["message"], "said by the component", "{said}");
        assert_eq!(said["span"]["request_id"], "req_1", "{said}");
        assert_eq!(said["span"]["merchant_id"], "m_1", "{said}");
        let end = &lines[1];
        assert_eq!(end["level"], "INFO", "{end}");
        assert_eq!(end["message"], "request", "{end}");
        assert_eq!(end["status"], 201, "{end}");
        assert_eq!(end["duration_ms"], 12.345, "{end}");
        let span = &end["span"];
        assert_eq!(span["request_id"], "req_1", "{end}");
        assert_eq!(span["method"], "POST", "{end}");
        assert_eq!(span["path"], "/api/v1/collect/payments", "{end}");
        assert_eq!(span["component"], "collect", "{end}");
        assert_eq!(span["merchant_id"], "m_1", "{end}");
        assert_eq!(span["environment"], "test", "{end}");
    }

    #[test]
    fn a_requests_lines_in_text_are_prefixed_by_its_span_without_colour() {
        let text = logs_of_a_request(LogFormat::Text);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        for line in &lines {
            assert!(
                line.contains(
                    "request{request_id=req_1 method=POST path=/api/v1/collect/payments component=collect merchant_id=m_1 environment=test}:"
                ),
                "{line}"
            );
        }
        assert!(lines[1].contains("status=201") && lines[1].contains("duration_ms=12.345"));
        assert!(!text.contains('\u{1b}'), "{text}");
    }

    #[test]
    fn a_long_path_is_cut_for_the_log() {
        let long = "/é".repeat(200);
        let logged = logged_path(&long);
        assert!(logged.len() <= MAX_LOGGED_PATH && long.starts_with(logged));
        assert_eq!(logged_path("/healthz"), "/healthz");
    }
}
