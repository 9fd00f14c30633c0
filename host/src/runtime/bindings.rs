//! Host-side bindings generated from `wit/operator.wit`.
//!
//! Kept in a module of its own so that the generated names stay out of the
//! rest of the runtime; everything else converts to and from [`crate::model`].

wasmtime::component::bindgen!({
    path: "../wit",
    world: "operator-guest",
});

pub use exports::wasmop::operator::operator as guest_api;
pub use wasmop::operator::log::Level;
pub use wasmop::operator::types;
