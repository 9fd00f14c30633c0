//! `cargo xtask test` and `cargo xtask bench`.

use anyhow::Result;

use crate::process::{Steps, cargo, run};

/// The README's test command: builds what the tests need (control plane,
/// guests, the container image), then fmt, clippy and every test of the
/// workspace, stopping at the first failure. Formatting
/// is checked first because it takes a second and a fresh machine's
/// control-plane build takes minutes.
pub fn test(test_args: &[String]) -> Result<()> {
    let mut steps = Steps::new(7);
    steps.run("formatting: cargo fmt --all -- --check", || {
        run(&mut cargo(&["fmt", "--all", "--", "--check"]))
    })?;
    let (binaries, registry) = steps.run(
        "Kubernetes control-plane binaries and the OCI registry (built from tests/controlplane and tests/registry if missing)",
        || {
            let binaries = wasmop_testenv::ensure_binaries()?;
            match binaries.dir() {
                Some(dir) => eprintln!("    KUBEBUILDER_ASSETS={}", dir.display()),
                None => eprintln!("    {binaries:?}"),
            }
            let registry = wasmop_testenv::ensure_registry_binary()?;
            eprintln!("    TEST_ASSET_REGISTRY={}", registry.display());
            Ok((binaries, registry))
        },
    )?;
    steps.run("guest components", crate::guests::build_all)?;
    steps.run(
        "container image: cargo xtask image (a static musl build the image test runs)",
        || crate::image::build().map(drop),
    )?;
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
    let toolchains = steps.run(
        "unit tests of the TypeScript and Python SDKs and guests (node --test, pytest)",
        || {
            let root = crate::guests::workspace_root();
            let toolchains = crate::languages::Toolchains::ensure(&root)?;
            toolchains.test_all(&root)?;
            Ok(toolchains)
        },
    )?;
    steps.run("tests: cargo test --workspace", || {
        let mut command = cargo(&["test", "--workspace"]);
        command
            .args(test_args)
            .envs(binaries.env_vars())
            .env("TEST_ASSET_REGISTRY", &registry)
            .envs(toolchains.env());
        run(&mut command)
    })?;
    eprintln!("==> all steps passed");
    Ok(())
}

/// The benches of `host/benches`, by name.
const BENCHES: &[&str] = &[
    "reconcile",
    "swap",
    "failover",
    "soak",
    "scale",
    "admission",
    "rollout",
];

/// `cargo bench -p wasmop-host` (only `--bench <name>` when `args` starts
/// with a bench's name), the rest of `args` passed on, after building the
/// guests, the control-plane binaries and the registry the benches use.
pub fn bench(args: &[String]) -> Result<()> {
    if let Some(name) = args.first().filter(|a| !a.starts_with('-'))
        && !BENCHES.contains(&name.as_str())
    {
        anyhow::bail!("no bench {name:?}: the benches are {}", BENCHES.join(", "));
    }
    let binaries = wasmop_testenv::ensure_binaries()?;
    let registry = wasmop_testenv::ensure_registry_binary()?;
    crate::guests::build_all()?;
    let mut command = cargo(&["bench", "-p", "wasmop-host"]);
    match args.split_first() {
        Some((name, rest)) if BENCHES.contains(&name.as_str()) => {
            command.args(["--bench", name]).args(rest);
        }
        _ => {
            command.args(args);
        }
    }
    command
        .envs(binaries.env_vars())
        .env("TEST_ASSET_REGISTRY", registry);
    run(&mut command)
}
