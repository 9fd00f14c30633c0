//! The host's view of what a guest describes and returns.
//!
//! The records themselves are the contract's ([`wasmop_contract`]), shared
//! with the guest SDK and lifted straight out of the guest by the runtime;
//! this module adds what only the host needs: the request as the host
//! gathers it (parsed objects) and the guest's own error as a Rust error.

use serde_json::Value;

pub use wasmop_contract::{
    ChildKind, Description, ErrorKind, Event, EventType, KindRef, ObjectRef, ObservedObject,
    ReconcileError, ReconcileRequest, ReconcileResponse, RelatedBy, RelatedKind,
};

/// The input of one reconcile, as the host gathers it from its caches.
#[derive(Clone, Debug, Default)]
pub struct Request {
    /// The parent object.
    pub parent: Value,
    /// The observed children.
    pub observed: Vec<Value>,
    /// The parent is being deleted (finalizer path).
    pub deleting: bool,
    /// The related objects that map to the parent, Secrets already
    /// concealed where the guest may not see their values.
    pub related: Vec<Value>,
}

impl Request {
    /// A request for `parent` alone: no child observed, nothing related,
    /// not being deleted.
    pub fn of(parent: Value) -> Self {
        Self {
            parent,
            ..Self::default()
        }
    }

    /// The request with `observed` as the parent's children.
    pub fn observing(mut self, observed: Vec<Value>) -> Self {
        self.observed = observed;
        self
    }

    /// The request with `related` as the parent's related objects.
    pub fn relating(mut self, related: Vec<Value>) -> Self {
        self.related = related;
        self
    }

    /// The request on the deletion path.
    pub fn being_deleted(mut self) -> Self {
        self.deleting = true;
        self
    }

    /// The request as the guest gets it: the parent and each observed child
    /// as JSON text, each child with the fields that identify it read out,
    /// the time and the settings.
    pub fn to_wire(&self, now: u64, settings: Option<&str>) -> ReconcileRequest {
        ReconcileRequest {
            parent: json_text(&self.parent),
            observed: self.observed.iter().map(observed_object).collect(),
            deleting: self.deleting,
            now,
            settings: settings.map(str::to_owned),
            related: self.related.iter().map(observed_object).collect(),
        }
    }
}

/// An observed child as a guest gets it: its apiVersion, kind and name (""
/// where the object has none) and the whole object as JSON text.
fn observed_object(child: &Value) -> ObservedObject {
    let field = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_owned();
    ObservedObject {
        api_version: field(child.get("apiVersion")),
        kind: field(child.get("kind")),
        name: field(child.get("metadata").and_then(|m| m.get("name"))),
        object: json_text(child),
    }
}

/// `value` as compact JSON text. `serde_json::to_string` writes straight
/// into a byte buffer; `Value`'s `Display` goes through `fmt` and takes
/// half as long again.
pub fn json_text(value: &Value) -> String {
    serde_json::to_string(value).expect("a JSON value always serialises")
}

/// Total size of the JSON text and strings a guest answered, in bytes: what
/// `maxResponseBytes` bounds.
pub fn response_size(response: &ReconcileResponse) -> usize {
    response.children.iter().map(String::len).sum::<usize>()
        + response.status.as_ref().map_or(0, String::len)
        + response
            .events
            .iter()
            .map(|e| e.reason.len() + e.message.len())
            .sum::<usize>()
        + response
            .keep
            .iter()
            .map(|k| k.api_version.len() + k.kind.len() + k.name.len())
            .sum::<usize>()
}

/// A failure the guest reported through the WIT `reconcile-error`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{kind} guest error: {message}")]
pub struct GuestError {
    /// Retryable or permanent.
    pub kind: ErrorKind,
    /// The guest's message.
    pub message: String,
}

impl From<ReconcileError> for GuestError {
    fn from(ReconcileError { kind, message }: ReconcileError) -> Self {
        Self { kind, message }
    }
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
            related: vec![],
            deleting: false,
        };
        let wire = request.to_wire(7, Some(r#"{"a":1}"#));
        assert_eq!(wire.parent, r#"{"metadata":{"name":"demo"}}"#);
        assert_eq!(
            (wire.now, wire.settings.as_deref()),
            (7, Some(r#"{"a":1}"#))
        );
        assert_eq!(
            wire.observed[0],
            ObservedObject {
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
            (
                wire.observed[1].api_version.as_str(),
                wire.observed[1].name.as_str()
            ),
            ("", "")
        );
        assert_eq!(wire.observed[1].object, r#"{"kind":"ConfigMap"}"#);
    }

    #[test]
    fn the_response_size_counts_every_string_the_guest_sent() {
        let response = ReconcileResponse {
            children: vec!["abc".into()],
            status: Some("{}".into()),
            events: vec![Event::normal("R", "msg")],
            keep: vec![ObjectRef::new("v1", "ConfigMap", "x")],
            ..ReconcileResponse::default()
        };
        assert_eq!(response_size(&response), 3 + 2 + 4 + 12);
    }
}
