//! `cargo xtask test` and `cargo xtask bench`.

use anyhow::Result;

use std::ffi::OsString;

use crate::process::{Steps, cargo, run};
use crate::suites;

/// Guests built against the released contract, kept as fixtures: every
/// host must keep running them.
const RELEASED_GUESTS: &str = "tests/fixtures/operator@0.1.0";
/// Where the host's tests look for guests before `target/guests`.
const GUESTS_DIR: &str = "WASMOP_GUESTS_DIR";
/// The cluster tests run again against [`RELEASED_GUESTS`], as filters of
/// the cluster binary: the Rust cache-operator's cases and the hostile
/// guest's suites.
const RELEASED_SUITES: [&str; 3] = ["cache_operator::rust::", "sandbox::", "authority::"];

/// The README's test command: builds what the tests need (control plane,
/// guests, the container image), then fmt, clippy and every test of the
/// workspace, stopping at the first failure. Formatting
/// is checked first because it takes a second and a fresh machine's
/// control-plane build takes minutes.
pub fn test(test_args: &[String]) -> Result<()> {
    let mut steps = Steps::new(9);
    steps.run("formatting: cargo fmt --all -- --check", || {
        run(&mut cargo(&["fmt", "--all", "--", "--check"]))
    })?;
    let (binaries, registry, promtool, otelcol) = steps.run(
        "Kubernetes control-plane binaries, the OCI registry, promtool and an OpenTelemetry Collector (built from tests/controlplane, tests/registry, tests/monitoring and tests/otelcol if missing)",
        || {
            let binaries = wasmop_testenv::ensure_binaries()?;
            match binaries.dir() {
                Some(dir) => eprintln!("    KUBEBUILDER_ASSETS={}", dir.display()),
                None => eprintln!("    {binaries:?}"),
            }
            let registry = wasmop_testenv::ensure_registry_binary()?;
            eprintln!("    TEST_ASSET_REGISTRY={}", registry.display());
            let promtool = wasmop_testenv::ensure_promtool()?;
            eprintln!("    TEST_ASSET_PROMTOOL={}", promtool.display());
            let otelcol = wasmop_testenv::ensure_otelcol()?;
            eprintln!("    TEST_ASSET_OTELCOL={}", otelcol.display());
            Ok((binaries, registry, promtool, otelcol))
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
    steps.run(
        "tests: every test binary of the workspace, several at a time (with the cache-operator's cases and the hostile suites run again against the guests built for the released contract, tests/fixtures/operator@0.1.0), then the doc tests",
        || {
            let mut envs: Vec<(String, OsString)> = binaries
                .env_vars()
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect();
            envs.push(("TEST_ASSET_REGISTRY".into(), registry.clone().into()));
            envs.push(("TEST_ASSET_PROMTOOL".into(), promtool.clone().into()));
            envs.push(("TEST_ASSET_OTELCOL".into(), otelcol.clone().into()));
            envs.extend(toolchains.env().iter().map(|(k, v)| ((*k).to_owned(), v.into())));
            if !test_args.is_empty() {
                let mut command = cargo(&["test", "--workspace"]);
                command.args(test_args).envs(envs.iter().map(|(k, v)| (k, v)));
                return run(&mut command);
            }
            let mut all = suites::build(&envs)?;
            // One run a filter (libtest-mimic takes one), each on a control
            // plane of its own, beside the other binaries.
            let released: Vec<_> = all
                .iter()
                .filter(|s| s.is_integration() && s.name == suites::CLUSTER)
                .flat_map(|s| {
                    RELEASED_SUITES.map(|filter| {
                        s.with(
                            &format!("{RELEASED_GUESTS}, {filter}"),
                            &[filter],
                            &[(GUESTS_DIR, RELEASED_GUESTS)],
                        )
                    })
                })
                .collect();
            all.extend(released);
            let logs = crate::guests::target_dir().join("xtask-tests");
            suites::run(all, suites::parallel()?, &logs)?;
            let mut doc = cargo(&["test", "--workspace", "--doc"]);
            doc.envs(envs.iter().map(|(k, v)| (k, v)));
            run(&mut doc)
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
    "fairness",
    "shards",
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
