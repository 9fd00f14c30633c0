//! `cargo xtask controlplane` and `cargo xtask testenv`.

use std::io::Write;

use anyhow::{Context, Result};
use tokio::signal::unix::{SignalKind, signal};
use wasmop_testenv::{TestEnv, ensure_binaries};

/// Finds or builds the binaries and prints their directory on stdout (or each
/// path, when `TEST_ASSET_*` variables scatter them).
pub fn print_binaries() -> Result<()> {
    let binaries = ensure_binaries()?;
    match binaries.dir() {
        Some(dir) => println!("{}", dir.display()),
        None => {
            for (var, path) in binaries.env_vars() {
                println!("{var}={}", path.to_string_lossy());
            }
        }
    }
    Ok(())
}

/// Interface contract: starts the control plane, prints exactly one stdout
/// line `export KUBECONFIG=<absolute path>` once it is ready (everything else
/// goes to stderr), runs until SIGINT or SIGTERM, then removes everything it
/// started: the processes and the temporary directory.
pub fn run_testenv() -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("building the tokio runtime")?;
    runtime.block_on(async {
        // Installed first, so that a signal during start-up also stops
        // cleanly: dropping the start future kills what it started.
        let mut interrupt = signal(SignalKind::interrupt())?;
        let mut terminate = signal(SignalKind::terminate())?;
        let env = tokio::select! {
            env = TestEnv::start() => env?,
            _ = interrupt.recv() => { eprintln!("testenv: interrupted while starting"); return Ok(()) }
            _ = terminate.recv() => { eprintln!("testenv: terminated while starting"); return Ok(()) }
        };
        let kubeconfig = std::path::absolute(env.kubeconfig_path())?;
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "export KUBECONFIG={}", kubeconfig.display())?;
        stdout.flush()?;
        drop(stdout);
        eprintln!(
            "testenv: API server {}, logs and audit log in {}; stop with Ctrl-C (SIGINT) or SIGTERM",
            env.api_server_url(),
            env.temp_dir().display()
        );
        let signal = tokio::select! {
            _ = interrupt.recv() => "SIGINT",
            _ = terminate.recv() => "SIGTERM",
        };
        eprintln!("testenv: {signal}, stopping the control plane");
        drop(env);
        eprintln!("testenv: stopped; processes and temporary directory removed");
        Ok(())
    })
}
