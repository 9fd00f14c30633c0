//! Per-key exponential backoff for failed reconciles.
//!
//! kube-runtime's `error_policy` keeps no state, so the host keeps its own:
//! the n-th consecutive failure of one object waits `5 ms * 2^(n-1)`, capped at
//! 1000 s — controller-runtime's default item rate limiter, so operators
//! behave the way their users already know. A success forgets the key.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;

/// First retry delay (controller-runtime: `ItemExponentialFailureRateLimiter(5ms, 1000s)`).
pub const BASE_DELAY: Duration = Duration::from_millis(5);
/// Longest retry delay.
pub const MAX_DELAY: Duration = Duration::from_secs(1000);
/// Longest retry delay of a failure that says only that the API server is
/// unavailable (see `ReconcileError::is_unavailable`).
pub const UNAVAILABLE_MAX_DELAY: Duration = Duration::from_secs(2);

/// Failure counts per key.
#[derive(Debug)]
pub struct Backoff<K> {
    failures: Mutex<HashMap<K, u32>>,
}

impl<K> Default for Backoff<K> {
    fn default() -> Self {
        Self {
            failures: Mutex::default(),
        }
    }
}

impl<K: Eq + Hash + Clone> Backoff<K> {
    /// Records one more failure of `key` and returns how long to wait.
    pub fn fail(&self, key: &K) -> Duration {
        let mut map = self.failures.lock().expect("backoff lock");
        let n = map.entry(key.clone()).or_insert(0);
        *n = n.saturating_add(1);
        delay_for(*n)
    }

    /// Forgets `key` after a success.
    pub fn succeed(&self, key: &K) {
        self.failures.lock().expect("backoff lock").remove(key);
    }

    /// The delay the last failure of `key` asked for (zero when it has
    /// not failed).
    pub fn delay(&self, key: &K) -> Duration {
        match self.failures(key) {
            0 => Duration::ZERO,
            n => delay_for(n),
        }
    }

    /// Forgets every key `live` says is gone: objects deleted while they
    /// were failing (bounded memory).
    pub fn retain(&self, mut live: impl FnMut(&K) -> bool) {
        self.failures
            .lock()
            .expect("backoff lock")
            .retain(|k, _| live(k));
    }

    /// Forgets every failure (the API server is back after an outage:
    /// what failed during it says nothing about the keys).
    pub fn clear(&self) {
        self.failures.lock().expect("backoff lock").clear();
    }

    /// How many keys are failing.
    pub fn len(&self) -> usize {
        self.failures.lock().expect("backoff lock").len()
    }

    /// Whether no key is failing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Consecutive failures of `key` so far.
    pub fn failures(&self, key: &K) -> u32 {
        self.failures
            .lock()
            .expect("backoff lock")
            .get(key)
            .copied()
            .unwrap_or(0)
    }
}

/// Delay after the `n`-th consecutive failure (n >= 1).
pub fn delay_for(n: u32) -> Duration {
    let exp = n.saturating_sub(1).min(40);
    BASE_DELAY
        .saturating_mul(1u32 << exp.min(31))
        .min(MAX_DELAY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_from_five_milliseconds_to_a_thousand_seconds() {
        assert_eq!(delay_for(1), Duration::from_millis(5));
        assert_eq!(delay_for(2), Duration::from_millis(10));
        assert_eq!(delay_for(11), Duration::from_millis(5 * 1024));
        assert_eq!(delay_for(30), MAX_DELAY);
        assert_eq!(delay_for(u32::MAX), MAX_DELAY);
    }

    #[test]
    fn a_success_resets_the_key_and_keys_are_independent() {
        let b = Backoff::default();
        b.fail(&"a");
        assert_eq!(b.fail(&"a"), Duration::from_millis(10));
        assert_eq!(b.fail(&"b"), Duration::from_millis(5));
        b.succeed(&"a");
        assert_eq!(b.failures(&"a"), 0);
        assert_eq!(b.fail(&"a"), Duration::from_millis(5));
        assert_eq!(b.delay(&"a"), Duration::from_millis(5));
    }

    #[test]
    fn clearing_forgets_every_key() {
        let b = Backoff::default();
        for _ in 0..12 {
            b.fail(&"a");
        }
        b.fail(&"b");
        b.clear();
        assert!(b.is_empty());
        assert_eq!(b.fail(&"a"), BASE_DELAY);
    }

    #[test]
    fn keys_of_gone_objects_are_forgotten() {
        let b = Backoff::default();
        b.fail(&"gone");
        b.fail(&"here");
        b.retain(|k| *k == "here");
        assert_eq!(b.len(), 1);
        assert_eq!(b.delay(&"gone"), Duration::ZERO);
    }
}
