//! The per-call sandbox: the store data a guest runs with.
//!
//! Every reconcile gets a fresh [`GuestState`]: a WASI context that grants
//! nothing (no preopened directories, environment, arguments, sockets or name
//! lookups; only clocks and randomness), a memory limiter, and buffers that
//! collect what the guest prints so it reaches the host log under the guest's
//! name; and, for a guest that imports `wasi:http`, its outbound grant
//! ([`super::http`]). Nothing survives the call.

use std::sync::Arc;

use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::http::Outbound;

use super::abi::v0_1::{Level, wasmop::operator::log};

/// How much of the guest's stdout/stderr the host keeps per call. A panic
/// message fits many times over; a guest that floods its stdout gets write
/// errors past this, not host memory.
const OUTPUT_CAPACITY: usize = 64 << 10;

/// Most log lines one call may write through the `log` import, and the
/// longest line kept; beyond them lines are dropped or cut so that a chatty
/// guest cannot flood the host's log.
const MAX_LOG_LINES: usize = 200;
const MAX_LOG_LINE: usize = 4 << 10;

/// Most WASI and wasi:http resources (streams, pollables, requests, header
/// maps) one call may hold at once; a reconcile needs a few dozen.
const MAX_RESOURCES: usize = 1024;

/// Largest header map (`fields`) a guest may build, as wasmtime-wasi-http
/// counts it (wire size plus its in-memory overhead).
const MAX_FIELDS_BYTES: usize = 16 << 10;

/// Store data of one guest call.
pub(crate) struct GuestState {
    /// Built on the guest's first WASI call: a guest that imports nothing
    /// but `log` (what the SDK builds) never pays for it.
    wasi: Option<Wasi>,
    /// Set for a guest that imports `wasi:http`.
    pub(crate) outbound: Option<Outbound>,
    pub(crate) memory: MemoryCap,
    guest: Arc<str>,
    log_lines: usize,
    /// The last line logged at error level: where an SDK guest's panic
    /// message goes before the trap.
    last_error: Option<String>,
}

/// The WASI side of a call: the context, its resources and the pipes that
/// catch stdout and stderr.
struct Wasi {
    ctx: WasiCtx,
    table: ResourceTable,
    http: WasiHttpCtx,
    stdout: MemoryOutputPipe,
    stderr: MemoryOutputPipe,
}

impl Wasi {
    /// A context that grants nothing but clocks and randomness.
    fn locked_down() -> Self {
        let stdout = MemoryOutputPipe::new(OUTPUT_CAPACITY);
        let stderr = MemoryOutputPipe::new(OUTPUT_CAPACITY);
        let mut builder = WasiCtx::builder();
        // Explicit even where these are the defaults: the sandbox should not
        // change if a wasmtime release changes a default.
        builder
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .socket_addr_check(|_, _| Box::pin(async { false }));
        // Host-side state a guest creates through WASI and wasi:http lives
        // outside its linear memory, so the memory cap does not see it:
        // bound the number of resources and the size of each header map.
        let mut table = ResourceTable::new();
        table.set_max_capacity(MAX_RESOURCES);
        let mut http = WasiHttpCtx::new();
        http.set_field_size_limit(MAX_FIELDS_BYTES);
        Self {
            ctx: builder.build(),
            table,
            http,
            stdout,
            stderr,
        }
    }
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
            guest,
            log_lines: 0,
            last_error: None,
        }
    }

    /// Writes what the guest printed on stdout and stderr to the host log
    /// (in the span of the call, which names the guest and the object).
    pub(crate) fn flush_output(&self) {
        let Some(wasi) = &self.wasi else { return };
        for (stream, pipe) in [("stdout", &wasi.stdout), ("stderr", &wasi.stderr)] {
            let bytes = pipe.contents();
            if bytes.is_empty() {
                continue;
            }
            for line in String::from_utf8_lossy(&bytes)
                .lines()
                .filter(|l| !l.trim().is_empty())
            {
                tracing::info!(guest = %self.guest, stream, "{line}");
            }
        }
    }

    /// What explains a trap: the guest's stderr (where Rust's default panic
    /// hook writes), else its last error log line (where the SDK's hook
    /// sends a panic message).
    pub(crate) fn failure_text(&self) -> String {
        let stderr = self.wasi.as_ref().map_or_else(String::new, |wasi| {
            String::from_utf8_lossy(&wasi.stderr.contents())
                .trim()
                .to_string()
        });
        if stderr.is_empty() {
            self.last_error.clone().unwrap_or_default()
        } else {
            stderr
        }
    }
}

impl WasiView for GuestState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        let wasi = self.wasi.get_or_insert_with(Wasi::locked_down);
        WasiCtxView {
            ctx: &mut wasi.ctx,
            table: &mut wasi.table,
        }
    }
}

impl WasiHttpView for GuestState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        let wasi = self.wasi.get_or_insert_with(Wasi::locked_down);
        let hooks = self
            .outbound
            .get_or_insert_with(|| Outbound::deny_all(self.guest.clone()));
        WasiHttpCtxView {
            ctx: &mut wasi.http,
            table: &mut wasi.table,
            hooks,
        }
    }
}

impl log::Host for GuestState {
    fn log(&mut self, level: Level, message: String) {
        self.log_lines += 1;
        if self.log_lines > MAX_LOG_LINES {
            if self.log_lines == MAX_LOG_LINES + 1 {
                tracing::warn!(guest = %self.guest, "guest log limit reached; dropping further lines of this call");
            }
            return;
        }
        let mut message = message;
        if message.len() > MAX_LOG_LINE {
            message.truncate(message.floor_char_boundary(MAX_LOG_LINE));
            message.push('…');
        }
        if matches!(level, Level::Error) {
            self.last_error = Some(message.clone());
        }
        let guest = &*self.guest;
        match level {
            Level::Trace => tracing::trace!(target: "wasmop::guest", guest, "{message}"),
            Level::Debug => tracing::debug!(target: "wasmop::guest", guest, "{message}"),
            Level::Info => tracing::info!(target: "wasmop::guest", guest, "{message}"),
            Level::Warn => tracing::warn!(target: "wasmop::guest", guest, "{message}"),
            Level::Error => tracing::error!(target: "wasmop::guest", guest, "{message}"),
        }
    }
}

impl super::abi::v0_1::wasmop::operator::types::Host for GuestState {}

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
