//! The WIT versions the host serves, and how a call to each export is
//! typed.
//!
//! Each released version of the contract lives in `wit/operator@<version>/`
//! and gets a module here (`v0_1` for `wasmop:operator@0.1.0`) with its
//! generated world: what only a generated world gives, the `log` import's
//! `Host` trait and the check that a component implements the world.
//! Requests are lowered from, and answers lifted into, the contract's plain
//! types ([`wasmop_contract`]), which implement the component-model traits
//! and are the newest version's records: the host's logic sees one model.
//!
//! Adding a version (a change to the contract): copy the newest
//! `wit/operator@<version>/` to a new version folder and change it there
//! (released folders never change; `wit/released.sha256` holds their
//! digests), change `crates/contract` to the new records, add a module
//! beside `v0_1` with its bindings, and turn the older modules into
//! adapters: each keeps its own generated records and converts them to and
//! from the contract's types in one place, so a guest built against an old
//! version is called through its adapter. [`Contract`] names the version a
//! component was built against, found by the interface it exports.

use wasmop_contract::{
    AdmissionResponse, AdmissionReview, Description, ReconcileError, ReconcileRequest,
    ReconcileResponse,
};

pub(crate) mod metacontroller;
pub(crate) mod v0_1;

/// A released version of the contract the host serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Contract {
    /// `wasmop:operator@0.1.0`.
    V0_1,
    /// `wasmop:metacontroller@0.1.0`: a Metacontroller controller's
    /// definition and hooks, which the host reconciles as the definition
    /// says (`crate::metacontroller`).
    Metacontroller,
}

impl Contract {
    /// Every version served, newest first.
    pub const SERVED: &'static [Contract] = &[Contract::V0_1];

    /// The WIT package, as `wasmop_guest_info{contract}` and `wasmop render`
    /// show it.
    pub fn package(self) -> &'static str {
        match self {
            Self::V0_1 => wasmop_contract::WIT_PACKAGE,
            Self::Metacontroller => metacontroller::PACKAGE,
        }
    }

    /// The operator interface a component of this version exports.
    pub fn operator_interface(self) -> &'static str {
        match self {
            Self::V0_1 => wasmop_contract::OPERATOR_INTERFACE,
            Self::Metacontroller => metacontroller::HOOKS_INTERFACE,
        }
    }
}

/// The interface a guest exports, as its component names it.
pub const OPERATOR_INTERFACE: &str = wasmop_contract::OPERATOR_INTERFACE;

/// Parameters and results of `describe`.
pub type DescribeParams<'a> = (Option<&'a str>,);
/// See [`DescribeParams`].
pub type DescribeResults = (Result<Description, String>,);

/// Parameters and results of `reconcile`.
pub type ReconcileParams<'a> = (&'a ReconcileRequest,);
/// See [`ReconcileParams`].
pub type ReconcileResults = (Result<ReconcileResponse, ReconcileError>,);

/// The optional admission interface, as a component names it.
pub const ADMISSION_INTERFACE: &str = wasmop_contract::ADMISSION_INTERFACE;

/// The optional conversion interface, as a component names it.
pub const CONVERSION_INTERFACE: &str = wasmop_contract::CONVERSION_INTERFACE;

/// Parameters and results of `admit`.
pub type AdmitParams<'a> = (&'a AdmissionReview,);
/// See [`AdmitParams`].
pub type AdmitResults = (AdmissionResponse,);

/// Parameters and results of `convert`.
pub type ConvertParams<'a> = (&'a [String], &'a str);
/// See [`ConvertParams`].
pub type ConvertResults = (Result<Vec<String>, String>,);
