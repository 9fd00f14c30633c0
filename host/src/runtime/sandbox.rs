//! The per-call sandbox: the store data a guest runs with.
//!
//! Every call gets a fresh [`GuestState`]: the state of each capability it
//! may use ([`super::capabilities`]: its `log` lines, a WASI context that
//! grants nothing, and, for a guest that imports `wasi:http`, its outbound
//! grant) and a memory limiter. Nothing survives the call. The state
//! composes the capabilities: each reaches its own part through its
//! accessor, implemented here.

use std::sync::Arc;

use wasmtime::ResourceLimiter;

use wasmtime_wasi::{WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtxView, WasiHttpView};

use super::capabilities::http::{self, Outbound};
use super::capabilities::log::{LogState, LogView};
use super::capabilities::wasi::Wasi;

/// Store data of one guest call.
pub(crate) struct GuestState {
    /// Built on the guest's first WASI call.
    wasi: Option<Wasi>,
    /// Set for a guest that imports `wasi:http`.
    pub(crate) outbound: Option<Outbound>,
    pub(crate) memory: MemoryCap,
    pub(crate) log: LogState,
    guest: Arc<str>,
}

impl GuestState {
    /// A fresh, locked-down state for one call of `guest`.
    pub(crate) fn new(guest: Arc<str>, memory_bytes: usize, outbound: Option<Outbound>) -> Self {
        Self {
            wasi: None,
            outbound,
            memory: MemoryCap {
                limit: memory_bytes,
                exceeded: false,
            },
            log: LogState::new(guest.clone()),
            guest,
        }
    }

    /// The call's WASI context, built on first use.
    pub(crate) fn wasi(&mut self) -> &mut Wasi {
        self.wasi.get_or_insert_with(Wasi::locked_down)
    }

    /// Writes what the guest printed on stdout and stderr to the host log.
    pub(crate) fn flush_output(&self) {
        if let Some(wasi) = &self.wasi {
            wasi.flush_output(&self.guest);
        }
    }

    /// What explains a trap: the guest's stderr (where Rust's default panic
    /// hook writes), else its last error log line (where the SDK's hook
    /// sends a panic message).
    pub(crate) fn failure_text(&self) -> String {
        let stderr = self.wasi.as_ref().map_or_else(String::new, Wasi::stderr);
        if stderr.is_empty() {
            self.log.last_error().unwrap_or_default().to_owned()
        } else {
            stderr
        }
    }
}

impl WasiView for GuestState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        self.wasi().view()
    }
}

impl WasiHttpView for GuestState {
    /// The WASI context and the outbound grant (denying everything where
    /// the guest was granted nothing).
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        let wasi = self.wasi.get_or_insert_with(Wasi::locked_down);
        let guest = &self.guest;
        let outbound = self
            .outbound
            .get_or_insert_with(|| Outbound::deny_all(guest.clone()));
        http::view(wasi, outbound)
    }
}

impl LogView for GuestState {
    fn log(&mut self) -> &mut LogState {
        &mut self.log
    }
}

/// Caps the linear memory of one call and remembers whether the cap was hit,
/// so a trap can be reported as "memory limit exceeded" rather than as a
/// generic failure.
pub(crate) struct MemoryCap {
    limit: usize,
    pub(crate) exceeded: bool,
}

/// Table elements one call may allocate; component glue needs a few hundred.
const MAX_TABLE_ELEMENTS: usize = 100_000;

impl ResourceLimiter for MemoryCap {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.limit {
            self.exceeded = true;
            // Trap instead of returning -1 from memory.grow: a Rust guest
            // aborts on allocation failure anyway, and a trap carries a
            // clear reason.
            wasmtime::bail!("guest memory limit of {} bytes exceeded", self.limit);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }

    fn instances(&self) -> usize {
        32
    }

    fn memories(&self) -> usize {
        8
    }

    fn tables(&self) -> usize {
        64
    }
}
