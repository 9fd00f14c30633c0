//! The WebAssembly side of the host: one [`Engine`], compiled guests and the
//! sandbox every guest call runs in.
//!
//! Layout: [`Runtime`] owns the engine, the epoch ticker and the linker;
//! [`cache`] keeps compiled components by digest, [`compile`] compiles them
//! (in a child process for `wasmop run`); [`guest`] turns a
//! component into a loaded [`Guest`] (an `InstancePre` plus its description)
//! and runs one reconcile in a fresh store; [`abi`] types the calls of each
//! WIT version served; [`limits`] holds the knobs; [`capabilities`] are
//! what a guest may import (`log`, WASI, outbound HTTP), each with its
//! linking and its part of the per-call state ([`sandbox`]).
//!
//! A guest that imports nothing but the WIT's `log` (what the SDK builds
//! for `wasm32-unknown-unknown`) is called synchronously: nothing it can do
//! waits, and epoch interruption stops it at its deadline. A guest that
//! imports WASI (clocks, streams, `wasi:http`) can wait in a host call, where
//! epochs do not reach; it is called asynchronously, on the blocking thread
//! that runs the call, under a Tokio timeout at the same deadline, which
//! drops the call (and any request in flight) when it passes. A waiting
//! guest thus holds its call's blocking thread for at most its deadline,
//! and no guest holds more call threads than its `concurrency` (name
//! lookups, which cannot be cancelled, are bounded host-wide by
//! [`capabilities::http`]).

pub mod abi;
pub mod cache;
pub mod capabilities;
pub mod compile;
pub mod guest;
pub mod limits;
mod sandbox;
pub mod shares;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::telemetry::Metrics;

use wasmtime::component::Linker;
use wasmtime::{Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

pub use cache::{CacheOutcome, ModuleBytes, ModuleCache, is_component};
pub use compile::{CompileLimits, Compiler};
pub use guest::{CallError, Guest};
pub use limits::Limits;
use sandbox::GuestState;
pub use shares::Shares;

/// How often the epoch advances. Deadlines are counted in these ticks, so a
/// 1 s timeout fires between 1.00 and 1.01 s. Spin ticks every 10 ms too;
/// the cost is one atomic increment per tick.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Errors of the runtime.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The wasmtime engine could not be configured.
    #[error("failed to configure the wasm engine: {0:#}")]
    Engine(wasmtime::Error),
    /// The bytes are not a valid component (or not wasm at all).
    #[error("not a valid WebAssembly component: {0:#}")]
    Compile(wasmtime::Error),
    /// The component does not implement the `wasmop:operator/operator-guest` world.
    #[error("component does not implement the {package} operator-guest world: {0:#}", package = wasmop_contract::WIT_PACKAGE)]
    WrongWorld(wasmtime::Error),
    /// The guest's `describe` call failed or trapped.
    #[error("the guest's describe call failed: {0}")]
    Describe(CallError),
    /// `describe` refused the guest's settings.
    #[error("the guest refused its settings: {0}")]
    InvalidSettings(String),
    /// A Metacontroller hook guest carries a definition the host refuses.
    #[error("the module's Metacontroller definition: {0}")]
    Definition(String),
    /// `describe` answered a description the host refuses.
    #[error("invalid description: {0}")]
    InvalidDescription(#[from] crate::validate::description::Error),
    /// The on-disk cache could not be used.
    #[error("compiled module cache: {0}")]
    Cache(std::io::Error),
}

/// Result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Options of the runtime.
#[derive(Clone, Debug)]
pub struct RuntimeConfig {
    /// Directory of the on-disk compiled-module cache; `None` keeps compiled
    /// modules in memory only.
    pub cache_dir: Option<PathBuf>,
    /// How many guest calls may run at the same time across all guests: the
    /// size of the instance pool. A call beyond it fails (retryably) instead
    /// of allocating. Default [`DEFAULT_INSTANCE_POOL`].
    pub instance_pool: u32,
    /// Where call durations and compile times are recorded.
    pub metrics: Arc<Metrics>,
    /// Where modules are compiled: in this process by default, in a child
    /// process under limits for `wasmop run`.
    pub compiler: Compiler,
}

/// Default size of the instance pool: far above `guests x --concurrency` for
/// any realistic host, and only address space until used.
pub const DEFAULT_INSTANCE_POOL: u32 = 256;

/// Largest instance pool: each slot reserves two linear memories of 4 GiB
/// address space plus guards, and x86-64 user space is 128 TiB.
pub const MAX_INSTANCE_POOL: u32 = 4096;

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            cache_dir: None,
            instance_pool: DEFAULT_INSTANCE_POOL,
            metrics: Metrics::new(),
            compiler: Compiler::InProcess,
        }
    }
}

/// Bytes of each pooled linear memory kept resident between calls. With
/// `PAGEMAP_SCAN` (Linux 6.7+) only the pages a call dirtied are reset, by
/// `memset`, so the next call on the slot takes no page faults; a Rust guest
/// reconciling a few objects dirties well under this.
const KEEP_RESIDENT: usize = 8 << 20;

/// Core instances, memories and tables one guest component may hold: a
/// `wasm32-wasip2` Rust component has a handful of each.
const CORE_INSTANCES_PER_CALL: u32 = 8;
const MEMORIES_PER_CALL: u32 = 2;
const TABLES_PER_CALL: u32 = 4;

/// The pooling allocator: every call's instance, memory and tables come from
/// slots reserved once, reused call after call. A fresh instance per
/// reconcile then costs microseconds instead of an `mmap`, page faults and an
/// `munmap` (with its TLB shootdown) per call.
fn pooling(slots: u32) -> PoolingAllocationConfig {
    let mut pool = PoolingAllocationConfig::new();
    pool.total_component_instances(slots)
        .total_core_instances(slots * CORE_INSTANCES_PER_CALL)
        .total_memories(slots * MEMORIES_PER_CALL)
        .total_tables(slots * TABLES_PER_CALL)
        // Fiber stacks of asynchronous calls (guests that import WASI).
        .total_stacks(slots)
        .max_memories_per_component(MEMORIES_PER_CALL)
        .max_tables_per_component(TABLES_PER_CALL)
        .linear_memory_keep_resident(KEEP_RESIDENT)
        .table_keep_resident(64 << 10)
        .pagemap_scan(Enabled::Auto);
    pool
}

/// The shared wasm engine: compiled once per process, used by every guest.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
}

struct Inner {
    engine: Engine,
    pooled: bool,
    linker: Linker<GuestState>,
    cache: ModuleCache,
    metrics: Arc<Metrics>,
    ticker_stop: Arc<AtomicBool>,
    ticker: Option<JoinHandle<()>>,
    /// Milliseconds since `started` at the ticker's last tick.
    heartbeat: Arc<AtomicU64>,
    started: Instant,
    /// Each guest's share of the instance pool.
    shares: Shares,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.ticker_stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
    }
}

/// The engine's configuration without its instance pool: what compiles
/// (in this process or in `wasmop compile-worker`), and what the running
/// engine adds its pool to.
pub fn compile_config() -> Config {
    let mut wasm = Config::new();
    wasm.wasm_component_model(true);
    wasm.epoch_interruption(true);
    // A guest that recurses without bound must trap, not take the host
    // thread's stack: 1 MiB of wasm stack is plenty for reconcile logic.
    wasm.max_wasm_stack(1 << 20);
    // A trap's frames get file and line from a module that keeps DWARF
    // line tables (a debug build); other modules are compiled as before.
    wasm.wasm_backtrace_details(wasmtime::WasmBacktraceDetails::Enable);
    // `WASMOP_PERFMAP=1` writes /tmp/perf-<pid>.map so that `perf`
    // names guest functions (wasm[0]::function[N]) in profiles.
    if std::env::var_os("WASMOP_PERFMAP").is_some() {
        wasm.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    wasm
}

impl Runtime {
    /// Creates the engine, the locked-down linker and the epoch ticker.
    pub fn new(config: RuntimeConfig) -> Result<Self> {
        let mut wasm = compile_config();
        let slots = config.instance_pool.clamp(1, MAX_INSTANCE_POOL);
        wasm.allocation_strategy(InstanceAllocationStrategy::Pooling(pooling(slots)));
        let (engine, pooled) = match Engine::new(&wasm) {
            Ok(engine) => (engine, true),
            // The pool is reserved address space; a process limited in it
            // (`ulimit -v`) still runs, with slower per-call allocation.
            Err(e) => {
                tracing::warn!(
                    slots,
                    "cannot reserve the instance pool ({e:#}); allocating each guest instance on demand instead, which is slower"
                );
                wasm.allocation_strategy(InstanceAllocationStrategy::OnDemand);
                (Engine::new(&wasm).map_err(Error::Engine)?, false)
            }
        };

        let mut linker = Linker::<GuestState>::new(&engine);
        capabilities::link(&mut linker).map_err(Error::Engine)?;

        let ticker_stop = Arc::new(AtomicBool::new(false));
        let heartbeat = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        let ticker = {
            let engine = engine.clone();
            let stop = ticker_stop.clone();
            let heartbeat = heartbeat.clone();
            std::thread::Builder::new()
                .name("wasmop-epoch".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(EPOCH_TICK);
                        engine.increment_epoch();
                        let now = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
                        heartbeat.store(now, Ordering::Relaxed);
                    }
                })
                .map_err(|e| Error::Engine(e.into()))?
        };
        let cache = ModuleCache::new(engine.clone(), config.compiler, config.cache_dir)
            .map_err(Error::Cache)?;
        Ok(Self {
            inner: Arc::new(Inner {
                engine,
                pooled,
                linker,
                cache,
                metrics: config.metrics,
                ticker_stop,
                ticker: Some(ticker),
                heartbeat,
                started,
                shares: Shares::new(pooled.then_some(slots)),
            }),
        })
    }

    /// Each guest's share of the instance pool.
    pub fn shares(&self) -> &Shares {
        &self.inner.shares
    }

    /// The wasmtime engine.
    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// Whether guest instances come from the instance pool (false only when
    /// its address space could not be reserved).
    pub fn is_pooled(&self) -> bool {
        self.inner.pooled
    }

    /// The compiled-module cache.
    pub fn cache(&self) -> &ModuleCache {
        &self.inner.cache
    }

    /// Where the runtime records call durations and compile times.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.inner.metrics
    }

    /// Whether the epoch ticker, which enforces every deadline, ticked in
    /// the last second.
    pub fn ticker_alive(&self) -> bool {
        let now = u64::try_from(self.inner.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        now.saturating_sub(self.inner.heartbeat.load(Ordering::Relaxed)) < 1000
    }

    /// Compiles (or fetches from the cache), links and describes a guest
    /// under `settings` (the guest-list entry's, as JSON text).
    ///
    /// This is the whole validation a new module version goes through before
    /// it may serve reconciles: valid component, our world, a `describe`
    /// call that succeeds within the limits and accepts the settings, and a
    /// description the host accepts (see [`crate::validate::description`]).
    pub fn load(
        &self,
        name: &str,
        module: &ModuleBytes,
        limits: Limits,
        settings: Option<String>,
    ) -> Result<(Guest, CacheOutcome)> {
        let (component, outcome) = self.inner.cache.get_or_compile(module)?;
        if outcome.hit == cache::CacheHit::Miss {
            self.inner
                .metrics
                .module_compile
                .observe(outcome.elapsed.as_secs_f64());
        }
        let guest = Guest::new(
            self.clone(),
            guest::Identity {
                name: name.into(),
                digest: outcome.digest.clone(),
                settings,
            },
            component,
            limits,
        )?;
        Ok((guest, outcome))
    }

    pub(crate) fn linker(&self) -> &Linker<GuestState> {
        &self.inner.linker
    }
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime").finish_non_exhaustive()
    }
}
