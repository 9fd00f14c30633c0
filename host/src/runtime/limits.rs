//! Per-guest resource limits and their defaults.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use super::capabilities::http::OutboundHosts;

/// The limits one guest runs under. Every field has a default that works
/// without any configuration; the guest list ConfigMap can override each one
/// per guest.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct Limits {
    /// Wall-clock deadline of one guest call, enforced by epoch interruption.
    /// Default 1 s: a reconcile is pure computation over a few objects and
    /// takes microseconds; a second means the guest is stuck.
    #[serde(with = "humantime_ms")]
    pub timeout: Duration,
    /// Maximum size of the guest's linear memory. Default 64 MiB, far above
    /// what a Rust guest needs for a handful of objects (about 2 MiB).
    pub memory_bytes: usize,
    /// Maximum total size of a response (children, status and events as
    /// JSON text). Default 4 MiB: Kubernetes caps one object near 1.5 MiB.
    pub max_response_bytes: usize,
    /// Maximum number of desired children in one response (and of kept
    /// ones). Default 100.
    pub max_children: usize,
    /// Maximum number of Events in one response. Default 16: an answer
    /// reports a few transitions; hundreds are a flood.
    pub max_events: usize,
    /// Most related objects the host puts in one request. Default 256.
    pub max_related_objects: usize,
    /// Most bytes of related objects (about their JSON size) in one
    /// request. Default 4 MiB.
    pub max_related_bytes: usize,
    /// What a guest that imports `wasi:http` may call
    /// (`allowedOutboundHosts`). Default: nothing.
    #[serde(skip)]
    pub outbound: Arc<OutboundHosts>,
    /// The kinds that grant power the guest may declare
    /// (`privilegedKinds`). Default: none.
    #[serde(skip)]
    pub privileged: Arc<crate::validate::description::PrivilegedKinds>,
}

impl Limits {
    /// What the answer checks of `validate` hold it to.
    pub fn bounds(&self) -> crate::validate::Bounds {
        crate::validate::Bounds {
            max_children: self.max_children,
            max_events: self.max_events,
            service_account_tokens: self.privileged.allows(&crate::model::KindRef::new(
                "",
                "v1",
                "ServiceAccount",
            )),
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(1),
            memory_bytes: 64 << 20,
            max_response_bytes: 4 << 20,
            max_children: 100,
            max_events: 16,
            max_related_objects: 256,
            max_related_bytes: 4 << 20,
            outbound: Arc::default(),
            privileged: Arc::default(),
        }
    }
}

/// Durations in the guest list are written as milliseconds (`timeoutMs`-style
/// integers) or as strings like `"1500ms"`, `"2s"`, `"1m"`.
mod humantime_ms {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, de::Error};

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Millis(u64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Millis(ms) => Ok(Duration::from_millis(ms)),
            Raw::Text(s) => super::parse_duration(&s).map_err(D::Error::custom),
        }
    }
}

/// Parses `"250ms"`, `"2s"`, `"5m"` or `"1h"` into a [`Duration`].
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("invalid duration {text:?}"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" | "" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n * 60)),
        "h" => Ok(Duration::from_secs(n * 3600)),
        _ => Err(format!(
            "invalid duration unit in {text:?} (use ms, s, m or h)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_in_common_units() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert!(parse_duration("5 parsecs").is_err());
    }

    #[test]
    fn defaults_match_the_documented_values() {
        let l = Limits::default();
        assert_eq!(l.timeout, Duration::from_secs(1));
        assert_eq!(l.memory_bytes, 64 * 1024 * 1024);
    }
}
