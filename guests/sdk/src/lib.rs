//! The SDK for wasmop operator guests.
//!
//! A wasmop guest is pure reconcile logic compiled to a WebAssembly component:
//! the host owns watches, queues, clients and credentials, hands the guest a
//! parent object and the children it observes, and applies what the guest
//! answers. This crate wraps the WIT bindings (`wit/operator@0.1.0/operator.wit`, world
//! `operator-guest`) so that a guest is a type implementing [`Operator`]:
//!
//! ```
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use wasmop_guest::{meta, ChildKind, Description, KindRef, Operator, Request, Response, Result, Settings};
//!
//! /// Gives every `Greeting` a ConfigMap with a greeting in it.
//! pub struct Greeter;
//!
//! impl Operator for Greeter {
//!     fn describe(_settings: &Settings) -> std::result::Result<Description, String> {
//!         Ok(Description::new(KindRef::new("example.com", "v1", "Greeting"))
//!             .child(ChildKind::of::<ConfigMap>()))
//!     }
//!
//!     fn reconcile(request: Request) -> Result<Response> {
//!         let name = request.parent_name();
//!         let config = ConfigMap {
//!             metadata: meta::object_meta(format!("{name}-greeting"), meta::labels([("app", "greeter")])),
//!             data: Some([("hello".to_owned(), "world".to_owned())].into()),
//!             ..ConfigMap::default()
//!         };
//!         Response::new().child(&config)?.status(&serde_json::json!({"greeted": true}))
//!     }
//! }
//!
//! // In the guest crate (a `cdylib`), this wires `Greeter` into the component's
//! // exports; natively it expands to nothing, so the logic stays testable.
//! wasmop_guest::export_operator!(Greeter);
//!
//! // Natively the logic is plain Rust:
//! let request = Request::new(serde_json::json!({"metadata": {"name": "hi"}}), vec![], false);
//! let response = Greeter::reconcile(request).unwrap();
//! assert_eq!(response.child_values()[0]["metadata"]["name"], "hi-greeting");
//! ```
//!
//! What the host stamps, a guest never sets: the namespace, the controller
//! ownerReference and the `wasmop.dev/guest` label of its children, nor any
//! label or annotation under `wasmop.dev/`. To leave an observed child as
//! it is (a paused parent), [`Response::keep`] it instead of sending it
//! back.
//!
//! The plain types of the contract ([`Description`], [`KindRef`],
//! [`Event`], the wire records) come from the `wasmop-contract` crate,
//! which the host shares: SDK and host cannot drift apart.
//!
//! Everything here except the wasm export glue (module `export`, wasm32 only)
//! is plain Rust that compiles and runs natively, so guest logic is
//! unit-tested with `cargo test` and can be benchmarked natively against its
//! wasm build.
//!
//! Speed: objects cross the WIT boundary as JSON text, each observed child
//! with its apiVersion, kind and name beside it, and the SDK keeps them as
//! text: finding a child reads no object. Decode the parent with
//! [`Request::parent_as`] and an observed child with
//! [`Request::observed_named_as`] into types that name only the fields you
//! read; add children with [`Response::push_child`], which serialises each
//! object once. The untyped views ([`Request::parent`],
//! [`Request::observed`]) parse on first use and cost several times more.
//! Build guests for `wasm32-unknown-unknown`, linked by the toolchain's
//! `wasm-component-ld`, with a small shadow stack and enough initial memory
//! for one reconcile (this workspace's `.cargo/config.toml` shows how: 128
//! KiB and 512 KiB): the component then imports nothing but `log`,
//! instantiates in a few microseconds, and with the SDK's allocator (feature
//! `call-heap`) never grows its memory. A guest that does CPU-heavy work
//! should know that it runs without SHA or SIMD instructions and with an
//! epoch check at every function entry and loop header: hashing, for
//! example, is far cheaper with a non-cryptographic hash where no security
//! property is needed (the cache-operator's config hash is FNV-1a). The
//! time comes with each request ([`Request::now`]); a panic's message
//! reaches the host log. The SDK also builds for `wasm32-wasip2`, for guests
//! that want WASI.

pub mod admission;
#[cfg(all(feature = "call-heap", target_arch = "wasm32", target_os = "unknown"))]
mod alloc;
pub mod condition;
mod error;
#[cfg(target_arch = "wasm32")]
#[doc(hidden)]
pub mod export;
pub mod http;
pub mod log;
pub mod meta;
mod operator;
mod request;
mod response;
mod settings;
pub mod time;

pub use admission::{Admission, Conversion, Review};
pub use error::{Error, ErrorKind, Result};
pub use operator::Operator;
pub use request::{Request, observed_from_json};
pub use response::Response;
pub use settings::Settings;
pub use wasmop_contract::{
    ChildKind, Description, Event, EventType, KindRef, ObjectRef, ObjectScope, ObservedObject,
    ReconcileRequest, ReconcileResponse, RelatedBy, RelatedKind, names,
};

/// `value` as compact JSON text. `serde_json::to_string` writes straight
/// into a byte buffer; `Value`'s `Display` (`to_string()`) goes through
/// `fmt` and takes twice as long for the same bytes.
pub(crate) fn json_text(value: &serde_json::Value) -> String {
    serde_json::to_string(value).expect("a JSON value always serialises")
}

/// Exports an [`Operator`] as the component's `wasmop:operator/operator`
/// interface; with the SDK's feature `admission` also its [`Admission`],
/// with `conversion` its [`Conversion`] (the component then targets the
/// WIT world `admission-guest`, `conversion-guest` or `webhook-guest`).
///
/// Invoke it once, at the top level of the guest crate (a `cdylib`). On
/// wasm32 it implements the generated WIT `Guest` traits by converting JSON
/// text to and from the SDK's types; on any other target it expands to
/// nothing, so the same crate builds natively for tests and benchmarks.
#[macro_export]
macro_rules! export_operator {
    ($operator:ty) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            struct WasmopGuestExport;

            impl $crate::export::Guest for WasmopGuestExport {
                fn describe(
                    settings: ::core::option::Option<::std::string::String>,
                ) -> ::core::result::Result<
                    $crate::export::bindings::wasmop::operator::types::Description,
                    ::std::string::String,
                > {
                    $crate::export::describe::<$operator>(settings)
                }

                fn reconcile(
                    request: $crate::export::bindings::wasmop::operator::types::ReconcileRequest,
                ) -> ::core::result::Result<
                    $crate::export::bindings::wasmop::operator::types::ReconcileResponse,
                    $crate::export::bindings::wasmop::operator::types::ReconcileError,
                > {
                    $crate::export::reconcile::<$operator>(request)
                }
            }

            $crate::__export_admission!($operator);
            $crate::__export_conversion!($operator);

            $crate::export::bindings::export_guest!(
                WasmopGuestExport with_types_in $crate::export::bindings
            );
        };
    };
}

#[cfg(feature = "admission")]
#[doc(hidden)]
#[macro_export]
macro_rules! __export_admission {
    ($operator:ty) => {
        impl $crate::export::bindings::exports::wasmop::operator::admission::Guest
            for WasmopGuestExport
        {
            fn admit(
                review: $crate::export::bindings::wasmop::operator::types::AdmissionReview,
            ) -> $crate::export::bindings::wasmop::operator::types::AdmissionResponse {
                $crate::export::admit::<$operator>(review)
            }
        }
    };
}

#[cfg(not(feature = "admission"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __export_admission {
    ($operator:ty) => {};
}

#[cfg(feature = "conversion")]
#[doc(hidden)]
#[macro_export]
macro_rules! __export_conversion {
    ($operator:ty) => {
        impl $crate::export::bindings::exports::wasmop::operator::conversion::Guest
            for WasmopGuestExport
        {
            fn convert(
                objects: ::std::vec::Vec<::std::string::String>,
                desired_api_version: ::std::string::String,
            ) -> ::core::result::Result<::std::vec::Vec<::std::string::String>, ::std::string::String>
            {
                $crate::export::convert::<$operator>(objects, &desired_api_version)
            }
        }
    };
}

#[cfg(not(feature = "conversion"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __export_conversion {
    ($operator:ty) => {};
}
