//! The Go runtime's start-up, run once while building and kept in the
//! module (as Wizer does, and as the TypeScript and Python guests are
//! pre-initialised): a call then starts from a runtime that is already
//! up, instead of running `_initialize` (the runtime, every package's init
//! functions, the guest's registration) on each fresh instance.
//!
//! The start-up runs in wasmtime with the WASI preview 1 calls the Go
//! runtime makes while it starts answered here, deterministically, so the
//! same inputs build the same module:
//! - no arguments and no environment; no preopened files;
//! - both clocks read 1 ns (the runtime refuses a monotonic clock that
//!   reads 0): each call's WASI clocks start near 0 in the host, so the
//!   runtime's times only move forward after the snapshot;
//! - the randomness the runtime seeds its hash maps and generators with
//!   comes from the core module's SHA-256, the same in every instance of
//!   one build (a guest that needs unpredictable numbers has none: the
//!   host grants randomness through WASI, read at call time);
//! - what it writes on stdout and stderr is kept for the error message.
//!
//! Any other call to the host during start-up (a sleep, a file, `log` is
//! printed) fails the build, naming the call. After `_initialize`, the
//! SDK's `wasmop-build-exports` says what the guest registered.

use std::sync::Arc;

use sha2::{Digest, Sha256};
use wasmtime::{Caller, Engine, Extern, ExternType, Instance, Linker, Module, Store, Val};
use wasmtime_wizer::{InstanceState, SnapshotVal, Wizer};

use super::{Error, Result};

/// The export through which the SDK tells what the guest registered.
pub(super) const EXPORTS_PROBE: &str = "wasmop-build-exports";

/// The export that sets the module's `cabi_realloc` back to allocating
/// with sbrk until the component's start (`glue/start.go`).
pub(super) const REALLOC_BY_SBRK: &str = "wasmop-realloc-by-sbrk";

/// The export that starts the WASI adapter, which the component calls as
/// it is instantiated (it becomes `_initialize`).
pub(super) const START_ADAPTER: &str = "wasmop-start-adapter";

/// What a start-up left: the pre-initialised module and the SDK's answer.
pub(super) struct Started {
    /// The module with the runtime's memory and globals after start-up,
    /// and no `_initialize`.
    pub module: Vec<u8>,
    /// What [`EXPORTS_PROBE`] returned.
    pub exports: i32,
}

/// The store data of a start-up.
struct StartUp {
    seed: [u8; 32],
    drawn: u64,
    output: Vec<u8>,
}

/// WASI preview 1 errno: bad file descriptor.
const EBADF: i32 = 8;

/// Runs the start-up of `core` and snapshots it.
pub(super) fn run(core: &[u8]) -> Result<Started> {
    let fail = |e: wasmtime::Error| Error::Preinit(format!("{e:#}"));
    let mut wizer = Wizer::new();
    wizer.init_func("_initialize");
    let (cx, instrumented) = wizer.instrument(core).map_err(fail)?;
    // The start-up runs once: compiling the module fast matters more than
    // running it fast.
    let mut config = wasmtime::Config::new();
    config.cranelift_opt_level(wasmtime::OptLevel::None);
    let engine = Engine::new(&config).map_err(fail)?;
    let module = Module::new(&engine, &instrumented).map_err(fail)?;
    let mut linker = Linker::new(&engine);
    // Go imports some functions twice (fd_write): each is defined once.
    let mut defined = std::collections::HashSet::new();
    for import in module.imports() {
        if !defined.insert((import.module().to_owned(), import.name().to_owned())) {
            continue;
        }
        let ExternType::Func(ty) = import.ty() else {
            return Err(Error::Preinit(format!(
                "the module imports {}.{}, which is not a function",
                import.module(),
                import.name()
            )));
        };
        let (module_name, name) = (import.module().to_owned(), import.name().to_owned());
        let call: Arc<str> = format!("{module_name}.{name}").into();
        linker
            .func_new(&module_name, &name, ty, move |caller, params, results| {
                answer(caller, &call, params, results)
            })
            .map_err(fail)?;
    }
    let mut store = Store::new(
        &engine,
        StartUp {
            seed: Sha256::digest(core).into(),
            drawn: 0,
            output: Vec::new(),
        },
    );
    let instance = linker.instantiate(&mut store, &module).map_err(fail)?;
    let with_output = |e: wasmtime::Error, store: &Store<StartUp>| {
        let output = String::from_utf8_lossy(&store.data().output)
            .trim()
            .to_owned();
        Error::Preinit(if output.is_empty() {
            format!("{e:#}")
        } else {
            format!("{e:#}; it printed: {output}")
        })
    };
    let initialize = instance
        .get_typed_func::<(), ()>(&mut store, "_initialize")
        .map_err(|_| {
            Error::Preinit(
                "the module has no _initialize: it was not built with -buildmode=c-shared".into(),
            )
        })?;
    if let Err(e) = initialize.call(&mut store, ()) {
        return Err(with_output(e, &store));
    }
    let probe = instance
        .get_typed_func::<(), i32>(&mut store, EXPORTS_PROBE)
        .map_err(|_| {
            Error::Preinit(format!(
                "the module has no {EXPORTS_PROBE}: the guest does not import the wasmop Go SDK (wasmop.dev/sdk)"
            ))
        })?;
    let exports = probe
        .call(&mut store, ())
        .map_err(|e| with_output(e, &store))?;
    instance
        .get_typed_func::<(), ()>(&mut store, REALLOC_BY_SBRK)
        .map_err(|_| Error::Preinit(format!("the module has no {REALLOC_BY_SBRK}")))?
        .call(&mut store, ())
        .map_err(|e| with_output(e, &store))?;
    let module = futures::executor::block_on(wizer.snapshot(
        &cx,
        &mut Snapshot {
            store: &mut store,
            instance,
        },
    ))
    .map_err(fail)?;
    Ok(Started { module, exports })
}

/// What the start-up gets from the host for `call`.
fn answer(
    mut caller: Caller<'_, StartUp>,
    call: &str,
    params: &[Val],
    results: &mut [Val],
) -> wasmtime::Result<()> {
    let int = |i: usize| params.get(i).and_then(Val::i32).unwrap_or(0);
    let ok = |results: &mut [Val], errno: i32| {
        if let Some(result) = results.first_mut() {
            *result = Val::I32(errno);
        }
    };
    let Some(Extern::Memory(memory)) = caller.get_export("memory") else {
        wasmtime::bail!("the module exports no memory");
    };
    let at = |i: usize| usize::try_from(int(i)).unwrap_or(usize::MAX);
    match call {
        "wasi_snapshot_preview1.args_sizes_get" | "wasi_snapshot_preview1.environ_sizes_get" => {
            memory.write(&mut caller, at(0), &0u32.to_le_bytes())?;
            memory.write(&mut caller, at(1), &0u32.to_le_bytes())?;
            ok(results, 0);
        }
        "wasi_snapshot_preview1.args_get"
        | "wasi_snapshot_preview1.environ_get"
        | "wasi_snapshot_preview1.sched_yield"
        | "wasi_snapshot_preview1.fd_fdstat_set_flags" => ok(results, 0),
        "wasi_snapshot_preview1.adapter_monotonic_clock_set_paused" => {}
        "wasi_snapshot_preview1.clock_time_get" => {
            // 1, not 0: the runtime refuses a monotonic clock that reads 0.
            memory.write(&mut caller, at(2), &1u64.to_le_bytes())?;
            ok(results, 0);
        }
        "wasi_snapshot_preview1.random_get" => {
            let (start, len) = (at(0), at(1));
            let mut bytes = Vec::with_capacity(len);
            while bytes.len() < len {
                let state = caller.data_mut();
                let block = Sha256::new()
                    .chain_update(state.seed)
                    .chain_update(state.drawn.to_le_bytes())
                    .finalize();
                state.drawn += 1;
                bytes.extend_from_slice(&block);
            }
            bytes.truncate(len);
            memory.write(&mut caller, start, &bytes)?;
            ok(results, 0);
        }
        "wasi_snapshot_preview1.fd_write" => {
            let (iovs, count, written) = (at(1), at(2), at(3));
            let mut total = 0u32;
            for i in 0..count {
                let mut iov = [0u8; 8];
                memory.read(&caller, iovs + i * 8, &mut iov)?;
                let base = u32::from_le_bytes([iov[0], iov[1], iov[2], iov[3]]) as usize;
                let len = u32::from_le_bytes([iov[4], iov[5], iov[6], iov[7]]) as usize;
                let mut data = vec![0u8; len];
                memory.read(&caller, base, &mut data)?;
                caller.data_mut().output.extend_from_slice(&data);
                total = total.saturating_add(u32::try_from(len).unwrap_or(u32::MAX));
            }
            memory.write(&mut caller, written, &total.to_le_bytes())?;
            ok(results, 0);
        }
        "wasi_snapshot_preview1.fd_fdstat_get" if int(0) <= 2 => {
            // A character device with every right: what Go's os package
            // expects of stdin, stdout and stderr.
            let mut stat = [0u8; 24];
            stat[0] = 2;
            stat[8..].fill(0xff);
            memory.write(&mut caller, at(1), &stat)?;
            ok(results, 0);
        }
        "wasi_snapshot_preview1.fd_fdstat_get"
        | "wasi_snapshot_preview1.fd_prestat_get"
        | "wasi_snapshot_preview1.fd_prestat_dir_name"
        | "wasi_snapshot_preview1.fd_close" => ok(results, EBADF),
        "wasi_snapshot_preview1.proc_exit" => {
            wasmtime::bail!("the guest exited with code {} while starting up", int(0))
        }
        "wasmop:operator/log@0.1.0.log" => {
            let (start, len) = (at(1), at(2));
            let mut data = vec![0u8; len];
            memory.read(&caller, start, &mut data)?;
            eprintln!(
                "    guest log while starting up: {}",
                String::from_utf8_lossy(&data)
            );
        }
        other => wasmtime::bail!(
            "the guest called {other} while starting up: its init functions may compute and register, not call the host"
        ),
    }
    Ok(())
}

/// The instance's state as Wizer reads it.
struct Snapshot<'a> {
    store: &'a mut Store<StartUp>,
    instance: Instance,
}

impl InstanceState for Snapshot<'_> {
    fn global_get(
        &mut self,
        name: &str,
        _type_hint: wasmtime_wizer::ValType,
    ) -> impl Future<Output = SnapshotVal> + Send {
        let global = self
            .instance
            .get_global(&mut *self.store, name)
            .unwrap_or_else(|| panic!("wizer names exported globals only: {name}"));
        let value = match global.get(&mut *self.store) {
            Val::I32(v) => SnapshotVal::I32(v),
            Val::I64(v) => SnapshotVal::I64(v),
            Val::F32(v) => SnapshotVal::F32(v),
            Val::F64(v) => SnapshotVal::F64(v),
            Val::V128(v) => SnapshotVal::V128(v.as_u128()),
            other => panic!("wizer snapshots no reference global ({other:?})"),
        };
        std::future::ready(value)
    }

    fn memory_contents(
        &mut self,
        name: &str,
        contents: impl FnOnce(&[u8]) + Send,
    ) -> impl Future<Output = ()> + Send {
        let memory = self
            .instance
            .get_memory(&mut *self.store, name)
            .unwrap_or_else(|| panic!("wizer names exported memories only: {name}"));
        contents(memory.data(&*self.store));
        std::future::ready(())
    }
}
