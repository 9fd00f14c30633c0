//! Admission and conversion: the WIT `admission-review`,
//! `admission-response` and `operation`.

use serde::{Deserialize, Serialize};

/// What an admission request does to the object. The WIT `operation`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
#[cfg_attr(
    feature = "wasmtime",
    derive(
        wasmtime::component::ComponentType,
        wasmtime::component::Lift,
        wasmtime::component::Lower
    )
)]
#[cfg_attr(feature = "wasmtime", component(enum))]
#[repr(u8)]
pub enum Operation {
    /// The object is being created.
    #[cfg_attr(feature = "wasmtime", component(name = "create"))]
    Create,
    /// The object is being changed.
    #[cfg_attr(feature = "wasmtime", component(name = "update"))]
    Update,
    /// The object is being deleted.
    #[cfg_attr(feature = "wasmtime", component(name = "delete"))]
    Delete,
    /// A connect request to the object.
    #[cfg_attr(feature = "wasmtime", component(name = "connect"))]
    Connect,
}

/// One admission request for an object of the guest's primary kind. The
/// WIT `admission-review`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
pub struct AdmissionReview {
    /// What the request does.
    pub operation: Operation,
    /// The object as it would be stored, as JSON text; none for a delete.
    pub object: Option<String>,
    /// The object as stored before the request; only for update and delete.
    #[cfg_attr(feature = "wasmtime", component(name = "old-object"))]
    pub old_object: Option<String>,
    /// The subresource ("status", "scale"), "" for the object itself.
    #[cfg_attr(feature = "wasmtime", component(name = "sub-resource"))]
    pub sub_resource: String,
    /// True when nothing will be stored.
    #[cfg_attr(feature = "wasmtime", component(name = "dry-run"))]
    pub dry_run: bool,
    /// The user who made the request.
    pub username: String,
    /// That user's groups.
    pub groups: Vec<String>,
    /// True in the defaulting call (the patch is applied), false in the
    /// validating one (the patch is ignored).
    pub mutating: bool,
    /// The guest-list entry's `settings` as JSON text.
    pub settings: Option<String>,
}

/// The guest's verdict on one admission request. The WIT
/// `admission-response`.
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
pub struct AdmissionResponse {
    /// True to admit the request.
    pub allowed: bool,
    /// Why a request is denied (the host keeps its first 1024 bytes).
    pub message: String,
    /// The status of a denial (400–599); none for 403.
    pub code: Option<u16>,
    /// Mutating only: a JSON Patch (RFC 6902) as JSON text.
    pub patch: Option<String>,
    /// Warnings shown to the user.
    pub warnings: Vec<String>,
}

impl AdmissionResponse {
    /// Admits the request unchanged.
    pub fn allow() -> Self {
        Self {
            allowed: true,
            ..Self::default()
        }
    }

    /// Denies the request with `message` (status 403).
    pub fn deny(message: impl Into<String>) -> Self {
        Self {
            allowed: false,
            message: message.into(),
            ..Self::default()
        }
    }
}
