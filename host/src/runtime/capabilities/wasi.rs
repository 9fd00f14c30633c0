//! Standard WASI, linked so that a module built for `wasm32-wasip2` loads,
//! and granting nothing: no preopened directories, environment, arguments,
//! sockets or name lookups; only clocks and randomness. What the guest
//! prints on stdout and stderr is kept (at most [`OUTPUT_CAPACITY`] each)
//! and written to the host log after the call. The context is built on the
//! guest's first WASI call: a guest that imports nothing but `log` (what
//! the SDK builds) never pays for it.

use wasmtime::component::{Linker, ResourceTable};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::WasiHttpCtx;

/// How much of the guest's stdout/stderr the host keeps per call. A panic
/// message fits many times over; a guest that floods its stdout gets write
/// errors past this, not host memory.
const OUTPUT_CAPACITY: usize = 64 << 10;

/// Most WASI and wasi:http resources (streams, pollables, requests, header
/// maps) one call may hold at once; a reconcile needs a few dozen.
const MAX_RESOURCES: usize = 1024;

/// Largest header map (`fields`) a guest may build, as wasmtime-wasi-http
/// counts it (wire size plus its in-memory overhead).
const MAX_FIELDS_BYTES: usize = 16 << 10;

/// The WASI side of a call: the context, its resources (shared with
/// `wasi:http`) and the pipes that catch stdout and stderr.
pub(crate) struct Wasi {
    ctx: WasiCtx,
    pub(super) table: ResourceTable,
    pub(super) http: WasiHttpCtx,
    stdout: MemoryOutputPipe,
    stderr: MemoryOutputPipe,
}

impl Wasi {
    /// A context that grants nothing but clocks and randomness.
    pub(crate) fn locked_down() -> Self {
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

    /// Writes what the guest printed on stdout and stderr to the host log
    /// (in the span of the call, which names the guest and the object).
    pub(crate) fn flush_output(&self, guest: &str) {
        for (stream, pipe) in [("stdout", &self.stdout), ("stderr", &self.stderr)] {
            let bytes = pipe.contents();
            if bytes.is_empty() {
                continue;
            }
            for line in String::from_utf8_lossy(&bytes)
                .lines()
                .filter(|l| !l.trim().is_empty())
            {
                let line = crate::sink::cut(line, crate::sink::LOG_MESSAGE_BYTES);
                tracing::info!(guest, stream, "{line}");
            }
        }
    }

    /// The view `WasiView` hands wasmtime-wasi: the context and its
    /// resources.
    pub(crate) fn view(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.ctx,
            table: &mut self.table,
        }
    }

    /// What the guest wrote on stderr, trimmed.
    pub(crate) fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.contents())
            .trim()
            .to_string()
    }
}

/// Adds WASI's interfaces to `linker`; the store's data reaches its [`Wasi`]
/// through `WasiView` (built on [`Wasi::view`]).
pub(super) fn link<T: WasiView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_async(linker)
}
