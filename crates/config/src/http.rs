//! The public listener's settings: rate limits (`[rate_limit]`) and
//! connection caps and clocks (`[connections]`).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RateLimitConfig {
    /// Sustained requests per second per key; 0 disables limiting.
    pub per_second: f64,
    pub burst: f64,
    /// Requests without a key (checkout page, operators' callbacks) per
    /// client address and surface; 0 disables. Behind a load balancer every
    /// client is the balancer: raise it there (or limit at the balancer).
    pub per_client_per_second: f64,
    pub per_client_burst: f64,
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        RateLimitConfig {
            per_second: 100.0,
            burst: 200.0,
            per_client_per_second: 50.0,
            per_client_burst: 200.0,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConnectionConfig {
    /// From a request's first byte to the end of its headers.
    pub header_read_timeout_ms: u64,
    /// To read a request's whole body (408 after it).
    pub body_read_timeout_ms: u64,
    /// A kept-alive connection with nothing in progress and no byte for this long is closed.
    pub idle_timeout_ms: u64,
    /// Open connections at most, per listener; more are closed at accept.
    pub max_connections: usize,
    /// Open connections at most from one client address.
    pub max_connections_per_client: usize,
    /// Request bodies read at once per API key (an unauthenticated body is
    /// never read); a request past it waits up to `body_permit_wait_ms`,
    /// then gets 429 with Retry-After.
    pub body_reads_per_key: usize,
    /// Bodies read at once per client address on the routes without a key
    /// (checkout, operators' callbacks), with the same wait.
    pub body_reads_per_client: usize,
    pub body_permit_wait_ms: u64,
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        ConnectionConfig {
            header_read_timeout_ms: 10_000,
            body_read_timeout_ms: 30_000,
            idle_timeout_ms: 75_000,
            max_connections: 10_000,
            max_connections_per_client: 512,
            body_reads_per_key: 16,
            body_reads_per_client: 8,
            body_permit_wait_ms: 1_000,
        }
    }
}
