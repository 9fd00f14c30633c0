//! One reconcile, from the queue to the status, read top to bottom:
//!
//! 1. **gates** ([`gates`]): this replica leads the parent's unit, the
//!    parent is of this scope's shard, a reconcile permit is free;
//! 2. **finalizer** ([`crate::controller::finalizer`]): a guest that
//!    declares one has it on every parent before anything else, and a
//!    deleted parent without it has nothing left to do;
//! 3. **gather** ([`gather`]): the parent's children and related objects
//!    from the caches, as the request of the version the rollout assigns;
//! 4. **call and validate** ([`call`]): the guest answers in a fresh
//!    sandbox, its answer checked all or nothing; a shadow candidate is
//!    handed the same request;
//! 5. **plan** ([`plan`]): pure, from the observed state and the answer to
//!    the writes;
//! 6. **execute** ([`execute`]): applies, prunes, the status, Events, the
//!    progress record, the finalizer's removal;
//! 7. **requeue** ([`requeue`]): when the parent comes back, decided once,
//!    for a success as for a failure ([`error`]).
//!
//! Every reconcile runs in a tracing span naming the guest, the object, its
//! generation and a reconcile id, which the guest's own log lines (written
//! on a blocking thread) carry too.

mod call;
mod error;
mod execute;
mod gates;
pub mod gather;
pub mod plan;
mod requeue;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use kube::ResourceExt;
use kube::api::DynamicObject;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use tracing::Instrument as _;

pub use error::{Failure, ReconcileError};
pub use gather::CHILD_CACHE_TIMEOUT;

use crate::controller::compact::Compact;
use crate::controller::context::{Context, queue_key};
use crate::controller::finalizer;
use crate::controller::status;
use crate::model::Description;
use crate::rollout::Assignment;
use crate::telemetry::metrics::ControllerLabels;
use requeue::Outcome;

/// Numbers reconciles within this process, for the span.
static NEXT_RECONCILE: AtomicU64 = AtomicU64::new(1);

/// Reconciles one parent. Called by the kube-runtime controller, never twice
/// at once for the same object; at most the guest's `concurrency` run at
/// once across all its namespace scopes.
pub async fn reconcile(parent: Arc<Compact>, ctx: Arc<Context>) -> Result<Action, Failure> {
    let key = ObjectRef::from_obj_with(&*parent, ctx.kinds.primary.resource.clone());
    let queue_key = queue_key(parent.metadata.namespace.as_deref(), &parent.name_any());
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
        let _passed = match gates::pass(&parent, &ctx, &queue_key).await {
            Ok(passed) => passed,
            Err(action) => return Ok(action),
        };
        tracing::debug!("reconcile started");
        let tele = &ctx.telemetry;
        let labels = ControllerLabels {
            controller: ctx.guest_name.clone(),
        };
        let waited = ctx.queue.start(&queue_key, id);
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
        let result = run(&parent, &ctx).await;
        workers.dec();
        ctx.queue.finish(id);
        tele.reconcile_time
            .get_or_create(&labels)
            .observe(started.elapsed().as_secs_f64());
        if result.is_ok() {
            let elapsed_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
            tracing::debug!(elapsed_us, "reconciled");
        }
        requeue::decide(&parent, &ctx, &key, queue_key, result).await
    }
    .instrument(span)
    .await
}

/// What the kube-runtime controller does after a failure: what
/// [`requeue`] decided when the reconcile failed.
pub fn error_policy(_parent: Arc<Compact>, failure: &Failure, _ctx: Arc<Context>) -> Action {
    failure
        .retry_in
        .map_or_else(Action::await_change, Action::requeue)
}

/// The stages of one reconcile of `parent`, on the version the rollout
/// assigns it; a candidate is told of the failures that are its answer's.
async fn run(parent: &DynamicObject, ctx: &Arc<Context>) -> Result<Outcome, ReconcileError> {
    let uid = parent.uid().unwrap_or_default();
    let assignment = ctx.slot.assign(&uid);
    let result = stages(parent, ctx, &assignment).await;
    if let (Assignment::Candidate { tracker, .. }, Err(e)) = (&assignment, &result)
        && e.is_guests()
    {
        let key = queue_key(parent.metadata.namespace.as_deref(), &parent.name_any());
        tracker.failed(
            &uid,
            &key,
            crate::sink::one_line(&format!("{}: {e}", e.reason()), 200),
            call::ready_before(parent, tracker),
        );
    }
    result
}

/// Finalizer, gather, call and validate, plan, execute; then when the
/// parent comes back.
async fn stages(
    parent: &DynamicObject,
    ctx: &Arc<Context>,
    assignment: &Assignment,
) -> Result<Outcome, ReconcileError> {
    let guest = assignment.applied().clone();
    let deleting = parent.metadata.deletion_timestamp.is_some();
    // A Metacontroller controller's selectors leave a parent out, unless
    // it still carries the controller's finalizer.
    let finalizing = guest
        .description()
        .finalizer
        .as_ref()
        .is_some_and(|f| finalizer::has(parent, f));
    if !guest.selects(parent) && !finalizing {
        return Ok(Outcome::Done);
    }
    let latest = match finalizer_first(parent, ctx, guest.description()).await? {
        Finalizer::Done => return Ok(Outcome::Done),
        Finalizer::Go { added } => added.map(|added| *added),
    };
    let gathered = gather::gather(parent, ctx, &guest, deleting, latest.as_ref()).await?;
    let (answer, decoration) = call::call(parent, ctx, assignment, &guest, &gathered).await?;
    let plan = plan::plan(
        plan::Inputs {
            parent,
            primary: &ctx.kinds.primary.resource,
            children: &ctx.kinds.children,
            guest: &ctx.guest_name,
            shard: ctx.shard.map(|s| s.index),
            observed: &gathered.observed,
            strategies: guest.update_strategies(),
            status_schema: status::schema_for(&guest, ctx.kinds.status_schema.as_deref()),
            decoration: decoration.as_ref(),
        },
        &answer,
        &status::now_rfc3339(),
    );
    let executed = execute::execute(parent, ctx, &guest, plan, gathered, &answer, latest).await?;
    Ok(requeue::after(&answer, &executed))
}

/// What the finalizer stage leaves a reconcile to do.
enum Finalizer {
    /// Nothing: the parent is being deleted and carries no finalizer of
    /// the guest's (garbage collection removes the children).
    Done,
    /// Go on; `added`: the parent as the patch that added the finalizer
    /// left it, if one was needed.
    Go { added: Option<Box<DynamicObject>> },
}

/// The finalizer stage: a live parent gets the guest's finalizer before
/// anything else; a deleted one without it needs nothing more.
async fn finalizer_first(
    parent: &DynamicObject,
    ctx: &Context,
    description: &Description,
) -> Result<Finalizer, ReconcileError> {
    let deleting = parent.metadata.deletion_timestamp.is_some();
    match (&description.finalizer, deleting) {
        (None, true) => Ok(Finalizer::Done),
        (Some(f), true) if !finalizer::has(parent, f) => Ok(Finalizer::Done),
        (Some(f), false) if !finalizer::has(parent, f) => {
            let api = ctx.parent_api(parent.namespace().as_deref());
            let added = finalizer::add(&api, parent, f)
                .await
                .map_err(ReconcileError::api(format!("adding finalizer {f}")))?;
            ctx.last_writes.remember(parent, &added);
            Ok(Finalizer::Go {
                added: Some(Box::new(added)),
            })
        }
        _ => Ok(Finalizer::Go { added: None }),
    }
}
