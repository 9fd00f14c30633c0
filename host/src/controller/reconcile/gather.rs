//! Gather: what a reconcile observes of its parent (its children and
//! related objects from the caches, once they are listed), and the request
//! a guest gets for one parent, gathered one way for the controller,
//! `wasmop plan` and `wasmop render`.
//!
//! Every object reaches the guest without the managedFields entries the
//! host keeps for its own use; each Secret among the observed children is
//! concealed unless the guest's entry says `secretValues: true` (the host
//! keeps its children's values for the drift check). Related objects are
//! concealed, stripped to their metadata where declared so, and bounded
//! where they are read (the controller's related cache, `plan`'s lists,
//! `render`'s input), so they come here as the guest may see them.

use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt;
use kube::api::DynamicObject;
use serde_json::Value;

use super::ReconcileError;
use crate::controller::adopt;
use crate::controller::compact::parent_ref;
use crate::controller::context::Context;
use crate::controller::customized;
use crate::controller::discovery::ResolvedKind;
use crate::controller::index::ChildKey;
use crate::controller::progress;
use crate::controller::related::{RelatedBounds, RelatedTooLarge};
use crate::model::{Description, Request};
use crate::runtime::Guest;

/// How long a reconcile waits for the caches' first lists before it fails
/// (and is retried with backoff) instead of waiting for ever.
pub const CHILD_CACHE_TIMEOUT: Duration = Duration::from_secs(30);

/// What a reconcile observed of its parent.
pub(super) struct Gathered {
    /// The parent's observed children, by index of their kind.
    pub(super) observed: Vec<(usize, Arc<DynamicObject>)>,
    /// The request for the version that answers.
    pub(super) request: Arc<Request>,
    /// Each observed child's key and resourceVersion.
    pub(super) versions: Vec<(ChildKey, String)>,
    /// The fingerprint of the related objects the request carries.
    pub(super) related_versions: u64,
    /// What the progress check found at the start.
    pub(super) start: progress::Start,
    /// A Metacontroller hook guest's `related`: what its customize hook
    /// selected (`null` for any other guest).
    pub(super) hook_related: serde_json::Value,
}

/// Gathers what `guest` is to be asked about `parent` (`latest`: the parent
/// as the host's finalizer write just left it), once the caches are listed.
pub(super) async fn gather(
    parent: &DynamicObject,
    ctx: &Context,
    guest: &Guest,
    deleting: bool,
    latest: Option<&DynamicObject>,
) -> Result<Gathered, ReconcileError> {
    // Never decide on half-filled caches: a child that is merely not listed
    // yet would look missing (and be re-created) or unwanted. Only the
    // kinds this version declares: during a rollout the caches also hold
    // the other version's, whose watch is no concern of this one.
    let description = guest.description();
    ctx.children
        .wait_ready(CHILD_CACHE_TIMEOUT, &ctx.child_kind_names, |i| {
            declares_child(description, &ctx.kinds.children[i])
        })
        .await?;
    ctx.related
        .wait_ready(CHILD_CACHE_TIMEOUT, &ctx.related_kind_names, |i| {
            description.related.contains(&ctx.kinds.related[i].1)
        })
        .await?;
    let uid = parent.uid().unwrap_or_default();
    let mut observed = ctx.children.children_of(&uid);
    observed.extend(adopted(parent, ctx, guest).await?);
    let (request, mut related) = request_for(guest, parent, ctx, &observed, deleting)?;
    let hook_related = match guest.metacontroller() {
        Some(controller) => {
            let (objects, kinds) = customized(parent, ctx, guest).await?;
            let value = crate::metacontroller::sync::related_map(
                controller.parent.namespaced,
                &kinds,
                objects.iter().map(|o| shown(value(o))),
            );
            related.extend(objects);
            value
        }
        None => Value::Null,
    };
    let versions = observed_versions(&observed);
    // A change of a related object is a change outside the host, like one
    // of the parent's spec.
    let related_versions = progress::related_fingerprint(&related);
    let spec =
        progress::spec_fingerprint(latest.unwrap_or(parent), guest.digest()) ^ related_versions;
    let start = ctx.progress.start(&uid, spec, &versions);
    Ok(Gathered {
        observed,
        request: Arc::new(request),
        versions,
        related_versions,
        start,
        hook_related,
    })
}

/// The orphans a Metacontroller CompositeController's parent adopts by its
/// `spec.selector` (without `generateSelector`), once per generation.
async fn adopted(
    parent: &DynamicObject,
    ctx: &Context,
    guest: &Guest,
) -> Result<Vec<(usize, Arc<DynamicObject>)>, ReconcileError> {
    let Some(controller) = guest.metacontroller() else {
        return Ok(Vec::new());
    };
    if controller.decorates() || controller.definition.generate_selector {
        return Ok(Vec::new());
    }
    let (Some(selector), Some(uid)) = (adopt::selector_of(parent), parent.uid()) else {
        return Ok(Vec::new());
    };
    let generation = parent.metadata.generation.unwrap_or_default();
    if !ctx.adoption.due(&uid, generation) {
        return Ok(Vec::new());
    }
    let description = guest.description();
    let claim = adopt::Claim {
        client: &ctx.client,
        parent,
        primary: &ctx.kinds.primary.resource,
        guest: &ctx.guest_name,
        kinds: ctx
            .kinds
            .children
            .iter()
            .enumerate()
            .filter(|(_, k)| k.namespaced && declares_child(description, k))
            .map(|(i, k)| (i, &k.resource))
            .collect(),
        protected: &ctx.protected,
    };
    let adopted = adopt::adopt(claim, &selector)
        .await
        .map_err(ReconcileError::api(
            "adopting the orphans the parent's selector matches",
        ))?;
    if !adopted.again {
        ctx.adoption.claimed(&uid, generation);
    }
    Ok(adopted
        .children
        .into_iter()
        .map(|(kind, object)| (kind, Arc::new(object)))
        .collect())
}

/// The related objects a Metacontroller hook guest's customize hook
/// selects for `parent` (none without one), and each rule's
/// `<Kind>.<apiVersion>`.
async fn customized(
    parent: &DynamicObject,
    ctx: &Context,
    guest: &Guest,
) -> Result<(Vec<Arc<DynamicObject>>, Vec<String>), ReconcileError> {
    let has_hook = guest
        .metacontroller()
        .is_some_and(|c| c.definition.hooks.customize.is_some());
    if !has_hook {
        return Ok((Vec::new(), Vec::new()));
    }
    let shown = value(parent);
    let hook = guest.clone();
    let rules = tokio::task::spawn_blocking(move || hook.call_customize(&shown)).await??;
    if rules.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let key = parent_ref(
        &ctx.kinds.primary.resource,
        parent.metadata.namespace.as_deref(),
        &parent.name_any(),
    );
    ctx.customized
        .objects(&key, rules, guest.limits(), CHILD_CACHE_TIMEOUT)
        .await
        .map_err(|e| match e {
            customized::Error::NotReady(e) => ReconcileError::Watch(e),
            customized::Error::TooLarge(e) => ReconcileError::RelatedTooLarge(e),
            customized::Error::Rule(message) => {
                ReconcileError::Call(crate::runtime::CallError::Guest(
                    crate::model::ReconcileError {
                        kind: crate::model::ErrorKind::Retryable,
                        message,
                    }
                    .into(),
                ))
            }
        })
}

/// The request `guest` gets for `parent`: the observed children and related
/// objects of the kinds it declares (during a rollout the caches hold both
/// versions' kinds).
pub(super) fn request_for(
    guest: &Guest,
    parent: &DynamicObject,
    ctx: &Context,
    observed: &[(usize, Arc<DynamicObject>)],
    deleting: bool,
) -> Result<(Request, Vec<Arc<DynamicObject>>), RelatedTooLarge> {
    let description = guest.description();
    let declared = |kind: usize| declares_child(description, &ctx.kinds.children[kind]);
    let related = ctx.related.objects_of_declared(
        parent,
        |d| description.related.contains(d),
        &RelatedBounds::from(guest.limits()),
    )?;
    let request = self::request(
        value(parent),
        observed
            .iter()
            .filter(|(kind, _)| declared(*kind))
            .map(|(_, o)| value(o)),
        related.iter().map(|o| value(o)),
        deleting,
        ctx.settings.secret_values,
    );
    Ok((request, related))
}

/// Whether `description` declares the watched child kind `kind`.
fn declares_child(description: &Description, kind: &ResolvedKind) -> bool {
    description
        .children
        .iter()
        .any(|c| c.kind.same_resource(&kind.kind))
}

/// Each observed child's key and resourceVersion.
fn observed_versions(observed: &[(usize, Arc<DynamicObject>)]) -> Vec<(ChildKey, String)> {
    observed
        .iter()
        .map(|(kind, o)| {
            (
                (*kind, o.namespace(), o.name_any()),
                o.resource_version().unwrap_or_default(),
            )
        })
        .collect()
}

/// `object` as JSON.
pub fn value(object: &DynamicObject) -> Value {
    serde_json::to_value(object).expect("objects serialise")
}

/// An object as a guest is shown it: without its managedFields.
fn shown(mut object: Value) -> Value {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    object
}

/// The request for `parent`: its `observed` children of the kinds the
/// guest declares, and its `related` objects as read.
pub fn request(
    parent: Value,
    observed: impl IntoIterator<Item = Value>,
    related: impl IntoIterator<Item = Value>,
    deleting: bool,
    secret_values: bool,
) -> Request {
    Request {
        parent: shown(parent),
        observed: observed
            .into_iter()
            .map(|child| {
                let mut child = shown(child);
                if !secret_values {
                    crate::secrets::conceal(&mut child);
                }
                child
            })
            .collect(),
        deleting,
        related: related.into_iter().map(shown).collect(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// `value` as the API server's objects reach the host.
    fn object(value: Value) -> DynamicObject {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn children_are_concealed_and_nothing_carries_managed_fields() {
        let managed = json!([{"manager": "wasmop", "operation": "Apply"}]);
        let parent = value(&object(
            json!({"apiVersion": "apps.example.com/v1alpha1", "kind": "Cache",
            "metadata": {"name": "c", "namespace": "d", "managedFields": managed}}),
        ));
        let secret = value(&object(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s", "namespace": "d", "managedFields": managed},
            "data": {"password": "aHVudGVyMg=="}})));
        let related = value(&object(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "r", "namespace": "d", "managedFields": managed}})));

        let request = request(
            parent.clone(),
            [secret.clone()],
            [related.clone()],
            true,
            false,
        );
        for value in [&request.parent, &request.observed[0], &request.related[0]] {
            assert!(
                value.pointer("/metadata/managedFields").is_none(),
                "{value}"
            );
        }
        assert_ne!(request.observed[0]["data"]["password"], "aHVudGVyMg==");
        assert!(request.deleting);

        let shown = super::request(parent, [secret], [], false, true);
        assert_eq!(shown.observed[0]["data"]["password"], "aHVudGVyMg==");
    }
}
