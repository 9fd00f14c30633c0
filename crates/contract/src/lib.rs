//! The contract between the wasmop host and its guests, as plain Rust.
//!
//! The newest `wit/operator@<version>/operator.wit` is the contract ([`WIT_FOLDER`]);
//! this crate is its one Rust rendering,
//! shared by the host's model and the guest SDK, so that a new field is one
//! edit here (and in the WIT) plus its use. With the feature `wasmtime` the
//! types implement the component-model traits and the host lowers requests
//! and lifts answers straight into them; the guest SDK converts between
//! them and its `wit-bindgen` bindings in one place (`guests/sdk/src/export.rs`).
//!
//! Beside the records, [`names`] holds the labels, annotations and field
//! managers the host stamps, and [`Reason`] every Event reason the host
//! records: each is defined once, here.
//!
//! Several WIT versions can be served side by side: each version the host
//! supports maps onto these types in a module of its own
//! (`host/src/runtime/abi/`), so the host's logic sees one model.

mod admission;
mod description;
mod kind;
pub mod names;
mod reason;
mod request;
mod response;

pub use admission::{AdmissionResponse, AdmissionReview, Operation};
pub use description::Description;
#[cfg(feature = "k8s")]
pub use kind::ObjectScope;
pub use kind::{ChildKind, KindRef, RelatedBy, RelatedKind};
pub use reason::Reason;
pub use request::{ObservedObject, ReconcileRequest};
pub use response::{ErrorKind, Event, EventType, ObjectRef, ReconcileError, ReconcileResponse};

// WIT_PACKAGE, VERSION, WIT_FOLDER and the interface names, read from the
// WIT's package line by build.rs.
include!(concat!(env!("OUT_DIR"), "/contract.rs"));

#[cfg(test)]
mod released {
    use sha2::Digest as _;

    /// `wit/released.sha256`: the digest of every released version of the
    /// contract, as `sha256sum` writes it.
    const RECORDED: &str = include_str!("../../../wit/released.sha256");

    #[test]
    fn a_released_contract_never_changes() {
        let wit = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../wit");
        for line in RECORDED.lines().filter(|l| !l.trim().is_empty()) {
            let (digest, file) = line.split_once("  ").expect("sha256sum format");
            let bytes = std::fs::read(wit.join(file)).expect("a released version is kept");
            assert_eq!(
                hex::encode(sha2::Sha256::digest(&bytes)),
                digest,
                "wit/{file} changed: a released version never changes; make the change in a new version beside it"
            );
        }
    }

    #[test]
    fn the_package_the_types_render_is_released() {
        let version = super::WIT_PACKAGE.rsplit('@').next().expect("a version");
        assert!(
            RECORDED.contains(&format!("operator@{version}/operator.wit")),
            "{} is not recorded in wit/released.sha256",
            super::WIT_PACKAGE
        );
    }
}
