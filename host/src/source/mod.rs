//! Where guests come from: the guest list ConfigMap and the modules it names.
//!
//! [`list`] parses the `guests.yaml` document, [`fetch`] gets module bytes
//! from a ConfigMap key, a file, a URL or an OCI registry ([`oci`]) and
//! checks their digest (at most [`limits::MAX_MODULE_BYTES`]) and, where
//! the entry or the host asks, their signature ([`signature`]), and
//! [`watch`] keeps the running guests in step with the ConfigMap.

pub mod fetch;
mod limits;
pub mod list;
pub mod oci;
pub mod signature;
pub mod watch;

pub use list::{GuestEntry, GuestList, ModuleSource};
