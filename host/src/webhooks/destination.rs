//! Where webhooks may go. Live endpoints: `https` on public addresses only.
//! The test environment may also use plain `http` to loopback. Checked when
//! the URL is registered and again at connect time (a resolver that refuses
//! forbidden addresses, against DNS rebinding); redirects are never followed.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::accounts::Environment;

/// Whether an address may receive webhooks. Loopback only when `allow_loopback`.
pub fn is_allowed_ip(ip: IpAddr, allow_loopback: bool) -> bool {
    match ip {
        IpAddr::V4(v4) => allowed_v4(v4, allow_loopback),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => allowed_v4(v4, allow_loopback),
            None => allowed_v6(v6, allow_loopback),
        },
    }
}

fn allowed_v4(ip: Ipv4Addr, allow_loopback: bool) -> bool {
    if ip.is_loopback() {
        return allow_loopback;
    }
    let [a, b, ..] = ip.octets();
    !(ip.is_private()
        || ip.is_link_local() // 169.254/16, cloud metadata included
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // carrier-grade NAT
        || (a == 192 && b == 0 && ip.octets()[2] == 0) // IETF protocol assignments
        || (a == 198 && (18..20).contains(&b)) // benchmarking
        || a >= 240)
}

fn allowed_v6(ip: Ipv6Addr, allow_loopback: bool) -> bool {
    if ip.is_loopback() {
        return allow_loopback;
    }
    let first = ip.segments()[0];
    !(ip.is_unspecified()
        || ip.is_multicast()
        || (first & 0xfe00) == 0xfc00 // unique local (fd00:ec2::254 metadata included)
        || (first & 0xffc0) == 0xfe80 // link-local
        || first == 0x2001 && ip.segments()[1] == 0x0db8) // documentation
}

#[derive(Debug, thiserror::Error)]
pub enum DestinationError {
    #[error("url is not a valid absolute URL")]
    Malformed,
    #[error("live webhook endpoints must use https")]
    HttpsRequired,
    #[error("plain http is allowed only to loopback addresses, in the test environment")]
    HttpOnlyToLoopback,
    #[error(
        "{0} is not a public address: webhooks cannot target loopback, private, link-local or metadata addresses"
    )]
    Forbidden(String),
    #[error("the host {0} does not resolve")]
    Unresolvable(String),
}

/// Validates a destination for `environment`, resolving its host.
pub async fn check(url: &str, environment: Environment) -> Result<Url, DestinationError> {
    let parsed = Url::parse(url).map_err(|_| DestinationError::Malformed)?;
    let host = parsed
        .host_str()
        .ok_or(DestinationError::Malformed)?
        .to_string();
    if url.len() > 2048 || !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(DestinationError::Malformed);
    }
    let is_test = environment == Environment::Test;
    let https = match parsed.scheme() {
        "https" => true,
        "http" if is_test => false,
        "http" => return Err(DestinationError::HttpsRequired),
        _ => return Err(DestinationError::Malformed),
    };
    let port = parsed.port_or_known_default().unwrap_or(443);
    let addrs = resolve(&host, port)
        .await
        .ok_or_else(|| DestinationError::Unresolvable(host.clone()))?;
    for addr in &addrs {
        let ip = addr.ip();
        let allowed = if https {
            is_allowed_ip(ip, is_test)
        } else {
            ip.is_loopback() || ip.to_canonical().is_loopback()
        };
        if !allowed {
            return Err(if https {
                DestinationError::Forbidden(ip.to_string())
            } else {
                DestinationError::HttpOnlyToLoopback
            });
        }
    }
    Ok(parsed)
}

async fn resolve(host: &str, port: u16) -> Option<Vec<SocketAddr>> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Some(vec![SocketAddr::new(ip, port)]);
    }
    let found = tokio::time::timeout(
        Duration::from_secs(5),
        tokio::net::lookup_host((host, port)),
    )
    .await
    .ok()?
    .ok()?;
    let addrs: Vec<SocketAddr> = found.collect();
    (!addrs.is_empty()).then_some(addrs)
}

/// The connect-time check: reqwest asks this resolver, which drops every
/// forbidden address, so a name that re-resolves to a private address after
/// registration still cannot be reached. (IP-literal URLs skip resolvers;
/// the delivery worker checks those itself before sending.)
pub struct SafeResolver {
    pub allow_loopback: bool,
}

impl Resolve for SafeResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow_loopback = self.allow_loopback;
        let host = name.as_str().to_string();
        Box::pin(async move {
            let all = resolve(&host, 0)
                .await
                .ok_or_else(|| format!("{host} does not resolve"))?;
            let allowed: Vec<SocketAddr> = all
                .into_iter()
                .filter(|a| is_allowed_ip(a.ip(), allow_loopback))
                .collect();
            if allowed.is_empty() {
                return Err(format!("{host} resolves only to forbidden addresses").into());
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

/// The check applied before each attempt to IP-literal hosts.
pub fn literal_allowed(url: &Url, allow_loopback: bool) -> bool {
    match url.host() {
        Some(url::Host::Ipv4(ip)) => is_allowed_ip(IpAddr::V4(ip), allow_loopback),
        Some(url::Host::Ipv6(ip)) => is_allowed_ip(IpAddr::V6(ip), allow_loopback),
        Some(url::Host::Domain(_)) => true,
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forbidden_ranges() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fd00:ec2::254",
            "fe80::1",
            "::ffff:10.0.0.1",
        ] {
            assert!(!is_allowed_ip(ip.parse().unwrap(), false), "{ip}");
        }
        assert!(is_allowed_ip("127.0.0.1".parse().unwrap(), true));
        assert!(
            !is_allowed_ip("10.0.0.1".parse().unwrap(), true),
            "test mode allows loopback only"
        );
        assert!(is_allowed_ip("8.8.8.8".parse().unwrap(), false));
        assert!(is_allowed_ip("2606:4700::1111".parse().unwrap(), false));
    }

    #[tokio::test]
    async fn registration_rules() {
        use Environment::*;
        assert!(matches!(
            check("http://example.com/x", Live).await,
            Err(DestinationError::HttpsRequired)
        ));
        assert!(matches!(
            check("https://127.0.0.1/x", Live).await,
            Err(DestinationError::Forbidden(_))
        ));
        assert!(matches!(
            check("https://169.254.169.254/latest", Live).await,
            Err(DestinationError::Forbidden(_))
        ));
        assert!(matches!(
            check("https://[::1]/x", Live).await,
            Err(DestinationError::Forbidden(_))
        ));
        assert!(matches!(
            check("https://localhost/x", Live).await,
            Err(DestinationError::Forbidden(_))
        ));
        assert!(check("http://127.0.0.1:9/x", Test).await.is_ok());
        assert!(check("http://localhost:9/x", Test).await.is_ok());
        assert!(matches!(
            check("http://10.0.0.1/x", Test).await,
            Err(DestinationError::HttpOnlyToLoopback)
        ));
        assert!(matches!(
            check("https://10.0.0.1/x", Test).await,
            Err(DestinationError::Forbidden(_))
        ));
        assert!(matches!(
            check("ftp://x", Test).await,
            Err(DestinationError::Malformed)
        ));
        assert!(matches!(
            check("https://user:pw@8.8.8.8/", Live).await,
            Err(DestinationError::Malformed)
        ));
    }

    #[tokio::test]
    async fn the_resolver_refuses_names_that_resolve_to_loopback() {
        let strict = SafeResolver {
            allow_loopback: false,
        };
        assert!(strict.resolve("localhost".parse().unwrap()).await.is_err());
        let test = SafeResolver {
            allow_loopback: true,
        };
        assert!(test.resolve("localhost".parse().unwrap()).await.is_ok());
    }
}
