//! The parent's status: what the guest's desired status and the host's
//! own `GuestReconciled` condition ask to write (planned without I/O), and
//! the writes.
//!
//! Both go through the status subresource by server-side apply, under two
//! field managers: the guest's (`wasmop-<guest>`) for what the guest asked,
//! the host's (`wasmop-host-<guest>`) for its condition. The guest's status
//! arrives without the host's condition (`validate` strips it), and is
//! compared with the observed status without it, so each manager owns
//! exactly its part and a converged parent gets no write. A condition's
//! `lastTransitionTime` moves only when its status does (as Kubernetes'
//! `meta.SetStatusCondition` keeps it): a guest that stamps the time of
//! every answer on an unchanged condition changes nothing.

use kube::api::{DynamicObject, Patch, PatchParams};
use kube::{Resource as _, ResourceExt};
use serde_json::{Map, Value, json};
use wasmop_contract::Reason;
use wasmop_contract::names::HOST_CONDITION;

use super::context::Context;
use crate::validate::without_host_condition;

/// What the host's condition should say.
#[derive(Clone, Copy, Debug)]
pub enum HostCondition<'a> {
    /// The reconcile succeeded: `True` again if it was `False`.
    Succeeded,
    /// It failed with this reason and message.
    Failed(Reason, &'a str),
    /// None kept: the parent is another controller's object (a
    /// Metacontroller decorator's target), whose status is written only as
    /// the hook answers it, without `observedGeneration`.
    Omitted,
}

/// The status writes a parent needs, each `None` when the parent already
/// shows it.
#[derive(Debug, Default, PartialEq)]
pub struct StatusWrites {
    /// The guest's status, with `observedGeneration`: applied under the
    /// guest's field manager.
    pub guest: Option<Value>,
    /// The host's condition: applied under the host's field manager.
    pub host: Option<Value>,
}

impl StatusWrites {
    /// Whether nothing is to be written.
    pub fn is_empty(&self) -> bool {
        self.guest.is_none() && self.host.is_none()
    }
}

/// A status write the API server refused.
#[derive(Debug, thiserror::Error)]
#[error("{action}: {source}")]
pub struct WriteFailed {
    /// What the host was writing.
    pub action: &'static str,
    /// The API error.
    #[source]
    pub source: kube::Error,
}

/// The status `desired` asks for, as it is compared with the parent's: with
/// `observedGeneration`, and each condition whose status is the one the
/// parent shows with the parent's `lastTransitionTime`.
fn wanted(parent: &DynamicObject, desired: &Map<String, Value>, generation: bool) -> Value {
    let mut want = desired.clone();
    if let (Some(Value::Array(conditions)), Some(shown)) = (
        want.get_mut("conditions"),
        parent
            .data
            .pointer("/status/conditions")
            .and_then(Value::as_array),
    ) {
        for condition in conditions.iter_mut().filter_map(Value::as_object_mut) {
            let same = shown.iter().find(|c| {
                c.get("type") == condition.get("type") && c.get("status") == condition.get("status")
            });
            if let (Some(since), Some(time)) = (
                same.and_then(|c| c.get("lastTransitionTime")),
                condition.get_mut("lastTransitionTime"),
            ) {
                time.clone_from(since);
            }
        }
    }
    if let Some(g) = parent.metadata.generation.filter(|_| generation) {
        want.insert("observedGeneration".into(), g.into());
    }
    Value::Object(want)
}

/// The parent's status without the host's condition.
fn observed(parent: &DynamicObject) -> Value {
    match parent.data.get("status") {
        Some(Value::Object(map)) => Value::Object(without_host_condition(map.clone())),
        Some(other) => other.clone(),
        None => Value::Null,
    }
}

/// The parent's status as it is now and as writing `desired` would leave
/// it (both without the host's condition): what `wasmop plan` compares.
pub fn status_change(
    parent: &DynamicObject,
    desired: Option<&Map<String, Value>>,
) -> (Value, Value) {
    let now = observed(parent);
    let then = desired.map_or_else(|| now.clone(), |d| wanted(parent, d, true));
    (now, then)
}

/// What writing `desired` (the guest's status, host condition already
/// removed) and bringing the host's condition to `condition` would write
/// to `parent`, the condition's transition stamped `now`. With `schema`
/// (the CRD's schema of `.status`), both are first pruned to the fields it
/// declares, as the API server prunes an update: for a CRD written for
/// another controller, whose status may not declare `observedGeneration` or
/// conditions. Pure.
pub fn plan(
    parent: &DynamicObject,
    desired: Option<&Map<String, Value>>,
    condition: HostCondition<'_>,
    now: &str,
    schema: Option<&Value>,
) -> StatusWrites {
    let pruned = |mut status: Value| {
        if let Some(schema) = schema {
            prune(&mut status, schema);
        }
        status
    };
    let generation = !matches!(condition, HostCondition::Omitted);
    let guest = desired
        .map(|desired| pruned(wanted(parent, desired, generation)))
        .filter(|want| observed(parent) != *want);
    // The host's own condition: False with the reason after a failure, back
    // to True after the next success. Written only when it changes.
    let current = parent.data.get("status").and_then(|s| host_condition_of(s));
    let host_wants = match condition {
        HostCondition::Failed(reason, message) => Some((
            "False",
            reason.as_str(),
            crate::sink::cut(message, crate::sink::CONDITION_MESSAGE_BYTES),
        )),
        HostCondition::Succeeded if current.is_some_and(|c| c["status"] != "True") => {
            Some(("True", Reason::Reconciled.as_str(), "".into()))
        }
        HostCondition::Succeeded | HostCondition::Omitted => None,
    };
    let host = host_wants
        .filter(|(status, reason, message)| {
            !current.is_some_and(|c| {
                c["status"] == *status && c["reason"] == *reason && c["message"] == **message
            })
        })
        .map(|(status, reason, message)| {
            pruned(json!({"conditions": [{
                "type": HOST_CONDITION,
                "status": status,
                "reason": reason,
                "message": message,
                "observedGeneration": parent.metadata.generation,
                "lastTransitionTime": now,
            }]}))
        })
        // A schema without conditions has no room for the host's.
        .filter(|host| host.get("conditions").is_some());
    StatusWrites { guest, host }
}

/// The schema [`plan`] prunes `guest`'s status to: the CRD's status schema
/// (`schema`) for a guest made from a Metacontroller controller, whose
/// parents' CRDs were written for Metacontroller; none for any other guest,
/// whose status fields its CRD declares.
pub fn schema_for<'a>(
    guest: &crate::runtime::Guest,
    schema: Option<&'a Value>,
) -> Option<&'a Value> {
    guest.follows_metacontroller().then_some(schema).flatten()
}

/// Drops from `value` every field `schema` (a structural OpenAPI schema,
/// as a CRD gives it) does not declare, as the API server prunes an object
/// it stores: properties are kept by `properties` or `additionalProperties`,
/// list items by `items`, anything under
/// `x-kubernetes-preserve-unknown-fields: true`.
pub fn prune(value: &mut Value, schema: &Value) {
    let preserve = schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    match value {
        Value::Object(map) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties");
            let embedded = schema.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true));
            map.retain(|key, field| {
                if let Some(inner) = properties.and_then(|p| p.get(key)) {
                    prune(field, inner);
                    true
                } else if let Some(inner) = additional.filter(|a| a.is_object()) {
                    prune(field, inner);
                    true
                } else {
                    preserve
                        || additional == Some(&Value::Bool(true))
                        || (embedded && matches!(key.as_str(), "apiVersion" | "kind" | "metadata"))
                }
            });
        }
        Value::Array(items) => {
            if let Some(inner) = schema.get("items").filter(|i| i.is_object()) {
                for item in items {
                    prune(item, inner);
                }
            }
        }
        _ => {}
    }
}

/// Sends `writes` for `parent`; returns the parent as the last write left
/// it, if one was made.
pub async fn write(
    parent: &DynamicObject,
    ctx: &Context,
    writes: StatusWrites,
) -> Result<Option<DynamicObject>, WriteFailed> {
    let api = ctx.parent_api(parent.namespace().as_deref());
    let mut written: Option<DynamicObject> = None;
    let sends = [
        (writes.guest, &ctx.field_manager, "writing status"),
        (writes.host, &ctx.host_manager, "writing the host condition"),
    ];
    for (status, manager, action) in sends {
        let Some(status) = status else { continue };
        let body = status_body(parent, ctx, status);
        let object = api
            .patch_status(
                &parent.name_any(),
                &PatchParams::apply(manager).force(),
                &Patch::Apply(&body),
            )
            .await
            .map_err(|source| WriteFailed { action, source })?;
        ctx.last_writes
            .remember(written.as_ref().unwrap_or(parent), &object);
        written = Some(object);
    }
    Ok(written)
}

/// The time a condition's transition is stamped with: now, to the second.
pub fn now_rfc3339() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .round(k8s_openapi::jiff::Unit::Second)
        .map_or_else(|_| String::new(), |t| t.to_string())
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

/// The parent's object reference, for Events.
pub fn reference(
    parent: &DynamicObject,
    ctx: &Context,
) -> k8s_openapi::api::core::v1::ObjectReference {
    parent.object_ref(&ctx.kinds.primary.resource)
}
