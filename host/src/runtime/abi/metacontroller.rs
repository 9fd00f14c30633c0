//! `wasmop:metacontroller@0.1.0` (`wit/metacontroller@0.1.0/`): the world
//! of a guest made from a Metacontroller controller. Loading such a module
//! type-checks it against the generated world; the calls are typed here.

wasmtime::component::bindgen!({
    path: "../wit/metacontroller@0.1.0",
    world: "hook-guest",
});

/// The WIT package, as `wasmop_guest_info{contract}` shows it.
pub const PACKAGE: &str = "wasmop:metacontroller@0.1.0";

/// The interface a hook guest exports, as its component names it.
pub const HOOKS_INTERFACE: &str = "wasmop:metacontroller/hooks@0.1.0";

/// Parameters and results of `definition`.
pub type DefinitionParams = ();
/// See [`DefinitionParams`].
pub type DefinitionResults = (String,);

/// Parameters and results of `call`.
pub type CallParams<'a> = (&'a str, &'a str);
/// See [`CallParams`].
pub type CallResults = (Result<String, String>,);
