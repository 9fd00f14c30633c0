//! The per-guest settings the guest list sets: parsed by `source`, used by
//! `host`, `controller` and `webhook`. A leaf: it imports no other module of
//! the host.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Largest `settings` value of one guest, as JSON text (the guest list's
/// `settings`, or `--settings` of `run`, `render` and `test`). Settings
/// configure a guest; data belongs in objects the guest reads.
pub const MAX_SETTINGS_BYTES: usize = 64 << 10;

/// The most shards a guest may have (`shards` in the guest list).
pub const MAX_SHARDS: u16 = 64;

/// A guest's settings as the JSON text it is handed, refused when larger
/// than [`MAX_SETTINGS_BYTES`].
pub fn settings_text(value: &serde_json::Value) -> Result<String, String> {
    let text = serde_json::to_string(value).expect("a JSON value always serialises");
    if text.len() > MAX_SETTINGS_BYTES {
        return Err(format!(
            "settings are {} bytes as JSON, at most {MAX_SETTINGS_BYTES} are allowed",
            text.len()
        ));
    }
    Ok(text)
}

/// How one guest's controller runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerSettings {
    /// Reconciles of this guest that may run at once, across all its
    /// namespaces. Default 10: a guest call is CPU-bound for microseconds,
    /// while a reconcile that creates children waits on several API
    /// requests in a row (finalizer, each child, status, Events), so more
    /// reconciles at once keep the API server, not the guest, busy. See
    /// docs/decisions/0036-ten-reconciles-at-once-by-default.md.
    pub concurrency: u16,
    /// Reconcile every parent this often even if nothing changed. Default
    /// 10 minutes; a converged object costs only reads then.
    pub resync: Duration,
    /// Namespaces to watch; empty means all.
    pub namespaces: Vec<String>,
    /// Whether a desired child may adopt an existing object that no
    /// controller owns (never a Secret). Default false.
    pub adopt_orphans: bool,
    /// Whether the guest gets the values of the Secrets it sees instead of
    /// their SHA-256 ([`crate::secrets`]). Default false.
    pub secret_values: bool,
    /// What a failed admission call answers (guests that export `admit`).
    pub admission_failure_policy: FailurePolicy,
    /// The guest's own budget of API requests (`apiQPS`, `apiBurst`);
    /// none by default, so convergence is not slowed.
    pub api_budget: Option<ApiBudget>,
    /// How many shards the guest's parents are split into
    /// ([`crate::controller::shards`]); 1 (the default) watches them all as
    /// one.
    pub shards: u16,
}

/// A guest's own budget of API requests: a token bucket that refills at
/// `apiQPS` a second and holds `apiBurst`. The guest's requests wait on
/// it, never on another guest's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApiBudget {
    /// Requests a second, in thousandths.
    pub milli_qps: u64,
    /// Requests that may go at once.
    pub burst: u32,
}

impl ApiBudget {
    /// The budget of `qps` requests a second and bursts of `burst`
    /// (default: `qps` rounded up, at least 1).
    pub fn new(qps: f64, burst: Option<u32>) -> Result<Self, String> {
        if !(qps.is_finite() && (0.001..=100_000.0).contains(&qps)) {
            return Err(format!("apiQPS {qps} is not between 0.001 and 100000"));
        }
        let burst = burst.unwrap_or_else(|| (qps.ceil() as u32).max(1));
        if burst == 0 {
            return Err("apiBurst must be at least 1".into());
        }
        Ok(Self {
            milli_qps: (qps * 1000.0).round() as u64,
            burst,
        })
    }

    /// How long the bucket takes to refill one request.
    pub fn period(&self) -> Duration {
        Duration::from_secs_f64(1000.0 / self.milli_qps.max(1) as f64)
    }
}

impl Default for ControllerSettings {
    fn default() -> Self {
        Self {
            concurrency: 10,
            resync: Duration::from_secs(600),
            namespaces: Vec::new(),
            adopt_orphans: false,
            secret_values: false,
            admission_failure_policy: FailurePolicy::Fail,
            api_budget: None,
            shards: 1,
        }
    }
}

/// What the API server does when a guest cannot answer an admission
/// request (a trap, a timeout, a refused verdict): the guest-list entry's
/// `admissionFailurePolicy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FailurePolicy {
    /// Deny the request (the default).
    #[default]
    Fail,
    /// Admit it, with a warning.
    Ignore,
}

impl FailurePolicy {
    /// The name in a webhook configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fail => "Fail",
            Self::Ignore => "Ignore",
        }
    }
}
