//! Execute: the plan's writes (children applied or created behind the
//! ownership fence, then prunes), the status, the answer's Events, the
//! progress record and, once the guest finalized a deleted parent, the
//! finalizer's removal. Also what a failed reconcile leaves on its parent.

use std::time::Duration;

use futures::StreamExt as _;
use kube::ResourceExt;
use kube::api::{DynamicObject, Patch, PatchParams};
use wasmop_contract::Reason;

use super::ReconcileError;
use super::gather::Gathered;
use super::plan::{Plan, Step};
use crate::controller::apply::{self, Target, Written};
use crate::controller::context::Context;
use crate::controller::finalizer;
use crate::controller::progress;
use crate::controller::status::{self, HostCondition};
use crate::model::EventType;
use crate::runtime::Guest;
use crate::telemetry::metrics::GuestLabels;
use crate::validate::{Validated, Violation};

/// Writes of one reconcile's children in flight at once.
const CHILD_WRITES_AT_ONCE: usize = 8;

/// What the writes left for the requeue to decide on.
pub(super) struct Executed {
    /// The deleted parent was finalized: nothing is left to do.
    pub(super) finalized: bool,
    /// The soonest a contested child may be corrected again.
    pub(super) contested_retry: Option<Duration>,
    /// The guest's status was written for a guest that reads it back (a
    /// Metacontroller controller's hooks see the parent's status, and
    /// Metacontroller syncs again on every change of the parent): the
    /// parent comes back at once.
    pub(super) status_to_see: bool,
}

/// A correction of a contested child the host put off.
struct Contested {
    kind: String,
    name: String,
    deferred: progress::Deferred,
}

/// Carries out `plan` for `parent`, whose guest (`guest`) gave `answer` on
/// what `gathered` holds; `latest` is the parent as the host's finalizer
/// write left it, if one was made.
pub(super) async fn execute(
    parent: &DynamicObject,
    ctx: &Context,
    guest: &Guest,
    plan: Plan<'_>,
    gathered: Gathered,
    answer: &Validated,
    mut latest: Option<DynamicObject>,
) -> Result<Executed, ReconcileError> {
    let Gathered {
        versions,
        related_versions,
        start,
        ..
    } = gathered;
    if plan.converged > 0 {
        ctx.telemetry
            .writes_skipped
            .get_or_create(&GuestLabels {
                guest: ctx.guest_name.clone(),
            })
            .inc_by(plan.converged as u64);
    }
    if plan.writes_for_the_guest() {
        start.check_write()?;
    }
    let Plan {
        steps,
        status,
        decorate,
        ..
    } = plan;
    let mut end = progress::Finish {
        children: versions.into_iter().collect(),
        wrote: !steps.is_empty(),
        ..progress::Finish::default()
    };
    let contested = write_children(parent, ctx, guest, steps, &start, &mut end).await?;
    if !contested.is_empty() {
        end.wrote = !end.written.is_empty() || !end.pruned.is_empty();
    }
    if let Some(patch) = decorate {
        latest = Some(decorate_target(parent, ctx, &patch).await?);
        end.wrote = true;
    }
    let guest_status = status.guest.is_some();
    let mut status_to_see = false;
    let decorates = guest.decorates();
    let written = match status::write(parent, ctx, status).await {
        // A decorator's target of a kind without a status subresource
        // keeps none, as Metacontroller leaves it.
        Err(status::WriteFailed {
            source: kube::Error::Api(e),
            ..
        }) if decorates && e.code == 404 => None,
        written => written?,
    };
    if let Some(written) = written {
        end.wrote = true;
        latest = Some(written);
        status_to_see = guest_status && guest.follows_metacontroller();
    }
    let reference = status::reference(parent, ctx);
    for event in &answer.events {
        ctx.events.publish(&reference, event, "Reconcile");
    }
    let mut contested_retry: Option<Duration> = None;
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
        contested_retry =
            Some(contested_retry.map_or(c.deferred.retry_in, |r| r.min(c.deferred.retry_in)));
    }
    let uid = parent.uid().unwrap_or_default();
    end.spec = progress::spec_fingerprint(latest.as_ref().unwrap_or(parent), guest.digest())
        ^ related_versions;
    ctx.progress.finish(&uid, start, end);
    let deleting = parent.metadata.deletion_timestamp.is_some();
    let finalized = deleting && answer.finalized;
    if finalized && let Some(f) = &guest.description().finalizer {
        let api = ctx.parent_api(parent.namespace().as_deref());
        finalizer::remove(&api, parent, f)
            .await
            .map_err(ReconcileError::api(format!("removing finalizer {f}")))?;
        tracing::info!("finalized");
    }
    Ok(Executed {
        finalized,
        contested_retry,
        status_to_see,
    })
}

/// Sends the planned writes of children, recording in `end` each child's
/// resourceVersion as the writes leave it and what was pruned; returns the
/// corrections of contested children it put off. The children's writes go
/// out together, [`CHILD_WRITES_AT_ONCE`] at a time (each is one object's
/// own request; the API server orders nothing between them either), then
/// the prunes, one after another; the first failure in the answer's order
/// is the reconcile's.
async fn write_children(
    parent: &DynamicObject,
    ctx: &Context,
    guest: &Guest,
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
                namespace,
                stamped,
                observed,
                why,
            } => {
                let resource = &ctx.kinds.children[kind].resource;
                let key = (kind, namespace.map(str::to_owned), name.to_owned());
                let mut correction = false;
                if observed.is_none() {
                    // A child kind the guest recreates by design (a
                    // Metacontroller `Recreate` strategy) is deleted and
                    // created again on purpose.
                    let recreates = guest
                        .update_strategies()
                        .and_then(|s| s.get(kind))
                        .is_some_and(|s| s.method.recreates());
                    if !recreates {
                        start.check_create(&key, &resource.kind)?;
                    }
                } else {
                    tracing::debug!(kind = %resource.kind, name, "re-applying: {why}");
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
                    namespace,
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
        let name = key.2.clone();
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
        let key = (kind, child.namespace(), child.name_any());
        end.children.remove(&key);
        end.pruned.insert(key);
    }
    Ok(contested)
}

/// Merges a decorator's labels and annotations (`patch`) into its target,
/// which must not be one of the host's own objects; returns the target as
/// the write left it.
async fn decorate_target(
    parent: &DynamicObject,
    ctx: &Context,
    patch: &serde_json::Value,
) -> Result<DynamicObject, ReconcileError> {
    let primary = &ctx.kinds.primary.resource;
    let name = parent.name_any();
    if ctx.protected.contains(
        &primary.group,
        &primary.kind,
        parent.namespace().as_deref(),
        &name,
    ) {
        return Err(ReconcileError::Invalid(Violation::Protected {
            kind: primary.kind.clone(),
            name,
        }));
    }
    let api = ctx.parent_api(parent.namespace().as_deref());
    let written = api
        .patch(
            &name,
            &PatchParams {
                field_manager: Some(ctx.field_manager.clone()),
                ..PatchParams::default()
            },
            &Patch::Merge(patch),
        )
        .await
        .map_err(ReconcileError::api(format!(
            "setting the labels and annotations of {} {name}",
            primary.kind
        )))?;
    tracing::info!(kind = %primary.kind, name, "decorated the target");
    ctx.last_writes.remember(parent, &written);
    Ok(written)
}

/// What a failed reconcile leaves on its parent: a Warning Event and the
/// host's condition `False` with the reason (not on a Metacontroller
/// decorator's target, another controller's object).
pub(super) async fn report_failure(parent: &DynamicObject, ctx: &Context, error: &ReconcileError) {
    let reference = status::reference(parent, ctx);
    let message = error.to_string();
    ctx.events.host(
        &reference,
        EventType::Warning,
        error.reason(),
        message.clone(),
        "Reconcile",
    );
    let guest = ctx.slot.current();
    if guest.decorates() {
        return;
    }
    let schema = status::schema_for(&guest, ctx.kinds.status_schema.as_deref());
    let writes = status::plan(
        parent,
        None,
        HostCondition::Failed(error.reason(), &message),
        &status::now_rfc3339(),
        schema,
    );
    if let Err(e) = status::write(parent, ctx, writes).await {
        tracing::warn!("could not record the failure on the parent's status: {e}");
    }
}
