//! One reconcile's answer, as plain Rust values, and its wire form.

use k8s_openapi::Resource;
use serde::Serialize;
use serde_json::Value;

use crate::{Error, Event, ObjectRef, ReconcileResponse, Result};

/// One reconcile's answer. Mirrors the WIT `reconcile-response`.
///
/// Children and status are serialized to JSON text as they are added, the
/// form the host receives, so a typed child goes to text in one step.
/// Children carry no namespace, ownerReferences or `wasmop.dev/guest` label:
/// the host stamps those, and refuses children that set ownerReferences.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Response {
    /// The children that should exist, each a complete object with
    /// apiVersion, kind and metadata.name, as JSON text.
    children: Vec<String>,
    /// The desired `.status` of the parent as JSON text, or `None` to leave
    /// it alone.
    status: Option<String>,
    /// Ask to be called again after this many seconds even if nothing changes.
    pub requeue_after_seconds: Option<u32>,
    /// Deletion path only: cleanup is complete and the host may remove the
    /// finalizer.
    pub finalized: bool,
    /// Events to record on the parent.
    pub events: Vec<Event>,
    /// Observed children to leave exactly as they are.
    keep: Vec<ObjectRef>,
}

impl Response {
    /// An empty answer: no children, status left alone.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a desired child; see [`Response::push_child`].
    pub fn child<K: Resource + Serialize>(mut self, child: &K) -> Result<Self> {
        self.push_child(child)?;
        Ok(self)
    }

    /// Adds a desired child, typically a k8s-openapi object.
    ///
    /// `apiVersion` and `kind` are filled from `K` when the serialized object
    /// lacks them (a hand-written type implementing [`Resource`]); an object
    /// that names another kind than `K` is an error.
    pub fn push_child<K: Resource + Serialize>(&mut self, child: &K) -> Result<()> {
        let text = serde_json::to_string(child)
            .map_err(|e| Error::permanent(format!("cannot serialize a {}: {e}", K::KIND)))?;
        // k8s-openapi objects write their type first: then the text is final.
        if starts_with_type(&text, K::API_VERSION, K::KIND) {
            self.children.push(text);
            return Ok(());
        }
        let mut value: Value = serde_json::from_str(&text)
            .map_err(|e| Error::permanent(format!("cannot serialize a {}: {e}", K::KIND)))?;
        let Value::Object(object) = &mut value else {
            return Err(Error::permanent(format!(
                "a {} did not serialize to a JSON object",
                K::KIND
            )));
        };
        for (field, expected) in [("apiVersion", K::API_VERSION), ("kind", K::KIND)] {
            match object.get(field) {
                None | Some(Value::Null) => {
                    object.insert(field.to_owned(), Value::from(expected));
                }
                Some(actual) if actual.as_str() == Some(expected) => {}
                Some(actual) => {
                    return Err(Error::permanent(format!(
                        "a child of type {} has {field} {actual}, expected {expected:?}",
                        K::KIND
                    )));
                }
            }
        }
        self.push_child_value(&value);
        Ok(())
    }

    /// Adds a desired child given as untyped JSON; it must already carry
    /// apiVersion, kind and metadata.name (the host checks).
    pub fn push_child_value(&mut self, child: &Value) {
        self.children.push(crate::json_text(child));
    }

    /// Adds a child as raw text that the SDK passes to the host unchanged.
    ///
    /// This is an escape hatch for the hostile test guest, which must be able
    /// to send text that is not JSON at all to prove the host refuses it. A
    /// real guest has no reason to use it: [`Response::child`] always
    /// produces valid JSON.
    #[must_use]
    pub fn raw_child(mut self, text: impl Into<String>) -> Self {
        self.children.push(text.into());
        self
    }

    /// The desired children as JSON text, in the order they were added.
    pub fn children(&self) -> &[String] {
        &self.children
    }

    /// The desired children parsed back into JSON values, for tests; a raw
    /// child that is not JSON becomes `null`.
    pub fn child_values(&self) -> Vec<Value> {
        self.children
            .iter()
            .map(|text| serde_json::from_str(text).unwrap_or(Value::Null))
            .collect()
    }

    /// The desired status as JSON text, if set.
    pub fn status_json(&self) -> Option<&str> {
        self.status.as_deref()
    }

    /// The desired status parsed back into a JSON value, for tests.
    pub fn status_value(&self) -> Option<Value> {
        self.status
            .as_deref()
            .map(|text| serde_json::from_str(text).unwrap_or(Value::Null))
    }

    /// Sets the desired status; see [`Response::set_status`].
    pub fn status(mut self, status: &impl Serialize) -> Result<Self> {
        self.set_status(status)?;
        Ok(self)
    }

    /// Sets the desired status from any serializable value (it must serialize
    /// to a JSON object, which the host checks).
    pub fn set_status(&mut self, status: &impl Serialize) -> Result<()> {
        let text = serde_json::to_string(status)
            .map_err(|e| Error::permanent(format!("cannot serialize the status: {e}")))?;
        self.status = Some(text);
        Ok(())
    }

    /// Asks to be called again after `seconds`.
    #[must_use]
    pub fn requeue_after(mut self, seconds: u32) -> Self {
        self.requeue_after_seconds = Some(seconds);
        self
    }

    /// Deletion path: says cleanup is complete.
    #[must_use]
    pub fn finalize(mut self) -> Self {
        self.finalized = true;
        self
    }

    /// Adds an event.
    #[must_use]
    pub fn event(mut self, event: Event) -> Self {
        self.events.push(event);
        self
    }

    /// Leaves the observed child `child` exactly as it is: the host neither
    /// writes nor prunes it (a paused parent, a child kept during cleanup).
    /// Nothing of the child is sent back, so no field of it becomes the
    /// guest's. A child both kept and desired is refused by the host.
    pub fn keep(&mut self, child: ObjectRef) {
        self.keep.push(child);
    }

    /// Leaves every observed child of `request` as it is, except those for
    /// which `except` is true (the guest desires or drops those itself).
    pub fn keep_observed(
        &mut self,
        request: &crate::Request,
        mut except: impl FnMut(&ObjectRef) -> bool,
    ) {
        self.keep
            .extend(request.observed_refs().filter(|child| !except(child)));
    }

    /// The observed children this answer keeps.
    pub fn kept(&self) -> &[ObjectRef] {
        &self.keep
    }

    /// The answer in the text form the WIT interface carries.
    ///
    /// Serialization is deterministic (struct fields in declaration order,
    /// maps sorted), so the same answer always gives the same bytes and a
    /// converged parent produces nothing for the host to write. Children
    /// and status are already text, so this cannot fail.
    pub fn into_wire(self) -> ReconcileResponse {
        ReconcileResponse {
            children: self.children,
            status: self.status,
            requeue_after_seconds: self.requeue_after_seconds,
            finalized: self.finalized,
            events: self.events,
            keep: self.keep,
        }
    }
}

/// True when `text` opens with exactly `{"apiVersion":"<api_version>","kind":"<kind>"`.
fn starts_with_type(text: &str, api_version: &str, kind: &str) -> bool {
    text.strip_prefix(r#"{"apiVersion":""#)
        .and_then(|rest| rest.strip_prefix(api_version))
        .and_then(|rest| rest.strip_prefix(r#"","kind":""#))
        .and_then(|rest| rest.strip_prefix(kind))
        .is_some_and(|rest| rest.starts_with("\",") || rest.starts_with("\"}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EventType;
    use k8s_openapi::NamespaceResourceScope;
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use serde_json::json;

    fn config_map(name: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// A hand-written resource whose serialization has no apiVersion/kind.
    #[derive(Serialize)]
    struct Bare {
        metadata: ObjectMeta,
    }

    impl Resource for Bare {
        const API_VERSION: &'static str = "example.com/v1";
        const GROUP: &'static str = "example.com";
        const KIND: &'static str = "Bare";
        const VERSION: &'static str = "v1";
        const URL_PATH_SEGMENT: &'static str = "bares";
        type Scope = NamespaceResourceScope;
    }

    #[test]
    fn child_keeps_the_type_meta_of_k8s_openapi_objects() {
        let response = Response::new().child(&config_map("a")).unwrap();
        assert_eq!(
            response.child_values(),
            vec![json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}})]
        );
    }

    #[test]
    fn child_fills_missing_api_version_and_kind_from_the_type() {
        let bare = Bare {
            metadata: ObjectMeta {
                name: Some("b".into()),
                ..Default::default()
            },
        };
        let response = Response::new().child(&bare).unwrap();
        let children = response.child_values();
        assert_eq!(children[0]["apiVersion"], "example.com/v1");
        assert_eq!(children[0]["kind"], "Bare");
    }

    #[test]
    fn child_refuses_an_object_that_names_another_kind() {
        #[derive(Serialize)]
        struct Liar {
            kind: &'static str,
        }
        impl Resource for Liar {
            const API_VERSION: &'static str = "v1";
            const GROUP: &'static str = "";
            const KIND: &'static str = "ConfigMap";
            const VERSION: &'static str = "v1";
            const URL_PATH_SEGMENT: &'static str = "configmaps";
            type Scope = NamespaceResourceScope;
        }
        let err = Response::new().child(&Liar { kind: "Secret" }).unwrap_err();
        assert!(err.message.contains("expected \"ConfigMap\""), "{err}");
    }

    #[test]
    fn into_wire_carries_children_in_order_and_the_status_as_text() {
        let wire = Response::new()
            .child(&config_map("a"))
            .unwrap()
            .raw_child("{not json")
            .status(&json!({"a": 1, "b": 2}))
            .unwrap()
            .requeue_after(5)
            .finalize()
            .event(Event::normal("Done", "all done"))
            .into_wire();
        assert_eq!(
            wire.children,
            vec![
                r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}"#.to_owned(),
                "{not json".to_owned()
            ]
        );
        assert_eq!(wire.status.as_deref(), Some(r#"{"a":1,"b":2}"#));
        assert_eq!(wire.requeue_after_seconds, Some(5));
        assert!(wire.finalized);
        assert_eq!(wire.events, vec![Event::normal("Done", "all done")]);
    }

    #[test]
    fn keep_observed_names_every_observed_child_but_the_exceptions() {
        let request = crate::Request::new(
            json!({}),
            vec![
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}),
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "a"}}),
            ],
            false,
        );
        let mut response = Response::new();
        response.keep_observed(&request, |child| child.kind == "Deployment");
        assert_eq!(
            response.into_wire().keep,
            vec![ObjectRef::new("v1", "ConfigMap", "a")]
        );
    }

    #[test]
    fn an_empty_response_leaves_the_status_alone() {
        let wire = Response::new().into_wire();
        assert!(wire.children.is_empty());
        assert_eq!(wire.status, None);
        assert!(!wire.finalized);
    }

    #[test]
    fn event_constructors_set_the_type() {
        assert_eq!(Event::normal("A", "b").event_type, EventType::Normal);
        assert_eq!(Event::warning("A", "b").event_type, EventType::Warning);
    }
}
