//! One reconcile: observed state in, guest call, checks, writes out.
//!
//! watch → queue → **here**: gather the parent and its children from the
//! caches, call the guest in a fresh sandbox, validate its answer (all or
//! nothing), write changed children behind the ownership fence
//! ([`super::apply`]), prune unwanted ones, write the status, record events
//! and drive the finalizer. Every reconcile runs in a tracing span naming
//! the guest, the object, its generation and a reconcile id, which the
//! guest's own log lines (written on a blocking thread) carry too.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt as _;
use kube::ResourceExt;
use kube::api::DynamicObject;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use tracing::Instrument as _;
use wasmop_contract::Reason;

use super::apply::{self, Owner, Target, Written};
use super::compact::Compact;
use super::index::{ChildKey, NotReady};
use super::progress::{self, Refusal};
use super::related::{RelatedBounds, RelatedTooLarge};
use super::shadow::Shadow;
use super::shards::SHARD_LABEL;
use super::status::{self, HostCondition};
use super::{Context, backoff, finalizer, gather};
use crate::model::{EventType, Request};
use crate::rollout::Assignment;
use crate::runtime::{CallError, Guest};
use crate::sink;
use crate::telemetry::metrics::{ControllerLabels, GuestLabels, ResultLabels};
use crate::validate::{self, ParentScope, Rules, Validated, Violation};

/// How long a reconcile waits for the child caches' first lists before it
/// fails (and is retried with backoff) instead of waiting for ever.
pub const CHILD_CACHE_TIMEOUT: Duration = Duration::from_secs(30);

/// When a scope tries again to move a parent to its shard after its
/// attempts failed.
const RELABEL_RETRY: Duration = Duration::from_secs(10);

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// The guest call failed (trap, limit, or its own error).
    #[error("{0}")]
    Call(#[from] CallError),
    /// The guest's answer broke a rule; nothing was applied.
    #[error("invalid guest response, nothing applied: {0}")]
    Invalid(#[from] Violation),
    /// A desired child's name is taken by an object the parent does not
    /// control; that object was left as it is.
    #[error(
        "{kind} {name} already exists and is not this parent's child ({owner}); it was left as it is"
    )]
    ChildNameTaken {
        /// The child's kind.
        kind: String,
        /// Its name.
        name: String,
        /// Who controls the existing object.
        owner: String,
    },
    /// A desired child's name was taken when the host created it and free
    /// again when it looked; the next reconcile creates it.
    #[error("{kind} {name} was deleted while it was being created")]
    ChildVanished {
        /// The child's kind.
        kind: String,
        /// Its name.
        name: String,
    },
    /// The guest's answers keep the host writing without progress.
    #[error("{0}")]
    NoProgress(#[from] Refusal),
    /// The children cannot be known: a child watch is failing.
    #[error("{0}")]
    Watch(#[from] NotReady),
    /// The related objects would pass the guest's bounds; the guest was
    /// not called.
    #[error("{0}")]
    RelatedTooLarge(#[from] RelatedTooLarge),
    /// The API server refused a write.
    #[error("{action}: {source}")]
    Api {
        /// What the host was doing.
        action: String,
        /// The API error.
        source: kube::Error,
    },
    /// The blocking guest task did not finish.
    #[error("guest task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}

impl ReconcileError {
    /// A trapping guest's own stack for the log, innermost first, as
    /// `f <- g <- h`; empty for any other failure.
    pub fn stack(&self) -> String {
        match self {
            Self::Call(e) => e.frames().join(" <- "),
            _ => String::new(),
        }
    }

    /// The reason for the Warning event, the condition and metrics.
    pub fn reason(&self) -> Reason {
        match self {
            Self::Call(e) => e.reason(),
            Self::Invalid(v) => v.reason(),
            Self::ChildNameTaken { .. } => Reason::ChildNameTaken,
            Self::NoProgress(Refusal::Recreated { .. }) => Reason::ChildRecreated,
            Self::NoProgress(Refusal::Flapping(_)) => Reason::ChildFlapping,
            Self::Watch(_) => Reason::WatchFailed,
            Self::RelatedTooLarge(_) => Reason::RelatedTooLarge,
            Self::Api {
                source: kube::Error::Api(status),
                ..
            } if status.code == 403 => Reason::Forbidden,
            Self::Api { .. } | Self::ChildVanished { .. } => Reason::ApplyFailed,
            Self::Join(_) => Reason::GuestTaskFailed,
        }
    }

    /// Whether the failure is the guest's answer's (a call that failed, an
    /// answer the host refused, a child it cannot have), not the host's or
    /// the API server's: what a rollout counts against a candidate.
    pub fn is_guests(&self) -> bool {
        match self {
            Self::Call(e) => !matches!(e, CallError::PoolExhausted(_)),
            Self::Invalid(_) | Self::NoProgress(_) | Self::ChildNameTaken { .. } => true,
            // The API server refused what the answer asked for (invalid,
            // forbidden, denied by a webhook); a conflict or throttling is
            // nobody's answer.
            Self::Api {
                source: kube::Error::Api(status),
                ..
            } => (400..500).contains(&status.code) && !matches!(status.code, 404 | 409 | 429),
            // What users create in the cluster, not the guest's answer.
            Self::Watch(_)
            | Self::RelatedTooLarge(_)
            | Self::Api { .. }
            | Self::ChildVanished { .. }
            | Self::Join(_) => false,
        }
    }

    /// Whether retrying may help.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Call(e) => e.is_retryable(),
            _ => true,
        }
    }

    /// Whether the failure says only that the API server is unavailable
    /// (unreachable, or answering 502/503/504), nothing about the parent:
    /// such failures retry within [`backoff::UNAVAILABLE_MAX_DELAY`].
    pub fn is_unavailable(&self) -> bool {
        match self {
            Self::Api { source, .. } => unavailable(source),
            _ => false,
        }
    }

    /// Turns an API error into a reconcile error saying what was being done.
    pub fn api(action: impl Into<String>) -> impl FnOnce(kube::Error) -> ReconcileError {
        let action = action.into();
        move |source| ReconcileError::Api { action, source }
    }
}

/// See [`ReconcileError::is_unavailable`]. A 500 is left out: a failing
/// admission webhook answers 500 too, and must back off in full.
fn unavailable(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(status) => matches!(status.code, 502..=504),
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => true,
        _ => false,
    }
}

/// Numbers reconciles within this process, for the span.
static NEXT_RECONCILE: AtomicU64 = AtomicU64::new(1);

/// Reconciles one parent. Called by the kube-runtime controller, never twice
/// at once for the same object; at most the guest's `concurrency` run at
/// once across all its namespace scopes.
pub async fn reconcile(parent: Arc<Compact>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let key = ObjectRef::from_obj_with(&*parent, ctx.kinds.primary.resource.clone());
    let queue_key = super::queue_key(parent.metadata.namespace.as_deref(), &parent.name_any());
    let id = NEXT_RECONCILE.fetch_add(1, Ordering::Relaxed);
    let span = tracing::info_span!(
        "reconcile",
        guest = %ctx.guest_name,
        object = %queue_key,
        generation = parent.metadata.generation.unwrap_or_default(),
        id,
        queue_wait_ms = tracing::field::Empty,
    );
    async move {
        ctx.pacer.started(&key);
        // Counted before the check: a lease handed back waits for this
        // reconcile to finish, or it sees the lease going and does not start.
        let _work = ctx.leadership.work();
        // A standby keeps its caches warm but does not reconcile; the
        // leader it becomes reconciles every parent.
        if !ctx.leadership.may_start() {
            ctx.queue.forget(&queue_key);
            return Ok(Action::await_change());
        }
        // Labelled with this shard but hashed to another (a user's edit, a
        // label of another count): moved there, never reconciled here.
        let (namespace, name) = (parent.metadata.namespace.as_deref(), parent.name_any());
        if ctx.shard.is_some_and(|s| !s.owns(namespace, &name)) {
            let moved = match (&ctx.relabeller, parent.metadata.uid.as_deref()) {
                (Some(relabeller), Some(uid)) => {
                    let have = parent.labels().get(SHARD_LABEL).map(String::as_str);
                    relabeller.relabel(namespace, &name, uid, have).await
                }
                _ => true,
            };
            if !moved {
                return Ok(Action::requeue(RELABEL_RETRY));
            }
            ctx.queue.forget(&queue_key);
            return Ok(Action::await_change());
        }
        let Ok(_permit) = ctx.permits.clone().acquire_owned().await else {
            return Ok(Action::await_change());
        };
        tracing::debug!("reconcile started");
        let tele = &ctx.telemetry;
        let labels = ControllerLabels {
            controller: ctx.guest_name.clone(),
        };
        let waited = ctx.queue.start(tele, &queue_key, id);
        tracing::Span::current().record(
            "queue_wait_ms",
            u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
        );
        let workers = tele.active_workers.get_or_create(&labels).clone();
        workers.inc();
        let started = std::time::Instant::now();
        // The store may not have seen the host's own last write of the
        // parent yet: decide on the parent as that write left it.
        let parent = ctx.last_writes.decide_on(&parent, || ctx.parents.get(&key));
        let result = reconcile_inner(&parent, &ctx).await;
        workers.dec();
        ctx.queue.finish(tele, id);
        tele.reconcile_time
            .get_or_create(&labels)
            .observe(started.elapsed().as_secs_f64());
        let result_label = |result: &'static str| ResultLabels {
            controller: ctx.guest_name.clone(),
            result,
        };
        match result {
            Ok(action) => {
                let elapsed_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
                tracing::debug!(elapsed_us, "reconciled");
                ctx.backoff.succeed(&key);
                ctx.metrics.record_success();
                let (label, after) = match &action.requeue {
                    Requeue::After(delay) => ("requeue_after", Some(*delay)),
                    Requeue::No => ("success", None),
                };
                tele.reconcile_total.get_or_create(&result_label(label)).inc();
                if let Some(after) = after {
                    ctx.queue.add(tele, queue_key, after);
                }
                Ok(action.into())
            }
            Err(e) => {
                ctx.metrics.record_failure();
                tele.reconcile_total.get_or_create(&result_label("error")).inc();
                tele.reconcile_errors.get_or_create(&labels).inc();
                tele.guest_failed(&ctx.guest_name, e.reason());
                if e.is_retryable() {
                    let delay = retry_delay(&e, ctx.backoff.fail(&key));
                    tele.queue_retries.get_or_create(ctx.queue.labels()).inc();
                    ctx.queue.add(tele, queue_key, delay);
                    tracing::warn!(reason = %e.reason(), retry_in = ?delay, guest_stack = %e.stack(), "reconcile failed: {}", sink::cut(&e.to_string(), sink::LOG_MESSAGE_BYTES));
                } else {
                    tele.terminal_errors.get_or_create(&labels).inc();
                    tracing::warn!(reason = %e.reason(), guest_stack = %e.stack(), "reconcile failed permanently, waiting for a change: {}", sink::cut(&e.to_string(), sink::LOG_MESSAGE_BYTES));
                }
                report_failure(&parent, &ctx, &e).await;
                Err(e)
            }
        }
    }
    .instrument(span)
    .await
}

/// What a reconcile asks of the queue: nothing, or another run after a
/// delay (the guest's `requeueAfterSeconds`).
#[derive(Debug)]
enum Requeue {
    No,
    After(Duration),
}

/// A successful reconcile's outcome, before it becomes a kube-runtime
/// `Action` (which keeps its delay to itself).
#[derive(Debug)]
struct Outcome {
    requeue: Requeue,
}

impl Outcome {
    fn done() -> Self {
        Self {
            requeue: Requeue::No,
        }
    }

    fn after(delay: Duration) -> Self {
        Self {
            requeue: Requeue::After(delay),
        }
    }
}

impl From<Outcome> for Action {
    fn from(outcome: Outcome) -> Self {
        match outcome.requeue {
            Requeue::No => Action::await_change(),
            Requeue::After(delay) => Action::requeue(delay),
        }
    }
}

/// What the kube-runtime controller does after a failure: the per-key
/// exponential backoff the failure recorded, or wait for a change if
/// retrying cannot help.
pub fn error_policy(parent: Arc<Compact>, error: &ReconcileError, ctx: Arc<Context>) -> Action {
    if error.is_retryable() {
        let key = ObjectRef::from_obj_with(&*parent, ctx.kinds.primary.resource.clone());
        let delay = retry_delay(error, ctx.backoff.delay(&key));
        Action::requeue(delay.max(Duration::from_millis(1)))
    } else {
        Action::await_change()
    }
}

/// The backoff's `delay`, capped for a failure that says only that the API
/// server is unavailable: the parent's failures during an outage say
/// nothing about it, and it must not wait minutes once the server is back.
fn retry_delay(error: &ReconcileError, delay: Duration) -> Duration {
    if error.is_unavailable() {
        delay.min(backoff::UNAVAILABLE_MAX_DELAY)
    } else {
        delay
    }
}

async fn reconcile_inner(
    parent: &DynamicObject,
    ctx: &Arc<Context>,
) -> Result<Outcome, ReconcileError> {
    let uid = parent.uid().unwrap_or_default();
    let assignment = ctx.slot.assign(&uid);
    let result = reconcile_with(parent, ctx, &assignment).await;
    if let (Assignment::Candidate { tracker, .. }, Err(e)) = (&assignment, &result)
        && e.is_guests()
    {
        let key = super::queue_key(parent.metadata.namespace.as_deref(), &parent.name_any());
        tracker.failed(
            &uid,
            &key,
            crate::sink::one_line(&format!("{}: {e}", e.reason()), 200),
        );
    }
    result
}

/// The request `guest` gets for `parent`: the observed children and related
/// objects of the kinds it declares (during a rollout the caches hold both
/// versions' kinds).
fn request_for(
    guest: &Guest,
    parent: &DynamicObject,
    ctx: &Context,
    observed: &[(usize, Arc<DynamicObject>)],
    deleting: bool,
) -> Result<(Request, Vec<Arc<DynamicObject>>), RelatedTooLarge> {
    let description = guest.description();
    let declared = |kind: usize| {
        description
            .children
            .iter()
            .any(|c| c.kind.same_resource(&ctx.kinds.children[kind].kind))
    };
    let related = ctx.related.objects_of_declared(
        parent,
        |d| description.related.contains(d),
        &guest.limits().into(),
    )?;
    let request = gather::request(
        gather::value(parent),
        observed
            .iter()
            .filter(|(kind, _)| declared(*kind))
            .map(|(_, o)| gather::value(o)),
        related.iter().map(|o| gather::value(o)),
        deleting,
        ctx.settings.secret_values,
    );
    Ok((request, related))
}

async fn reconcile_with(
    parent: &DynamicObject,
    ctx: &Arc<Context>,
    assignment: &Assignment,
) -> Result<Outcome, ReconcileError> {
    let guest = assignment.applied().clone();
    let description = guest.description();
    let api = ctx.parent_api(parent.namespace().as_deref());
    let deleting = parent.metadata.deletion_timestamp.is_some();
    // The parent as the host's own writes leave it, for the progress check.
    let mut latest: Option<DynamicObject> = None;

    match (&description.finalizer, deleting) {
        // Without our finalizer there is nothing left to do on deletion:
        // garbage collection removes the children.
        (None, true) => return Ok(Outcome::done()),
        (Some(f), true) if !finalizer::has(parent, f) => return Ok(Outcome::done()),
        (Some(f), false) if !finalizer::has(parent, f) => {
            let added = finalizer::add(&api, parent, f)
                .await
                .map_err(ReconcileError::api(format!("adding finalizer {f}")))?;
            ctx.last_writes.remember(parent, &added);
            latest = Some(added);
        }
        _ => {}
    }

    // Never decide on half-filled caches: a child that is merely not listed
    // yet would look missing (and be re-created) or unwanted.
    ctx.children
        .wait_ready(CHILD_CACHE_TIMEOUT, &ctx.child_kind_names)
        .await?;
    ctx.related
        .wait_ready(CHILD_CACHE_TIMEOUT, &ctx.related_kind_names)
        .await?;
    let uid = parent.uid().unwrap_or_default();
    let observed = ctx.children.children_of(&uid);
    let (request, related) = request_for(&guest, parent, ctx, &observed, deleting)?;
    let request = Arc::new(request);
    let versions = observed_versions(&observed);
    // A change of a related object is a change outside the host, like one
    // of the parent's spec.
    let related_versions = progress::related_fingerprint(&related);
    let spec = progress::spec_fingerprint(latest.as_ref().unwrap_or(parent), guest.digest())
        ^ related_versions;
    let start = ctx.progress.start(&uid, spec, &versions);

    let now = crate::runtime::guest::now();
    // A shadow candidate answers the same request, after the stable
    // version, on the guest's shadow thread.
    let shadow = match assignment {
        Assignment::Shadowed {
            candidate, tracker, ..
        } => {
            // Both versions declare the same kinds (the common case): one
            // request serves both.
            let (ours, theirs) = (guest.description(), candidate.description());
            let bounds = |g: &Guest| RelatedBounds::from(g.limits());
            let shadow = |own| Shadow::new(ctx, parent, candidate, tracker, own, now);
            if ours.children == theirs.children
                && ours.related == theirs.related
                && bounds(candidate) == bounds(&guest)
            {
                Some(shadow(None))
            } else {
                // A request past the candidate's bounds is not run in the
                // shadow: the candidate would refuse it as the stable did not.
                request_for(candidate, parent, ctx, &observed, deleting)
                    .ok()
                    .map(|(request, _)| shadow(Some(Arc::new(request))))
            }
        }
        _ => None,
    };
    let call_guest = guest.clone();
    // A candidate's calls are told apart from the stable version's in the
    // log.
    let span = match assignment {
        Assignment::Candidate { guest, .. } => {
            tracing::info_span!("candidate", sha256 = %&guest.digest()[..12.min(guest.digest().len())])
        }
        _ => tracing::Span::current(),
    };
    let call = tracing::info_span!(
        target: crate::telemetry::traces::TARGET,
        parent: &span,
        "guest call",
        otel.name = "guest reconcile",
        export = "reconcile",
        sha256 = %&call_guest.digest()[..12.min(call_guest.digest().len())],
    );
    let (reply, wire) = tokio::task::spawn_blocking(move || {
        span.in_scope(|| {
            call.in_scope(|| {
                let wire = request.to_wire(now, call_guest.settings());
                (call_guest.call_reconcile_wire(&wire), wire)
            })
        })
    })
    .await?;
    if !reply.refused.is_empty() {
        let reference = status::reference(parent, ctx);
        let message = format!("the host refused: {}", reply.refused.join("; "));
        ctx.events
            .warn(&reference, Reason::OutboundRefused, message);
    }
    let answer = reply.result.map_err(ReconcileError::from).and_then(|raw| {
        validate::validate(
            Rules {
                description,
                bounds: guest.limits().bounds(),
                parent: ParentScope {
                    namespace: parent.metadata.namespace.as_deref(),
                },
                protected: &ctx.protected,
            },
            raw,
        )
        .map_err(ReconcileError::from)
    });
    if let Some(shadow) = shadow {
        shadow.stable_answered(answer.as_ref(), wire);
    }
    let answer = answer?;
    if let Assignment::Candidate { tracker, .. } = assignment
        && let Some(condition) = tracker.ready_condition()
    {
        let before = parent
            .data
            .get("status")
            .and_then(serde_json::Value::as_object);
        let key = super::queue_key(parent.metadata.namespace.as_deref(), &parent.name_any());
        tracker.answered(
            &uid,
            &key,
            crate::rollout::tracker::shows(before, &condition),
            crate::rollout::tracker::shows(answer.status.as_ref(), &condition),
        );
    } else if let Assignment::Candidate { tracker, .. } = assignment {
        let key = super::queue_key(parent.metadata.namespace.as_deref(), &parent.name_any());
        tracker.answered(&uid, &key, None, None);
    }

    let plan = plan(parent, ctx, &answer, &observed);
    if !plan.is_empty() || status::needs_write(parent, answer.status.as_ref()) {
        start.check_write()?;
    }
    let mut end = progress::Finish {
        children: versions.into_iter().collect(),
        wrote: !plan.is_empty(),
        ..progress::Finish::default()
    };
    let contested = execute(parent, ctx, plan, &start, &mut end).await?;
    if !contested.is_empty() {
        end.wrote = !end.written.is_empty() || !end.pruned.is_empty();
    }
    if let Some(written) = status::write(
        parent,
        ctx,
        answer.status.as_ref(),
        HostCondition::Succeeded,
    )
    .await?
    {
        end.wrote = true;
        latest = Some(written);
    }
    let reference = status::reference(parent, ctx);
    for event in &answer.events {
        ctx.events.publish(&reference, event, "Reconcile");
    }
    let mut retry_contested: Option<Duration> = None;
    for c in &contested {
        let message = format!(
            "{} {} keeps being changed by another writer: the host corrected it {} times and corrects it again in {:.1} s",
            c.kind,
            c.name,
            c.deferred.corrections,
            c.deferred.retry_in.as_secs_f64()
        );
        tracing::warn!(kind = %c.kind, name = %c.name, retry_in = ?c.deferred.retry_in, "contested child: {message}");
        ctx.events.host(
            &reference,
            EventType::Warning,
            Reason::ChildContested,
            message,
            "Reconcile",
        );
        retry_contested =
            Some(retry_contested.map_or(c.deferred.retry_in, |r| r.min(c.deferred.retry_in)));
    }
    end.spec = progress::spec_fingerprint(latest.as_ref().unwrap_or(parent), guest.digest())
        ^ related_versions;
    ctx.progress.finish(&uid, start, end);
    if deleting && answer.finalized {
        if let Some(f) = &description.finalizer {
            finalizer::remove(&api, parent, f)
                .await
                .map_err(ReconcileError::api(format!("removing finalizer {f}")))?;
            tracing::info!("finalized");
        }
        return Ok(Outcome::done());
    }
    let requeue = answer
        .requeue_after_seconds
        .map(|s| Duration::from_secs(u64::from(s.max(1))));
    Ok(match (requeue, retry_contested) {
        (Some(a), Some(b)) => Outcome::after(a.min(b)),
        (Some(d), None) | (None, Some(d)) => Outcome::after(d),
        (None, None) => Outcome::done(),
    })
}

/// Each observed child's key and resourceVersion.
fn observed_versions(observed: &[(usize, Arc<DynamicObject>)]) -> Vec<(ChildKey, String)> {
    observed
        .iter()
        .map(|(kind, o)| {
            (
                (*kind, o.name_any()),
                o.resource_version().unwrap_or_default(),
            )
        })
        .collect()
}

/// One write a reconcile makes.
enum Step<'a> {
    /// Write a desired child (apply, or create behind the fence).
    Write {
        kind: usize,
        name: &'a str,
        cluster_scoped: bool,
        stamped: serde_json::Value,
        observed: Option<Arc<DynamicObject>>,
    },
    /// Delete an observed child that is neither desired nor kept.
    Prune {
        kind: usize,
        child: Arc<DynamicObject>,
    },
}

/// The writes an answer needs: desired children that changed or drifted,
/// and observed children neither desired nor kept. Pure: nothing is sent.
fn plan<'a>(
    parent: &DynamicObject,
    ctx: &Context,
    answer: &'a Validated,
    observed: &[(usize, Arc<DynamicObject>)],
) -> Vec<Step<'a>> {
    let primary = &ctx.kinds.primary.resource;
    let uid = parent.uid().unwrap_or_default();
    let name = parent.name_any();
    let owner = Owner {
        api_version: &primary.api_version,
        kind: &primary.kind,
        name: &name,
        uid: &uid,
        namespace: parent.metadata.namespace.as_deref(),
        shard: ctx.shard.map(|s| s.index),
    };
    let mut steps = Vec::new();
    let mut kept = vec![false; observed.len()];
    for child in &answer.children {
        let kind = ctx
            .kinds
            .children
            .iter()
            .position(|k| k.kind.matches(&child.api_version, &child.kind))
            .expect("validated: declared kind");
        let stamped = apply::stamp(child, owner, &ctx.guest_name);
        let current = observed
            .iter()
            .position(|(k, o)| *k == kind && o.name_any() == child.name);
        if let Some(i) = current {
            kept[i] = true;
            match apply::drift(&stamped, &observed[i].1) {
                None => {
                    ctx.telemetry
                        .writes_skipped
                        .get_or_create(&GuestLabels {
                            guest: ctx.guest_name.clone(),
                        })
                        .inc();
                    continue;
                }
                Some(why) => {
                    tracing::debug!(kind = %child.kind, name = %child.name, "re-applying: {why}");
                }
            }
        }
        steps.push(Step::Write {
            kind,
            name: &child.name,
            cluster_scoped: child.cluster_scoped,
            stamped,
            observed: current.map(|i| observed[i].1.clone()),
        });
    }
    for (i, (kind, child)) in observed.iter().enumerate() {
        let keep = answer.keep.iter().any(|k| {
            k.name == child.name_any()
                && ctx.kinds.children[*kind]
                    .kind
                    .matches(&k.api_version, &k.kind)
        });
        if !kept[i] && !keep {
            steps.push(Step::Prune {
                kind: *kind,
                child: child.clone(),
            });
        }
    }
    steps
}

/// Writes of one reconcile's children in flight at once.
const CHILD_WRITES_AT_ONCE: usize = 8;

/// A correction of a contested child the host put off.
struct Contested {
    kind: String,
    name: String,
    deferred: progress::Deferred,
}

/// Sends the planned writes, recording in `end` each child's
/// resourceVersion as the writes leave it and what was pruned; returns the
/// corrections of contested children it put off. The children's writes go
/// out together, [`CHILD_WRITES_AT_ONCE`] at a time (each is one object's
/// own request; the API server orders nothing between them either), then
/// the prunes, one after another; the first failure in the answer's order
/// is the reconcile's.
async fn execute(
    parent: &DynamicObject,
    ctx: &Context,
    steps: Vec<Step<'_>>,
    start: &progress::Start,
    end: &mut progress::Finish,
) -> Result<Vec<Contested>, ReconcileError> {
    let uid = parent.uid().unwrap_or_default();
    let mut contested = Vec::new();
    let mut writes = Vec::new();
    let mut prunes = Vec::new();
    for step in steps {
        match step {
            Step::Write {
                kind,
                name,
                cluster_scoped,
                stamped,
                observed,
            } => {
                let resource = &ctx.kinds.children[kind].resource;
                let key = (kind, name.to_owned());
                let mut correction = false;
                if observed.is_none() {
                    start.check_create(&key, &resource.kind)?;
                } else {
                    match start.check_correction(&key) {
                        Ok(is_correction) => correction = is_correction,
                        Err(deferred) => {
                            // Not the host's version: the next reconcile
                            // sees the same change as someone else's again.
                            end.children.insert(key, String::new());
                            contested.push(Contested {
                                kind: resource.kind.clone(),
                                name: name.to_owned(),
                                deferred,
                            });
                            continue;
                        }
                    }
                }
                let target = Target {
                    resource,
                    namespace: if cluster_scoped {
                        None
                    } else {
                        parent.metadata.namespace.as_deref()
                    },
                    name,
                    manager: &ctx.field_manager,
                };
                let uid = uid.as_str();
                let write = async move {
                    apply::write_child(
                        &ctx.client,
                        target,
                        &stamped,
                        observed.as_deref(),
                        uid,
                        ctx.settings.adopt_orphans,
                    )
                    .await
                };
                writes.push(((key, resource, correction), write));
            }
            Step::Prune { kind, child } => prunes.push((kind, child)),
        }
    }
    let (done, sent): (Vec<_>, Vec<_>) = writes.into_iter().unzip();
    let results: Vec<_> = futures::stream::iter(sent)
        .buffered(CHILD_WRITES_AT_ONCE)
        .collect()
        .await;
    for ((key, resource, correction), written) in done.into_iter().zip(results) {
        let name = key.1.clone();
        let written = written.map_err(ReconcileError::api(format!(
            "writing {} {name}",
            resource.kind
        )))?;
        match written {
            Written::Done(object, first) => {
                tracing::debug!(kind = %resource.kind, name, "applied");
                let rv = object.resource_version().unwrap_or_default();
                end.children.insert(key.clone(), rv.clone());
                end.written.extend(first.map(|first| (key.clone(), first)));
                if correction {
                    end.corrected.push(key.clone());
                }
                end.written.push((key, rv));
            }
            Written::Taken(owner) => {
                return Err(ReconcileError::ChildNameTaken {
                    kind: resource.kind.clone(),
                    name,
                    owner,
                });
            }
            Written::Vanished => {
                return Err(ReconcileError::ChildVanished {
                    kind: resource.kind.clone(),
                    name,
                });
            }
        }
    }
    for (kind, child) in prunes {
        let resource = &ctx.kinds.children[kind].resource;
        apply::prune_child(&ctx.client, resource, &child)
            .await
            .map_err(ReconcileError::api(format!(
                "pruning {} {}",
                resource.kind,
                child.name_any()
            )))?;
        tracing::info!(kind = %resource.kind, name = %child.name_any(), "pruned child no longer desired");
        let key = (kind, child.name_any());
        end.children.remove(&key);
        end.pruned.insert(key);
    }
    Ok(contested)
}

async fn report_failure(parent: &DynamicObject, ctx: &Context, error: &ReconcileError) {
    let reference = status::reference(parent, ctx);
    let message = error.to_string();
    ctx.events.host(
        &reference,
        EventType::Warning,
        error.reason(),
        message.clone(),
        "Reconcile",
    );
    if let Err(e) = status::write(
        parent,
        ctx,
        None,
        HostCondition::Failed(error.reason(), &message),
    )
    .await
    {
        tracing::warn!("could not record the failure on the parent's status: {e}");
    }
}
