//! One reconcile: observed state in, guest call, checks, writes out.
//!
//! watch → queue → **here**: gather the parent and its children from the
//! caches, call the guest in a fresh sandbox, validate its answer (all or
//! nothing), apply changed children, prune unwanted ones, write the status,
//! record events and drive the finalizer.

use std::sync::Arc;
use std::time::Duration;

use kube::api::{DynamicObject, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::{Map, Value, json};

use super::apply::{self, Owner};
use super::{Context, finalizer};
use crate::model::Request;
use crate::runtime::CallError;
use crate::validate::{self, ParentScope, Validated, Violation};

/// Condition type the host itself maintains on the parent's status when a
/// reconcile fails for a host-side reason (limit hit, trap, invalid answer).
pub const HOST_CONDITION: &str = "GuestReconciled";

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// The guest call failed (trap, limit, or its own error).
    #[error("{0}")]
    Call(#[from] CallError),
    /// The guest's answer broke a rule; nothing was applied.
    #[error("invalid guest response, nothing applied: {0}")]
    Invalid(#[from] Violation),
    /// The API server refused a write.
    #[error("{action}: {source}")]
    Api {
        /// What the host was doing.
        action: String,
        /// The API error.
        source: kube::Error,
    },
    /// The child caches were dropped (the controller is stopping).
    #[error("child caches are gone; the controller is stopping")]
    CachesGone,
    /// The blocking guest task did not finish.
    #[error("guest task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}

impl ReconcileError {
    /// A short CamelCase reason for the Warning event and the condition.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Call(e) => e.reason(),
            Self::Invalid(_) => "InvalidGuestResponse",
            Self::Api { .. } => "ApplyFailed",
            Self::Join(_) => "GuestTaskFailed",
            Self::CachesGone => "ControllerStopping",
        }
    }

    /// Whether retrying may help.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Call(e) => e.is_retryable(),
            _ => true,
        }
    }
}

fn api_error(action: impl Into<String>) -> impl FnOnce(kube::Error) -> ReconcileError {
    let action = action.into();
    move |source| ReconcileError::Api { action, source }
}

/// Reconciles one parent. Called by the kube-runtime controller, never twice
/// at once for the same object.
pub async fn reconcile(
    parent: Arc<DynamicObject>,
    ctx: Arc<Context>,
) -> Result<Action, ReconcileError> {
    let key = ObjectRef::from_obj_with(&*parent, ctx.kinds.primary.resource.clone());
    match reconcile_inner(&parent, &ctx).await {
        Ok(action) => {
            tracing::debug!(guest = %ctx.guest_name, object = %key, "reconciled");
            ctx.backoff.succeed(&key);
            ctx.metrics.record_success();
            Ok(action)
        }
        Err(e) => {
            ctx.metrics.record_failure();
            report_failure(&parent, &ctx, &e).await;
            Err(e)
        }
    }
}

/// What the kube-runtime controller does after a failure: per-key
/// exponential backoff, or wait for a change if retrying cannot help.
pub fn error_policy(
    parent: Arc<DynamicObject>,
    error: &ReconcileError,
    ctx: Arc<Context>,
) -> Action {
    let key = ObjectRef::from_obj_with(&*parent, ctx.kinds.primary.resource.clone());
    if error.is_retryable() {
        let delay = ctx.backoff.fail(&key);
        tracing::warn!(guest = %ctx.guest_name, object = %key, retry_in = ?delay, "reconcile failed: {error}");
        Action::requeue(delay)
    } else {
        tracing::warn!(guest = %ctx.guest_name, object = %key, "reconcile failed permanently, waiting for a change: {error}");
        Action::await_change()
    }
}

async fn reconcile_inner(parent: &DynamicObject, ctx: &Context) -> Result<Action, ReconcileError> {
    let guest = ctx.slot.current();
    let description = guest.description();
    let api = ctx.parent_api(parent.namespace().as_deref());
    let deleting = parent.metadata.deletion_timestamp.is_some();

    match (&description.finalizer, deleting) {
        // Without our finalizer there is nothing left to do on deletion:
        // garbage collection removes the children.
        (None, true) => return Ok(Action::await_change()),
        (Some(f), true) if !finalizer::has(parent, f) => return Ok(Action::await_change()),
        (Some(f), false) if !finalizer::has(parent, f) => {
            finalizer::add(&api, parent, f)
                .await
                .map_err(api_error(format!("adding finalizer {f}")))?;
        }
        _ => {}
    }

    // Never decide on half-filled caches: a child that is merely not listed
    // yet would look missing (and be re-created) or unwanted.
    if !ctx.children_ready.clone().await {
        return Err(ReconcileError::CachesGone);
    }
    let observed = ctx.observed_children(parent);
    let request = Request {
        parent: without_managed_fields(serde_json::to_value(parent).expect("objects serialise")),
        observed: observed
            .iter()
            .map(|(_, o)| {
                without_managed_fields(serde_json::to_value(&**o).expect("objects serialise"))
            })
            .collect(),
        deleting,
    };
    let call_guest = guest.clone();
    let raw = tokio::task::spawn_blocking(move || call_guest.reconcile(&request)).await??;
    let scope = ParentScope {
        namespace: parent.metadata.namespace.as_deref(),
    };
    let answer = validate::validate(guest.name(), description, guest.limits(), scope, raw)?;

    write_children(parent, ctx, &answer, &observed).await?;
    write_status(parent, ctx, answer.status.as_ref(), None).await?;
    let reference = parent.object_ref(&ctx.kinds.primary.resource);
    for event in &answer.events {
        ctx.events.publish(&reference, event, "Reconcile").await;
    }
    if deleting && answer.finalized {
        if let Some(f) = &description.finalizer {
            finalizer::remove(&api, parent, f)
                .await
                .map_err(api_error(format!("removing finalizer {f}")))?;
            tracing::info!(guest = %ctx.guest_name, object = %parent.name_any(), "finalized");
        }
        return Ok(Action::await_change());
    }
    Ok(match answer.requeue_after_seconds {
        Some(s) => Action::requeue(Duration::from_secs(u64::from(s.max(1)))),
        None => Action::await_change(),
    })
}

async fn write_children(
    parent: &DynamicObject,
    ctx: &Context,
    answer: &Validated,
    observed: &[(usize, Arc<DynamicObject>)],
) -> Result<(), ReconcileError> {
    let primary = &ctx.kinds.primary.resource;
    let uid = parent.uid().unwrap_or_default();
    let owner = Owner {
        api_version: &primary.api_version,
        kind: &primary.kind,
        name: &parent.name_any(),
        uid: &uid,
        namespace: parent.metadata.namespace.as_deref(),
    };
    let mut kept = vec![false; observed.len()];
    for child in &answer.children {
        let kind_index = ctx
            .kinds
            .children
            .iter()
            .position(|k| k.kind.matches(&child.api_version, &child.kind))
            .expect("validated: declared kind");
        let stamped = apply::stamp(child, owner, &ctx.guest_name);
        let current = observed
            .iter()
            .position(|(k, o)| *k == kind_index && o.name_any() == child.name);
        if let Some(i) = current {
            kept[i] = true;
            match apply::drift(&stamped, &observed[i].1) {
                None => continue,
                Some(why) => {
                    tracing::debug!(guest = %ctx.guest_name, kind = %child.kind, name = %child.name, "re-applying: {why}")
                }
            }
        }
        let ar = &ctx.kinds.children[kind_index].resource;
        let ns = if child.cluster_scoped {
            None
        } else {
            owner.namespace
        };
        apply::apply_child(
            &ctx.client,
            ar,
            ns,
            &child.name,
            &ctx.field_manager,
            &stamped,
        )
        .await
        .map_err(api_error(format!("applying {} {}", child.kind, child.name)))?;
        tracing::debug!(guest = %ctx.guest_name, kind = %child.kind, name = %child.name, "applied");
    }
    for ((kind_index, child), keep) in observed.iter().zip(kept) {
        if keep {
            continue;
        }
        let ar = &ctx.kinds.children[*kind_index].resource;
        apply::prune_child(&ctx.client, ar, child)
            .await
            .map_err(api_error(format!(
                "pruning {} {}",
                ar.kind,
                child.name_any()
            )))?;
        tracing::info!(guest = %ctx.guest_name, kind = %ar.kind, name = %child.name_any(), "pruned child no longer desired");
    }
    Ok(())
}

/// Writes the desired status through the status subresource unless the
/// parent already shows it. `host_condition` carries a failure to report.
async fn write_status(
    parent: &DynamicObject,
    ctx: &Context,
    desired: Option<&Map<String, Value>>,
    host_condition: Option<(&str, &str)>,
) -> Result<(), ReconcileError> {
    let observed_status = parent.data.get("status").cloned().unwrap_or(Value::Null);
    let generation = parent.metadata.generation;
    let api = ctx.parent_api(parent.namespace().as_deref());
    if let Some(desired) = desired {
        let mut want = desired.clone();
        if let Some(g) = generation {
            want.insert("observedGeneration".into(), g.into());
        }
        let want = Value::Object(want);
        if without_host_condition(&observed_status) != want {
            let body = status_body(parent, ctx, want);
            api.patch_status(
                &parent.name_any(),
                &PatchParams::apply(&ctx.field_manager).force(),
                &Patch::Apply(&body),
            )
            .await
            .map_err(api_error("writing status"))?;
        }
    }
    // The host's own condition: False with the reason after a failure, back
    // to True after the next success. Written only when it changes.
    let current = host_condition_of(&observed_status);
    let wanted = match host_condition {
        Some((reason, message)) => Some(("False", reason, message)),
        None if current.is_some_and(|c| c["status"] != "True") => Some(("True", "Reconciled", "")),
        None => None,
    };
    if let Some((status, reason, message)) = wanted {
        let unchanged = current.is_some_and(|c| {
            c["status"] == status && c["reason"] == reason && c["message"] == message
        });
        if !unchanged {
            let condition = json!({
                "type": HOST_CONDITION,
                "status": status,
                "reason": reason,
                "message": message,
                "observedGeneration": generation,
                "lastTransitionTime": now_rfc3339(),
            });
            let body = status_body(parent, ctx, json!({"conditions": [condition]}));
            api.patch_status(
                &parent.name_any(),
                &PatchParams::apply(&ctx.host_manager).force(),
                &Patch::Apply(&body),
            )
            .await
            .map_err(api_error("writing the host condition"))?;
        }
    }
    Ok(())
}

fn status_body(parent: &DynamicObject, ctx: &Context, status: Value) -> Value {
    let primary = &ctx.kinds.primary.resource;
    json!({
        "apiVersion": primary.api_version,
        "kind": primary.kind,
        "metadata": {"name": parent.name_any(), "namespace": parent.namespace()},
        "status": status,
    })
}

fn host_condition_of(status: &Value) -> Option<&Value> {
    status
        .get("conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == HOST_CONDITION)
}

/// The status as the guest's field manager sees it: without the host's own
/// condition (another manager owns that list entry).
fn without_host_condition(status: &Value) -> Value {
    let mut status = status.clone();
    if let Some(list) = status.get_mut("conditions").and_then(Value::as_array_mut) {
        list.retain(|c| c["type"] != HOST_CONDITION);
        if list.is_empty() {
            status.as_object_mut().map(|m| m.remove("conditions"));
        }
    }
    status
}

async fn report_failure(parent: &DynamicObject, ctx: &Context, error: &ReconcileError) {
    let reference = parent.object_ref(&ctx.kinds.primary.resource);
    let message = error.to_string();
    ctx.events
        .warn(&reference, error.reason(), message.clone())
        .await;
    if let Err(e) = write_status(parent, ctx, None, Some((error.reason(), &message))).await {
        tracing::warn!(guest = %ctx.guest_name, "could not record the failure on the parent's status: {e}");
    }
}

fn without_managed_fields(mut object: Value) -> Value {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    object
}

fn now_rfc3339() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .round(k8s_openapi::jiff::Unit::Second)
        .map_or_else(|_| String::new(), |t| t.to_string())
}
