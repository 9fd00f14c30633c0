//! Objects as the host's caches hold them: the metadata parsed (queues,
//! sweeps, triggers and label selectors read it), everything else as one
//! compact JSON text, parsed again when a reconcile reads the object.
//! kube-runtime's store of the parents and the related-object index hold
//! these; the child index holds whole objects as text (`index.rs`).
//!
//! A parsed `serde_json::Value` costs a B-tree node of about 600 bytes for
//! every JSON object in it, however small; as text an object takes about
//! its JSON length. The text is parsed once per reconcile, which is small
//! against a reconcile's API requests
//! (docs/decisions/0018-cached-objects-as-json-text.md).

use std::borrow::Cow;
use std::hash::{DefaultHasher, Hash, Hasher};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::DynamicObject;
use kube::core::{ApiResource, DynamicResourceScope, TypeMeta};
use kube::runtime::predicates;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde::Deserialize;

/// The controller's key of a parent.
pub type ParentRef = ObjectRef<Compact>;

/// One object as a cache keeps it.
#[derive(Clone, Debug, Deserialize)]
#[serde(from = "DynamicObject")]
pub struct Compact {
    types: Option<TypeMeta>,
    /// The metadata without managedFields (nothing reads those of a
    /// parent or a related object).
    pub metadata: ObjectMeta,
    /// The other fields (spec, status, ...) as compact JSON.
    data: Box<str>,
    /// [`spec_hash`] of the object (a parent's predicate).
    spec_hash: u64,
}

impl Compact {
    /// The whole object again (the metadata without managedFields).
    pub fn object(&self) -> DynamicObject {
        DynamicObject {
            types: self.types.clone(),
            metadata: self.metadata.clone(),
            data: serde_json::from_str(&self.data).expect("the text was written from a JSON value"),
        }
    }

    /// About the size of the object as JSON: its fields but the metadata
    /// exactly, and the metadata's names, labels and annotations.
    pub fn approx_bytes(&self) -> usize {
        self.data.len() + meta_bytes(&self.metadata)
    }

    /// What a change of a parent must touch to trigger a reconcile:
    /// everything but the status.
    pub fn spec_hash(&self) -> u64 {
        self.spec_hash
    }
}

/// [`Compact::approx_bytes`] of an object not in a cache (`render`,
/// `plan`).
pub fn approx_bytes(object: &DynamicObject) -> usize {
    serde_json::to_string(&object.data).map_or(0, |text| text.len()) + meta_bytes(&object.metadata)
}

/// About the size of the names, labels and annotations of `m`, and a fixed
/// share for the rest of the metadata.
fn meta_bytes(m: &ObjectMeta) -> usize {
    let pairs = |map: &Option<std::collections::BTreeMap<String, String>>| {
        map.iter()
            .flatten()
            .map(|(k, v)| k.len() + v.len() + 6)
            .sum::<usize>()
    };
    m.name.as_ref().map_or(0, String::len)
        + m.namespace.as_ref().map_or(0, String::len)
        + pairs(&m.labels)
        + pairs(&m.annotations)
        + 256
}

impl From<DynamicObject> for Compact {
    fn from(mut object: DynamicObject) -> Self {
        let spec_hash = spec_hash(&object);
        object.metadata.managed_fields = None;
        Self {
            types: object.types,
            metadata: object.metadata,
            data: object.data.to_string().into_boxed_str(),
            spec_hash,
        }
    }
}

/// Hash of everything but the status: the parent's spec (and any other
/// top-level field), uid, generation, labels, annotations, finalizers and
/// deletion mark. Status-only updates (most of them written by this very
/// host) do not trigger a reconcile; the progress check builds its
/// fingerprint on it too.
pub fn spec_hash(object: &DynamicObject) -> u64 {
    let mut h = DefaultHasher::new();
    if let Some(data) = object.data.as_object() {
        for (k, v) in data.iter().filter(|(k, _)| *k != "status") {
            k.hash(&mut h);
            v.to_string().hash(&mut h);
        }
    }
    object.metadata.uid.hash(&mut h);
    object.metadata.generation.hash(&mut h);
    object.metadata.deletion_timestamp.is_some().hash(&mut h);
    predicates::labels(object).hash(&mut h);
    predicates::annotations(object).hash(&mut h);
    predicates::finalizers(object).hash(&mut h);
    h.finish()
}

impl Resource for Compact {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        DynamicObject::group(dt)
    }

    fn version(dt: &ApiResource) -> Cow<'_, str> {
        DynamicObject::version(dt)
    }

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        DynamicObject::kind(dt)
    }

    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        DynamicObject::api_version(dt)
    }

    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        DynamicObject::plural(dt)
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// The key of the parent `namespace/name`.
pub fn parent_ref(primary: &ApiResource, namespace: Option<&str>, name: &str) -> ParentRef {
    let object = ObjectRef::new_with(name, primary.clone());
    match namespace {
        Some(ns) => object.within(ns),
        None => object,
    }
}

/// The key of `object`, a parent as the API returned it.
pub fn key_of(object: &DynamicObject, primary: &ApiResource) -> ParentRef {
    parent_ref(primary, object.namespace().as_deref(), &object.name_any())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn cache(spec: Value, status: Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "apps.example.com/v1alpha1", "kind": "Cache",
            "metadata": {"name": "c", "namespace": "ns", "uid": "u", "generation": 2,
                "resourceVersion": "7", "labels": {"a": "b"}, "finalizers": ["f"],
                "managedFields": [{"manager": "m", "operation": "Apply"}]},
            "spec": spec, "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn a_parent_comes_back_whole_but_its_managed_fields() {
        let object = cache(
            json!({"replicas": 3, "image": "redis:7"}),
            json!({"phase": "Ready"}),
        );
        let parent = Compact::from(object.clone());
        let mut expected = object;
        expected.metadata.managed_fields = None;
        assert_eq!(
            serde_json::to_value(parent.object()).unwrap(),
            serde_json::to_value(expected).unwrap()
        );
        assert_eq!(parent.name_any(), "c");
        assert_eq!(parent.namespace().as_deref(), Some("ns"));
    }

    #[test]
    fn only_a_change_outside_the_status_changes_the_spec_hash() {
        let at = |spec: Value, status: Value| Compact::from(cache(spec, status)).spec_hash();
        let before = at(json!({"replicas": 3}), json!({"phase": "Creating"}));
        assert_eq!(
            before,
            at(json!({"replicas": 3}), json!({"phase": "Ready"}))
        );
        assert_ne!(
            before,
            at(json!({"replicas": 4}), json!({"phase": "Creating"}))
        );
        let mut relabelled = cache(json!({"replicas": 3}), json!({"phase": "Creating"}));
        relabelled.labels_mut().insert("a".into(), "c".into());
        assert_ne!(before, Compact::from(relabelled).spec_hash());
    }

    #[test]
    fn a_parent_deserialises_as_the_api_sends_it() {
        let text = serde_json::to_string(&cache(json!({"replicas": 1}), json!({}))).unwrap();
        let parent: Compact = serde_json::from_str(&text).unwrap();
        assert_eq!(parent.object().data["spec"]["replicas"], 1);
        assert!(parent.meta().managed_fields.is_none());
    }
}
