//! Turning validated guest output into API writes: stamping ownership,
//! deciding what actually changed, server-side apply and pruning.
//!
//! The rule that matters most here: a converged object costs **zero writes**.
//! A desired child is applied only when the guest's wish changed (tracked by
//! a hash annotation) or when the cluster drifted from it (a field the guest
//! sets has another value, or is gone). Server defaults and fields other
//! managers own do not count as drift.

use kube::api::{
    Api, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions, PropagationPolicy,
};
use kube::core::ApiResource;
use kube::{Client, ResourceExt};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::validate::{DesiredChild, GUEST_LABEL};

/// Annotation holding the hash of what the host last applied for a child.
pub const DESIRED_HASH_ANNOTATION: &str = "wasmop.dev/desired-hash";

/// The parent as the host needs it for stamping.
#[derive(Clone, Copy, Debug)]
pub struct Owner<'a> {
    /// `apiVersion` of the parent.
    pub api_version: &'a str,
    /// `kind` of the parent.
    pub kind: &'a str,
    /// Parent name.
    pub name: &'a str,
    /// Parent UID.
    pub uid: &'a str,
    /// Parent namespace (`None` when cluster-scoped).
    pub namespace: Option<&'a str>,
}

/// Returns the child as the host applies it: namespace, guest label,
/// controller ownerReference and the desired-hash annotation added.
pub fn stamp(child: &DesiredChild, owner: Owner<'_>, guest: &str) -> Value {
    let mut object = child.object.clone();
    let metadata = object.entry("metadata").or_insert_with(|| json!({}));
    let meta = metadata
        .as_object_mut()
        .expect("validated: metadata is an object");
    if let (false, Some(ns)) = (child.cluster_scoped, owner.namespace) {
        meta.insert("namespace".into(), ns.into());
    }
    let labels = meta.entry("labels").or_insert_with(|| json!({}));
    if let Some(labels) = labels.as_object_mut() {
        labels.insert(GUEST_LABEL.into(), guest.into());
    }
    meta.insert(
        "ownerReferences".into(),
        json!([{
            "apiVersion": owner.api_version,
            "kind": owner.kind,
            "name": owner.name,
            "uid": owner.uid,
            "controller": true,
            "blockOwnerDeletion": true,
        }]),
    );
    // A guest that re-emits an observed child (paused, deleting) hands back
    // the previous hash too; it is the host's, never part of the wish.
    if let Some(a) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
        a.remove(DESIRED_HASH_ANNOTATION);
        if a.is_empty() {
            meta.remove("annotations");
        }
    }
    let hash = hash_of(&object);
    let meta = object
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
        .expect("inserted above");
    let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
    if let Some(a) = annotations.as_object_mut() {
        a.insert(DESIRED_HASH_ANNOTATION.into(), hash.into());
    }
    Value::Object(object)
}

/// sha256 of the canonical JSON text of `object` (serde_json maps are
/// sorted, so equal objects hash equal), first 16 bytes in hex.
fn hash_of(object: &Map<String, Value>) -> String {
    let text = serde_json::to_string(object).expect("JSON values always serialise");
    hex::encode(&Sha256::digest(text.as_bytes())[..16])
}

/// Why `observed` is not what applying `stamped` would make it, or `None`
/// when it already is: the guest's wish changed (hash annotation) or the
/// cluster drifted (the JSON path of the first field that differs).
pub fn drift(stamped: &Value, observed: &DynamicObject) -> Option<String> {
    let want = stamped.pointer(&format!(
        "/metadata/annotations/{}",
        DESIRED_HASH_ANNOTATION.replace('/', "~1")
    ));
    let have = observed.annotations().get(DESIRED_HASH_ANNOTATION);
    if want.and_then(Value::as_str) != have.map(String::as_str) {
        return Some("desired state changed".into());
    }
    let observed = serde_json::to_value(observed).expect("objects serialise");
    first_difference(stamped, &observed, &mut String::new())
}

/// The first place where `want` is not contained in `have`: every field of
/// `want` must be present in `have` with the same value; lists must have the
/// same length and match item by item. Extra fields in `have` (server
/// defaults, other managers) are fine.
fn first_difference(want: &Value, have: &Value, path: &mut String) -> Option<String> {
    match (want, have) {
        (Value::Object(w), Value::Object(h)) => w.iter().find_map(|(k, wv)| {
            let len = path.len();
            path.push('/');
            path.push_str(k);
            let found = match h.get(k) {
                Some(hv) => first_difference(wv, hv, path),
                // An empty or null value the guest sets may be omitted by the server.
                None if is_empty(wv) => None,
                None => Some(format!("{path} is missing")),
            };
            path.truncate(len);
            found
        }),
        (Value::Array(w), Value::Array(h)) if w.len() == h.len() => {
            w.iter().zip(h).enumerate().find_map(|(i, (a, b))| {
                let len = path.len();
                path.push_str(&format!("/{i}"));
                let found = first_difference(a, b, path);
                path.truncate(len);
                found
            })
        }
        (Value::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64() => None,
        _ if want == have => None,
        // The server drops empty maps and lists it was given.
        _ if is_empty(want) && have.is_null() => None,
        _ => Some(format!("{path} differs")),
    }
}

fn is_empty(v: &Value) -> bool {
    v.is_null()
        || v.as_object().is_some_and(Map::is_empty)
        || v.as_array().is_some_and(Vec::is_empty)
}

/// Server-side apply of one stamped child with the guest's field manager.
pub async fn apply_child(
    client: &Client,
    ar: &ApiResource,
    namespace: Option<&str>,
    name: &str,
    manager: &str,
    stamped: &Value,
) -> kube::Result<DynamicObject> {
    api_for(client, ar, namespace)
        .patch(
            name,
            &PatchParams::apply(manager).force(),
            &Patch::Apply(stamped),
        )
        .await
}

/// Deletes an observed child that is no longer desired, only if it is still
/// the object we observed (UID precondition). Gone already is success.
pub async fn prune_child(
    client: &Client,
    ar: &ApiResource,
    child: &DynamicObject,
) -> kube::Result<()> {
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: child.uid(),
            resource_version: None,
        }),
        propagation_policy: Some(PropagationPolicy::Background),
        ..DeleteParams::default()
    };
    match api_for(client, ar, child.namespace().as_deref())
        .delete(&child.name_any(), &params)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

/// An `Api` for a dynamic kind, namespaced when a namespace is given.
pub fn api_for(client: &Client, ar: &ApiResource, namespace: Option<&str>) -> Api<DynamicObject> {
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, ar),
        None => Api::all_with(client.clone(), ar),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn child(object: Value) -> DesiredChild {
        DesiredChild {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "demo".into(),
            cluster_scoped: false,
            object: object.as_object().unwrap().clone(),
        }
    }

    const OWNER: Owner<'static> = Owner {
        api_version: "apps.example.com/v1alpha1",
        kind: "Cache",
        name: "demo",
        uid: "u-1",
        namespace: Some("team-a"),
    };

    #[test]
    fn stamping_sets_namespace_label_controller_owner_and_hash() {
        let s = stamp(
            &child(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "demo"}})),
            OWNER,
            "cache",
        );
        assert_eq!(s["metadata"]["namespace"], "team-a");
        assert_eq!(s["metadata"]["labels"][GUEST_LABEL], "cache");
        let owner = &s["metadata"]["ownerReferences"][0];
        assert_eq!(owner["controller"], true);
        assert_eq!(owner["blockOwnerDeletion"], true);
        assert_eq!(owner["uid"], "u-1");
        assert_eq!(
            s["metadata"]["annotations"][DESIRED_HASH_ANNOTATION]
                .as_str()
                .unwrap()
                .len(),
            32
        );
    }

    #[test]
    fn equal_wishes_hash_equal_and_different_wishes_differ() {
        let a = stamp(
            &child(
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "demo"}, "data": {"a": "1"}}),
            ),
            OWNER,
            "cache",
        );
        let b = stamp(
            &child(
                json!({"kind": "ConfigMap", "data": {"a": "1"}, "apiVersion": "v1", "metadata": {"name": "demo"}}),
            ),
            OWNER,
            "cache",
        );
        let c = stamp(
            &child(
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "demo"}, "data": {"a": "2"}}),
            ),
            OWNER,
            "cache",
        );
        let h = |v: &Value| v["metadata"]["annotations"][DESIRED_HASH_ANNOTATION].clone();
        assert_eq!(h(&a), h(&b));
        assert_ne!(h(&a), h(&c));
    }

    #[test]
    fn a_re_emitted_observed_child_hashes_like_the_original_wish() {
        let wish =
            child(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "demo"}}));
        let first = stamp(&wish, OWNER, "cache");
        let mut again = first.clone();
        again["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("ownerReferences");
        let second = stamp(&child(again), OWNER, "cache");
        assert_eq!(first, second);
    }

    fn is_subset(want: &Value, have: &Value) -> bool {
        first_difference(want, have, &mut String::new()).is_none()
    }

    #[test]
    fn server_defaults_are_not_drift_but_changed_values_are() {
        let want = json!({"spec": {"replicas": 2, "ports": [{"port": 80}]}});
        let defaulted = json!({"spec": {"replicas": 2, "ports": [{"port": 80, "protocol": "TCP"}], "strategy": {}}});
        assert!(is_subset(&want, &defaulted));
        assert!(!is_subset(
            &want,
            &json!({"spec": {"replicas": 3, "ports": [{"port": 80}]}})
        ));
        assert!(!is_subset(
            &want,
            &json!({"spec": {"replicas": 2, "ports": []}})
        ));
        assert!(!is_subset(
            &want,
            &json!({"spec": {"ports": [{"port": 80}]}})
        ));
        assert!(is_subset(&json!({"a": 1}), &json!({"a": 1.0})));
    }
}
