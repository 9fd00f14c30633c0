//! One reconcile's input, as plain Rust values.

use k8s_openapi::Resource;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::{Error, Result};

/// One reconcile's input: the parent object and the children the host
/// observes for it. Mirrors the WIT `reconcile-request` with the JSON text
/// already parsed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Request {
    /// The parent object exactly as the API server returned it (managedFields
    /// removed).
    pub parent: Value,
    /// The children the host observes for this parent: owned by it through a
    /// controller ownerReference and labelled with the guest's name.
    pub observed: Vec<Value>,
    /// True once the parent has a deletionTimestamp; only sent to guests that
    /// declared a finalizer.
    pub deleting: bool,
}

impl Request {
    /// A request from already parsed values.
    pub fn new(parent: Value, observed: Vec<Value>, deleting: bool) -> Self {
        Self {
            parent,
            observed,
            deleting,
        }
    }

    /// Parses a request from the JSON text the host sends.
    ///
    /// Invalid JSON is a [permanent](Error::permanent) error: the same text
    /// will never parse.
    pub fn from_json<S: AsRef<str>>(parent: &str, observed: &[S], deleting: bool) -> Result<Self> {
        let parent = serde_json::from_str(parent)
            .map_err(|e| Error::permanent(format!("parent is not valid JSON: {e}")))?;
        let observed = observed
            .iter()
            .enumerate()
            .map(|(i, text)| {
                serde_json::from_str(text.as_ref()).map_err(|e| {
                    Error::permanent(format!("observed child {i} is not valid JSON: {e}"))
                })
            })
            .collect::<Result<_>>()?;
        Ok(Self::new(parent, observed, deleting))
    }

    /// The parent as a typed value, e.g. the guest's own custom resource
    /// struct. A parent that does not fit `T` is a permanent error: the API
    /// server's schema and the guest's type disagree.
    pub fn parent_as<T: DeserializeOwned>(&self) -> Result<T> {
        T::deserialize(&self.parent)
            .map_err(|e| Error::permanent(format!("cannot read the parent: {e}")))
    }

    /// The parent's `metadata.name`, or "" if it has none.
    pub fn parent_name(&self) -> &str {
        self.parent
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// The parent's `metadata.generation`, if set.
    pub fn parent_generation(&self) -> Option<i64> {
        self.parent
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
    }

    /// The parent's current `.status`, if it has one.
    pub fn parent_status(&self) -> Option<&Value> {
        self.parent.get("status").filter(|s| !s.is_null())
    }

    /// The observed children of kind `K`, as JSON, in the order the host sent
    /// them.
    pub fn observed_raw_of<K: Resource>(&self) -> impl Iterator<Item = &Value> {
        self.observed.iter().filter(|child| is_kind::<K>(child))
    }

    /// The observed child of kind `K` named `name`, as JSON.
    pub fn observed_raw_named<K: Resource>(&self, name: &str) -> Option<&Value> {
        self.observed_raw_of::<K>()
            .find(|child| child.pointer("/metadata/name").and_then(Value::as_str) == Some(name))
    }

    /// The observed children of kind `K`, typed. A child that does not
    /// deserialize as `K` is skipped and logged: observed objects come from
    /// the API server, so this only happens when the guest's type is wrong.
    pub fn observed_of<K: Resource + DeserializeOwned>(&self) -> Vec<K> {
        self.observed_raw_of::<K>()
            .filter_map(|child| decode::<K>(child))
            .collect()
    }

    /// The observed child of kind `K` named `name`, typed.
    pub fn observed_named<K: Resource + DeserializeOwned>(&self, name: &str) -> Option<K> {
        self.observed_raw_named::<K>(name).and_then(decode::<K>)
    }
}

/// True when `object`'s apiVersion and kind are those of `K`.
fn is_kind<K: Resource>(object: &Value) -> bool {
    object.get("apiVersion").and_then(Value::as_str) == Some(K::API_VERSION)
        && object.get("kind").and_then(Value::as_str) == Some(K::KIND)
}

fn decode<K: Resource + DeserializeOwned>(object: &Value) -> Option<K> {
    match K::deserialize(object) {
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
    fn from_json_parses_parent_and_children() {
        let parsed = Request::from_json(r#"{"a":1}"#, &[r#"{"b":2}"#], true).unwrap();
        assert_eq!(parsed.parent, json!({"a": 1}));
        assert_eq!(parsed.observed, vec![json!({"b": 2})]);
        assert!(parsed.deleting);
    }

    #[test]
    fn from_json_rejects_invalid_text_as_permanent() {
        let err = Request::from_json("{", &[] as &[&str], false).unwrap_err();
        assert!(!err.is_retryable());
        let err = Request::from_json("{}", &["nope"], false).unwrap_err();
        assert!(err.message.contains("observed child 0"));
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
    }
}
