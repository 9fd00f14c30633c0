//! The WIT versions the host serves, and how a call to each export is
//! typed.
//!
//! Requests are lowered from, and answers lifted into, the contract's plain
//! types ([`wasmop_contract`]), which implement the component-model traits:
//! the host has no generated twin of them and no conversion code. The
//! generated bindings of `wit/operator.wit` remain for what only a generated
//! world gives: the `log` import's `Host` trait and the check that a
//! component implements the world. A future `@0.2.0` gets a module like this
//! one beside it, mapping onto the same contract types, so guests built
//! against either keep running.

use wasmop_contract::{
    AdmissionResponse, AdmissionReview, Description, ReconcileError, ReconcileRequest,
    ReconcileResponse,
};

/// `wasmop:operator@0.1.0`: the generated world.
pub mod v0_1 {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "operator-guest",
    });

    pub use wasmop::operator::log::Level;

    /// The worlds with the optional exports: loading a module that has one
    /// type-checks it against its world.
    pub mod admission {
        wasmtime::component::bindgen!({ path: "../wit", world: "admission-guest" });
    }
    /// See [`admission`].
    pub mod conversion {
        wasmtime::component::bindgen!({ path: "../wit", world: "conversion-guest" });
    }
    /// See [`admission`].
    pub mod webhook {
        wasmtime::component::bindgen!({ path: "../wit", world: "webhook-guest" });
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
