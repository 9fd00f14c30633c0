//! Units of work spread over the replicas: with leader election on, each
//! guest, or each shard of a guest with several, has a Lease of its own,
//! `<lease name>-<guest>` or `<lease name>-<guest>-<k>` (interface
//! contract), and one replica at a time holds it, with the fencing of
//! [`super::Leadership`].
//!
//! Each replica announces itself with a Lease of its own,
//! `<lease name>-replica-<identity>`, that it renews. A balancer, every
//! [`TICK`], reads every Lease of the namespace from one watch and decides
//! ([`super::balance`]) what this replica contends for and what it hands
//! back: with R live replicas and S units it holds at most ceil(S/R). A
//! unit handed back first drains (no new reconcile starts, the running
//! ones finish and may still write), then its Lease is released, so the
//! next holder takes it at once: never two writers, never none for longer
//! than a lease duration.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::Api;
use kube::runtime::{WatchStreamExt, reflector, watcher};

use super::balance::{self, Action, Doing, Unit};
use super::{Elector, LeaderConfig, Leadership};
use crate::telemetry::Metrics;

/// How often the balancer looks at the Leases.
const TICK: Duration = Duration::from_millis(500);

/// The units of this host, and their elections. Cheap to clone.
#[derive(Clone)]
pub struct Units {
    /// `None`: leader election is off, every unit is this host's.
    inner: Option<Arc<Inner>>,
    /// The host's own leadership, what every unit is without election.
    always: Leadership,
}

struct Inner {
    client: kube::Client,
    base: LeaderConfig,
    metrics: Arc<Metrics>,
    units: Mutex<BTreeMap<String, Entry>>,
    wake: tokio::sync::Notify,
    stop: tokio::sync::watch::Sender<bool>,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// Units being released in the background, which [`Units::release`]
    /// waits for.
    releases: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    replica: Mutex<Option<Elector>>,
}

impl Inner {
    /// Releases a unit in the background: the balancer and a guest that
    /// stops do not wait for it, a host that shuts down does.
    fn release_in_background(&self, release: impl Future<Output = ()> + Send + 'static) {
        let mut releases = self.releases.lock().expect("releases lock");
        releases.retain(|task| !task.is_finished());
        releases.push(tokio::spawn(release));
    }
}

/// A unit as this host runs it.
struct Entry {
    /// Controllers that use it (a restarting guest's old and new one).
    refs: usize,
    /// The guest whose unit it is.
    guest: String,
    leadership: Leadership,
    elector: Option<Elector>,
    releasing: bool,
    /// Handed back: not contended for again before this, unless a
    /// replica leaves first (it was handed back to make room for another).
    cooling_until: Option<Instant>,
}

impl Entry {
    fn doing(&self) -> Doing {
        match (&self.elector, self.releasing) {
            (_, true) => Doing::Releasing,
            (None, false) => Doing::Idle,
            (Some(_), false) if self.leadership.inner.held.load(Ordering::Acquire) => {
                Doing::Holding
            }
            (Some(_), false) => Doing::Contending,
        }
    }
}

/// A unit held for a guest's controller: its leadership, and the
/// registration that ends when this is dropped.
pub struct Held {
    /// Whether this host may work on the unit now.
    pub leadership: Leadership,
    _registered: Option<Registered>,
}

struct Registered {
    inner: Arc<Inner>,
    name: String,
}

impl Drop for Registered {
    fn drop(&mut self) {
        let mut units = self.inner.units.lock().expect("units lock");
        let Some(entry) = units.get_mut(&self.name) else {
            return;
        };
        entry.refs -= 1;
        if entry.refs == 0
            && let Some(entry) = units.remove(&self.name)
            && let Some(elector) = entry.elector
        {
            let timeout = self.inner.base.renew_deadline;
            self.inner.release_in_background(elector.release(timeout));
        }
        self.inner.wake.notify_one();
    }
}

/// The Lease name of a guest's unit: `<base>-<guest>`, or
/// `<base>-<guest>-<k>` for shard k of a guest with several.
pub fn lease_name(base: &str, guest: &str, shard: Option<u16>) -> String {
    match shard {
        None => format!("{base}-{guest}"),
        Some(k) => format!("{base}-{guest}-{k}"),
    }
}

/// The Lease name of the replica `identity`: `<base>-replica-<identity>`,
/// the identity made a DNS subdomain (lower case, other characters `-`).
pub fn replica_lease_name(base: &str, identity: &str) -> String {
    let cleaned: String = identity
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '-' | '.') => c,
            _ => '-',
        })
        .collect();
    let mut name = format!("{base}-replica-{}", cleaned.trim_matches(['-', '.']));
    name.truncate(253);
    name.trim_end_matches(['-', '.']).to_owned()
}

impl Units {
    /// Leader election off: every unit is `always`'s.
    pub fn unelected(always: Leadership) -> Self {
        Self {
            inner: None,
            always,
        }
    }

    /// Starts this replica's own Lease and the balancer, with `client`
    /// (not fenced) and the election settings `base` (its Lease name is
    /// the prefix of every unit's).
    pub fn start(
        client: kube::Client,
        base: LeaderConfig,
        metrics: Arc<Metrics>,
        host: Leadership,
    ) -> Self {
        let (replica, replica_elector) = super::start(
            client.clone(),
            LeaderConfig {
                lease_name: replica_lease_name(&base.lease_name, &base.identity),
                announce: false,
                ..base.clone()
            },
            metrics.clone(),
        );
        drop(replica);
        let (stop, _) = tokio::sync::watch::channel(false);
        let inner = Arc::new(Inner {
            client,
            base,
            metrics,
            units: Mutex::default(),
            wake: tokio::sync::Notify::new(),
            stop,
            tasks: Mutex::default(),
            releases: Mutex::default(),
            replica: Mutex::new(Some(replica_elector)),
        });
        let task = tokio::spawn(balance(inner.clone()));
        inner.tasks.lock().expect("tasks lock").push(task);
        Self {
            inner: Some(inner),
            always: host,
        }
    }

    /// Registers the unit of `guest`'s shard `shard` (none for a guest of
    /// one shard; its Lease contended for as the balance allows) and
    /// returns its leadership.
    pub fn hold(&self, guest: &str, shard: Option<u16>) -> Held {
        let Some(inner) = &self.inner else {
            return Held {
                leadership: self.always.clone(),
                _registered: None,
            };
        };
        let name = lease_name(&inner.base.lease_name, guest, shard);
        let leadership = {
            let mut units = inner.units.lock().expect("units lock");
            let entry = units.entry(name.clone()).or_insert_with(|| Entry {
                refs: 0,
                guest: guest.to_owned(),
                leadership: Leadership::new(true, inner.base.renew_deadline),
                elector: None,
                releasing: false,
                cooling_until: None,
            });
            entry.refs += 1;
            entry.leadership.clone()
        };
        inner.wake.notify_one();
        Held {
            leadership,
            _registered: Some(Registered {
                inner: inner.clone(),
                name,
            }),
        }
    }

    /// Stops balancing and releases every unit this host holds and its own
    /// Lease, so the others take them at once (call once the controllers
    /// have stopped). Units already being released (a stopped guest's, one
    /// handed back) are waited for too: a host that exits before their
    /// release lands leaves them to expire.
    pub async fn release(&self, timeout: Duration) {
        let Some(inner) = &self.inner else { return };
        let _ = inner.stop.send(true);
        for task in inner.tasks.lock().expect("tasks lock").drain(..) {
            task.abort();
        }
        let electors: Vec<Elector> = inner
            .units
            .lock()
            .expect("units lock")
            .values_mut()
            .filter_map(|e| e.elector.take())
            .collect();
        let releases = std::mem::take(&mut *inner.releases.lock().expect("releases lock"));
        let (_, background) = tokio::join!(
            futures::future::join_all(electors.into_iter().map(|e| e.release(timeout))),
            tokio::time::timeout(timeout, futures::future::join_all(releases)),
        );
        if background.is_err() {
            tracing::warn!("units were still being released after {timeout:?}");
        }
        let replica = inner.replica.lock().expect("replica lock").take();
        if let Some(replica) = replica {
            replica.release(timeout).await;
        }
    }
}

/// Every [`TICK`], and whenever a unit comes or goes, acts on what
/// [`balance::decide`] says of the Leases.
async fn balance(inner: Arc<Inner>) {
    let api: Api<Lease> = Api::namespaced(inner.client.clone(), &inner.base.namespace);
    let (leases, writer) = reflector::store();
    let listed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = listed.clone();
    let watch = watcher(api, watcher::Config::default())
        .backoff(crate::retry::watch_backoff())
        .reflect(writer)
        .for_each(move |event| {
            if let Ok(watcher::Event::InitDone) = event {
                seen.store(true, Ordering::Release);
            }
            std::future::ready(())
        });
    let watching = tokio::spawn(watch);
    let mut stop = inner.stop.subscribe();
    // The live replicas the last step counted.
    let mut replicas = 0;
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = inner.wake.notified() => {}
            _ = stop.wait_for(|s| *s) => break,
        }
        // Nothing is decided before the first list: every unit would look
        // free.
        if listed.load(Ordering::Acquire) {
            replicas = step(&inner, &leases.state(), replicas);
        }
    }
    watching.abort();
}

/// One decision on the Leases `leases`, `before` live replicas counted
/// the step before; returns the live replicas counted now.
fn step(inner: &Arc<Inner>, leases: &[Arc<Lease>], before: usize) -> usize {
    let now = Timestamp::now();
    let base = &inner.base;
    let live = |lease: &Lease| -> Option<String> {
        let spec = lease.spec.as_ref()?;
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty())?;
        let renewed = spec.renew_time.as_ref()?.0;
        let duration = i64::from(
            spec.lease_duration_seconds
                .unwrap_or(base.lease_duration.as_secs() as i32),
        );
        (renewed + SignedDuration::from_secs(duration) > now).then_some(holder)
    };
    let prefix = format!("{}-replica-", base.lease_name);
    let replicas = leases
        .iter()
        .filter(|l| {
            l.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with(&prefix))
        })
        .filter(|l| live(l).is_some())
        .count();
    let holders: BTreeMap<&str, Option<String>> = leases
        .iter()
        .filter_map(|l| Some((l.metadata.name.as_deref()?, live(l))))
        .collect();
    let mut units = inner.units.lock().expect("units lock");
    // A replica left: the units handed back to make room stop cooling, so
    // what the leaving one releases is taken at once.
    if replicas < before {
        for entry in units.values_mut() {
            entry.cooling_until = None;
        }
    }
    let instant = Instant::now();
    let view: Vec<Unit> = units
        .iter()
        .map(|(name, entry)| {
            let doing = entry.doing();
            let holder = holders.get(name.as_str()).cloned().flatten();
            let lease = match holder.clone() {
                None => balance::Lease::Free,
                Some(holder) if holder == base.identity => match doing {
                    // Ours on paper only (an election that just ended).
                    Doing::Idle => balance::Lease::Free,
                    _ => balance::Lease::Ours,
                },
                Some(_) => balance::Lease::Theirs,
            };
            Unit {
                name: name.clone(),
                group: entry.guest.clone(),
                holder: holder.filter(|_| lease != balance::Lease::Free),
                lease,
                doing,
                cooling: entry.cooling_until.is_some_and(|until| until > instant),
            }
        })
        .collect();
    for action in balance::decide(&base.identity, &view, replicas) {
        match action {
            Action::Contend(name) => {
                let Some(entry) = units.get_mut(&name) else {
                    continue;
                };
                tracing::debug!(lease = %name, "contending for a unit");
                entry.elector = Some(super::start_on(
                    inner.client.clone(),
                    LeaderConfig {
                        lease_name: name,
                        ..base.clone()
                    },
                    entry.leadership.clone(),
                    inner.metrics.clone(),
                ));
            }
            Action::Stop(name) => {
                let Some(entry) = units.get_mut(&name) else {
                    continue;
                };
                if let Some(elector) = entry.elector.take() {
                    inner.release_in_background(elector.release(base.renew_deadline));
                }
            }
            Action::Release(name) => {
                let Some(entry) = units.get_mut(&name) else {
                    continue;
                };
                entry.releasing = true;
                entry.leadership.set_draining(true);
                tracing::info!(lease = %name, "handing a unit back to balance the replicas");
                inner.release_in_background(hand_back(inner.clone(), name));
            }
        }
    }
    replicas
}

/// Waits for the unit's running work to finish (at most the renew
/// deadline), then releases its Lease.
async fn hand_back(inner: Arc<Inner>, name: String) {
    let leadership = {
        let units = inner.units.lock().expect("units lock");
        let Some(entry) = units.get(&name) else {
            return;
        };
        entry.leadership.clone()
    };
    let deadline = Instant::now() + inner.base.renew_deadline;
    while leadership.active() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let elector = {
        let mut units = inner.units.lock().expect("units lock");
        units.get_mut(&name).and_then(|e| e.elector.take())
    };
    if let Some(elector) = elector {
        elector.release(inner.base.renew_deadline).await;
    }
    let mut units = inner.units.lock().expect("units lock");
    if let Some(entry) = units.get_mut(&name) {
        entry.releasing = false;
        entry.cooling_until = Some(Instant::now() + inner.base.lease_duration);
        entry.leadership.set_draining(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_leases_are_named_after_the_guest_and_shard() {
        assert_eq!(lease_name("wasmop", "cache", None), "wasmop-cache");
        assert_eq!(lease_name("wasmop", "cache", Some(2)), "wasmop-cache-2");
    }

    #[test]
    fn a_replica_lease_name_is_a_dns_subdomain() {
        assert_eq!(
            replica_lease_name("wasmop", "Pod-7f_a1B2"),
            "wasmop-replica-pod-7f-a1b2"
        );
        let long = replica_lease_name("wasmop", &"x".repeat(400));
        assert!(long.len() <= 253);
        assert_eq!(replica_lease_name("w", "_a_"), "w-replica-a");
    }

    #[tokio::test]
    async fn without_election_every_unit_is_the_hosts() {
        let units = Units::unelected(Leadership::always());
        let held = units.hold("cache", None);
        assert!(held.leadership.may_start());
    }
}
