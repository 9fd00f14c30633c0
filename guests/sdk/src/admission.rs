//! Admission and conversion: what a guest implements to default, validate
//! and convert objects of its primary kind, exported beside its
//! [`Operator`](crate::Operator) with
//! [`export_operator!`](crate::export_operator)`(MyOperator, admission)`,
//! `(MyOperator, conversion)` or `(MyOperator, admission, conversion)`.

use serde::de::DeserializeOwned;
use serde_json::Value;

pub use wasmop_contract::{AdmissionResponse, AdmissionReview, Operation};

/// Defaulting and validation of the guest's primary kind.
///
/// The host calls [`Admission::admit`] twice per create or update: first
/// with [`Review::mutating`] true, where the answer's patch defaults the
/// object, then with the defaulted object and `mutating` false, where only
/// the verdict counts. Both calls must give the same verdict for the same
/// object; a patch must be idempotent (nothing left to default the second
/// time).
pub trait Admission {
    /// The verdict on one request.
    fn admit(review: &Review) -> AdmissionResponse;
}

/// Conversion of the guest's primary kind between its versions.
pub trait Conversion {
    /// `object` in `desired_api_version` (e.g. "apps.example.com/v1beta1").
    /// Keep `kind` and `metadata` as they are (only labels and annotations
    /// may change); set `apiVersion` to the desired one. An error fails the
    /// API server's whole request with the message.
    fn convert(object: Value, desired_api_version: &str) -> Result<Value, String>;

    /// Every object of one request (JSON text) in `desired_api_version`,
    /// in order: by default each through [`Conversion::convert`].
    ///
    /// # Errors
    /// An object that is not JSON, or the first error of `convert`.
    fn convert_all(objects: Vec<String>, desired_api_version: &str) -> Result<Vec<String>, String> {
        objects
            .iter()
            .map(|text| {
                let object: Value = serde_json::from_str(text)
                    .map_err(|e| format!("an object is not JSON: {e}"))?;
                Self::convert(object, desired_api_version).map(|o| crate::json_text(&o))
            })
            .collect()
    }
}

/// One admission request, decoded on demand.
#[derive(Clone, Debug)]
pub struct Review {
    wire: AdmissionReview,
}

impl Review {
    /// Wraps a request as the host sends it.
    pub fn from_wire(wire: AdmissionReview) -> Self {
        Self { wire }
    }

    /// A request for `operation` of `object` (tests and `render`).
    pub fn new(operation: Operation, object: Option<&Value>, mutating: bool) -> Self {
        Self::from_wire(AdmissionReview {
            operation,
            object: object.map(crate::json_text),
            old_object: None,
            sub_resource: String::new(),
            dry_run: false,
            username: String::new(),
            groups: Vec::new(),
            mutating,
            settings: None,
        })
    }

    /// The request as the host sent it.
    pub fn wire(&self) -> &AdmissionReview {
        &self.wire
    }

    /// What the request does.
    pub fn operation(&self) -> Operation {
        self.wire.operation
    }

    /// True in the defaulting call, false in the validating one.
    pub fn mutating(&self) -> bool {
        self.wire.mutating
    }

    /// The object as it would be stored, decoded into `T`.
    ///
    /// # Errors
    /// The object does not decode into `T` (its message names the field).
    pub fn object_as<T: DeserializeOwned>(&self) -> Result<Option<T>, String> {
        decode(self.wire.object.as_deref())
    }

    /// The object before the request, decoded into `T`.
    ///
    /// # Errors
    /// As [`Self::object_as`].
    pub fn old_object_as<T: DeserializeOwned>(&self) -> Result<Option<T>, String> {
        decode(self.wire.old_object.as_deref())
    }

    /// The guest-list entry's settings.
    pub fn settings(&self) -> crate::Settings {
        crate::Settings::from_json(self.wire.settings.clone())
    }
}

fn decode<T: DeserializeOwned>(text: Option<&str>) -> Result<Option<T>, String> {
    text.map(|t| serde_json::from_str(t).map_err(|e| e.to_string()))
        .transpose()
}

/// A JSON Patch (RFC 6902) built one operation at a time.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Patch {
    ops: Vec<Value>,
}

impl Patch {
    /// No operations.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the member at `pointer` (RFC 6901) to `value`; its parent must
    /// exist.
    pub fn add(mut self, pointer: &str, value: Value) -> Self {
        self.ops
            .push(serde_json::json!({"op": "add", "path": pointer, "value": value}));
        self
    }

    /// Whether there is nothing to patch.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// The operations, as JSON values.
    pub fn ops(&self) -> &[Value] {
        &self.ops
    }

    /// Admits the request with this patch (none when empty).
    pub fn allow(self) -> AdmissionResponse {
        AdmissionResponse {
            patch: (!self.ops.is_empty()).then(|| crate::json_text(&Value::Array(self.ops))),
            ..AdmissionResponse::allow()
        }
    }
}

/// The last segment of an RFC 6901 pointer for `key`: `~` and `/` escaped.
pub fn pointer_segment(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_patch_is_a_json_patch_and_none_when_empty() {
        assert_eq!(Patch::new().allow().patch, None);
        let response = Patch::new().add("/spec/a~1b", serde_json::json!(1)).allow();
        assert!(response.allowed);
        let ops: Value = serde_json::from_str(response.patch.as_deref().unwrap()).unwrap();
        assert_eq!(
            ops,
            serde_json::json!([{"op": "add", "path": "/spec/a~1b", "value": 1}])
        );
        assert_eq!(pointer_segment("a/b~c"), "a~1b~0c");
    }

    #[test]
    fn the_review_decodes_its_object_on_demand() {
        let object = serde_json::json!({"spec": {"x": 1}});
        let review = Review::new(Operation::Create, Some(&object), true);
        let read: Value = review.object_as().unwrap().unwrap();
        assert_eq!(read, object);
        assert!(review.old_object_as::<Value>().unwrap().is_none());
        assert!(review.mutating());
    }
}
