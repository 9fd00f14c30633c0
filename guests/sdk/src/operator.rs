//! The trait a guest implements.

use crate::{Description, Request, Response, Result, Settings};

/// An operator's reconcile logic. Implement it on a unit struct and export it
/// with [`export_operator!`](crate::export_operator); the SDK converts between
/// the WIT types and these plain Rust ones.
///
/// Both functions must be deterministic: the same request must give the same
/// response byte for byte, so a converged parent makes the host write
/// nothing. The request carries the host's time for the call
/// ([`Request::now`](crate::Request::now)); use it only for things that
/// change (a condition's transition).
pub trait Operator {
    /// What the guest manages under `settings` (the guest-list entry's
    /// `settings`). Must be cheap and depend on nothing but the module and
    /// the settings; the host calls it once per loaded module version. An
    /// error refuses the settings: the host reports `InvalidSettings` and
    /// keeps the running version.
    fn describe(settings: &Settings) -> std::result::Result<Description, String>;

    /// The desired children and status for one parent.
    fn reconcile(request: Request) -> Result<Response>;
}
