//! What a guest may import, one capability per module, each owning its
//! linking, its part of the per-call state and its limits:
//!
//! - [`log`]: the WIT's own `log` import, lines written to the host log
//!   under the guest's name, bounded in count and length.
//! - [`wasi`]: standard WASI, linked so that a module built for
//!   `wasm32-wasip2` loads, granting nothing but clocks and randomness; its
//!   stdout and stderr reach the host log.
//! - [`http`]: `wasi:http/outgoing-handler`, outbound requests to the hosts
//!   the entry's `allowedOutboundHosts` grants, checked before any
//!   connection.
//!
//! A new capability is a new module here: its `link` adds its imports to the
//! linker, and its state joins [`super::sandbox::GuestState`].

pub mod http;
pub mod log;
pub mod wasi;

use wasmtime::component::Linker;

use super::sandbox::GuestState;

/// Adds every capability's imports to `linker`.
pub(crate) fn link(linker: &mut Linker<GuestState>) -> wasmtime::Result<()> {
    wasi::link(linker)?;
    http::link(linker)?;
    log::link(linker)
}
