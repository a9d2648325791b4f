//! The host's metrics (`mmc_metrics::Metrics`) beside prometheus-client, on
//! what a request costs: counting it by route and status and observing its
//! duration by route, and rendering a scrape. Run by `make bench`
//! (`bench/crates_compared.sh`); prints one JSON object.
//!
//! Both keep the same two series, on 20 routes and 3 statuses. The host's
//! scrape also writes its other series (empty here), so its render does
//! more than prometheus-client's.

use std::time::{Duration, Instant};

use mmc_metrics::Metrics;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    route: String,
    status: u64,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: String,
}

const REQUESTS: u32 = 2_000_000;
const SCRAPES: u32 = 2_000;
const BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

fn routes() -> Vec<String> {
    (0..20).map(|n| format!("/api/v1/area{n}")).collect()
}

/// Nanoseconds per request counted, over `REQUESTS` spread on the routes.
fn per_request(count: impl Fn(&str, u16, Duration)) -> f64 {
    let routes = routes();
    let statuses = [200, 201, 404];
    let started = Instant::now();
    for n in 0..REQUESTS as usize {
        count(
            &routes[n % routes.len()],
            statuses[n % statuses.len()],
            Duration::from_micros((n % 5000) as u64),
        );
    }
    started.elapsed().as_nanos() as f64 / f64::from(REQUESTS)
}

/// Microseconds per scrape, and its size in bytes.
fn per_scrape(render: impl Fn() -> String) -> (f64, usize) {
    let size = render().len();
    let started = Instant::now();
    for _ in 0..SCRAPES {
        std::hint::black_box(render());
    }
    (
        started.elapsed().as_secs_f64() * 1e6 / f64::from(SCRAPES),
        size,
    )
}

fn main() {
    let ours = Metrics::default();
    let ours_ns = per_request(|route, status, elapsed| ours.request(route, status, elapsed));
    let (ours_us, ours_bytes) = per_scrape(|| ours.render());

    let requests = Family::<RequestLabels, Counter>::default();
    let seconds = Family::<RouteLabels, Histogram>::new_with_constructor(|| {
        Histogram::new(BUCKETS.iter().copied())
    });
    let mut registry = Registry::default();
    registry.register("mmc_http_requests", "Requests", requests.clone());
    registry.register(
        "mmc_http_request_duration_seconds",
        "Request durations",
        seconds.clone(),
    );
    let theirs_ns = per_request(|route, status, elapsed| {
        requests
            .get_or_create(&RequestLabels {
                route: route.to_string(),
                status: u64::from(status),
            })
            .inc();
        seconds
            .get_or_create(&RouteLabels {
                route: route.to_string(),
            })
            .observe(elapsed.as_secs_f64());
    });
    let (theirs_us, theirs_bytes) = per_scrape(|| {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
        out
    });

    println!(
        "{{\"request_ns\": {{\"ours\": {ours_ns:.1}, \"prometheus_client\": {theirs_ns:.1}}}, \
         \"scrape_us\": {{\"ours\": {ours_us:.1}, \"prometheus_client\": {theirs_us:.1}}}, \
         \"scrape_bytes\": {{\"ours\": {ours_bytes}, \"prometheus_client\": {theirs_bytes}}}}}"
    );
}
