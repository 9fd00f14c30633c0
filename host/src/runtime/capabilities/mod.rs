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
//! A new capability is a new module here: its `link` adds its imports to a
//! linker whose store data reaches the capability's own state through an
//! accessor (its view trait), and the store's data
//! ([`super::sandbox::GuestState`]) holds that state and implements the
//! accessor. No capability names the store's type.

pub mod http;
pub mod log;
pub mod wasi;

use wasmtime::component::Linker;

/// Adds every capability's imports to `linker`.
pub(crate) fn link<T>(linker: &mut Linker<T>) -> wasmtime::Result<()>
where
    T: wasmtime_wasi::WasiView + wasmtime_wasi_http::WasiHttpView + log::LogView + 'static,
{
    wasi::link(linker)?;
    http::link(linker)?;
    log::link(linker)
}
