//! `cargo xtask test` and `cargo xtask bench`.

use anyhow::Result;

use crate::process::{Steps, cargo, run};

/// Guests built against the released contract, kept as fixtures: every
/// host must keep running them.
const RELEASED_GUESTS: &str = "tests/fixtures/operator@0.1.0";

/// The README's test command: builds what the tests need (control plane,
/// guests, the container image), then fmt, clippy and every test of the
/// workspace, stopping at the first failure. Formatting
/// is checked first because it takes a second and a fresh machine's
/// control-plane build takes minutes.
pub fn test(test_args: &[String]) -> Result<()> {
    let mut steps = Steps::new(10);
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
    steps.run(
        "old guests keep running: the cache-operator's cases and the hostile suites against the guests built for the released contract (tests/fixtures/operator@0.1.0)",
        || {
            for (tests, filter) in [
                (&["--test", "cache_operator"][..], Some("::rust")),
                (&["--test", "sandbox", "--test", "authority"][..], None),
            ] {
                let mut command = cargo(&["test", "-p", "wasmop-host"]);
                command.args(tests).args(filter.map(|f| ["--", f]).iter().flatten());
                command
                    .envs(binaries.env_vars())
                    .env("WASMOP_GUESTS_DIR", RELEASED_GUESTS);
                run(&mut command)?;
            }
            Ok(())
        },
    )?;
    steps.run(
        "docs: every shell block of the README and docs/ (cargo xtask docs-test)",
        crate::docs::run,
    )?;
    steps.run(
        "the demo, every mode at once: cargo xtask demo --ha --oci --keep-running (to its prompt)",
        crate::demo::run_in_ci,
    )?;
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
