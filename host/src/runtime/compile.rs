//! Compiling a component into wasmtime's artifact, in this process or in a
//! child process running this executable's hidden `compile-worker`
//! command.
//!
//! Compiling touches Cranelift: its code and its working memory (the
//! register allocator's arenas, per-thread caches, the compile threads'
//! stacks) stay resident in the process that compiled. `wasmop run`
//! compiles in a child process, which exits when the artifact is written:
//! an idle host with one guest holds 22.6 MiB RSS instead of 34.7 MiB.
//! Either way a compile runs in an engine of its own, configured as the
//! long-lived one except for the instance pool (not part of an artifact),
//! and the artifact is loaded into the long-lived engine.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};

use wasmtime::{Config, Engine};

/// The hidden subcommand of `wasmop` that compiles in a child process.
pub const WORKER_COMMAND: &str = "compile-worker";

/// The worker's exit code when the module does not compile (its error on
/// stderr); any other failure exits otherwise.
const INVALID_MODULE: u8 = 3;

/// Where components are compiled.
#[derive(Clone)]
pub struct Compiler {
    config: Config,
    worker: Option<PathBuf>,
}

impl Compiler {
    /// Compiles with `config` in this process, or, with `worker`, in a child
    /// process running that executable's [`WORKER_COMMAND`] (which must
    /// build the same configuration: [`super::compile_config`]).
    pub fn new(config: Config, worker: Option<PathBuf>) -> Self {
        Self { config, worker }
    }

    /// wasmtime's artifact of the component `bytes`, or why it does not
    /// compile.
    pub fn compile(&self, bytes: &[u8]) -> wasmtime::Result<Vec<u8>> {
        match &self.worker {
            None => Engine::new(&self.config)?.precompile_component(bytes),
            Some(exe) => in_child(exe, bytes),
        }
    }
}

fn in_child(exe: &PathBuf, bytes: &[u8]) -> wasmtime::Result<Vec<u8>> {
    let mut child = Command::new(exe)
        .arg(WORKER_COMMAND)
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
            "the compiling process ({} {WORKER_COMMAND}) failed ({}): {stderr}",
            exe.display(),
            output.status
        )),
    }
}

/// `wasmop compile-worker`: reads a component on stdin, writes its
/// artifact on stdout.
pub fn worker() -> ExitCode {
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
