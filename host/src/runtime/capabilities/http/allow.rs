//! `allowedOutboundHosts`: which URLs a guest may call, and which addresses
//! those calls may reach.
//!
//! An entry is `scheme://host[:port]`: scheme `http` or `https`; host a DNS
//! name, a `*.`-prefixed subdomain wildcard or an IP literal; the port
//! defaults to the scheme's. Nothing else is accepted (no paths, user info,
//! bare `*` or port wildcards), so an entry means exactly one origin or one
//! family of subdomains.
//!
//! Names are checked twice: the request's scheme, host and port against the
//! entries, then every address the name resolves to. An address in a
//! loopback, private, link-local (cloud metadata), shared or otherwise
//! non-public range is refused unless the matching entry is that exact IP
//! literal, so a listed name that resolves (or is rebound) to
//! `127.0.0.1` or `169.254.169.254` reaches nothing.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// The scheme of an entry or a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    /// Plain HTTP.
    Http,
    /// HTTP over TLS.
    Https,
}

impl Scheme {
    fn default_port(self) -> u16 {
        match self {
            Self::Http => 80,
            Self::Https => 443,
        }
    }

    fn parse(text: &str) -> Option<Self> {
        match text.to_ascii_lowercase().as_str() {
            "http" => Some(Self::Http),
            "https" => Some(Self::Https),
            _ => None,
        }
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Http => "http",
            Self::Https => "https",
        })
    }
}

/// The host part of an entry.
#[derive(Clone, Debug, PartialEq, Eq)]
enum HostPattern {
    /// One DNS name, lower case, without a trailing dot.
    Name(String),
    /// `*.suffix`: any name with at least one more label before `suffix`.
    Subdomains(String),
    /// One IP address.
    Ip(IpAddr),
}

/// One `allowedOutboundHosts` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    scheme: Scheme,
    host: HostPattern,
    port: u16,
}

impl Entry {
    /// Whether a request to `target` matches this entry.
    fn matches(&self, target: &Target) -> bool {
        if self.scheme != target.scheme || self.port != target.port {
            return false;
        }
        match (&self.host, &target.host) {
            (HostPattern::Name(name), TargetHost::Name(host)) => name == host,
            (HostPattern::Subdomains(suffix), TargetHost::Name(host)) => host
                .strip_suffix(suffix.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            (HostPattern::Ip(ip), TargetHost::Ip(host)) => ip == host,
            _ => false,
        }
    }

    /// Whether a connection under this entry may go to `address`: any
    /// public address, or the exact address the entry names.
    pub fn admits(&self, address: IpAddr) -> bool {
        let address = address.to_canonical();
        match self.host {
            HostPattern::Ip(ip) => ip.to_canonical() == address,
            _ => is_public(address),
        }
    }
}

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://", self.scheme)?;
        match &self.host {
            HostPattern::Name(n) => f.write_str(n)?,
            HostPattern::Subdomains(s) => write!(f, "*.{s}")?,
            HostPattern::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]")?,
            HostPattern::Ip(IpAddr::V4(ip)) => write!(f, "{ip}")?,
        }
        write!(f, ":{}", self.port)
    }
}

/// Why an entry was refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid allowedOutboundHosts entry {entry:?}: {reason}")]
pub struct EntryError {
    entry: String,
    reason: &'static str,
}

impl FromStr for Entry {
    type Err = EntryError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let fail = |reason| EntryError {
            entry: text.to_owned(),
            reason,
        };
        let (scheme, rest) = text
            .split_once("://")
            .ok_or_else(|| fail("expected scheme://host[:port]"))?;
        let scheme =
            Scheme::parse(scheme).ok_or_else(|| fail("the scheme must be http or https"))?;
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.is_empty() {
            return Err(fail("no host"));
        }
        if rest.contains(['/', '?', '#', '@', '%', '\\']) {
            return Err(fail(
                "only scheme, host and port are allowed (no path, query or user info)",
            ));
        }
        let (host, port) = split_port(rest).ok_or_else(|| fail("invalid port"))?;
        let port = port.unwrap_or_else(|| scheme.default_port());
        let host = if let Some(v6) = host.strip_prefix('[') {
            let v6 = v6
                .strip_suffix(']')
                .ok_or_else(|| fail("unclosed IPv6 bracket"))?;
            HostPattern::Ip(IpAddr::V6(
                v6.parse().map_err(|_| fail("invalid IPv6 address"))?,
            ))
        } else if let Ok(ip) = host.parse::<Ipv4Addr>() {
            HostPattern::Ip(IpAddr::V4(ip))
        } else if let Some(suffix) = host.strip_prefix("*.") {
            HostPattern::Subdomains(dns_name(suffix).ok_or_else(|| {
                fail("a wildcard is `*.` followed by a DNS name; no other wildcard is allowed")
            })?)
        } else {
            HostPattern::Name(dns_name(host).ok_or_else(|| {
                fail("the host must be a DNS name, `*.` and a DNS name, or an IP address")
            })?)
        };
        Ok(Self { scheme, host, port })
    }
}

/// Splits `host[:port]`, where an IPv6 host is bracketed.
fn split_port(text: &str) -> Option<(&str, Option<u16>)> {
    let colon = if text.starts_with('[') {
        let close = text.find(']')?;
        match &text[close + 1..] {
            "" => return Some((text, None)),
            after if after.starts_with(':') => close + 1,
            _ => return None,
        }
    } else {
        match text.rfind(':') {
            Some(i) => i,
            None => return Some((text, None)),
        }
    };
    let port = &text[colon + 1..];
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((&text[..colon], Some(port.parse().ok().filter(|p| *p != 0)?)))
}

/// `text` as a lower-case DNS name, or none when it is not one.
fn dns_name(text: &str) -> Option<String> {
    let name = text.strip_suffix('.').unwrap_or(text).to_ascii_lowercase();
    let valid = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
    valid.then_some(name)
}

/// The host of a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TargetHost {
    /// A DNS name (lower case, no trailing dot).
    Name(String),
    /// An IP literal.
    Ip(IpAddr),
}

impl fmt::Display for TargetHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Name(n) => f.write_str(n),
            Self::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
            Self::Ip(IpAddr::V4(ip)) => write!(f, "{ip}"),
        }
    }
}

/// Where a request goes: scheme, host and port, defaults filled in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The scheme.
    pub scheme: Scheme,
    /// The host.
    pub host: TargetHost,
    /// The port.
    pub port: u16,
}

impl Target {
    /// The target of a request URI, or none when it has no usable scheme or
    /// host.
    pub fn of(uri: &http::Uri) -> Option<Self> {
        let scheme = Scheme::parse(uri.scheme_str()?)?;
        let host = uri.host()?;
        let host = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            Some(v6) => TargetHost::Ip(IpAddr::V6(v6.parse().ok()?)),
            None => match host.parse::<Ipv4Addr>() {
                Ok(ip) => TargetHost::Ip(IpAddr::V4(ip)),
                Err(_) => TargetHost::Name(dns_name(host)?),
            },
        };
        Some(Self {
            scheme,
            host,
            port: uri.port_u16().unwrap_or_else(|| scheme.default_port()),
        })
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}:{}", self.scheme, self.host, self.port)
    }
}

/// A guest's `allowedOutboundHosts`. Empty (the default) allows nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OutboundHosts {
    entries: Vec<Entry>,
}

impl OutboundHosts {
    /// Parses every entry; the first invalid one is the error.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Self, EntryError> {
        Ok(Self {
            entries: entries
                .iter()
                .map(|e| e.as_ref().trim().parse())
                .collect::<Result<_, _>>()?,
        })
    }

    /// Whether no host is allowed.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The first entry that allows a request to `target`.
    pub fn entry_for(&self, target: &Target) -> Option<&Entry> {
        self.entries.iter().find(|e| e.matches(target))
    }
}

/// Whether `ip` is a globally routable unicast address: not loopback,
/// unspecified, private, shared (CGNAT), link-local (where cloud metadata
/// services answer), multicast, broadcast, documentation, benchmarking or
/// reserved, nor an IPv6 form (mapped, NAT64, 6to4) of such an IPv4 address.
pub fn is_public(ip: IpAddr) -> bool {
    match ip.to_canonical() {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b))
        || (a == 192 && b == 0 && c == 0)
        || (a == 198 && (b == 18 || b == 19))
        || a >= 240)
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    let embedded_v4 = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    if ip.is_unspecified() || ip.is_loopback() || ip.is_multicast() {
        return false;
    }
    match s[0] {
        // Unique local (fc00::/7), link-local (fe80::/10), site-local (fec0::/10).
        x if (x & 0xfe00) == 0xfc00 || (x & 0xffc0) == 0xfe80 || (x & 0xffc0) == 0xfec0 => false,
        // Documentation (2001:db8::/32) and Teredo (2001::/32), which tunnels
        // to an address the host cannot check.
        0x2001 if s[1] == 0x0db8 || s[1] == 0 => false,
        // 6to4 (2002::/16) carries an IPv4 address in its next 32 bits.
        0x2002 => is_public_v4(embedded_v4(s[1], s[2])),
        // NAT64 (64:ff9b::/96) carries one in its last 32 bits.
        0x0064 if s[1] == 0xff9b && s[2..6] == [0; 4] => is_public_v4(embedded_v4(s[6], s[7])),
        // Only global unicast (2000::/3) is public.
        x => (x & 0xe000) == 0x2000,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(uri: &str) -> Target {
        Target::of(&uri.parse().unwrap()).unwrap()
    }

    fn allows(entries: &[&str], uri: &str) -> bool {
        OutboundHosts::parse(entries)
            .unwrap()
            .entry_for(&target(uri))
            .is_some()
    }

    #[test]
    fn entries_are_scheme_host_and_port_only() {
        for good in [
            "https://registry.example.com",
            "http://127.0.0.1:8089",
            "https://*.example.com",
            "http://[::1]:8080",
            "https://Registry.Example.com./",
        ] {
            assert!(good.parse::<Entry>().is_ok(), "{good}");
        }
        for bad in [
            "registry.example.com",
            "ftp://example.com",
            "https://example.com/path",
            "https://example.com?q",
            "https://user@example.com",
            "https://*",
            "*://example.com",
            "https://example.com:*",
            "https://exa*mple.com",
            "https://*.*.example.com",
            "https://foo.*.example.com",
            "https://example.com:0",
            "https://example.com:99999",
            "https://",
            "https://[::1",
            "https://-bad.example.com",
        ] {
            assert!(bad.parse::<Entry>().is_err(), "{bad} should be refused");
        }
    }

    #[test]
    fn requests_match_scheme_host_and_port_exactly() {
        let list = ["https://registry.example.com", "http://127.0.0.1:8089"];
        assert!(allows(&list, "https://registry.example.com/caches/a/b"));
        assert!(allows(&list, "https://REGISTRY.example.com:443/"));
        assert!(allows(&list, "http://127.0.0.1:8089/x"));
        assert!(!allows(&list, "http://registry.example.com/"));
        assert!(!allows(&list, "https://registry.example.com:8443/"));
        assert!(!allows(&list, "https://other.example.com/"));
        assert!(!allows(&list, "https://registry.example.com.evil.test/"));
        assert!(!allows(&list, "http://127.0.0.1:8090/"));
        assert!(!allows(&list, "http://localhost:8089/"));
        assert!(!allows(&[], "https://registry.example.com/"));
    }

    #[test]
    fn wildcards_cover_subdomains_but_not_the_apex_or_lookalikes() {
        let list = ["https://*.example.com"];
        assert!(allows(&list, "https://a.example.com/"));
        assert!(allows(&list, "https://a.b.example.com/"));
        assert!(!allows(&list, "https://example.com/"));
        assert!(!allows(&list, "https://badexample.com/"));
        assert!(!allows(&list, "https://a.example.com.evil.test/"));
    }

    #[test]
    fn non_public_addresses_need_an_entry_naming_them() {
        let name: Entry = "http://registry.example.com".parse().unwrap();
        let ip: Entry = "http://127.0.0.1:8089".parse().unwrap();
        for blocked in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
        ] {
            let address: IpAddr = blocked.parse().unwrap();
            assert!(!name.admits(address), "{blocked} must need an exact entry");
        }
        for public in ["93.184.215.14", "2606:4700::1111", "64:ff9b::5db8:d70e"] {
            assert!(name.admits(public.parse().unwrap()), "{public}");
        }
        assert!(ip.admits("127.0.0.1".parse().unwrap()));
        assert!(ip.admits("::ffff:127.0.0.1".parse().unwrap()));
        assert!(!ip.admits("127.0.0.2".parse().unwrap()));
    }
}
