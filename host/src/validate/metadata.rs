//! The metadata a guest may give a child: `name`, `namespace` (the
//! parent's), and `labels` and `annotations` as maps of strings with valid
//! keys, none under `wasmop.dev/`. Any other field (ownerReferences,
//! finalizers, uid, generateName, ...) and any other shape (`labels: null`,
//! a number as a value) is refused, so that what the host stamps is exactly
//! what reaches the API server.

use serde_json::{Map, Value};
use wasmop_contract::names::is_host_key;

use super::names;

/// The metadata fields a guest may set.
const ALLOWED: &[&str] = &["name", "namespace", "labels", "annotations"];

/// Why a child's metadata is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A field the host or the API server owns.
    #[error(
        "metadata.{0} may not be set by a guest (only name, namespace, labels and annotations)"
    )]
    Field(String),
    /// `labels` or `annotations` is not a map of strings.
    #[error("metadata.{field} must be a map of strings, got {got}")]
    Shape {
        /// `labels` or `annotations`.
        field: &'static str,
        /// What it was.
        got: String,
    },
    /// A key that is not a qualified name.
    #[error("metadata.{field} key {key:?} {why}")]
    Key {
        /// `labels` or `annotations`.
        field: &'static str,
        /// The key.
        key: String,
        /// Why.
        why: &'static str,
    },
    /// A label value that is not valid.
    #[error("label {key}={value:?}: the value {why}")]
    LabelValue {
        /// The key.
        key: String,
        /// The value.
        value: String,
        /// Why.
        why: &'static str,
    },
    /// A key under `wasmop.dev/`.
    #[error("metadata.{field} key {key:?} is under wasmop.dev/, which is the host's alone")]
    HostKey {
        /// `labels` or `annotations`.
        field: &'static str,
        /// The key.
        key: String,
    },
}

/// Checks a child's `metadata` object.
pub fn check(metadata: &Map<String, Value>) -> Result<(), Error> {
    if let Some(field) = metadata.keys().find(|k| !ALLOWED.contains(&k.as_str())) {
        return Err(Error::Field(field.clone()));
    }
    for field in ["labels", "annotations"] {
        let Some(value) = metadata.get(field) else {
            continue;
        };
        let Value::Object(map) = value else {
            return Err(Error::Shape {
                field,
                got: super::type_name(value).to_owned(),
            });
        };
        for (key, value) in map {
            let Value::String(value) = value else {
                return Err(Error::Shape {
                    field,
                    got: format!("{} for key {key:?}", super::type_name(value)),
                });
            };
            names::qualified_name(key).map_err(|why| Error::Key {
                field,
                key: key.clone(),
                why,
            })?;
            if is_host_key(key) {
                return Err(Error::HostKey {
                    field,
                    key: key.clone(),
                });
            }
            if field == "labels" {
                names::label_value(value).map_err(|why| Error::LabelValue {
                    key: key.clone(),
                    value: value.clone(),
                    why,
                })?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta(value: Value) -> Result<(), Error> {
        check(value.as_object().unwrap())
    }

    #[test]
    fn names_labels_and_annotations_of_strings_pass() {
        assert_eq!(
            meta(
                json!({"name": "a", "namespace": "n", "labels": {"app": "x", "empty": ""},
                "annotations": {"example.com/note": "any text at all"}})
            ),
            Ok(())
        );
    }

    #[test]
    fn other_fields_and_other_shapes_are_refused() {
        for bad in [
            json!({"name": "a", "ownerReferences": []}),
            json!({"name": "a", "finalizers": ["x.io/y"]}),
            json!({"name": "a", "uid": "1"}),
            json!({"name": "a", "labels": null}),
            json!({"name": "a", "annotations": []}),
            json!({"name": "a", "labels": {"app": 7}}),
            json!({"name": "a", "labels": {"not a key!": "x"}}),
            json!({"name": "a", "labels": {"app": "two words"}}),
        ] {
            assert!(meta(bad.clone()).is_err(), "{bad}");
        }
    }

    #[test]
    fn keys_under_the_host_prefix_are_refused_even_with_the_guests_own_values() {
        let err = meta(json!({"name": "a", "labels": {"wasmop.dev/guest": "me"}})).unwrap_err();
        assert!(matches!(err, Error::HostKey { .. }), "{err}");
        let err = meta(json!({"name": "a", "annotations": {"wasmop.dev/desired-hash": "0"}}))
            .unwrap_err();
        assert!(matches!(err, Error::HostKey { .. }), "{err}");
    }
}
