//! Call and validate: the version the rollout assigned the parent answers
//! the gathered request in a fresh sandbox on a blocking thread; its answer
//! is checked all or nothing. A shadow candidate is handed the same request
//! and the stable answer; a canary candidate's answer tells its tracker
//! whether the parent shows the ready condition.

use std::sync::Arc;

use kube::ResourceExt;
use kube::api::DynamicObject;
use wasmop_contract::Reason;

use super::ReconcileError;
use super::gather::{Gathered, request_for};
use crate::controller::context::{Context, queue_key};
use crate::controller::related::RelatedBounds;
use crate::controller::shadow::Shadow;
use crate::controller::status;
use crate::metacontroller::sync::Decoration;
use crate::rollout::tracker::shows;
use crate::rollout::{Assignment, Tracker};
use crate::runtime::Guest;
use crate::validate::{self, ParentScope, Rules, Validated};

/// Calls `guest` (the version `assignment` applies) on `gathered`'s request
/// and validates its answer; with a Metacontroller decorator's decoration
/// of its target.
pub(super) async fn call(
    parent: &DynamicObject,
    ctx: &Arc<Context>,
    assignment: &Assignment,
    guest: &Guest,
    gathered: &Gathered,
) -> Result<(Validated, Option<Decoration>), ReconcileError> {
    let now = crate::runtime::guest::now();
    let shadow = shadow(parent, ctx, assignment, guest, gathered, now);
    let request = gathered.request.clone();
    let related = gathered.hook_related.clone();
    let call_guest = guest.clone();
    // A candidate's calls are told apart from the stable version's in the
    // log.
    let span = match assignment {
        Assignment::Candidate { guest, .. } => {
            tracing::info_span!("candidate", sha256 = %short(guest.digest()))
        }
        _ => tracing::Span::current(),
    };
    let call = tracing::info_span!(
        target: crate::telemetry::traces::TARGET,
        parent: &span,
        "guest call",
        otel.name = "guest reconcile",
        export = "reconcile",
        sha256 = %short(call_guest.digest()),
    );
    let (reply, wire) = tokio::task::spawn_blocking(move || {
        span.in_scope(|| {
            call.in_scope(|| {
                let wire = request.to_wire(now, call_guest.settings());
                (call_guest.call_reconcile_wire(&wire, &related), wire)
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
    // A shadow keeps the stable answer as the guest gave it (its text).
    let given = shadow
        .as_ref()
        .and_then(|_| reply.result.as_ref().ok().cloned());
    let decoration = reply.decoration;
    let answer = reply.result.map_err(ReconcileError::from).and_then(|raw| {
        validate::validate(
            Rules {
                description: guest.description(),
                bounds: guest.limits().bounds(),
                parent: ParentScope {
                    namespace: parent.metadata.namespace.as_deref(),
                    namespaced_children: guest.follows_metacontroller(),
                },
                protected: &ctx.protected,
            },
            raw,
        )
        .map_err(ReconcileError::from)
    });
    if let Some(shadow) = shadow {
        let stable = match (&answer, given) {
            (Ok(_), Some(given)) => Ok(given),
            (Err(e), _) => Err(e.to_string()),
            (Ok(_), None) => unreachable!("a valid answer was given"),
        };
        shadow.stable_answered(stable, wire, gathered.hook_related.clone());
    }
    let answer = answer?;
    if let Assignment::Candidate { tracker, .. } = assignment {
        let uid = parent.uid().unwrap_or_default();
        let key = queue_key(parent.metadata.namespace.as_deref(), &parent.name_any());
        let ready = tracker
            .ready_condition()
            .and_then(|condition| shows(answer.status.as_ref(), &condition));
        tracker.answered(&uid, &key, ready_before(parent, tracker), ready);
    }
    Ok((answer, decoration))
}

/// What `parent` shows of the ready condition `tracker` watches before the
/// candidate's answer is written: True, False, or `None` (no condition
/// watched, or none shown).
pub(super) fn ready_before(parent: &DynamicObject, tracker: &Tracker) -> Option<bool> {
    let condition = tracker.ready_condition()?;
    let status = parent
        .data
        .get("status")
        .and_then(serde_json::Value::as_object);
    shows(status, &condition)
}

/// The shadow of a shadowed candidate beside this call: the same request,
/// after the stable version, on the guest's shadow thread.
fn shadow(
    parent: &DynamicObject,
    ctx: &Arc<Context>,
    assignment: &Assignment,
    guest: &Guest,
    gathered: &Gathered,
    now: u64,
) -> Option<Shadow> {
    let Assignment::Shadowed {
        candidate, tracker, ..
    } = assignment
    else {
        return None;
    };
    let shadow = |own| {
        Shadow::new(
            ctx.shadow.clone(),
            parent,
            guest,
            candidate,
            tracker,
            own,
            now,
        )
    };
    // Both versions declare the same kinds (the common case): one request
    // serves both.
    let (ours, theirs) = (guest.description(), candidate.description());
    let bounds = |g: &Guest| RelatedBounds::from(g.limits());
    if ours.children == theirs.children
        && ours.related == theirs.related
        && bounds(candidate) == bounds(guest)
    {
        Some(shadow(None))
    } else {
        // A request past the candidate's bounds is not run in the shadow:
        // the candidate would refuse it as the stable did not.
        let deleting = parent.metadata.deletion_timestamp.is_some();
        request_for(candidate, parent, ctx, &gathered.observed, deleting)
            .ok()
            .map(|(request, _)| shadow(Some(Arc::new(request))))
    }
}

/// The first 12 hex digits of a module digest, for spans and logs.
fn short(digest: &str) -> &str {
    &digest[..digest.len().min(12)]
}
