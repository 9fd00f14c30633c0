//! The host's Prometheus metrics.
//!
//! controller-runtime's names and labels, with `controller` (and the work
//! queue's `name`) set to the guest's name, so dashboards and alerts made
//! for kubebuilder operators work as they are; and wasmop's own, which no
//! peer has (`wasmop_*`). No label holds an object: cardinality stays
//! bounded by guests × reasons × results.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::process::ProcessCollector;
pub use super::queue::QueueLabels;
use super::queue::{QueueFamilies, QueueTracker};

/// `controller`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabels {
    /// The guest's name.
    pub controller: String,
}

/// `controller`, `result` (success, error, requeue, requeue_after).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// The guest's name.
    pub controller: String,
    /// How the reconcile ended.
    pub result: &'static str,
}

/// `name` of the lease.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LeaseLabels {
    /// The lease's name.
    pub name: String,
}

/// `code`, `method`, `host`, `controller` of an API request.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RestLabels {
    /// The HTTP status, or `<error>` when no response came.
    pub code: String,
    /// The HTTP method.
    pub method: String,
    /// The API server's host:port.
    pub host: String,
    /// The guest the request was made for; empty for the host's own
    /// (the guest list, leader election, webhook configurations).
    pub controller: String,
}

/// `guest`, `kind` of the objects a host caches for a guest.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CachedLabels {
    /// The guest's name.
    pub guest: String,
    /// The kind (the primary kind for the parents).
    pub kind: String,
}

/// `guest`, `shard` of a guest's shard.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ShardLabels {
    /// The guest's name.
    pub guest: String,
    /// The shard, `0` for a guest of one shard.
    pub shard: String,
}

/// `guest`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GuestLabels {
    /// The guest's name.
    pub guest: String,
}

/// `guest`, `sha256` of a module version it runs, and the `contract` (WIT
/// package) that module was built against.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GuestInfoLabels {
    /// The guest's name.
    pub guest: String,
    /// The digest of its module.
    pub sha256: String,
    /// The contract version, e.g. `wasmop:operator@0.1.0`.
    pub contract: &'static str,
}

/// `guest`, `export` (describe, reconcile).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ExportLabels {
    /// The guest's name.
    pub guest: String,
    /// The export called.
    pub export: &'static str,
}

/// `guest`, `reason` (one of the host's reasons).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    /// The guest's name.
    pub guest: String,
    /// Why.
    pub reason: &'static str,
}

/// `guest`, `result`: how a swap ended (success, or the reason it was
/// refused), or a shadow comparison (same, different, failed).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SwapLabels {
    /// The guest's name.
    pub guest: String,
    /// How the swap ended.
    pub result: &'static str,
}

/// `guest`, `method`, `host`, `code` of a guest's outbound HTTP request.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutboundLabels {
    /// The guest's name.
    pub guest: String,
    /// The HTTP method.
    pub method: String,
    /// `scheme://host:port` the guest asked for.
    pub host: String,
    /// The HTTP status, `refused` when the host refused the request, or
    /// `error` when no response came.
    pub code: String,
}

/// `webhook` of a webhook request: the path served.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WebhookLabels {
    /// `/mutate/<guest>`, `/validate/<guest>`, `/convert/<guest>`, or
    /// `/unknown` for a guest not served.
    pub webhook: String,
}

/// `webhook`, `code` of a webhook request.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WebhookCodeLabels {
    /// As in [`WebhookLabels`].
    pub webhook: String,
    /// The HTTP status of the answer.
    pub code: String,
}

/// `guest`, `phase` of a rollout (Stable, Shadowing, Progressing,
/// Promoted, Aborted).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RolloutPhaseLabels {
    /// The guest's name.
    pub guest: String,
    /// The phase.
    pub phase: &'static str,
}

/// `guest`, `version` (`stable` or `candidate`) of a rollout.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RolloutParentsLabels {
    /// The guest's name.
    pub guest: String,
    /// Which version serves them.
    pub version: &'static str,
}

/// controller-runtime's buckets for `controller_runtime_reconcile_time_seconds`.
const RECONCILE_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0,
];

fn reconcile_histogram() -> Histogram {
    Histogram::new(RECONCILE_BUCKETS.iter().copied())
}

/// client-go's work-queue buckets: 10 ns × 10^n, twelve of them.
fn queue_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1e-8, 10.0, 12))
}

/// Guest calls take microseconds to a deadline of seconds: 1 µs × 4^n.
fn call_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1e-6, 4.0, 12))
}

/// Compiles take milliseconds to tens of seconds.
fn compile_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.01, 2.0, 14))
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// Every metric the host exports. Cheap to share (`Arc`).
#[derive(Debug)]
pub struct Metrics {
    /// `controller_runtime_reconcile_total{controller,result}`.
    pub reconcile_total: Family<ResultLabels, Counter>,
    /// `controller_runtime_reconcile_errors_total{controller}`.
    pub reconcile_errors: Family<ControllerLabels, Counter>,
    /// `controller_runtime_terminal_reconcile_errors_total{controller}`.
    pub terminal_errors: Family<ControllerLabels, Counter>,
    /// `controller_runtime_reconcile_time_seconds{controller}`.
    pub reconcile_time: Histograms<ControllerLabels>,
    /// `controller_runtime_max_concurrent_reconciles{controller}`.
    pub max_concurrent: Family<ControllerLabels, Gauge>,
    /// `controller_runtime_active_workers{controller}`.
    pub active_workers: Family<ControllerLabels, Gauge>,
    /// `workqueue_adds_total{name,controller}`.
    pub queue_adds: Family<QueueLabels, Counter>,
    /// `workqueue_queue_duration_seconds{name,controller}`.
    pub queue_duration: Histograms<QueueLabels>,
    /// `workqueue_work_duration_seconds{name,controller}`.
    pub work_duration: Histograms<QueueLabels>,
    /// `workqueue_retries_total{name,controller}`.
    pub queue_retries: Family<QueueLabels, Counter>,
    /// `leader_election_master_status{name}`.
    pub leader: Family<LeaseLabels, Gauge>,
    /// `rest_client_requests_total{code,method,host,controller}`.
    pub rest_requests: Family<RestLabels, Counter>,
    /// `wasmop_guest_info{guest,sha256,contract}`: 1 for each version a
    /// guest runs (two during a rollout).
    pub guest_info: Family<GuestInfoLabels, Gauge>,
    /// `wasmop_guest_call_duration_seconds{guest,export}`.
    pub guest_call: Histograms<ExportLabels>,
    /// `wasmop_guest_failures_total{guest,reason}`.
    pub guest_failures: Family<ReasonLabels, Counter>,
    /// `wasmop_guest_swaps_total{guest,result}`.
    pub guest_swaps: Family<SwapLabels, Counter>,
    /// `wasmop_module_compile_seconds`: compiles (cache misses) only.
    pub module_compile: Histogram,
    /// `wasmop_writes_skipped_total{guest}`: applies the zero-write check
    /// avoided.
    pub writes_skipped: Family<GuestLabels, Counter>,
    /// `wasmop_guest_http_requests_total{guest,method,host,code}`.
    pub outbound_requests: Family<OutboundLabels, Counter>,
    /// `controller_runtime_webhook_requests_total{webhook,code}`: `webhook`
    /// is the path served (`/validate/<guest>`), `code` the HTTP status.
    pub webhook_requests: Family<WebhookCodeLabels, Counter>,
    /// `controller_runtime_webhook_latency_seconds{webhook}`.
    pub webhook_latency: Histograms<WebhookLabels>,
    /// `controller_runtime_webhook_requests_in_flight{webhook}`.
    pub webhook_in_flight: Family<WebhookLabels, Gauge>,
    /// `wasmop_guest_shadow_reconciles_total{guest,result}`: `same`,
    /// `different` or `failed`.
    pub shadow_reconciles: Family<SwapLabels, Counter>,
    /// `wasmop_guest_shadow_skipped_total{guest}`: reconciles not shadowed
    /// because the guest's shadow queue was full.
    pub shadow_skipped: Family<GuestLabels, Counter>,
    /// `wasmop_rollout_phase{guest,phase}`: 1 for the phase each guest's
    /// rollout is in, 0 for the others.
    pub rollout_phase: Family<RolloutPhaseLabels, Gauge>,
    /// `wasmop_rollout_parents{guest,version}`: parents each version serves.
    pub rollout_parents: Family<RolloutParentsLabels, Gauge>,
    /// `wasmop_guest_deadline_seconds{guest}`: the deadline of one call of
    /// the version each guest runs.
    pub guest_deadline: Family<GuestLabels, Gauge<f64, AtomicU64>>,
    /// `wasmop_webhook_failures_total{webhook}`: requests the guest gave no
    /// verdict or conversion for (it failed, was not running, or its answer
    /// was refused), decided by the failure policy.
    pub webhook_failures: Family<WebhookLabels, Counter>,
    /// `wasmop_cached_objects{guest,kind}`: the objects this host caches
    /// for each guest, parents and children of the shards it watches.
    pub cached_objects: Family<CachedLabels, Gauge>,
    /// `wasmop_shard_held{guest,shard}`: 1 while this host reconciles the
    /// shard, 0 while it does not.
    pub shard_held: Family<ShardLabels, Gauge>,
    queues: Arc<Mutex<BTreeMap<String, Arc<QueueTracker>>>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            reconcile_total: Family::default(),
            reconcile_errors: Family::default(),
            terminal_errors: Family::default(),
            reconcile_time: Family::new_with_constructor(reconcile_histogram),
            max_concurrent: Family::default(),
            active_workers: Family::default(),
            queue_adds: Family::default(),
            queue_duration: Family::new_with_constructor(queue_histogram),
            work_duration: Family::new_with_constructor(queue_histogram),
            queue_retries: Family::default(),
            leader: Family::default(),
            rest_requests: Family::default(),
            guest_info: Family::default(),
            guest_call: Family::new_with_constructor(call_histogram),
            guest_failures: Family::default(),
            guest_swaps: Family::default(),
            module_compile: compile_histogram(),
            writes_skipped: Family::default(),
            outbound_requests: Family::default(),
            webhook_requests: Family::default(),
            webhook_latency: Family::new_with_constructor(reconcile_histogram),
            webhook_in_flight: Family::default(),
            shadow_reconciles: Family::default(),
            shadow_skipped: Family::default(),
            rollout_phase: Family::default(),
            rollout_parents: Family::default(),
            guest_deadline: Family::default(),
            webhook_failures: Family::default(),
            cached_objects: Family::default(),
            shard_held: Family::default(),
            queues: Arc::default(),
        }
    }
}

impl Metrics {
    /// A fresh set of metrics.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// The registry that exports every metric.
    pub fn registry(self: &Arc<Self>) -> Registry {
        let mut r = Registry::default();
        r.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller.",
            self.reconcile_total.clone(),
        );
        r.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller.",
            self.reconcile_errors.clone(),
        );
        r.register(
            "controller_runtime_terminal_reconcile_errors",
            "Total number of terminal reconciliation errors per controller.",
            self.terminal_errors.clone(),
        );
        r.register(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller.",
            self.reconcile_time.clone(),
        );
        r.register(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller.",
            self.max_concurrent.clone(),
        );
        r.register(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller.",
            self.active_workers.clone(),
        );
        r.register(
            "workqueue_adds",
            "Total number of adds handled by workqueue.",
            self.queue_adds.clone(),
        );
        r.register(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested.",
            self.queue_duration.clone(),
        );
        r.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            self.work_duration.clone(),
        );
        r.register(
            "workqueue_retries",
            "Total number of retries handled by workqueue.",
            self.queue_retries.clone(),
        );
        r.register("leader_election_master_status", "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master.", self.leader.clone());
        r.register(
            "rest_client_requests",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            self.rest_requests.clone(),
        );
        r.register(
            "wasmop_guest_info",
            "The module versions (sha256) each guest runs, and the contract each was built against.",
            self.guest_info.clone(),
        );
        r.register(
            "wasmop_guest_call_duration_seconds",
            "How long guest calls take, per export.",
            self.guest_call.clone(),
        );
        r.register(
            "wasmop_guest_failures",
            "Guest calls and answers that failed, by reason.",
            self.guest_failures.clone(),
        );
        r.register(
            "wasmop_guest_swaps",
            "Module version changes per guest, by result.",
            self.guest_swaps.clone(),
        );
        r.register(
            "wasmop_module_compile_seconds",
            "How long compiling a module version took (cache misses).",
            self.module_compile.clone(),
        );
        r.register(
            "wasmop_writes_skipped",
            "Child applies the zero-write check avoided.",
            self.writes_skipped.clone(),
        );
        r.register(
            "wasmop_guest_http_requests",
            "Outbound HTTP requests of guests, by method, host and status (`refused`: denied by the host).",
            self.outbound_requests.clone(),
        );
        r.register(
            "controller_runtime_webhook_requests",
            "Total number of admission requests by HTTP status code.",
            self.webhook_requests.clone(),
        );
        r.register(
            "controller_runtime_webhook_latency_seconds",
            "Histogram of the latency of processing admission requests.",
            self.webhook_latency.clone(),
        );
        r.register(
            "controller_runtime_webhook_requests_in_flight",
            "Current number of admission requests being served.",
            self.webhook_in_flight.clone(),
        );
        r.register(
            "wasmop_guest_shadow_reconciles",
            "Reconciles a candidate version answered beside the stable one, by result (same, different, failed).",
            self.shadow_reconciles.clone(),
        );
        r.register(
            "wasmop_guest_shadow_skipped",
            "Reconciles not shadowed because the guest's shadow queue was full.",
            self.shadow_skipped.clone(),
        );
        r.register(
            "wasmop_rollout_phase",
            "The phase of each guest's rollout: 1 for the current phase, 0 for the others.",
            self.rollout_phase.clone(),
        );
        r.register(
            "wasmop_rollout_parents",
            "Parents each version of a guest serves (stable, candidate).",
            self.rollout_parents.clone(),
        );
        r.register(
            "wasmop_guest_deadline_seconds",
            "The deadline of one call of the version each guest runs.",
            self.guest_deadline.clone(),
        );
        r.register(
            "wasmop_webhook_failures",
            "Webhook requests the guest gave no answer for, decided by the failure policy.",
            self.webhook_failures.clone(),
        );
        r.register(
            "wasmop_cached_objects",
            "Objects this host caches for each guest: parents and children of the shards it watches.",
            self.cached_objects.clone(),
        );
        r.register(
            "wasmop_shard_held",
            "1 while this host reconciles the guest's shard, 0 while it does not.",
            self.shard_held.clone(),
        );
        r.register_collector(Box::new(QueueGauges(self.queues.clone())));
        r.register_collector(Box::new(ProcessCollector));
        r
    }

    /// Makes every per-controller series of guest `guest` exist at zero, as
    /// controller-runtime does when a controller starts (a dashboard sees
    /// the guest before its first reconcile); returns its
    /// `controller_runtime_max_concurrent_reconciles` gauge to set.
    pub fn init_controller(&self, guest: &str) -> Gauge {
        let controller = ControllerLabels {
            controller: guest.to_owned(),
        };
        for result in ["success", "error", "requeue", "requeue_after"] {
            drop(self.reconcile_total.get_or_create(&ResultLabels {
                controller: guest.to_owned(),
                result,
            }));
        }
        drop(self.reconcile_errors.get_or_create(&controller));
        drop(self.terminal_errors.get_or_create(&controller));
        drop(self.reconcile_time.get_or_create(&controller));
        drop(self.active_workers.get_or_create(&controller));
        let queue = QueueLabels {
            name: guest.to_owned(),
            controller: guest.to_owned(),
        };
        drop(self.queue_adds.get_or_create(&queue));
        drop(self.queue_retries.get_or_create(&queue));
        drop(self.queue_duration.get_or_create(&queue));
        drop(self.work_duration.get_or_create(&queue));
        drop(self.writes_skipped.get_or_create(&GuestLabels {
            guest: guest.to_owned(),
        }));
        self.max_concurrent.get_or_create(&controller).clone()
    }

    /// The queue tracker of guest `guest` (made on first use).
    pub fn queue(&self, guest: &str) -> Arc<QueueTracker> {
        self.queues
            .lock()
            .expect("queues lock")
            .entry(guest.to_owned())
            .or_insert_with(|| {
                Arc::new(QueueTracker::new(
                    guest,
                    QueueFamilies {
                        adds: self.queue_adds.clone(),
                        queue_duration: self.queue_duration.clone(),
                        work_duration: self.work_duration.clone(),
                    },
                ))
            })
            .clone()
    }

    /// Counts a failed call or answer of guest `guest`
    /// (`wasmop_guest_failures_total`).
    pub fn guest_failed(&self, guest: &str, reason: wasmop_contract::Reason) {
        self.guest_failures
            .get_or_create(&ReasonLabels {
                guest: guest.to_owned(),
                reason: reason.as_str(),
            })
            .inc();
    }

    /// Forgets everything about guest `guest` that describes it as running
    /// (its queue and version); counters stay, as Prometheus expects.
    pub fn forget_guest(&self, guest: &str) {
        self.queues.lock().expect("queues lock").remove(guest);
        self.guest_deadline.remove(&GuestLabels {
            guest: guest.to_owned(),
        });
    }

    /// Renders every metric in the Prometheus text format (0.0.4).
    pub fn render(registry: &Registry) -> String {
        let mut out = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut out, registry)
            .expect("writing to a String cannot fail");
        out
    }
}

/// `workqueue_depth`, `workqueue_unfinished_work_seconds` and
/// `workqueue_longest_running_processor_seconds`, computed on each scrape
/// from the queue trackers.
#[derive(Debug)]
struct QueueGauges(Arc<Mutex<BTreeMap<String, Arc<QueueTracker>>>>);

impl Collector for QueueGauges {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let depth: Family<QueueLabels, Gauge> = Family::default();
        let unfinished: Family<QueueLabels, Gauge<f64, AtomicU64>> = Family::default();
        let longest: Family<QueueLabels, Gauge<f64, AtomicU64>> = Family::default();
        for queue in self.0.lock().expect("queues lock").values() {
            let (sum, max) = queue.unfinished();
            depth
                .get_or_create(queue.labels())
                .set(queue.depth() as i64);
            unfinished.get_or_create(queue.labels()).set(sum);
            longest.get_or_create(queue.labels()).set(max);
        }
        depth.encode(encoder.encode_descriptor(
            "workqueue_depth",
            "Current depth of workqueue.",
            None,
            depth.metric_type(),
        )?)?;
        unfinished.encode(encoder.encode_descriptor(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been observed by work_duration.",
            None,
            unfinished.metric_type(),
        )?)?;
        longest.encode(encoder.encode_descriptor(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
            None,
            longest.metric_type(),
        )?)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_carries_controller_runtimes_names() {
        let metrics = Metrics::new();
        let registry = metrics.registry();
        metrics
            .reconcile_total
            .get_or_create(&ResultLabels {
                controller: "cache-operator".into(),
                result: "success",
            })
            .inc();
        metrics.queue("cache-operator");
        let text = Metrics::render(&registry);
        for name in [
            "controller_runtime_reconcile_total{controller=\"cache-operator\",result=\"success\"} 1",
            "# TYPE workqueue_depth gauge",
            "workqueue_depth{name=\"cache-operator\",controller=\"cache-operator\"} 0",
            "# TYPE process_resident_memory_bytes gauge",
            "# TYPE process_cpu_seconds_total counter",
        ] {
            assert!(text.contains(name), "{name} missing in:\n{text}");
        }
    }
}
