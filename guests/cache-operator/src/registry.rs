//! Registering each Cache with an external registry, and removing it there
//! before the finalizer goes: the seeds' rule that an operator cleans up
//! what it created outside the cluster before it lets an object go.
//!
//! With the setting `registryUrl` (and the host granting that origin in the
//! guest's `allowedOutboundHosts`), a Ready Cache is registered once with
//! `PUT {registryUrl}/caches/{namespace}/{name}` and body
//! `{"namespace", "name", "address"}` (the Service's `name.namespace.svc:port`);
//! the condition `Registered` records it. A registry that fails leaves
//! `Registered=False` (reason `RegistryUnavailable`) and a retry after as
//! long as it has been failing (2 s, 4 s, 8 s … at most 5 min): a backoff
//! kept in the condition's transition time, so the guest stays stateless.
//!
//! A failure that may have stored something (no answer, a timeout, a 5xx)
//! is `RegistryUnavailable`; one that cannot have (a 4xx, the host refusing
//! the request) is `RegistrationRefused`, unless the Cache was registered
//! before under another address.
//!
//! On deletion a Cache that may be in the registry (registered, or
//! `RegistryUnavailable`) is removed with `DELETE` on the same URL before
//! the answer is `finalized`, a 404 counting as removed; while that fails
//! the Cache stays, with reason `CleanupBlocked` and the registry's error
//! (`Registered=True` if it was registered, `Unknown` if it may be).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use wasmop_guest::Event;
use wasmop_guest::condition::{ConditionStatus, find_condition, set_condition};
use wasmop_guest::http::{self, Method};

use crate::api::{Cache, CacheStatus};

/// Condition type: the Cache is in the registry.
pub const REGISTERED: &str = "Registered";
/// Reason of `Registered=False`: the registry could not be reached or
/// refused the registration.
pub const REGISTRY_UNAVAILABLE: &str = "RegistryUnavailable";
/// Reason of `Registered=True` while deleting fails: the finalizer waits.
pub const CLEANUP_BLOCKED: &str = "CleanupBlocked";
/// Reason of `Registered=False` once the Cache is out of the registry.
pub const DEREGISTERED: &str = "Deregistered";
/// Reason of `Registered=False` when a registration cannot have been
/// stored: the registry answered 4xx, or the host refused the request.
pub const REGISTRATION_REFUSED: &str = "RegistrationRefused";

/// Shortest and longest wait before trying the registry again.
const MIN_RETRY_SECONDS: u32 = 2;
const MAX_RETRY_SECONDS: u32 = 300;

/// The registry of one Cache.
pub struct Registry<'a> {
    url: String,
    cache: &'a Cache,
}

impl<'a> Registry<'a> {
    /// The registry `registry_url` names for `cache`; none without the
    /// setting.
    pub fn of(registry_url: Option<&str>, cache: &'a Cache) -> Option<Self> {
        let base = registry_url?.trim_end_matches('/');
        let namespace = cache.metadata.namespace.as_deref().unwrap_or("default");
        Some(Self {
            url: format!("{base}/caches/{namespace}/{}", cache.name()),
            cache,
        })
    }

    /// Sets the `Registered` condition at the Cache's generation; whether
    /// it changed.
    fn set(
        &self,
        status: &mut CacheStatus,
        state: ConditionStatus,
        reason: &str,
        message: &str,
        now: &Time,
    ) -> bool {
        set_condition(
            &mut status.conditions,
            REGISTERED,
            state,
            reason,
            message,
            self.cache.metadata.generation,
            now,
        )
    }

    /// Where clients reach the Cache: its Service.
    fn address(&self) -> String {
        let namespace = self
            .cache
            .metadata
            .namespace
            .as_deref()
            .unwrap_or("default");
        format!(
            "{}.{namespace}.svc:{}",
            self.cache.name(),
            self.cache.spec.port()
        )
    }

    /// Registers a Ready Cache unless `status` shows it registered at its
    /// current address. Returns an Event for a change and, after a failure,
    /// the seconds to wait before the next try.
    pub fn register(&self, status: &mut CacheStatus, now: &Time) -> (Option<Event>, Option<u32>) {
        let address = self.address();
        let message = format!("registered as {address}");
        if find_condition(&status.conditions, REGISTERED)
            .is_some_and(|c| c.status == ConditionStatus::True.as_str() && c.message == message)
        {
            return (None, None);
        }
        let body = serde_json::json!({
            "namespace": self.cache.metadata.namespace.as_deref().unwrap_or("default"),
            "name": self.cache.name(),
            "address": address,
        })
        .to_string();
        match http::send(Method::Put, &self.url, Some(body.as_bytes())) {
            Ok(r) if r.is_success() => {
                self.set(status, ConditionStatus::True, "Registered", &message, now);
                (
                    Some(Event::normal(
                        "Registered",
                        format!("{message} at {}", self.url),
                    )),
                    None,
                )
            }
            Ok(r) => self.unavailable(
                status,
                &format!("the registry answered {}", r.status),
                r.status < 500,
                now,
            ),
            Err(e) => {
                let definite = !matches!(e, http::HttpError::Failed(_));
                self.unavailable(status, &e.to_string(), definite, now)
            }
        }
    }

    /// Records a failed registration; `definite` when it cannot have been
    /// stored.
    fn unavailable(
        &self,
        status: &mut CacheStatus,
        error: &str,
        definite: bool,
        now: &Time,
    ) -> (Option<Event>, Option<u32>) {
        let message = format!("registering at {} failed: {error}", self.url);
        let reason = if definite && !may_be_registered(status) {
            REGISTRATION_REFUSED
        } else {
            REGISTRY_UNAVAILABLE
        };
        let changed = self.set(status, ConditionStatus::False, reason, &message, now);
        let event = changed.then(|| Event::warning(reason, message));
        (event, Some(retry_after(status, now)))
    }

    /// Removes the Cache from the registry if it may be there (see
    /// [`may_be_registered`]). A 404 counts as removed.
    pub fn deregister(&self, previous: Option<&CacheStatus>, now: &Time) -> Deregistration {
        let Some(mut status) = previous.cloned() else {
            return Deregistration::NotRegistered;
        };
        if !may_be_registered(&status) {
            return Deregistration::NotRegistered;
        }
        let registered = find_condition(&status.conditions, REGISTERED)
            .is_some_and(|c| c.status == ConditionStatus::True.as_str());
        let error = match http::send(Method::Delete, &self.url, None) {
            Ok(r) if r.is_success() || r.status == 404 => {
                self.set(
                    &mut status,
                    ConditionStatus::False,
                    DEREGISTERED,
                    &format!("removed from {}", self.url),
                    now,
                );
                return Deregistration::Removed(status);
            }
            Ok(r) => format!("the registry answered {}", r.status),
            Err(e) => e.to_string(),
        };
        let message = format!(
            "deleting {} failed: {error}; the Cache stays until it succeeds",
            self.url
        );
        let state = if registered {
            ConditionStatus::True
        } else {
            ConditionStatus::Unknown
        };
        let changed = self.set(&mut status, state, CLEANUP_BLOCKED, &message, now);
        let event = changed.then(|| Event::warning(CLEANUP_BLOCKED, message));
        let retry_after = retry_after(&status, now);
        Deregistration::Blocked {
            status,
            event,
            retry_after,
        }
    }
}

/// Whether the Cache may be in the registry: registered, or a registration
/// that failed in a way that may have stored it (a `PUT` without an answer
/// can have landed, and a Cache whose address changed is still registered
/// under the old one), and no `DELETE` succeeded since.
fn may_be_registered(status: &CacheStatus) -> bool {
    find_condition(&status.conditions, REGISTERED)
        .is_some_and(|c| c.reason != DEREGISTERED && c.reason != REGISTRATION_REFUSED)
}

/// What [`Registry::deregister`] did.
#[derive(Debug, PartialEq)]
pub enum Deregistration {
    /// The Cache was not registered: nothing to remove.
    NotRegistered,
    /// Removed; the status to report.
    Removed(CacheStatus),
    /// The registry failed: the finalizer waits.
    Blocked {
        /// The status saying `CleanupBlocked` and the registry's error.
        status: CacheStatus,
        /// A Warning when the Cache did not report it already.
        event: Option<Event>,
        /// Seconds before the next try.
        retry_after: u32,
    },
}

/// As long as the `Registered` condition has been in its state, within
/// [`MIN_RETRY_SECONDS`] and [`MAX_RETRY_SECONDS`]: retries double.
fn retry_after(status: &CacheStatus, now: &Time) -> u32 {
    let since = find_condition(&status.conditions, REGISTERED).map_or(0, |c| {
        now.0.duration_since(c.last_transition_time.0).as_secs()
    });
    u32::try_from(since.clamp(0, i64::from(MAX_RETRY_SECONDS)))
        .unwrap_or(MAX_RETRY_SECONDS)
        .max(MIN_RETRY_SECONDS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};
    use wasmop_guest::time::time_at;

    fn at(seconds: u64) -> Time {
        time_at(UNIX_EPOCH + Duration::from_secs(seconds))
    }

    /// Sets `status`'s `Registered` condition.
    fn registered_as(
        status: &mut CacheStatus,
        state: ConditionStatus,
        reason: &str,
        message: &str,
        seconds: u64,
    ) {
        set_condition(
            &mut status.conditions,
            REGISTERED,
            state,
            reason,
            message,
            None,
            &at(seconds),
        );
    }

    fn cache() -> Cache {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "apps.example.com/v1alpha1", "kind": "Cache",
            "metadata": {"name": "c1", "namespace": "team", "generation": 2},
            "spec": {"port": 6380},
        }))
        .unwrap()
    }

    #[test]
    fn a_failed_registration_is_refused_or_unavailable_and_backs_off() {
        let cache = cache();
        let registry = Registry::of(Some("http://r.example.com:8089/"), &cache).unwrap();
        assert_eq!(registry.url, "http://r.example.com:8089/caches/team/c1");
        assert_eq!(registry.address(), "c1.team.svc:6380");
        let mut status = CacheStatus::default();
        // Natively no request is sent: a refusal that stored nothing.
        let (event, wait) = registry.register(&mut status, &at(100));
        assert_eq!(event.unwrap().reason, REGISTRATION_REFUSED);
        assert_eq!(wait, Some(MIN_RETRY_SECONDS));
        let condition = find_condition(&status.conditions, REGISTERED).unwrap();
        assert_eq!(
            (condition.status.as_str(), condition.reason.as_str()),
            ("False", REGISTRATION_REFUSED)
        );
        // Still failing 40 s later: no new Event, the wait has grown.
        let (event, wait) = registry.register(&mut status, &at(140));
        assert!(event.is_none());
        assert_eq!(wait, Some(40));
        let (_, wait) = registry.register(&mut status, &at(100_000));
        assert_eq!(wait, Some(MAX_RETRY_SECONDS));
        assert!(Registry::of(None, &cache).is_none());

        // Registered under an old address: a refused re-registration leaves
        // it possibly registered there.
        let mut moved = CacheStatus::default();
        registered_as(
            &mut moved,
            ConditionStatus::True,
            "Registered",
            "registered as c1.team.svc:6379",
            1,
        );
        let (event, _) = registry.register(&mut moved, &at(2));
        assert_eq!(event.unwrap().reason, REGISTRY_UNAVAILABLE);
    }

    #[test]
    fn deletion_waits_for_the_registry_once_a_registration_was_tried() {
        let cache = cache();
        let registry = Registry::of(Some("http://r.example.com"), &cache).unwrap();
        assert_eq!(
            registry.deregister(None, &at(1)),
            Deregistration::NotRegistered
        );
        let mut status = CacheStatus::default();
        assert_eq!(
            registry.deregister(Some(&status), &at(1)),
            Deregistration::NotRegistered
        );
        registered_as(
            &mut status,
            ConditionStatus::False,
            DEREGISTERED,
            "removed",
            1,
        );
        assert_eq!(
            registry.deregister(Some(&status), &at(1)),
            Deregistration::NotRegistered
        );
        // A registration the registry refused stored nothing.
        registered_as(
            &mut status,
            ConditionStatus::False,
            REGISTRATION_REFUSED,
            "x",
            1,
        );
        assert_eq!(
            registry.deregister(Some(&status), &at(1)),
            Deregistration::NotRegistered
        );
        // A failed registration may have landed (or left the old address
        // registered): natively every request fails, so deletion waits,
        // and says the Cache may be registered.
        registered_as(
            &mut status,
            ConditionStatus::False,
            REGISTRY_UNAVAILABLE,
            "x",
            1,
        );
        let Deregistration::Blocked { status: maybe, .. } =
            registry.deregister(Some(&status), &at(2))
        else {
            panic!("a registration that may have landed must block the finalizer");
        };
        let condition = find_condition(&maybe.conditions, REGISTERED).unwrap();
        assert_eq!(
            (condition.status.as_str(), condition.reason.as_str()),
            ("Unknown", CLEANUP_BLOCKED)
        );
        registered_as(
            &mut status,
            ConditionStatus::True,
            "Registered",
            "registered as c1.team.svc:6380",
            3,
        );
        let Deregistration::Blocked {
            status: blocked,
            event,
            retry_after,
        } = registry.deregister(Some(&status), &at(4))
        else {
            panic!("a failing registry must block the finalizer");
        };
        assert_eq!(event.unwrap().reason, CLEANUP_BLOCKED);
        assert_eq!(retry_after, MIN_RETRY_SECONDS);
        let condition = find_condition(&blocked.conditions, REGISTERED).unwrap();
        assert_eq!(
            (condition.status.as_str(), condition.reason.as_str()),
            ("True", CLEANUP_BLOCKED)
        );
        assert!(
            condition
                .message
                .contains("http://r.example.com/caches/team/c1"),
            "{}",
            condition.message
        );
    }
}
