//! The host's own view of what a guest describes and returns.
//!
//! These types mirror the WIT records but are plain Rust with `serde`, so the
//! controller, `wasmop render` and the tests never touch generated bindings.

use serde::Serialize;
use serde_json::Value;

/// A Kubernetes kind: group (empty for core), version and kind.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct KindRef {
    /// API group, empty for the core group.
    pub group: String,
    /// API version inside the group.
    pub version: String,
    /// Kind name.
    pub kind: String,
}

impl KindRef {
    /// Builds a kind reference.
    pub fn new(group: &str, version: &str, kind: &str) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
        }
    }

    /// The `apiVersion` string objects of this kind carry (`v1`, `apps/v1`).
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Whether an object's `apiVersion` and `kind` name this kind.
    pub fn matches(&self, api_version: &str, kind: &str) -> bool {
        self.kind == kind && self.api_version() == api_version
    }
}

impl std::fmt::Display for KindRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.api_version(), self.kind)
    }
}

/// A kind the guest may create, with its declared scope.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ChildKind {
    /// The child kind.
    pub kind: KindRef,
    /// Declared cluster-scoped.
    pub cluster_scoped: bool,
}

/// What a guest manages: its answer to `describe`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Description {
    /// The parent kind.
    pub primary: KindRef,
    /// The kinds it may create.
    pub children: Vec<ChildKind>,
    /// The finalizer it wants on every parent, if any.
    pub finalizer: Option<String>,
}

impl Description {
    /// The declaration of a child kind, if the guest declared it.
    pub fn child(&self, api_version: &str, kind: &str) -> Option<&ChildKind> {
        self.children
            .iter()
            .find(|c| c.kind.matches(api_version, kind))
    }
}

/// The input of one reconcile.
#[derive(Clone, Debug)]
pub struct Request {
    /// The parent object.
    pub parent: Value,
    /// The observed children.
    pub observed: Vec<Value>,
    /// The parent is being deleted (finalizer path).
    pub deleting: bool,
}

impl Request {
    /// The parent and the observed children as the JSON text a guest gets,
    /// each child with the fields that identify it read out.
    pub fn to_texts(&self) -> (String, Vec<ObservedText>) {
        (
            json_text(&self.parent),
            self.observed.iter().map(ObservedText::new).collect(),
        )
    }
}

/// An observed child as a guest gets it (the WIT `observed-object`): its
/// apiVersion, kind and name ("" where the object has none) and the whole
/// object as JSON text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObservedText {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// `metadata.name`.
    pub name: String,
    /// The object.
    pub object: String,
}

impl ObservedText {
    fn new(child: &Value) -> Self {
        let field = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_owned();
        Self {
            api_version: field(child.get("apiVersion")),
            kind: field(child.get("kind")),
            name: field(child.get("metadata").and_then(|m| m.get("name"))),
            object: json_text(child),
        }
    }
}

/// `value` as compact JSON text. `serde_json::to_string` writes straight
/// into a byte buffer; `Value`'s `Display` goes through `fmt` and takes
/// half as long again.
fn json_text(value: &Value) -> String {
    serde_json::to_string(value).expect("a JSON value always serialises")
}

/// Severity of a guest event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum EventType {
    /// Expected.
    Normal,
    /// Needs attention.
    Warning,
}

/// An event a guest asked the host to record on the parent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GuestEvent {
    /// Normal or Warning.
    #[serde(rename = "type")]
    pub event_type: EventType,
    /// Short CamelCase reason.
    pub reason: String,
    /// Human-readable message.
    pub message: String,
}

/// A guest's answer, as the guest returned it: children and status are still
/// unparsed JSON text until [`crate::validate`] checks them.
#[derive(Clone, Debug)]
pub struct RawResponse {
    /// Desired children as JSON text.
    pub children: Vec<String>,
    /// Desired status as JSON text.
    pub status: Option<String>,
    /// Requested requeue delay.
    pub requeue_after_seconds: Option<u32>,
    /// Deletion path: cleanup done.
    pub finalized: bool,
    /// Events to record.
    pub events: Vec<GuestEvent>,
}

impl RawResponse {
    /// Total size of the JSON text the guest returned, in bytes.
    pub fn size(&self) -> usize {
        self.children.iter().map(String::len).sum::<usize>()
            + self.status.as_ref().map_or(0, String::len)
            + self
                .events
                .iter()
                .map(|e| e.reason.len() + e.message.len())
                .sum::<usize>()
    }
}

/// Whether a guest-reported failure is worth retrying.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum ErrorKind {
    /// Retry with backoff.
    Retryable,
    /// Do not retry until something changes.
    Permanent,
}

/// A failure the guest reported through the WIT `reconcile-error`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{kind:?} guest error: {message}")]
pub struct GuestError {
    /// Retryable or permanent.
    pub kind: ErrorKind,
    /// The guest's message.
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn observed_children_go_out_with_their_identity_read_out() {
        let request = Request {
            parent: json!({"metadata": {"name": "demo"}}),
            observed: vec![
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "demo"}}),
                json!({"kind": "ConfigMap"}),
            ],
            deleting: false,
        };
        let (parent, observed) = request.to_texts();
        assert_eq!(parent, r#"{"metadata":{"name":"demo"}}"#);
        assert_eq!(
            observed[0],
            ObservedText {
                api_version: "apps/v1".into(),
                kind: "Deployment".into(),
                name: "demo".into(),
                object:
                    r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"demo"}}"#
                        .into(),
            }
        );
        // A field the object lacks goes out empty; the text stays whole.
        assert_eq!(
            (observed[1].api_version.as_str(), observed[1].name.as_str()),
            ("", "")
        );
        assert_eq!(observed[1].object, r#"{"kind":"ConfigMap"}"#);
    }
}
