//! `wasmop:operator@0.1.0` (`wit/operator@0.1.0/`): the generated worlds.
//! The contract's plain types are this version's records, so no adapter is
//! needed yet.

wasmtime::component::bindgen!({
    path: "../wit/operator@0.1.0",
    world: "operator-guest",
});

pub use wasmop::operator::log::Level;

/// The worlds with the optional exports: loading a module that has one
/// type-checks it against its world.
pub mod admission {
    wasmtime::component::bindgen!({ path: "../wit/operator@0.1.0", world: "admission-guest" });
}
/// See [`admission`].
pub mod conversion {
    wasmtime::component::bindgen!({ path: "../wit/operator@0.1.0", world: "conversion-guest" });
}
/// See [`admission`].
pub mod webhook {
    wasmtime::component::bindgen!({ path: "../wit/operator@0.1.0", world: "webhook-guest" });
}
