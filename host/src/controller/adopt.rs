//! Adoption by label selector, as Metacontroller's CompositeController
//! claims children: a parent without `generateSelector` names its
//! children's labels in `spec.selector`; an object of a child kind in its
//! namespace that matches the selector and has no controller is made the
//! parent's child (its controller ownerReference and the guest's label set,
//! on the resourceVersion it was read at), so the hook sees it among the
//! children and what it does not want is pruned like any child.
//!
//! The children are listed once per generation of the parent (the
//! selector is in its spec), not at every sync: a parent's orphans appear
//! when it is created or its selector changes (a controller moving over from
//! Metacontroller, a user's objects). Secrets and the host's own objects
//! are never adopted, and an object another controller owns is left alone.

use std::collections::HashMap;
use std::sync::Mutex;

use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, Selector};
use kube::{Client, ResourceExt};
use serde_json::json;
use wasmop_contract::names::GUEST_LABEL;

use super::index::controller_uid;
use crate::protected::ProtectedObjects;

/// The generation each parent's children were last claimed at.
#[derive(Debug, Default)]
pub struct Adoption {
    claimed: Mutex<HashMap<String, i64>>,
}

impl Adoption {
    /// Whether the parent `uid` at `generation` has not been claimed for
    /// yet.
    pub fn due(&self, uid: &str, generation: i64) -> bool {
        self.claimed.lock().expect("adoption lock").get(uid) != Some(&generation)
    }

    /// Records that the parent `uid` was claimed for at `generation`.
    pub fn claimed(&self, uid: &str, generation: i64) {
        self.claimed
            .lock()
            .expect("adoption lock")
            .insert(uid.to_owned(), generation);
    }

    /// Forgets every parent `live` does not keep.
    pub fn retain(&self, live: impl Fn(&str) -> bool) {
        self.claimed
            .lock()
            .expect("adoption lock")
            .retain(|uid, _| live(uid));
    }
}

/// The parent's `spec.selector`, when it has one that selects something.
pub fn selector_of(parent: &DynamicObject) -> Option<Selector> {
    let selector = parent.data.pointer("/spec/selector")?;
    let parsed: k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector =
        serde_json::from_value(selector.clone()).ok()?;
    Selector::try_from(parsed).ok().filter(|s| !s.selects_all())
}

/// What a claim is made for: the parent and its kind, the guest that
/// adopts and the child kinds to look through.
pub struct Claim<'a> {
    /// The guest's client (its identity adopts).
    pub client: &'a Client,
    /// The parent.
    pub parent: &'a DynamicObject,
    /// The parent's kind.
    pub primary: &'a ApiResource,
    /// The guest's name, labelled on each adopted child.
    pub guest: &'a str,
    /// Each namespaced child kind, by its index.
    pub kinds: Vec<(usize, &'a ApiResource)>,
    /// The host's own objects.
    pub protected: &'a ProtectedObjects,
}

/// What a claim adopted.
#[derive(Debug, Default)]
pub struct Adopted {
    /// Each adopted child, as the adopting write left it, with its kind's
    /// index.
    pub children: Vec<(usize, DynamicObject)>,
    /// An orphan changed between its list and its adoption: the claim is
    /// to be made again.
    pub again: bool,
}

/// Adopts the orphans of `claim`'s child kinds in the parent's namespace
/// that `selector` matches.
pub async fn adopt(claim: Claim<'_>, selector: &Selector) -> Result<Adopted, kube::Error> {
    let mut adopted = Adopted::default();
    let Some(namespace) = claim.parent.namespace() else {
        return Ok(adopted);
    };
    let uid = claim.parent.uid().unwrap_or_default();
    for (kind, resource) in claim.kinds {
        if resource.group.is_empty() && resource.kind == "Secret" {
            continue;
        }
        let api: Api<DynamicObject> =
            Api::namespaced_with(claim.client.clone(), &namespace, resource);
        let listed = api
            .list(&ListParams::default().labels(&selector.to_string()))
            .await?;
        for object in listed.items {
            let name = object.name_any();
            if controller_uid(&object).is_some()
                || object.metadata.deletion_timestamp.is_some()
                || claim.protected.contains(
                    &resource.group,
                    &resource.kind,
                    Some(&namespace),
                    &name,
                )
            {
                continue;
            }
            let mut owners = object.owner_references().to_vec();
            owners.push(
                k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                    api_version: claim.primary.api_version.clone(),
                    kind: claim.primary.kind.clone(),
                    name: claim.parent.name_any(),
                    uid: uid.clone(),
                    controller: Some(true),
                    block_owner_deletion: Some(true),
                },
            );
            let patch = json!({"metadata": {
                "resourceVersion": object.resource_version(),
                "ownerReferences": owners,
                "labels": {GUEST_LABEL: claim.guest},
            }});
            match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(mut written) => {
                    tracing::info!(kind = %resource.kind, name, "adopted an orphan the parent's selector matches");
                    written.types.get_or_insert_with(|| kube::core::TypeMeta {
                        api_version: resource.api_version.clone(),
                        kind: resource.kind.clone(),
                    });
                    adopted.children.push((kind, written));
                }
                // Changed since it was listed (another controller may
                // have claimed it) or gone: looked at again next time.
                Err(kube::Error::Api(e)) if e.code == 409 || e.code == 404 => adopted.again = true,
                Err(e) => return Err(e),
            }
        }
    }
    Ok(adopted)
}
