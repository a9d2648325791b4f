//! Where webhooks may go: public addresses only, in every environment, so
//! that no key (a test key included) can make the service reach its own
//! network (SSRF: loopback ports, private services, cloud metadata) or read
//! what answers there. `webhooks.allow_private_destinations = true` lets
//! loopback and private addresses through, for development and tests only.
//! Live endpoints use `https` (plain `http` only to a private destination
//! that setting allows); test endpoints may use plain `http`. Checked when
//! the URL is registered and again at connect time (a resolver that refuses
//! forbidden addresses, against DNS rebinding); redirects are never followed.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use mmc_accounts::Environment;

/// Whether an address may receive webhooks: public ones always; loopback
/// and private ones only when `allow_private`; link-local (cloud metadata),
/// reserved and IPv6 transition ranges never.
pub fn is_allowed_ip(ip: IpAddr, allow_private: bool) -> bool {
    match ip {
        IpAddr::V4(v4) => allowed_v4(v4, allow_private),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => allowed_v4(v4, allow_private),
            None => allowed_v6(v6, allow_private),
        },
    }
}

/// The IPv4 address an IPv6 address stands for on the wire: IPv4-mapped
/// `::ffff:0:0/96` and IPv4-translated `::ffff:0:0:0/96` (SIIT). Such an
/// address is judged by the IPv4 rules, never passed as an IPv6 one.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let translated = s[..4] == [0; 4] && s[4] == 0xffff && s[5] == 0;
    ip.to_ipv4_mapped()
        .or_else(|| translated.then(|| Ipv4Addr::from(((s[6] as u32) << 16) | s[7] as u32)))
}

/// Loopback and private ranges: the service's own network.
fn private_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    ip.is_loopback() || ip.is_private() || (a == 100 && (64..128).contains(&b)) // carrier-grade NAT
}

fn allowed_v4(ip: Ipv4Addr, allow_private: bool) -> bool {
    if private_v4(ip) {
        return allow_private;
    }
    let [a, b, c, _] = ip.octets();
    !(ip.is_link_local() // 169.254/16, cloud metadata included
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 198 && (18..20).contains(&b)) // benchmarking
        || a >= 240)
}

fn allowed_v6(ip: Ipv6Addr, allow_private: bool) -> bool {
    let s = ip.segments();
    // Ranges that carry or reach an IPv4 address (a way around the IPv4
    // rules): NAT64 64:ff9b::/96 and 64:ff9b:1::/48, 6to4 2002::/16, Teredo
    // 2001::/32, IPv4-compatible ::/96 (deprecated); and discard 100::/64.
    let transition = (s[0] == 0x64 && s[1] == 0xff9b && (s[2..6] == [0; 4] || s[2] == 1))
        || s[0] == 0x2002
        || (s[0] == 0x2001 && s[1] == 0)
        || (s[..6] == [0; 6] && !ip.is_loopback() && !ip.is_unspecified())
        || (s[0] == 0x100 && s[1..4] == [0; 3]);
    if transition {
        return false;
    }
    let metadata = ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254);
    if ip.is_loopback() || ((s[0] & 0xfe00) == 0xfc00 && !metadata) {
        return allow_private; // loopback, unique local
    }
    !(ip.is_unspecified()
        || ip.is_multicast()
        || metadata
        || (s[0] & 0xffc0) == 0xfe80 // link-local
        || (s[0] & 0xffc0) == 0xfec0 // site-local (deprecated, still routed inside some networks)
        || (s[0] == 0x2001 && s[1] == 0x0db8)) // documentation
}

#[derive(Debug, thiserror::Error)]
pub enum DestinationError {
    #[error("url is not a valid absolute URL")]
    Malformed,
    #[error("live webhook endpoints must use https")]
    HttpsRequired,
    #[error(
        "{0} is not a public address: webhooks cannot target loopback, private, link-local, metadata or IPv6 transition addresses"
    )]
    Forbidden(String),
    #[error("the host {0} does not resolve")]
    Unresolvable(String),
}

/// Validates a destination for `environment`, resolving its host.
pub async fn check(
    url: &str,
    environment: Environment,
    allow_private: bool,
) -> Result<Url, DestinationError> {
    let parsed = Url::parse(url).map_err(|_| DestinationError::Malformed)?;
    let host = parsed
        .host_str()
        .ok_or(DestinationError::Malformed)?
        .to_string();
    if url.len() > 2048 || !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(DestinationError::Malformed);
    }
    let plain = match parsed.scheme() {
        "https" => false,
        "http" => true,
        _ => return Err(DestinationError::Malformed),
    };
    let port = parsed.port_or_known_default().unwrap_or(443);
    let addrs = resolve(&host, port)
        .await
        .ok_or_else(|| DestinationError::Unresolvable(host.clone()))?;
    for addr in &addrs {
        let ip = addr.ip().to_canonical();
        if !is_allowed_ip(ip, allow_private) {
            return Err(DestinationError::Forbidden(ip.to_string()));
        }
        let private = match ip {
            IpAddr::V4(v4) => private_v4(v4),
            IpAddr::V6(v6) => v6.is_loopback() || (v6.segments()[0] & 0xfe00) == 0xfc00,
        };
        // Live money events travel encrypted, except to a private
        // destination the operator explicitly allowed (a development setup).
        if plain && environment == Environment::Live && !private {
            return Err(DestinationError::HttpsRequired);
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
/// The resolver's refusal, found again in a failed request's error chain.
#[derive(Debug, thiserror::Error)]
#[error("{0} resolves only to forbidden addresses")]
pub struct Refused(pub String);

pub struct SafeResolver {
    pub allow_private: bool,
}

impl Resolve for SafeResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow_private = self.allow_private;
        let host = name.as_str().to_string();
        Box::pin(async move {
            let all = resolve(&host, 0)
                .await
                .ok_or_else(|| format!("{host} does not resolve"))?;
            let allowed: Vec<SocketAddr> = all
                .into_iter()
                .filter(|a| is_allowed_ip(a.ip(), allow_private))
                .collect();
            if allowed.is_empty() {
                return Err(Box::new(Refused(host)) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

/// The check applied before each attempt to IP-literal hosts.
pub fn literal_allowed(url: &Url, allow_private: bool) -> bool {
    match url.host() {
        Some(url::Host::Ipv4(ip)) => is_allowed_ip(IpAddr::V4(ip), allow_private),
        Some(url::Host::Ipv6(ip)) => is_allowed_ip(IpAddr::V6(ip), allow_private),
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
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            // IPv4-translated: the IPv4 rules, as for mapped.
            "::ffff:0:7f00:1",
            "::ffff:0:a00:1",
            "::ffff:0:a9fe:a9fe",
            // Site-local.
            "fec0::1",
            "feff:ffff::1",
            // IPv6 transition ranges, whatever IPv4 address they carry.
            "64:ff9b::7f00:1",
            "64:ff9b::808:808",
            "64:ff9b:1::a00:1",
            "2002:7f00:1::1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "::127.0.0.1",
            "::8.8.8.8",
            "100::1",
        ] {
            assert!(!is_allowed_ip(ip.parse().unwrap(), false), "{ip}");
        }
        for ip in [
            "127.0.0.1",
            "10.0.0.1",
            "::1",
            "fd12::1",
            "::ffff:192.168.0.9",
        ] {
            assert!(
                is_allowed_ip(ip.parse().unwrap(), true),
                "{ip} when allowed"
            );
        }
        for ip in [
            "169.254.169.254",
            "fd00:ec2::254",
            "64:ff9b::7f00:1",
            "2002:a00:1::1",
            "::ffff:169.254.169.254",
            "::ffff:0:a9fe:a9fe",
            "fec0::1",
        ] {
            assert!(!is_allowed_ip(ip.parse().unwrap(), true), "{ip} never");
        }
        // A public IPv4 address is as public mapped or translated.
        assert!(is_allowed_ip("::ffff:8.8.8.8".parse().unwrap(), false));
        assert!(is_allowed_ip("::ffff:0:808:808".parse().unwrap(), false));
        assert!(is_allowed_ip("8.8.8.8".parse().unwrap(), false));
        assert!(is_allowed_ip("2606:4700::1111".parse().unwrap(), false));
    }

    #[tokio::test]
    async fn registration_rules() {
        use Environment::*;
        assert!(matches!(
            check("http://8.8.8.8/x", Live, false).await,
            Err(DestinationError::HttpsRequired)
        ));
        assert!(check("http://8.8.8.8/x", Test, false).await.is_ok());
        for env in [Live, Test] {
            for url in [
                "https://127.0.0.1/x",
                "http://127.0.0.1:9/x",
                "http://localhost:9/x",
                "https://169.254.169.254/latest",
                "https://[::1]/x",
                "https://[64:ff9b::7f00:1]/x",
                "https://10.0.0.1/x",
            ] {
                assert!(
                    matches!(
                        check(url, env, false).await,
                        Err(DestinationError::Forbidden(_))
                    ),
                    "{url} {env:?}"
                );
            }
        }
        // Allowed for development: loopback and private, plain http too.
        assert!(check("http://127.0.0.1:9/x", Test, true).await.is_ok());
        assert!(check("http://localhost:9/x", Live, true).await.is_ok());
        assert!(matches!(
            check("https://169.254.169.254/latest", Test, true).await,
            Err(DestinationError::Forbidden(_))
        ));
        assert!(matches!(
            check("ftp://x", Test, true).await,
            Err(DestinationError::Malformed)
        ));
        assert!(matches!(
            check("https://user:pw@8.8.8.8/", Live, false).await,
            Err(DestinationError::Malformed)
        ));
    }

    #[tokio::test]
    async fn the_resolver_refuses_names_that_resolve_to_loopback() {
        let strict = SafeResolver {
            allow_private: false,
        };
        assert!(strict.resolve("localhost".parse().unwrap()).await.is_err());
        let dev = SafeResolver {
            allow_private: true,
        };
        assert!(dev.resolve("localhost".parse().unwrap()).await.is_ok());
    }
}
