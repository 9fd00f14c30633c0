//! A shadow candidate beside a reconcile: the same request, answered by
//! the candidate version with every outbound request refused; its answer
//! validated as if it were to be applied, compared with the stable
//! version's, and never applied.
//!
//! The reconcile does not wait for it, nor share its CPU: once the stable
//! version has answered, the request (the wire form the stable call was
//! given, with the candidate's settings) and the stable answer go to the
//! guest's shadow queue. One thread per guest, at the lowest scheduling
//! priority (nice 19), works the queue: it calls the candidate, validates
//! and compares. It starts a comparison only while none of the guest's
//! reconciles runs, or once the comparison has waited [`MAX_DEFER`]: a
//! priority orders the threads of one CPU, but the two CPUs of a VM may be
//! two threads of one core, where any work beside a reconcile slows it.
//! The queue holds at most [`MAX_WAITING`] comparisons and
//! [`MAX_WAITING_BYTES`] of JSON text, the requests and the stable answers
//! together (an answer waits as the text the guest gave, checked again on
//! the shadow thread, not as parsed JSON, which takes several times its
//! text); a reconcile that finds it full is not shadowed and is counted in
//! `wasmop_guest_shadow_skipped_total`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::time::{Duration, Instant};

use kube::ResourceExt;
use kube::api::DynamicObject;
use tokio::sync::Semaphore;
use wasmop_contract::Reason;

use crate::events::Events;
use crate::model::{EventType, ReconcileRequest, ReconcileResponse, Request};
use crate::protected::ProtectedObjects;
use crate::rollout::Tracker;
use crate::rollout::compare::{self, Outcome};
use crate::runtime::Guest;
use crate::sink;
use crate::telemetry::Metrics as Telemetry;
use crate::telemetry::metrics::{GuestLabels, SwapLabels};
use crate::validate::{self, ParentScope, Rules, Validated};

/// Longest difference named in a `ShadowDifferent` Event.
const MAX_DIFFERENCE: usize = 600;

/// Comparisons a guest's shadow queue holds at most.
pub(super) const MAX_WAITING: usize = 4096;

/// Bytes of requests and stable answers (their JSON text) a guest's shadow
/// queue holds at most.
pub(super) const MAX_WAITING_BYTES: usize = 64 << 20;

/// How long a comparison waits for a pause in the guest's reconciles.
pub(super) const MAX_DEFER: Duration = Duration::from_secs(10);

/// How often a waiting comparison looks for that pause.
const PAUSE_POLL: Duration = Duration::from_millis(1);

/// The shadow queue of one guest, shared by its namespace scopes.
pub(super) struct Queue {
    jobs: SyncSender<Job>,
    /// Bytes of the requests waiting or being compared.
    bytes: Arc<AtomicUsize>,
}

impl Queue {
    /// Starts the guest's low-priority shadow thread; `reconciles` are the
    /// permits of the guest's reconciles (`concurrency` of them), all free
    /// while none runs. Call from within the Tokio runtime: the thread
    /// records Events through it.
    pub(super) fn start(guest: &str, reconciles: Arc<Semaphore>, concurrency: usize) -> Arc<Self> {
        let (jobs, waiting) = sync_channel(MAX_WAITING);
        let bytes = Arc::new(AtomicUsize::new(0));
        let runtime = tokio::runtime::Handle::current();
        let worker_bytes = bytes.clone();
        let paused = move || reconciles.available_permits() >= concurrency;
        let started = std::thread::Builder::new()
            .name(format!("shadow-{guest}"))
            .spawn(move || work(&waiting, &worker_bytes, &runtime, &paused));
        if let Err(e) = started {
            // The receiver is gone with the closure: every try to shadow is
            // refused and counted as skipped.
            tracing::warn!(guest, "no shadow thread, candidates are not shadowed: {e}");
        }
        Arc::new(Self { jobs, bytes })
    }

    /// Queues `job` unless the queue is full (by count or by bytes).
    fn push(&self, job: Job) -> bool {
        let size = job.size;
        if self.bytes.fetch_add(size, Ordering::AcqRel) + size > MAX_WAITING_BYTES {
            self.bytes.fetch_sub(size, Ordering::AcqRel);
            return false;
        }
        match self.jobs.try_send(job) {
            Ok(()) => true,
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.bytes.fetch_sub(size, Ordering::AcqRel);
                false
            }
        }
    }
}

/// The thread's lowest priority: its work runs on CPU nothing else wants.
fn lowest_priority() {
    // On Linux the nice value is per thread: this lowers only the caller.
    if let Err(e) = rustix::process::setpriority_process(None, 19) {
        tracing::debug!("the shadow thread keeps its priority: {e}");
    }
}

fn work(
    waiting: &Receiver<Job>,
    bytes: &AtomicUsize,
    runtime: &tokio::runtime::Handle,
    paused: &dyn Fn() -> bool,
) {
    lowest_priority();
    let _runtime = runtime.enter();
    while let Ok(job) = waiting.recv() {
        while !paused() && job.queued.elapsed() < MAX_DEFER {
            std::thread::sleep(PAUSE_POLL);
        }
        let size = job.size;
        job.run();
        bytes.fetch_sub(size, Ordering::AcqRel);
    }
}

/// Where a shadow's outcome goes: the guest's queue, its Events and
/// metrics, and what its answers are checked against.
#[derive(Clone)]
pub(super) struct Sink {
    /// The guest's shadow queue.
    pub(super) queue: Arc<Queue>,
    /// The guest's name.
    pub(super) guest: String,
    /// Where `ShadowDifferent` Events go.
    pub(super) events: Arc<Events>,
    /// Where the shadow's counts go.
    pub(super) telemetry: Arc<Telemetry>,
    /// The host's own objects, which no answer may write.
    pub(super) protected: ProtectedObjects,
    /// The parents' kind, for the Events' object reference.
    pub(super) primary: kube::core::ApiResource,
}

/// A candidate to call beside one reconcile; tell it the stable answer.
pub(super) struct Shadow {
    sink: Sink,
    /// The stable version, whose answer is checked again by its rules.
    stable: Guest,
    candidate: Guest,
    tracker: Arc<Tracker>,
    /// The candidate's own request, where its kinds or bounds differ from
    /// the stable version's; `None`: the stable version's.
    own: Option<Arc<Request>>,
    now: u64,
    reference: k8s_openapi::api::core::v1::ObjectReference,
    uid: String,
    namespace: Option<String>,
    span: tracing::Span,
}

impl Shadow {
    /// A shadow of `candidate` beside the reconcile of `parent` at `now`:
    /// on the stable version's request (`own: None`) or on its own.
    pub(super) fn new(
        sink: Sink,
        parent: &DynamicObject,
        stable: &Guest,
        candidate: &Guest,
        tracker: &Arc<Tracker>,
        own: Option<Arc<Request>>,
        now: u64,
    ) -> Self {
        Self {
            reference: kube::Resource::object_ref(parent, &sink.primary),
            sink,
            stable: stable.clone(),
            candidate: candidate.clone(),
            tracker: tracker.clone(),
            own,
            now,
            uid: parent.uid().unwrap_or_default(),
            namespace: parent.metadata.namespace.clone(),
            span: tracing::info_span!("candidate", sha256 = %short(candidate.digest())),
        }
    }

    /// The stable version's answer as it gave it (one that passed the
    /// host's checks), or why it failed, and the request it was given (with
    /// the related objects a Metacontroller customize hook selected, `null`
    /// for any other guest): queues the comparison.
    pub(super) fn stable_answered(
        mut self,
        answer: Result<ReconcileResponse, String>,
        mut wire: ReconcileRequest,
        related: serde_json::Value,
    ) {
        let size = wire_bytes(&wire) + answer.as_ref().map_or_else(String::len, answer_bytes);
        let request = match self.own.take() {
            Some(own) => Work::Own(own),
            None => {
                wire.settings = self.candidate.settings().map(str::to_owned);
                Work::Wire(wire, related)
            }
        };
        let queue = self.sink.queue.clone();
        let (telemetry, guest) = (self.sink.telemetry.clone(), self.sink.guest.clone());
        let job = Job {
            queued: Instant::now(),
            stable: answer,
            request,
            size,
            shadow: self,
        };
        if !queue.push(job) {
            tracing::debug!("not shadowed: the shadow queue is full");
            telemetry
                .shadow_skipped
                .get_or_create(&GuestLabels { guest })
                .inc();
        }
    }
}

/// The JSON text a request carries: what a waiting comparison holds.
fn wire_bytes(wire: &ReconcileRequest) -> usize {
    wire.parent.len()
        + wire
            .observed
            .iter()
            .chain(&wire.related)
            .map(|o| o.object.len() + o.api_version.len() + o.kind.len() + o.name.len())
            .sum::<usize>()
}

/// The JSON text an answer carries.
fn answer_bytes(answer: &ReconcileResponse) -> usize {
    answer.children.iter().map(String::len).sum::<usize>()
        + answer.status.as_ref().map_or(0, String::len)
        + answer
            .events
            .iter()
            .map(|e| e.reason.len() + e.message.len())
            .sum::<usize>()
        + answer
            .keep
            .iter()
            .map(|k| k.api_version.len() + k.kind.len() + k.name.len())
            .sum::<usize>()
}

/// The request a candidate answers.
enum Work {
    /// The stable version's wire request, with the candidate's settings,
    /// and a hook guest's related objects.
    Wire(ReconcileRequest, serde_json::Value),
    /// The candidate's own request.
    Own(Arc<Request>),
}

/// One comparison waiting for the shadow thread.
struct Job {
    queued: Instant,
    shadow: Shadow,
    request: Work,
    /// The stable version's answer as given, or why it failed.
    stable: Result<ReconcileResponse, String>,
    size: usize,
}

impl Job {
    fn run(self) {
        let Self {
            shadow,
            request,
            stable,
            ..
        } = self;
        let Shadow {
            sink,
            stable: stable_guest,
            candidate,
            tracker,
            now,
            reference,
            uid,
            namespace,
            span,
            ..
        } = shadow;
        let reply = span.in_scope(|| match request {
            Work::Wire(wire, related) => candidate.call_reconcile_wire_offline(&wire, &related),
            Work::Own(own) => candidate.call_reconcile_offline(&own, now),
        });
        let check = |guest: &Guest, raw| {
            validate::validate(
                Rules {
                    description: guest.description(),
                    bounds: guest.limits().bounds(),
                    parent: ParentScope {
                        namespace: namespace.as_deref(),
                        namespaced_children: guest.follows_metacontroller(),
                    },
                    protected: &sink.protected,
                },
                raw,
            )
        };
        let answer = reply
            .result
            .map_err(|e| e.to_string())
            .and_then(|raw| check(&candidate, raw).map_err(|v| format!("invalid answer: {v}")));
        // The stable answer passed these checks once already.
        let stable = stable.and_then(|raw| check(&stable_guest, raw).map_err(|v| v.to_string()));
        let (result, difference) = judge(answer, stable);
        sink.telemetry
            .shadow_reconciles
            .get_or_create(&SwapLabels {
                guest: sink.guest.clone(),
                result,
            })
            .inc();
        let Some(difference) = difference else {
            return;
        };
        tracing::debug!(result, "shadow: {difference}");
        if result == "different" && tracker.first_difference(&uid) {
            sink.events.host(
                &reference,
                EventType::Normal,
                Reason::ShadowDifferent,
                format!(
                    "candidate sha256 {}… answers differently from the running version: {difference}",
                    short(candidate.digest())
                ),
                "Shadow",
            );
        }
    }
}

/// The result label and the first difference of the two answers.
fn judge(
    candidate: Result<Validated, String>,
    stable: Result<Validated, String>,
) -> (&'static str, Option<String>) {
    match (candidate, stable) {
        (Err(e), _) => (
            "failed",
            Some(sink::one_line(
                &format!("the candidate failed: {e}"),
                MAX_DIFFERENCE,
            )),
        ),
        (Ok(_), Err(e)) => (
            "different",
            Some(sink::one_line(
                &format!("the stable version failed and the candidate did not: {e}"),
                MAX_DIFFERENCE,
            )),
        ),
        (Ok(candidate), Ok(stable)) => match compare::compare(&stable, &candidate) {
            Outcome::Same => ("same", None),
            Outcome::Different(first) => {
                ("different", Some(sink::one_line(&first, MAX_DIFFERENCE)))
            }
        },
    }
}

fn short(digest: &str) -> &str {
    &digest[..digest.len().min(12)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shadow_thread_alone_runs_at_the_lowest_priority() {
        let before = rustix::process::getpriority_process(None).expect("priority");
        let inside = std::thread::spawn(|| {
            lowest_priority();
            rustix::process::getpriority_process(None).expect("priority")
        })
        .join()
        .expect("thread");
        assert_eq!(inside, 19);
        assert_eq!(
            rustix::process::getpriority_process(None).expect("priority"),
            before,
            "the calling thread keeps its priority"
        );
    }

    #[test]
    fn a_request_counts_the_json_text_it_carries() {
        let object = |text: &str| crate::model::ObservedObject {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "a".into(),
            object: text.into(),
        };
        let wire = ReconcileRequest {
            parent: "{}".into(),
            observed: vec![object("{\"a\":1}")],
            related: vec![object("{}")],
            ..ReconcileRequest::default()
        };
        assert_eq!(wire_bytes(&wire), 2 + (7 + 12) + (2 + 12));
    }

    #[test]
    fn an_answer_counts_the_json_text_it_carries() {
        let answer = ReconcileResponse {
            children: vec!["{\"a\":1}".into(), "{}".into()],
            status: Some("{\"big\":\"xxxx\"}".into()),
            events: vec![crate::model::Event {
                event_type: EventType::Normal,
                reason: "Made".into(),
                message: "it".into(),
            }],
            ..ReconcileResponse::default()
        };
        assert_eq!(answer_bytes(&answer), (7 + 2) + 14 + (4 + 2));
    }
}
