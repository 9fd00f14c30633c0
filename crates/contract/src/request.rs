//! One reconcile's input: the WIT `reconcile-request`.

use serde::{Deserialize, Serialize};

/// A child the host observes for a parent: the fields that identify it, read
/// out by the host so a guest finds the child it wants without parsing every
/// object, and the whole object as JSON text. The WIT `observed-object`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(
    feature = "wasmtime",
    derive(
        wasmtime::component::ComponentType,
        wasmtime::component::Lift,
        wasmtime::component::Lower
    )
)]
#[cfg_attr(feature = "wasmtime", component(record))]
pub struct ObservedObject {
    /// `apiVersion`, e.g. "apps/v1".
    #[cfg_attr(feature = "wasmtime", component(name = "api-version"))]
    pub api_version: String,
    /// `kind`, e.g. "Deployment".
    pub kind: String,
    /// `metadata.name`; each of these three is "" where the object has none.
    pub name: String,
    /// The whole object as a JSON object in text, as the API server returned
    /// it (managedFields removed).
    pub object: String,
}

/// One reconcile's input. The WIT `reconcile-request`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(
    feature = "wasmtime",
    derive(
        wasmtime::component::ComponentType,
        wasmtime::component::Lift,
        wasmtime::component::Lower
    )
)]
#[cfg_attr(feature = "wasmtime", component(record))]
pub struct ReconcileRequest {
    /// The parent object as JSON text (managedFields removed).
    pub parent: String,
    /// The children the host observes for this parent: controlled by it and
    /// labelled with the guest's name.
    pub observed: Vec<ObservedObject>,
    /// True once the parent has a deletionTimestamp; only sent to guests that
    /// declared a finalizer.
    pub deleting: bool,
    /// The host's wall-clock time, in whole seconds since the Unix epoch.
    pub now: u64,
    /// The guest-list entry's `settings` as JSON text, if it has any: the
    /// same text `describe` accepted for this module version.
    pub settings: Option<String>,
    /// The objects of the related kinds that map to this parent, sorted by
    /// kind and name. Secrets carry a SHA-256 for each value unless the
    /// guest-list entry says `secretValues: true`.
    pub related: Vec<ObservedObject>,
}
