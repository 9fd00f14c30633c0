//! Leader election on a Lease, with fencing.
//!
//! Several hosts follow one guest list; for each Lease, one of them, its
//! holder, writes. The others follow the list and compile modules, and
//! keep the caches of the guests of one shard synced, so taking such a
//! guest over needs no compile and no initial list, only a reconcile of
//! every parent; a shard is watched only by its holder, which lists it
//! when it takes it (`controller/mod.rs`).
//!
//! The lease protocol is `kube-lease-manager`'s (server-side apply on a
//! Lease). Around it this module adds what controller-runtime's leader
//! election gives:
//! - **fencing**: [`Leadership::is_leader`] is true only while the lease is
//!   ours *and* its last renewal was observed less than the renew deadline
//!   ago. A host that cannot renew (the API server unreachable, the host
//!   paused) stops writing at once, before the lease expires for the
//!   others: never two writers. The API clients enforce it on every write
//!   (`client.rs`).
//! - **prompt handover**: a standby watches the Lease, and when the holder
//!   releases it (SIGTERM), it tries at once instead of waiting for the old
//!   holder's expiry.
//! - the renew cadence of the retry period: the holder renews when the
//!   lease has `duration - retry_period` left.
//!
//! With leader election on, each guest (each shard of a guest) is a unit of
//! work with a Lease of its own, spread over the replicas (`units.rs`,
//! decided by `balance.rs`); the Lease of this module's election of one
//! host is then the host's own duties' (the guest list's Events, the
//! webhook configurations, the records of guests that left the list).

mod balance;
pub mod units;

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use kube_lease_manager::LeaseManagerBuilder;

use crate::telemetry::Metrics;
use crate::telemetry::metrics::LeaseLabels;

/// How leader election runs (the `--leader-elect-*` flags).
#[derive(Clone, Debug)]
pub struct LeaderConfig {
    /// The Lease's name.
    pub lease_name: String,
    /// Its namespace.
    pub namespace: String,
    /// This host's identity in the Lease.
    pub identity: String,
    /// How long a lease is valid after its last renewal (15 s).
    pub lease_duration: Duration,
    /// How long the holder may go without a renewal before it stops
    /// writing (10 s).
    pub renew_deadline: Duration,
    /// How often the holder renews and a standby retries (2 s).
    pub retry_period: Duration,
    /// Whether winning and losing the lease are logged at info (a
    /// replica's own Lease, which nobody else contends, is not).
    pub announce: bool,
}

/// Whether this host may write. Cheap to clone and to ask.
#[derive(Clone, Debug)]
pub struct Leadership {
    inner: Arc<State>,
}

#[derive(Debug)]
struct State {
    /// False when leader election is off: this host always writes.
    elected: bool,
    /// The lease manager says we hold the lease.
    held: AtomicBool,
    /// When a renewal of our lease was last observed.
    renewed: Mutex<Option<Instant>>,
    /// The lease is being handed back: no new work starts, the work
    /// running finishes and may still write.
    draining: AtomicBool,
    /// Work (reconciles) running under this lease.
    active: std::sync::atomic::AtomicUsize,
    renew_deadline: Duration,
    changes: tokio::sync::watch::Sender<bool>,
}

impl Leadership {
    /// Leader election off: this host is always the leader.
    pub fn always() -> Self {
        Self::new(false, Duration::MAX)
    }

    fn new(elected: bool, renew_deadline: Duration) -> Self {
        let (changes, _) = tokio::sync::watch::channel(!elected);
        Self {
            inner: Arc::new(State {
                elected,
                held: AtomicBool::new(false),
                renewed: Mutex::new(None),
                draining: AtomicBool::new(false),
                active: std::sync::atomic::AtomicUsize::new(0),
                renew_deadline,
                changes,
            }),
        }
    }

    /// Whether leader election is on.
    pub fn is_elected(&self) -> bool {
        self.inner.elected
    }

    /// Whether this host may write now: it holds the lease and renewed it
    /// within the renew deadline (always, when leader election is off).
    pub fn is_leader(&self) -> bool {
        let state = &*self.inner;
        if !state.elected {
            return true;
        }
        state.held.load(Ordering::Acquire)
            && state
                .renewed
                .lock()
                .expect("leadership lock")
                .is_some_and(|at| at.elapsed() < state.renew_deadline)
    }

    /// Whether new work may start: this host may write and is not handing
    /// the lease back.
    pub fn may_start(&self) -> bool {
        self.is_leader() && !self.inner.draining.load(Ordering::Acquire)
    }

    /// Counts a piece of work as running under this lease until the guard
    /// is dropped (a lease handed back waits for it).
    pub fn work(&self) -> Work {
        self.inner.active.fetch_add(1, Ordering::AcqRel);
        Work(self.clone())
    }

    /// Work running under this lease.
    fn active(&self) -> usize {
        self.inner.active.load(Ordering::Acquire)
    }

    /// Starts or ends handing the lease back: while draining, no new work
    /// starts.
    fn set_draining(&self, draining: bool) {
        self.inner.draining.store(draining, Ordering::Release);
        self.publish();
    }

    /// A receiver that sees every change of [`Leadership::may_start`].
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<bool> {
        self.inner.changes.subscribe()
    }

    fn set_held(&self, held: bool) {
        self.inner.held.store(held, Ordering::Release);
        if held {
            self.inner.draining.store(false, Ordering::Release);
            self.renewed();
        }
        self.publish();
    }

    /// The Lease shows another holder: fenced until a renewal of ours is
    /// observed again.
    fn superseded(&self) {
        *self.inner.renewed.lock().expect("leadership lock") = None;
        self.publish();
    }

    /// Whether this host holds the lease but has seen no renewal of its own
    /// for `overdue` (or none since it was superseded). A standby, which
    /// renews nothing, is never overdue.
    fn renewal_overdue(&self, overdue: Duration) -> bool {
        self.inner.held.load(Ordering::Acquire)
            && self
                .inner
                .renewed
                .lock()
                .expect("leadership lock")
                .is_none_or(|at| at.elapsed() > overdue)
    }

    fn renewed(&self) {
        *self.inner.renewed.lock().expect("leadership lock") = Some(Instant::now());
    }

    /// Publishes the current state if it changed.
    fn publish(&self) {
        let now = self.may_start();
        self.inner.changes.send_if_modified(|was| {
            let changed = *was != now;
            *was = now;
            changed
        });
    }
}

/// A piece of work running under a lease ([`Leadership::work`]).
pub struct Work(Leadership);

impl Drop for Work {
    fn drop(&mut self) {
        self.0.inner.active.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The running election; [`Elector::release`] ends it.
pub struct Elector {
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Elector {
    /// Stops electing and releases the lease if this host holds it, so a
    /// standby takes over without waiting for it to expire.
    pub async fn release(self, timeout: Duration) {
        let _ = self.stop.send(true);
        if tokio::time::timeout(timeout, self.task).await.is_err() {
            tracing::warn!("the lease was not released within {timeout:?}");
        }
    }
}

/// Starts leader election with `client` (which must not be fenced).
pub fn start(
    client: kube::Client,
    config: LeaderConfig,
    metrics: Arc<Metrics>,
) -> (Leadership, Elector) {
    let leadership = Leadership::new(true, config.renew_deadline);
    let elector = start_on(client, config, leadership.clone(), metrics);
    (leadership, elector)
}

/// Starts an election that drives `leadership`, which no other election
/// may drive meanwhile.
fn start_on(
    client: kube::Client,
    config: LeaderConfig,
    leadership: Leadership,
    metrics: Arc<Metrics>,
) -> Elector {
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(elect(client, config, leadership, metrics, stopped));
    Elector { stop, task }
}

async fn elect(
    client: kube::Client,
    config: LeaderConfig,
    leadership: Leadership,
    metrics: Arc<Metrics>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let gauge = metrics
        .leader
        .get_or_create(&LeaseLabels {
            name: config.lease_name.clone(),
        })
        .clone();
    gauge.set(0);
    // The Lease as the API server shows it: our renewals (for the fence)
    // and a release by the holder (for a prompt takeover).
    let released = Arc::new(tokio::sync::Notify::new());
    let observer = tokio::spawn(observe(
        client.clone(),
        config.clone(),
        leadership.clone(),
        released.clone(),
    ));
    // The fence is a deadline: re-evaluate it between events too.
    let ticker = {
        let leadership = leadership.clone();
        let gauge = gauge.clone();
        let mut changes = leadership.subscribe();
        tokio::spawn(async move {
            loop {
                leadership.publish();
                gauge.set(i64::from(*changes.borrow_and_update()));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let seconds = |d: Duration| d.as_secs().max(1);
    let grace = seconds(config.lease_duration)
        .saturating_sub(seconds(config.retry_period))
        .max(1);
    'rebuild: loop {
        let built = LeaseManagerBuilder::new(client.clone(), &config.lease_name)
            .with_namespace(&config.namespace)
            .with_identity(&config.identity)
            .with_duration(seconds(config.lease_duration))
            .with_grace(grace)
            // One field manager per identity: server-side apply's conflict
            // on `holderIdentity` is what keeps two contenders from both
            // taking an orphaned lease.
            .with_field_manager(field_manager(&config.identity))
            .build()
            .await;
        let manager = match built {
            Ok(manager) => manager,
            Err(e) => {
                tracing::warn!(lease = %config.lease_name, "leader election cannot start, retrying: {e}");
                if stopped_within(&mut stop, config.retry_period).await {
                    break 'rebuild;
                }
                continue 'rebuild;
            }
        };
        loop {
            let held = leadership.inner.held.load(Ordering::Acquire);
            let step = tokio::select! {
                result = manager.changed() => Step::Changed(result),
                // A standby's manager sleeps until the holder's lease
                // expires; when the holder releases it, start over at once.
                () = released.notified(), if !held => Step::Released,
                stopping = stop.wait_for(|s| *s) => {
                    drop(stopping);
                    Step::Stop
                }
            };
            match step {
                Step::Changed(Ok(true)) => {
                    if config.announce {
                        tracing::info!(lease = %config.lease_name, identity = %config.identity, "became the leader");
                    }
                    leadership.set_held(true);
                }
                Step::Changed(Ok(false)) => {
                    if config.announce {
                        tracing::warn!(lease = %config.lease_name, "lost the lease; writes are fenced");
                    }
                    leadership.set_held(false);
                }
                Step::Changed(Err(e)) => {
                    tracing::warn!(lease = %config.lease_name, "leader election: {e}");
                    if stopped_within(&mut stop, config.retry_period).await {
                        release(&manager, &leadership, &config).await;
                        break 'rebuild;
                    }
                }
                Step::Released => continue 'rebuild,
                Step::Stop => {
                    release(&manager, &leadership, &config).await;
                    break 'rebuild;
                }
            }
        }
    }
    leadership.set_held(false);
    gauge.set(0);
    observer.abort();
    ticker.abort();
}

/// What woke the election loop.
enum Step {
    Changed(kube_lease_manager::Result<bool>),
    Released,
    Stop,
}

/// The Lease's field manager for `identity` (field managers are at most
/// 128 bytes).
fn field_manager(identity: &str) -> String {
    let mut name = format!("wasmop-leader-{identity}");
    while name.len() > 128 {
        name.pop();
    }
    name
}

/// Waits `period`; true if a stop came first.
async fn stopped_within(stop: &mut tokio::sync::watch::Receiver<bool>, period: Duration) -> bool {
    tokio::select! {
        () = tokio::time::sleep(period) => false,
        stopping = stop.wait_for(|s| *s) => {
            let stopped = stopping.is_ok();
            drop(stopping);
            stopped
        }
    }
}

async fn release(
    manager: &kube_lease_manager::LeaseManager,
    leadership: &Leadership,
    config: &LeaderConfig,
) {
    let was_leader = leadership.inner.held.load(Ordering::Acquire);
    leadership.set_held(false);
    // The manager may hold the lease before it has said so (a standby that
    // took a released lease just as it was stopped): release whenever the
    // API server shows this identity as the holder, which `release` checks.
    match manager.release().await {
        Ok(()) if was_leader && config.announce => {
            tracing::info!(lease = %config.lease_name, "released the lease");
        }
        Ok(()) => {}
        Err(e) => tracing::warn!(lease = %config.lease_name, "could not release the lease: {e}"),
    }
}

/// Watches the Lease: records our renewals and wakes a standby when the
/// lease is released or changes hands. While it holds the lease but has
/// seen no renewal of its own for two retry periods (the watch failed and is
/// in its backoff, as after an outage), it also reads the Lease every retry
/// period, so the fence lifts as soon as a renewal lands, not when the watch
/// is back. A standby reads only the watch.
async fn observe(
    client: kube::Client,
    config: LeaderConfig,
    leadership: Leadership,
    released: Arc<tokio::sync::Notify>,
) {
    let api: Api<Lease> = Api::namespaced(client, &config.namespace);
    let selector = format!("metadata.name={}", config.lease_name);
    let mut events = watcher(api.clone(), watcher::Config::default().fields(&selector))
        .backoff(crate::retry::watch_backoff())
        .applied_objects()
        .boxed();
    let mut seen = LeaseObserver {
        identity: config.identity.clone(),
        leadership,
        released,
        last_renew: None,
    };
    let mut tick = tokio::time::interval(config.retry_period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            event = events.next() => match event {
                Some(Ok(lease)) => seen.lease(lease),
                Some(Err(_)) => {}
                None => return,
            },
            _ = tick.tick() => {
                if seen.leadership.renewal_overdue(config.retry_period * 2)
                    && let Ok(Some(lease)) = api.get_opt(&config.lease_name).await
                {
                    seen.lease(lease);
                }
            }
        }
    }
}

/// What [`observe`] makes of each state of the Lease it sees.
struct LeaseObserver {
    identity: String,
    leadership: Leadership,
    released: Arc<tokio::sync::Notify>,
    last_renew: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime>,
}

impl LeaseObserver {
    fn lease(&mut self, lease: Lease) {
        let spec = lease.spec.unwrap_or_default();
        match spec.holder_identity.as_deref() {
            Some(holder) if holder == self.identity => {
                let renew = spec.renew_time;
                if renew != self.last_renew {
                    self.last_renew = renew;
                    self.leadership.renewed();
                }
            }
            None => {
                self.leadership.superseded();
                self.released.notify_one();
            }
            // Someone else holds it: whatever our lease manager still
            // believes, stop writing now.
            Some(_) => self.leadership.superseded(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_election_the_host_always_leads() {
        assert!(Leadership::always().is_leader());
        assert!(!Leadership::always().is_elected());
    }

    #[test]
    fn a_held_lease_not_renewed_within_the_deadline_fences_writes() {
        let leadership = Leadership::new(true, Duration::from_millis(50));
        assert!(!leadership.is_leader());
        leadership.set_held(true);
        assert!(leadership.is_leader());
        std::thread::sleep(Duration::from_millis(80));
        assert!(!leadership.is_leader(), "no renewal within the deadline");
        leadership.renewed();
        assert!(leadership.is_leader());
        leadership.set_held(false);
        assert!(!leadership.is_leader());
    }

    #[test]
    fn only_a_holder_without_a_recent_renewal_is_overdue() {
        let period = Duration::from_millis(50);
        let leadership = Leadership::new(true, Duration::from_secs(10));
        assert!(
            !leadership.renewal_overdue(period),
            "a standby renews nothing"
        );
        leadership.set_held(true);
        assert!(!leadership.renewal_overdue(period), "just renewed");
        std::thread::sleep(Duration::from_millis(80));
        assert!(leadership.renewal_overdue(period));
        leadership.renewed();
        assert!(!leadership.renewal_overdue(period));
        leadership.superseded();
        assert!(
            leadership.renewal_overdue(period),
            "superseded: none seen since"
        );
    }

    #[test]
    fn a_lease_seen_with_another_holder_fences_writes_until_our_next_renewal() {
        let leadership = Leadership::new(true, Duration::from_secs(10));
        leadership.set_held(true);
        leadership.superseded();
        assert!(!leadership.is_leader());
        leadership.renewed();
        assert!(leadership.is_leader());
    }

    #[test]
    fn each_identity_has_a_field_manager_of_its_own_within_the_limit() {
        assert_ne!(field_manager("a"), field_manager("b"));
        assert!(field_manager(&"x".repeat(300)).len() <= 128);
    }
}
