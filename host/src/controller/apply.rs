//! Turning validated guest output into API writes: stamping ownership,
//! deciding what actually changed, writing only what the parent controls,
//! and pruning.
//!
//! Two rules matter most here.
//!
//! **Zero writes when converged.** A desired child is applied only when the
//! guest's wish changed (tracked by a hash annotation) or when the cluster
//! drifted from it (a field the guest sets has another value, or is gone).
//! Server defaults and fields other managers own do not count as drift.
//!
//! **The ownership fence.** The host writes only objects the reconciled
//! parent controls, and objects it creates for that parent:
//! - a child the host observes as the parent's is applied with its UID in
//!   the body, so the API server refuses the write if the object was
//!   replaced by another one of the same name in the meantime;
//! - a child the host does not observe is created (POST), which fails if
//!   the name is taken: nothing is ever taken over by a server-side apply.
//!   A create records the guest's field-manager entry as an update, whose
//!   fields a later apply could not drop. The create also records the
//!   shape of what it wrote ([`CREATED_SHAPE_ANNOTATION`]: its map keys
//!   and its lists); an apply of the same shape (values changed, such as
//!   replicas scaled to zero) drops nothing and is one write. The first
//!   apply of another shape is preceded by one small patch that marks
//!   the update entry as an apply (or removes it, once an apply entry
//!   holds the same fields), so the apply owns, and can drop, every field
//!   the guest set. A child that never changes costs one write;
//! - a name taken by an object the parent does not control is refused
//!   ([`Written::Taken`]), unless the guest list allows adopting orphans
//!   (`adoptOrphans: true`): an object with no controller at all, not a
//!   Secret, is then adopted by an apply that carries the object's
//!   resourceVersion, so it fails if the object changed since it was read;
//! - pruning deletes only observed children, with a UID precondition.

use kube::api::{
    Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, Preconditions,
    PropagationPolicy,
};
use kube::core::ApiResource;
use kube::{Client, ResourceExt};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use wasmop_contract::names::{DESIRED_HASH_ANNOTATION, SHARD_LABEL};

use super::index::controller_uid;
use crate::validate::{DesiredChild, GUEST_LABEL};

/// The annotation a create leaves on a child: the hash of the shape of
/// what it wrote ([`shape_of`]), so that a later apply of the same shape
/// knows it drops no field and needs no mark.
const CREATED_SHAPE_ANNOTATION: &str = "wasmop.dev/created-shape";

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
    /// The parent's shard, when its guest has several.
    pub shard: Option<u16>,
}

/// Returns the child as the host applies it: namespace, guest label,
/// controller ownerReference and the desired-hash annotation added, and the
/// parent's shard label when its guest has several.
pub fn stamp(child: &DesiredChild, owner: Owner<'_>, guest: &str) -> Value {
    let mut object = child.object.clone();
    let metadata = object.entry("metadata").or_insert_with(|| json!({}));
    let meta = metadata
        .as_object_mut()
        .expect("validated: metadata is an object");
    if let Some(ns) = &child.namespace {
        meta.insert("namespace".into(), ns.as_str().into());
    }
    // Validation lets only maps of strings through; whatever else reached
    // here would be replaced, never left unstamped.
    string_map(meta, "labels").insert(GUEST_LABEL.into(), guest.into());
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
    let hash = hash_of(&object);
    let meta = object
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
        .expect("inserted above");
    string_map(meta, "annotations").insert(DESIRED_HASH_ANNOTATION.into(), hash.into());
    // Outside the hash: the guest's wish does not change with the shard
    // its parent is in, and a moved child drifts from its new label.
    if let Some(shard) = owner.shard {
        string_map(meta, "labels").insert(SHARD_LABEL.into(), shard.to_string().into());
    }
    Value::Object(object)
}

/// `meta[field]` as a map, made one if it is missing or anything else.
fn string_map<'a>(meta: &'a mut Map<String, Value>, field: &str) -> &'a mut Map<String, Value> {
    let value = meta.entry(field).or_insert_with(|| json!({}));
    if !value.is_object() {
        *value = json!({});
    }
    value.as_object_mut().expect("made a map above")
}

/// sha256 of the canonical JSON text of `object` (serde_json maps are
/// sorted, so equal objects hash equal), first 16 bytes in hex.
fn hash_of(object: &Map<String, Value>) -> String {
    let text = serde_json::to_string(object).expect("JSON values always serialise");
    hex::encode(&Sha256::digest(text.as_bytes())[..16])
}

/// The hash of `object`'s shape: every map key at every depth outside
/// lists, and every list whole. Two objects of one shape hold the same
/// fields in server-side apply's terms (whatever its list types), so an
/// apply of one over the other drops nothing; any other difference
/// (a key gone or new, a list item changed) is another shape.
fn shape_of(object: &Value) -> String {
    fn shape(value: &Value) -> Value {
        match value {
            Value::Object(map) => Value::Object(
                map.iter()
                    .filter(|(k, _)| k.as_str() != CREATED_SHAPE_ANNOTATION)
                    .map(|(k, v)| (k.clone(), shape(v)))
                    .collect(),
            ),
            Value::Array(_) => value.clone(),
            _ => Value::Null,
        }
    }
    hash_of(&Map::from_iter([(String::new(), shape(object))]))
}

/// The JSON pointer to the annotation `key` of an object.
fn annotation_pointer(key: &str) -> String {
    format!(
        "/metadata/annotations/{}",
        key.replace('~', "~0").replace('/', "~1")
    )
}

/// Whether the guest's wish for a child changed since the host last wrote
/// it (its desired-hash annotation), as opposed to the cluster drifting
/// from it.
pub fn wish_changed(stamped: &Value, observed: &DynamicObject) -> bool {
    let want = stamped.pointer(&annotation_pointer(DESIRED_HASH_ANNOTATION));
    let have = observed.annotations().get(DESIRED_HASH_ANNOTATION);
    want.and_then(Value::as_str) != have.map(String::as_str)
}

/// Why `observed` is not what applying `stamped` would make it, or `None`
/// when it already is: the guest's wish changed (hash annotation) or the
/// cluster drifted (the JSON path of the first field that differs).
pub fn drift(stamped: &Value, observed: &DynamicObject) -> Option<String> {
    if wish_changed(stamped, observed) {
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

/// Where a child goes: its kind, namespace and name, and the field
/// manager it is written with.
#[derive(Clone, Copy, Debug)]
pub struct Target<'a> {
    /// The child's kind.
    pub resource: &'a ApiResource,
    /// Its namespace (`None` when cluster-scoped).
    pub namespace: Option<&'a str>,
    /// Its name.
    pub name: &'a str,
    /// The guest's field manager.
    pub manager: &'a str,
}

impl Target<'_> {
    fn api(&self, client: &Client) -> Api<DynamicObject> {
        api_for(client, self.resource, self.namespace)
    }
}

/// What writing a desired child came to.
#[derive(Debug)]
pub enum Written {
    /// The child as the API server holds it now, and the resourceVersion
    /// of an intermediate write (the mark before an apply), which a watch
    /// may still deliver.
    Done(Box<DynamicObject>, Option<String>),
    /// The name is taken by an object the parent does not control; nothing
    /// was written. The text names who controls it.
    Taken(String),
    /// The name was taken when the create ran, and free again when the
    /// host looked: the next reconcile creates it.
    Vanished,
}

/// Writes `stamped` for the parent `parent_uid` behind the fence (see the
/// module docs): `observed` is the child the host observes as the
/// parent's, if any.
pub async fn write_child(
    client: &Client,
    target: Target<'_>,
    stamped: &Value,
    observed: Option<&DynamicObject>,
    parent_uid: &str,
    adopt_orphans: bool,
) -> kube::Result<Written> {
    if let Some(observed) = observed {
        return apply_owned(client, target, stamped, observed)
            .await
            .map(|(o, marked)| Written::Done(Box::new(o), marked));
    }
    match create(client, target, stamped).await {
        Ok(created) => return Ok(Written::Done(Box::new(created), None)),
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => return Err(e),
    }
    // Taken. By the parent itself (a child the cache has not seen yet, or
    // one whose label someone removed), by an orphan, or by another owner.
    let Some(existing) = target.api(client).get_opt(target.name).await? else {
        return Ok(Written::Vanished);
    };
    match controller_uid(&existing) {
        Some(uid) if uid == parent_uid => apply_owned(client, target, stamped, &existing)
            .await
            .map(|(o, marked)| Written::Done(Box::new(o), marked)),
        None if adopt_orphans && target.resource.kind != "Secret" => {
            adopt(client, target, stamped, &existing)
                .await
                .map(|o| Written::Done(Box::new(o), None))
        }
        Some(_) => {
            let owner = existing
                .owner_references()
                .iter()
                .find(|o| o.controller == Some(true))
                .map(|o| format!("controlled by {} {}", o.kind, o.name))
                .unwrap_or_default();
            Ok(Written::Taken(owner))
        }
        None => Ok(Written::Taken(if target.resource.kind == "Secret" {
            "not controlled by anyone (Secrets are never adopted)".to_owned()
        } else {
            "not controlled by anyone (the guest list does not allow adopting orphans)".to_owned()
        })),
    }
}

/// Server-side apply of a child the parent controls, with the child's UID
/// in the body: if the object was deleted, or replaced by another of the
/// same name, the API server refuses the write instead of touching it.
/// A child the host created is first marked ([`mark_as_apply`]). Returns
/// the object and, when the mark was written, the resourceVersion it made.
async fn apply_owned(
    client: &Client,
    target: Target<'_>,
    stamped: &Value,
    observed: &DynamicObject,
) -> kube::Result<(DynamicObject, Option<String>)> {
    let created_shape = observed.annotations().get(CREATED_SHAPE_ANNOTATION);
    let marked = if created_shape.is_some_and(|shape| *shape == shape_of(stamped)) {
        None
    } else {
        mark_as_apply(client, target, observed).await?
    };
    let mut body = stamped.clone();
    body["metadata"]["uid"] = json!(observed.uid());
    let applied = target
        .api(client)
        .patch(
            target.name,
            &PatchParams::apply(target.manager).force(),
            &Patch::Apply(&body),
        )
        .await?;
    Ok((applied, marked))
}

/// Turns the guest's field-manager entry that a create recorded as an
/// update into an apply entry (the watch keeps each entry without its
/// field set, which is enough to find it); when an apply entry of the
/// guest's is there already (applies of the created shape came first), it
/// holds every field the update entry does, and the update entry is
/// removed instead. The patch tests the UID and the entry first; an object
/// changed in between (409, 422) keeps the entry, which costs only the
/// ability to drop those fields. The mark also removes the record of the
/// created shape, which has served. Returns the resourceVersion of the
/// mark, if one was written.
async fn mark_as_apply(
    client: &Client,
    target: Target<'_>,
    observed: &DynamicObject,
) -> kube::Result<Option<String>> {
    // The guest's entry of `operation` on the object itself.
    let guest_entry = |operation: &str| {
        observed
            .metadata
            .managed_fields
            .iter()
            .flatten()
            .position(|m| {
                m.manager.as_deref() == Some(target.manager)
                    && m.operation.as_deref() == Some(operation)
                    && m.subresource.is_none()
            })
    };
    let Some(i) = guest_entry("Update") else {
        return Ok(None);
    };
    let applied_before = guest_entry("Apply").is_some();
    let entry = format!("/metadata/managedFields/{i}");
    let change = if applied_before {
        json!({"op": "remove", "path": entry})
    } else {
        json!({"op": "replace", "path": format!("{entry}/operation"), "value": "Apply"})
    };
    let mut ops = vec![
        json!({"op": "test", "path": "/metadata/uid", "value": observed.uid()}),
        json!({"op": "test", "path": format!("{entry}/manager"), "value": target.manager}),
        json!({"op": "test", "path": format!("{entry}/operation"), "value": "Update"}),
        change,
    ];
    // The record of the created shape has served once the entry is marked.
    if let Some(shape) = observed.annotations().get(CREATED_SHAPE_ANNOTATION) {
        let path = annotation_pointer(CREATED_SHAPE_ANNOTATION);
        ops.push(json!({"op": "test", "path": path, "value": shape}));
        ops.push(json!({"op": "remove", "path": path}));
    }
    let ops = Value::Array(ops);
    let patch: json_patch::Patch = serde_json::from_value(ops).expect("well-formed JSON patch");
    match target
        .api(client)
        .patch(
            target.name,
            &PatchParams::default(),
            &Patch::<()>::Json(patch),
        )
        .await
    {
        Ok(marked) => Ok(marked.resource_version()),
        Err(kube::Error::Api(e)) if matches!(e.code, 409 | 422) => {
            tracing::debug!(kind = %target.resource.kind, name = target.name, "could not mark the create as an apply: {}", e.message);
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Adopts an orphan: an apply carrying the object's UID and
/// resourceVersion, so it fails if the object changed since it was read.
async fn adopt(
    client: &Client,
    target: Target<'_>,
    stamped: &Value,
    existing: &DynamicObject,
) -> kube::Result<DynamicObject> {
    let mut body = stamped.clone();
    body["metadata"]["uid"] = json!(existing.uid());
    body["metadata"]["resourceVersion"] = json!(existing.resource_version());
    target
        .api(client)
        .patch(
            target.name,
            &PatchParams::apply(target.manager).force(),
            &Patch::Apply(&body),
        )
        .await
}

/// Creates the child; fails with 409 when the name is taken.
async fn create(
    client: &Client,
    target: Target<'_>,
    stamped: &Value,
) -> kube::Result<DynamicObject> {
    let mut body = stamped.clone();
    if let Some(annotations) = body["metadata"]["annotations"].as_object_mut() {
        annotations.insert(CREATED_SHAPE_ANNOTATION.into(), shape_of(stamped).into());
    }
    let object: DynamicObject = serde_json::from_value(body).map_err(kube::Error::SerdeError)?;
    let params = PostParams {
        field_manager: Some(target.manager.to_owned()),
        ..PostParams::default()
    };
    target.api(client).create(&params, &object).await
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
            namespace: OWNER.namespace.map(str::to_owned),
            object: object.as_object().unwrap().clone(),
        }
    }

    const OWNER: Owner<'static> = Owner {
        api_version: "apps.example.com/v1alpha1",
        kind: "Cache",
        name: "demo",
        uid: "u-1",
        namespace: Some("team-a"),
        shard: None,
    };

    /// `desired` stamped for [`OWNER`] in `shard`.
    fn stamped_in(desired: &DesiredChild, shard: Option<u16>) -> Value {
        stamp(desired, Owner { shard, ..OWNER }, "cache")
    }

    #[test]
    fn a_shard_label_is_stamped_outside_the_desired_hash() {
        let desired =
            child(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "demo"}}));
        let plain = stamped_in(&desired, None);
        let sharded = stamped_in(&desired, Some(2));
        assert_eq!(sharded["metadata"]["labels"][SHARD_LABEL], "2");
        assert!(plain["metadata"]["labels"].get(SHARD_LABEL).is_none());
        let hash = |v: &Value| v["metadata"]["annotations"][DESIRED_HASH_ANNOTATION].clone();
        assert_eq!(hash(&plain), hash(&sharded));
        let moved = stamped_in(&desired, Some(0));
        let observed: DynamicObject = serde_json::from_value(sharded).unwrap();
        assert!(
            drift(&moved, &observed).is_some_and(|why| why.contains(SHARD_LABEL)),
            "a moved child drifts from its new shard"
        );
        assert_eq!(drift(&stamped_in(&desired, Some(2)), &observed), None);
    }

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
    fn an_apply_of_the_created_shape_drops_nothing_and_any_other_may() {
        let deployment = |replicas: Value, extra: Value| {
            let mut d = json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "annotations": {DESIRED_HASH_ANNOTATION: "1"}},
                "spec": {"replicas": replicas, "template": {"spec": {
                    "containers": [{"name": "cache", "image": "redis:7.2"}]}}},
            });
            if let Value::Object(extra) = extra {
                d["spec"].as_object_mut().unwrap().extend(extra);
            }
            d
        };
        let created = deployment(json!(2), json!({}));
        let mut recorded = created.clone();
        recorded["metadata"]["annotations"][CREATED_SHAPE_ANNOTATION] = json!("x");
        let mut image = created.clone();
        image["spec"]["template"]["spec"]["containers"][0]["image"] = json!("redis:7.4");
        let mut hash = created.clone();
        hash["metadata"]["annotations"][DESIRED_HASH_ANNOTATION] = json!("2");
        // (what is applied after the create, whether it has the created shape)
        let cases = [
            (
                "replicas scaled to zero",
                deployment(json!(0), json!({})),
                true,
            ),
            ("another desired hash", hash, true),
            ("the record itself is not part of the shape", recorded, true),
            (
                "a field added",
                deployment(json!(2), json!({"paused": true})),
                false,
            ),
            (
                "a value that became a map",
                deployment(json!({"n": 2}), json!({})),
                false,
            ),
            ("a list item changed", image, false),
            (
                "a field dropped",
                json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "annotations": {DESIRED_HASH_ANNOTATION: "1"}},
                "spec": {"replicas": 2}}),
                false,
            ),
        ];
        for (what, applied, same) in cases {
            assert_eq!(shape_of(&applied) == shape_of(&created), same, "{what}");
        }
    }

    #[test]
    fn the_hash_annotation_is_always_the_hosts() {
        let forged = "00000000000000000000000000000000";
        let s = stamp(
            &child(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "demo", "annotations": {DESIRED_HASH_ANNOTATION: forged}}})),
            OWNER,
            "cache",
        );
        assert_ne!(
            s["metadata"]["annotations"][DESIRED_HASH_ANNOTATION],
            forged
        );
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
