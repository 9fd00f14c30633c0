//! Owner-independent object metadata.
//!
//! A guest names and labels its children; everything that ties a child to its
//! parent (namespace, controller ownerReference, the `wasmop.dev/guest` label)
//! is stamped by the host, so these helpers never set it. Keys under
//! `wasmop.dev/` are the host's alone.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

pub use wasmop_contract::names::GUEST_LABEL;

/// A label map from pairs. A `BTreeMap`, so it serializes in sorted order.
pub fn labels<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> BTreeMap<String, String> {
    pairs
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// Metadata with a name and labels, and nothing the host stamps. Empty labels
/// are left out rather than written as `{}`.
pub fn object_meta(name: impl Into<String>, labels: BTreeMap<String, String>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        labels: (!labels.is_empty()).then_some(labels),
        ..ObjectMeta::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn object_meta_sets_only_name_and_labels() {
        let meta = object_meta("demo", labels([("app", "cache")]));
        assert_eq!(
            serde_json::to_value(&meta).unwrap(),
            json!({"name": "demo", "labels": {"app": "cache"}})
        );
    }

    #[test]
    fn object_meta_leaves_out_empty_labels() {
        let meta = object_meta("demo", BTreeMap::new());
        assert_eq!(
            serde_json::to_value(&meta).unwrap(),
            json!({"name": "demo"})
        );
    }
}
