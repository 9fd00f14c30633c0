//! `cargo xtask test` and `cargo xtask bench`.

use anyhow::Result;

use crate::process::{Steps, cargo, run};

/// The README's test command: builds what the tests need, then fmt, clippy
/// and every test of the workspace, stopping at the first failure. Formatting
/// is checked first because it takes a second and a fresh machine's
/// control-plane build takes minutes.
pub fn test(test_args: &[String]) -> Result<()> {
    let mut steps = Steps::new(5);
    steps.run("formatting: cargo fmt --all -- --check", || {
        run(&mut cargo(&["fmt", "--all", "--", "--check"]))
    })?;
    let binaries = steps.run(
        "Kubernetes control-plane binaries (built from tests/controlplane if missing)",
        || {
            let binaries = wasmop_testenv::ensure_binaries()?;
            match binaries.dir() {
                Some(dir) => eprintln!("    KUBEBUILDER_ASSETS={}", dir.display()),
                None => eprintln!("    {binaries:?}"),
            }
            Ok(binaries)
        },
    )?;
    steps.run("guest components", crate::guests::build_all)?;
    steps.run(
        "lints: cargo clippy --workspace --all-targets -- -D warnings, then each guest on its wasm target",
        || {
            run(&mut cargo(&[
                "clippy",
                "--workspace",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ]))?;
            crate::guests::clippy_all()
        },
    )?;
    steps.run("tests: cargo test --workspace", || {
        let mut command = cargo(&["test", "--workspace"]);
        command.args(test_args).envs(binaries.env_vars());
        run(&mut command)
    })?;
    eprintln!("==> all steps passed");
    Ok(())
}

/// `cargo bench -p wasmop-host`, with `args` passed on, after building the
/// guests and the control-plane binaries the benches use.
pub fn bench(args: &[String]) -> Result<()> {
    let binaries = wasmop_testenv::ensure_binaries()?;
    crate::guests::build_all()?;
    let mut command = cargo(&["bench", "-p", "wasmop-host"]);
    command.args(args).envs(binaries.env_vars());
    run(&mut command)
}
