//! Compiling a component into wasmtime's artifact, in this process or in a
//! child process running this executable's hidden `compile-worker`
//! command.
//!
//! Compiling touches Cranelift: its code and its working memory (the
//! register allocator's arenas, per-thread caches, the compile threads'
//! stacks) stay resident in the process that compiled. `wasmop run`
//! compiles in a child process, which exits when the artifact is written,
//! so none of that enters the long-lived host
//! (docs/decisions/0034-compile-in-a-child-process.md). Either way a compile runs in an engine of its own, configured as the
//! long-lived one except for the instance pool (not part of an artifact),
//! and the artifact is loaded into the long-lived engine.
//!
//! The child process also bounds what one compile may use: before it reads
//! the module it sets its own CPU and data limits ([`CompileLimits`]), and
//! the kernel stops it past either; the host reports that load as failed,
//! naming the limit.

use std::io::{Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};

use libc::SIGXCPU;
use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

use wasmtime::Engine;

/// The hidden subcommand of `wasmop` that compiles in a child process.
pub const WORKER_COMMAND: &str = "compile-worker";

/// The worker's exit code when the module does not compile (its error on
/// stderr); any other failure exits otherwise.
const INVALID_MODULE: u8 = 3;

/// What one compiling process may use, enforced by the kernel
/// (`RLIMIT_CPU`, `RLIMIT_DATA`): a module that makes the compiler spin or
/// grow without bound fails its own load, and the host goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompileLimits {
    /// CPU seconds, summed over the compiler's threads.
    pub cpu_seconds: u64,
    /// Heap and other private writable memory, in MiB.
    pub memory_mib: u64,
}

impl Default for CompileLimits {
    /// Compiling the largest guests of this repository (18 MiB, the Python
    /// cache-operator) takes a few CPU seconds and a few hundred MiB; the
    /// defaults leave room for modules several times larger.
    fn default() -> Self {
        Self {
            cpu_seconds: 300,
            memory_mib: 4096,
        }
    }
}

/// Where components are compiled. Either way in an engine configured by
/// [`super::compile_config`], so that the artifact loads into the
/// long-lived engine.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Compiler {
    /// In this process, in an engine of its own dropped after the compile.
    #[default]
    InProcess,
    /// In a child process running `exe`'s [`WORKER_COMMAND`] under
    /// `limits`.
    Worker {
        /// The executable (`wasmop run` passes itself).
        exe: PathBuf,
        /// What the child may use.
        limits: CompileLimits,
    },
}

impl Compiler {
    /// wasmtime's artifact of the component `bytes`, or why it does not
    /// compile.
    pub fn compile(&self, bytes: &[u8]) -> wasmtime::Result<Vec<u8>> {
        match self {
            Self::InProcess => Engine::new(&super::compile_config())?.precompile_component(bytes),
            Self::Worker { exe, limits } => in_child(exe, *limits, bytes),
        }
    }
}

fn in_child(exe: &PathBuf, limits: CompileLimits, bytes: &[u8]) -> wasmtime::Result<Vec<u8>> {
    let mut child = Command::new(exe)
        .arg(WORKER_COMMAND)
        .arg(format!("--cpu-seconds={}", limits.cpu_seconds))
        .arg(format!("--memory-mib={}", limits.memory_mib))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| wasmtime::format_err!("starting {} {WORKER_COMMAND}: {e}", exe.display()))?;
    let mut stdin = child.stdin.take().expect("piped stdin");
    // Written from a thread: the child may fill its stdout before it has
    // read all of its input.
    let input = bytes.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let output = child
        .wait_with_output()
        .map_err(|e| wasmtime::format_err!("waiting for {WORKER_COMMAND}: {e}"))?;
    let written = writer.join().expect("stdin writer");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stderr = stderr.trim();
    match output.status.code() {
        Some(0) if output.stdout.is_empty() => Err(wasmtime::format_err!(
            "the compiling process ({} {WORKER_COMMAND}) wrote no artifact",
            exe.display()
        )),
        Some(0) => {
            written.map_err(|e| wasmtime::format_err!("writing to {WORKER_COMMAND}: {e}"))?;
            Ok(output.stdout)
        }
        Some(code) if code == i32::from(INVALID_MODULE) => {
            Err(wasmtime::Error::msg(stderr.to_owned()))
        }
        _ => Err(wasmtime::format_err!(
            "the compiling process ({} {WORKER_COMMAND}) failed ({}{}): {stderr}",
            exe.display(),
            output.status,
            match output.status.signal() {
                Some(SIGXCPU) => format!(", past its {} CPU seconds", limits.cpu_seconds),
                Some(_) => format!(
                    "; a compile may use {} MiB of memory and {} CPU seconds",
                    limits.memory_mib, limits.cpu_seconds
                ),
                None => String::new(),
            }
        )),
    }
}

/// `wasmop compile-worker`: reads a component on stdin, writes its
/// artifact on stdout, within `limits` (the host passes them as
/// `--cpu-seconds` and `--memory-mib`).
pub fn worker(limits: CompileLimits) -> ExitCode {
    if let Err(e) = limit_this_process(limits) {
        eprintln!("setting the compile limits: {e}");
        return ExitCode::FAILURE;
    }
    let mut bytes = Vec::new();
    if let Err(e) = std::io::stdin().read_to_end(&mut bytes) {
        eprintln!("reading the module from stdin: {e}");
        return ExitCode::FAILURE;
    }
    let engine = match Engine::new(&super::compile_config()) {
        Ok(engine) => engine,
        Err(e) => {
            eprintln!("creating the compiling engine: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    match engine.precompile_component(&bytes) {
        Ok(artifact) => match std::io::stdout().lock().write_all(&artifact) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("writing the artifact to stdout: {e}");
                ExitCode::FAILURE
            }
        },
        Err(e) => {
            eprint!("{e:#}");
            ExitCode::from(INVALID_MODULE)
        }
    }
}

/// Sets `limits` on this process, each at most the hard limit it already
/// has, and no core dump when the kernel stops it.
fn limit_this_process(limits: CompileLimits) -> std::io::Result<()> {
    let at_most = |resource: Resource, soft: u64, hard: u64| {
        let ceiling = getrlimit(resource).maximum.unwrap_or(u64::MAX);
        setrlimit(
            resource,
            Rlimit {
                current: Some(soft.min(ceiling)),
                maximum: Some(hard.min(ceiling)),
            },
        )
    };
    at_most(Resource::Core, 0, 0)?;
    let memory = limits.memory_mib.saturating_mul(1 << 20);
    at_most(Resource::Data, memory, memory)?;
    // SIGXCPU at the soft limit; SIGKILL a few seconds later, should it be
    // caught.
    at_most(
        Resource::Cpu,
        limits.cpu_seconds,
        limits.cpu_seconds.saturating_add(5),
    )?;
    Ok(())
}
