//! One reconcile's input, as the JSON text the host sent, read on demand.
//!
//! A reconcile usually needs the parent as one typed value and one or two
//! fields of one observed child, so nothing is parsed into a generic
//! `serde_json::Value` unless asked for: the parent is decoded straight from
//! its text into the guest's type, observed children are found by the
//! apiVersion, kind and name the host sends beside each of them (no text is
//! scanned to find one) and decoded straight into whatever view the guest
//! asks for. Inside wasm this halves the cost of a reconcile compared with
//! building `Value` trees.

use std::borrow::Cow;
use std::cell::OnceCell;

use k8s_openapi::Resource;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::{Error, ObservedObject, ReconcileRequest, Result, Settings};

/// One reconcile's input: the parent object and the children the host
/// observes for it. Mirrors the WIT `reconcile-request`.
#[derive(Debug, Clone)]
pub struct Request {
    parent: Parent,
    observed: Vec<Child>,
    related: Vec<Child>,
    /// True once the parent has a deletionTimestamp; only sent to guests that
    /// declared a finalizer.
    pub deleting: bool,
    now: Time,
    settings: Settings,
}

/// Reads the identity of an observed child out of its text, as the host
/// does before it sends it (natively: tests and benchmarks). Text that is
/// not a JSON object, or an identity field that is not a string, is an
/// error.
pub fn observed_from_json(
    object: String,
) -> std::result::Result<ObservedObject, serde_json::Error> {
    let head: Head<'_> = serde_json::from_str(&object)?;
    Ok(ObservedObject {
        api_version: head.api_version.map(Cow::into_owned).unwrap_or_default(),
        kind: head.kind.map(Cow::into_owned).unwrap_or_default(),
        name: head
            .metadata
            .and_then(|m| m.name)
            .map(Cow::into_owned)
            .unwrap_or_default(),
        object,
    })
}

/// One object as JSON text, and its `Value` once someone asked for it.
#[derive(Debug, Clone, Default)]
struct Object {
    text: String,
    value: OnceCell<Value>,
}

/// The parent, and its name and generation once someone asked for them.
#[derive(Debug, Clone, Default)]
struct Parent {
    object: Object,
    head: OnceCell<ParentHead>,
}

#[derive(Debug, Clone, Default)]
struct ParentHead {
    name: Option<String>,
    generation: Option<i64>,
}

/// An observed child: its identity as the host sent it, and the object.
#[derive(Debug, Clone)]
struct Child {
    api_version: String,
    kind: String,
    name: String,
    object: Object,
}

/// The identifying fields of an object; everything else is skipped without
/// being decoded.
#[derive(Deserialize)]
struct Head<'a> {
    #[serde(rename = "apiVersion", borrow, default)]
    api_version: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    metadata: Option<HeadMeta<'a>>,
}

#[derive(Deserialize)]
struct HeadMeta<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(default)]
    generation: Option<i64>,
}

impl Object {
    fn new(text: String) -> Self {
        Self {
            text,
            value: OnceCell::new(),
        }
    }

    fn from_value(value: Value) -> Self {
        Self {
            text: crate::json_text(&value),
            value: OnceCell::from(value),
        }
    }

    fn value(&self) -> &Value {
        self.value
            .get_or_init(|| serde_json::from_str(&self.text).unwrap_or(Value::Null))
    }

    fn decode<T: DeserializeOwned>(&self) -> serde_json::Result<T> {
        serde_json::from_str(&self.text)
    }
}

impl Parent {
    fn new(object: Object) -> Self {
        Self {
            object,
            head: OnceCell::new(),
        }
    }

    /// A parent whose head has already been read.
    fn with_head(text: String, head: ParentHead) -> Self {
        Self {
            object: Object::new(text),
            head: OnceCell::from(head),
        }
    }

    /// Name and generation, read from the text on first use (the host sends
    /// a JSON object; anything else reads as neither).
    fn head(&self) -> &ParentHead {
        self.head
            .get_or_init(|| Self::read_head(&self.object.text).unwrap_or_default())
    }

    fn read_head(text: &str) -> std::result::Result<ParentHead, serde_json::Error> {
        let head: Head<'_> = serde_json::from_str(text)?;
        Ok(head
            .metadata
            .map_or_else(ParentHead::default, |m| ParentHead {
                name: m.name.map(Cow::into_owned),
                generation: m.generation,
            }))
    }
}

impl Child {
    fn from_wire(wire: ObservedObject) -> Self {
        Self {
            api_version: wire.api_version,
            kind: wire.kind,
            name: wire.name,
            object: Object::new(wire.object),
        }
    }

    fn from_value(value: Value) -> Self {
        let field = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_owned();
        Self {
            api_version: field(value.get("apiVersion")),
            kind: field(value.get("kind")),
            name: field(value.pointer("/metadata/name")),
            object: Object::from_value(value),
        }
    }

    fn is<K: Resource>(&self) -> bool {
        self.api_version == K::API_VERSION && self.kind == K::KIND
    }
}

impl Request {
    /// A request from already parsed values, at the system clock's time
    /// (natively: tests, benchmarks; pin the time with [`Request::at`]).
    pub fn new(parent: Value, observed: Vec<Value>, deleting: bool) -> Self {
        Self {
            parent: Parent::new(Object::from_value(parent)),
            observed: observed.into_iter().map(Child::from_value).collect(),
            related: Vec::new(),
            deleting,
            now: crate::time::now(),
            settings: Settings::none(),
        }
    }

    /// Parses a request from JSON text, reading each observed child's
    /// identity out of its text the way the host does, at the system clock's
    /// time (natively: tests).
    ///
    /// Text that is not a JSON object is a [permanent](Error::permanent)
    /// error: the same text will never parse.
    pub fn from_json<S: AsRef<str>>(parent: &str, observed: &[S], deleting: bool) -> Result<Self> {
        let head = Parent::read_head(parent)
            .map_err(|e| Error::permanent(format!("parent is not a valid JSON object: {e}")))?;
        let observed = observed
            .iter()
            .enumerate()
            .map(|(i, text)| {
                observed_from_json(text.as_ref().to_owned())
                    .map(Child::from_wire)
                    .map_err(|e| {
                        Error::permanent(format!(
                            "observed child {i} is not a valid JSON object: {e}"
                        ))
                    })
            })
            .collect::<Result<_>>()?;
        Ok(Self {
            parent: Parent::with_head(parent.to_owned(), head),
            observed,
            related: Vec::new(),
            deleting,
            now: crate::time::now(),
            settings: Settings::none(),
        })
    }

    /// A request as the export glue receives it, taking ownership of the
    /// texts: nothing is copied or parsed until the guest asks for it. The
    /// texts are trusted to be JSON objects (the host serialises them); one
    /// that is not fails only when the guest reads it: [`Request::parent_as`]
    /// with a permanent error, a typed lookup of a child by skipping it with
    /// a warning.
    pub fn from_wire(wire: ReconcileRequest) -> Self {
        let ReconcileRequest {
            parent,
            observed,
            deleting,
            now,
            settings,
            related,
        } = wire;
        Self {
            parent: Parent::new(Object::new(parent)),
            observed: observed.into_iter().map(Child::from_wire).collect(),
            related: related.into_iter().map(Child::from_wire).collect(),
            deleting,
            now: crate::time::from_unix_seconds(now),
            settings: Settings::from_json(settings),
        }
    }

    /// The same request with these related objects (tests, benchmarks).
    #[must_use]
    pub fn with_related(mut self, related: Vec<Value>) -> Self {
        self.related = related.into_iter().map(Child::from_value).collect();
        self
    }

    /// The same request with `settings` (tests).
    #[must_use]
    pub fn with_settings(mut self, settings: Settings) -> Self {
        self.settings = settings;
        self
    }

    /// The guest-list entry's settings, as `describe` accepted them.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The same request at another time (tests pin the clock with it).
    #[must_use]
    pub fn at(mut self, now: Time) -> Self {
        self.now = now;
        self
    }

    /// The host's time for this call, to the second. A guest has no clock
    /// of its own: stamp condition transitions with this, so that the same
    /// request always gives the same answer.
    pub fn now(&self) -> &Time {
        &self.now
    }

    /// The parent as JSON text, exactly as the host sent it.
    pub fn parent_json(&self) -> &str {
        &self.parent.object.text
    }

    /// The parent as an untyped JSON value (parsed on first use).
    pub fn parent(&self) -> &Value {
        self.parent.object.value()
    }

    /// The parent as a typed value, e.g. the guest's own custom resource
    /// struct, decoded straight from the text. A parent that does not fit
    /// `T` is a permanent error: the API server's schema and the guest's type
    /// disagree.
    pub fn parent_as<T: DeserializeOwned>(&self) -> Result<T> {
        self.parent
            .object
            .decode()
            .map_err(|e| Error::permanent(format!("cannot read the parent: {e}")))
    }

    /// The parent's `metadata.name`, or "" if it has none (read from the
    /// text on first use).
    pub fn parent_name(&self) -> &str {
        self.parent.head().name.as_deref().unwrap_or_default()
    }

    /// The parent's `metadata.generation`, if set (read from the text on
    /// first use).
    pub fn parent_generation(&self) -> Option<i64> {
        self.parent.head().generation
    }

    /// The parent's current `.status`, if it has one.
    pub fn parent_status(&self) -> Option<&Value> {
        self.parent().get("status").filter(|s| !s.is_null())
    }

    /// Every observed child as an untyped JSON value (each parsed on first
    /// use), in the order the host sent them.
    pub fn observed(&self) -> impl ExactSizeIterator<Item = &Value> {
        self.observed.iter().map(|child| child.object.value())
    }

    /// The observed children of kind `K`, as JSON, in the order the host sent
    /// them.
    pub fn observed_raw_of<K: Resource>(&self) -> impl Iterator<Item = &Value> {
        self.observed
            .iter()
            .filter(|child| child.is::<K>())
            .map(|child| child.object.value())
    }

    /// The observed child of kind `K` named `name`, as JSON.
    pub fn observed_raw_named<K: Resource>(&self, name: &str) -> Option<&Value> {
        self.find::<K>(name).map(|child| child.object.value())
    }

    /// The observed children of kind `K`, typed. A child that does not
    /// decode as `K` is skipped and logged: observed objects come from the
    /// API server, so this only happens when the guest's type is wrong.
    pub fn observed_of<K: Resource + DeserializeOwned>(&self) -> Vec<K> {
        self.observed
            .iter()
            .filter(|child| child.is::<K>())
            .filter_map(decode::<K, K>)
            .collect()
    }

    /// The observed child of kind `K` named `name`, typed.
    pub fn observed_named<K: Resource + DeserializeOwned>(&self, name: &str) -> Option<K> {
        self.observed_named_as::<K, K>(name)
    }

    /// The observed child of kind `K` named `name`, decoded as `T`: any type
    /// that reads the fields the guest needs, e.g. a small struct of a
    /// Deployment's replicas and status counters. Fields `T` does not name
    /// are skipped, not decoded.
    pub fn observed_named_as<K: Resource, T: DeserializeOwned>(&self, name: &str) -> Option<T> {
        self.find::<K>(name).and_then(decode::<K, T>)
    }

    /// The identity of every observed child, in the order the host sent
    /// them: what [`Response::keep`](crate::Response::keep) takes.
    pub fn observed_refs(&self) -> impl Iterator<Item = crate::ObjectRef> + '_ {
        self.observed
            .iter()
            .map(|child| crate::ObjectRef::new(&child.api_version, &child.kind, &child.name))
    }

    /// The child of kind `K` named `name`; a child without a name is never
    /// found.
    fn find<K: Resource>(&self, name: &str) -> Option<&Child> {
        find::<K>(&self.observed, name)
    }

    /// Every related object (of the kinds the description relates) as an
    /// untyped JSON value, in the order the host sent them: by kind, then
    /// name.
    pub fn related(&self) -> impl ExactSizeIterator<Item = &Value> {
        self.related.iter().map(|object| object.object.value())
    }

    /// The related objects of kind `K`, typed (one that does not decode is
    /// skipped and logged).
    pub fn related_of<K: Resource + DeserializeOwned>(&self) -> Vec<K> {
        self.related
            .iter()
            .filter(|object| object.is::<K>())
            .filter_map(decode::<K, K>)
            .collect()
    }

    /// The related object of kind `K` named `name`, typed: `None` when the
    /// parent points at an object that does not exist.
    pub fn related_named<K: Resource + DeserializeOwned>(&self, name: &str) -> Option<K> {
        find::<K>(&self.related, name).and_then(decode::<K, K>)
    }

    /// The related object of kind `K` named `name`, as JSON.
    pub fn related_raw_named<K: Resource>(&self, name: &str) -> Option<&Value> {
        find::<K>(&self.related, name).map(|object| object.object.value())
    }
}

/// The object of kind `K` named `name` among `objects`; one without a name
/// is never found.
fn find<'a, K: Resource>(objects: &'a [Child], name: &str) -> Option<&'a Child> {
    if name.is_empty() {
        return None;
    }
    objects
        .iter()
        .find(|child| child.is::<K>() && child.name == name)
}

fn decode<K: Resource, T: DeserializeOwned>(child: &Child) -> Option<T> {
    match child.object.decode() {
        Ok(typed) => Some(typed),
        Err(e) => {
            crate::log::warn(&format!(
                "skipping an observed {} that does not decode: {e}",
                K::KIND
            ));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::{ConfigMap, Service};
    use serde_json::json;

    fn request() -> Request {
        Request::new(
            json!({
                "apiVersion": "apps.example.com/v1alpha1",
                "kind": "Cache",
                "metadata": {"name": "demo", "generation": 3},
                "spec": {"image": "redis:7.2"},
                "status": {"phase": "Ready"}
            }),
            vec![
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "demo"}}),
                json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "demo"}}),
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "demo-config"}, "data": {"a": "b"}}),
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "other"}}),
            ],
            false,
        )
    }

    #[test]
    fn the_time_is_the_hosts_and_can_be_pinned() {
        let at = crate::time::from_unix_seconds(1_714_564_800);
        let request = Request::from_wire(ReconcileRequest {
            parent: "{}".into(),
            now: 1_714_564_800,
            ..ReconcileRequest::default()
        });
        assert_eq!(request.now(), &at);
        let later = crate::time::from_unix_seconds(1_714_564_860);
        assert_eq!(request.at(later.clone()).now(), &later);
    }

    #[test]
    fn from_json_parses_parent_and_children() {
        let parsed = Request::from_json(r#"{"a":1}"#, &[r#"{"b":2}"#], true).unwrap();
        assert_eq!(parsed.parent(), &json!({"a": 1}));
        assert_eq!(parsed.observed().collect::<Vec<_>>(), [&json!({"b": 2})]);
        assert_eq!(parsed.parent_json(), r#"{"a":1}"#);
        assert!(parsed.deleting);
    }

    #[test]
    fn from_json_rejects_invalid_text_as_permanent() {
        let err = Request::from_json("{", &[] as &[&str], false).unwrap_err();
        assert!(!err.is_retryable());
        let err = Request::from_json("{}", &["nope"], false).unwrap_err();
        assert!(err.message.contains("observed child 0"));
        let err = Request::from_json("[1]", &[] as &[&str], false).unwrap_err();
        assert!(err.message.contains("parent is not a valid JSON object"));
    }

    #[test]
    fn from_wire_finds_children_by_the_identity_the_host_sent() {
        let child = |kind: &str, name: &str, object: &str| ObservedObject {
            api_version: "v1".into(),
            kind: kind.into(),
            name: name.into(),
            object: object.into(),
        };
        let req = Request::from_wire(ReconcileRequest {
            parent: r#"{"metadata":{"name":"demo","generation":2}}"#.into(),
            observed: vec![
                child(
                    "ConfigMap",
                    "demo-config",
                    r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"demo-config"},"data":{"a":"b"}}"#,
                ),
                child("Service", "demo", "not JSON"),
            ],
            settings: Some(r#"{"a":1}"#.into()),
            ..ReconcileRequest::default()
        });
        assert_eq!(req.settings().json(), Some(r#"{"a":1}"#));
        assert_eq!(
            req.observed_refs()
                .map(|r| r.to_string())
                .collect::<Vec<_>>(),
            ["v1 ConfigMap/demo-config", "v1 Service/demo"]
        );
        assert_eq!(req.parent_name(), "demo");
        assert_eq!(req.parent_generation(), Some(2));
        let config = req.observed_named::<ConfigMap>("demo-config").unwrap();
        assert_eq!(config.data.unwrap()["a"], "b");
        // Found by the identity the host sent; its text only matters, and
        // only fails, when the guest reads it.
        assert_eq!(req.observed_raw_of::<Service>().count(), 1);
        assert!(req.observed_named::<Service>("demo").is_none());
    }

    #[test]
    fn related_objects_are_found_by_kind_and_name_apart_from_children() {
        use k8s_openapi::api::core::v1::Secret;
        let req = request().with_related(vec![
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "auth"},
                   "data": {"password": "c2hhMjU2OmFi"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared"}}),
        ]);
        let secret = req.related_named::<Secret>("auth").unwrap();
        assert_eq!(secret.data.unwrap()["password"].0, b"sha256:ab");
        assert!(req.related_named::<Secret>("other").is_none());
        assert!(
            req.related_named::<ConfigMap>("demo-config").is_none(),
            "a child is not related"
        );
        assert!(
            req.observed_named::<ConfigMap>("shared").is_none(),
            "a related object is no child"
        );
        assert_eq!(req.related_of::<ConfigMap>().len(), 1);
        assert_eq!(req.related().count(), 2);
        assert!(req.related_raw_named::<ConfigMap>("shared").is_some());
    }

    #[test]
    fn a_parent_that_is_not_json_fails_only_when_read() {
        let req = Request::from_wire(ReconcileRequest {
            parent: "nope".into(),
            ..ReconcileRequest::default()
        });
        assert_eq!(req.parent_name(), "");
        assert_eq!(req.parent_generation(), None);
        let err = req.parent_as::<Value>().unwrap_err();
        assert!(!err.is_retryable());
        assert!(
            err.message.contains("cannot read the parent"),
            "{}",
            err.message
        );
    }

    #[test]
    fn wire_observed_reads_the_identity_out_of_the_text() {
        let wire = observed_from_json(
            r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"demo"},"spec":{}}"#
                .into(),
        )
        .unwrap();
        assert_eq!(
            (
                wire.api_version.as_str(),
                wire.kind.as_str(),
                wire.name.as_str()
            ),
            ("apps/v1", "Deployment", "demo")
        );
        assert_eq!(observed_from_json("{}".into()).unwrap().name, "");
        assert!(observed_from_json("nope".into()).is_err());
    }

    #[test]
    fn parent_accessors_read_metadata_and_status() {
        let req = request();
        assert_eq!(req.parent_name(), "demo");
        assert_eq!(req.parent_generation(), Some(3));
        assert_eq!(req.parent_status(), Some(&json!({"phase": "Ready"})));
    }

    #[test]
    fn parent_as_reports_a_mismatch_as_permanent() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Strict {
            nothing_like_this: String,
        }
        let err = request().parent_as::<Strict>().unwrap_err();
        assert!(!err.is_retryable());
    }

    #[test]
    fn observed_of_filters_by_api_version_and_kind() {
        let req = request();
        assert_eq!(req.observed_of::<Deployment>().len(), 1);
        assert_eq!(req.observed_of::<Service>().len(), 1);
        assert_eq!(req.observed_of::<ConfigMap>().len(), 2);
    }

    #[test]
    fn observed_named_finds_one_child_by_name() {
        let req = request();
        let config = req.observed_named::<ConfigMap>("demo-config").unwrap();
        assert_eq!(config.data.unwrap()["a"], "b");
        assert!(req.observed_named::<ConfigMap>("missing").is_none());
        assert!(req.observed_named::<Deployment>("demo-config").is_none());
        // A nameless child is not what an empty name asks for.
        let nameless = Request::new(
            json!({}),
            vec![json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}})],
            false,
        );
        assert!(nameless.observed_raw_named::<ConfigMap>("").is_none());
    }

    #[test]
    fn observed_named_as_decodes_only_the_fields_asked_for() {
        #[derive(serde::Deserialize)]
        struct Data {
            data: std::collections::BTreeMap<String, String>,
        }
        let req = Request::from_json(
            "{}",
            &[r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"demo-config","uid":"u"},"data":{"a":"b"}}"#],
            false,
        )
        .unwrap();
        let data: Data = req
            .observed_named_as::<ConfigMap, _>("demo-config")
            .unwrap();
        assert_eq!(data.data["a"], "b");
        assert!(req.observed_named_as::<ConfigMap, Data>("other").is_none());
    }
}
