//! Adding and removing the guest's finalizer on a parent.
//!
//! JSON patches with a `test` operation, not server-side apply: an apply
//! could re-create a parent that was deleted a moment ago, and the `test`
//! makes a concurrent change fail cleanly (409/422) so the reconcile retries
//! on fresh data instead of clobbering another controller's finalizer.

use kube::ResourceExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::json;

/// Whether `parent` carries `finalizer`.
pub fn has(parent: &DynamicObject, finalizer: &str) -> bool {
    parent.finalizers().iter().any(|f| f == finalizer)
}

/// Adds `finalizer` to `parent`; returns the parent as the patch left it.
pub async fn add(
    api: &Api<DynamicObject>,
    parent: &DynamicObject,
    finalizer: &str,
) -> kube::Result<DynamicObject> {
    let ops = if parent.finalizers().is_empty() {
        json!([
            {"op": "test", "path": "/metadata/uid", "value": parent.uid()},
            {"op": "add", "path": "/metadata/finalizers", "value": [finalizer]},
        ])
    } else {
        json!([
            {"op": "test", "path": "/metadata/finalizers", "value": parent.finalizers()},
            {"op": "add", "path": "/metadata/finalizers/-", "value": finalizer},
        ])
    };
    patch(api, parent, ops).await
}

/// Removes `finalizer` from `parent`.
pub async fn remove(
    api: &Api<DynamicObject>,
    parent: &DynamicObject,
    finalizer: &str,
) -> kube::Result<()> {
    let Some(index) = parent.finalizers().iter().position(|f| f == finalizer) else {
        return Ok(());
    };
    let path = format!("/metadata/finalizers/{index}");
    let ops = json!([
        {"op": "test", "path": path, "value": finalizer},
        {"op": "remove", "path": path},
    ]);
    match patch(api, parent, ops).await {
        // Already gone: the object was removed once its last finalizer went.
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        other => other.map(drop),
    }
}

async fn patch(
    api: &Api<DynamicObject>,
    parent: &DynamicObject,
    ops: serde_json::Value,
) -> kube::Result<DynamicObject> {
    let patch: json_patch::Patch = serde_json::from_value(ops).expect("well-formed JSON patch");
    api.patch(
        &parent.name_any(),
        &PatchParams::default(),
        &Patch::<()>::Json(patch),
    )
    .await
}
