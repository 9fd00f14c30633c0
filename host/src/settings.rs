//! The per-guest settings the guest list sets: parsed by `source`, used by
//! `host`, `controller` and `webhook`. A leaf: it imports no other module of
//! the host.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Largest `settings` value of one guest, as JSON text (the guest list's
/// `settings`, or `--settings` of `run`, `render` and `test`). Settings
/// configure a guest; data belongs in objects the guest reads.
pub const MAX_SETTINGS_BYTES: usize = 64 << 10;

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
