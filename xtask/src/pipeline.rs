//! `cargo xtask test` and `cargo xtask bench`.

use anyhow::Result;

use std::ffi::OsString;

use std::process::Command;

use crate::process::{self, Steps, cargo, run};
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

/// The xtask test that reads the image archive: it runs once the
/// background build of the image is done, not with the other tests.
const IMAGE_TEST: &str = "image::tests::the_image_archive_runs_wasmop_as_its_entrypoint";

/// The README's test command: builds what the tests need (control plane,
/// guests, test binaries, the container image), then fmt, clippy and every
/// test of the workspace, stopping at the first failure, with each step's
/// time at the end. Formatting is checked first because it takes a second.
/// The Go tools build beside the guests and the test binaries, and the
/// image's release build and the lints run at the lowest priority in the
/// background while the tests (which mostly wait on controllers, leases
/// and deadlines) run.
pub fn test(test_args: &[String]) -> Result<()> {
    let mut steps = Steps::new(8);
    steps.run("formatting: cargo fmt --all -- --check", || {
        run(&mut cargo(&["fmt", "--all", "--", "--check"]))
    })?;
    let (tools, built) = steps.run(
        "builds, side by side: the Kubernetes control plane, the OCI registry, promtool, helm, cosign and an OpenTelemetry Collector with Go (from tests/controlplane, tests/registry, tests/monitoring, tests/helm, tests/cosign and tests/otelcol if missing); the guest components, then every test binary, with Cargo",
        || {
            let go = std::thread::spawn(Tools::ensure);
            let built = crate::guests::build_all().and_then(|()| {
                if test_args.is_empty() {
                    suites::build().map(Some)
                } else {
                    Ok(None)
                }
            });
            if !go.is_finished() {
                eprintln!("    waiting for the Go builds");
            }
            let tools = go
                .join()
                .map_err(|_| anyhow::anyhow!("the Go builds panicked"))??;
            Ok((tools, built?))
        },
    )?;
    let background = steps.run(
        "the container image and the lints, started: cargo xtask image (a static musl build the image test reads), then cargo xtask lint (clippy -D warnings on the workspace and each guest, in target/clippy)",
        || {
            let xtask = std::env::current_exe()?;
            let mut image = Command::new(&xtask);
            image.arg("image");
            let mut lint = Command::new(&xtask);
            lint.arg("lint")
                .env("CARGO_TARGET_DIR", crate::guests::target_dir().join("clippy"));
            process::Background::start(
                "cargo xtask image, cargo xtask lint",
                crate::guests::target_dir().join("xtask-background.log"),
                vec![
                    ("cargo xtask image".to_owned(), image),
                    ("cargo xtask lint".to_owned(), lint),
                ],
            )
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
    let mut envs = tools.env();
    envs.extend(
        toolchains
            .env()
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.into())),
    );
    let logs = crate::guests::target_dir().join("xtask-tests");
    let mut image_test = None;
    steps.run(
        "tests: every test binary of the workspace, several at a time (with the cache-operator's cases and the hostile suites run again against the guests built for the released contract, tests/fixtures/operator@0.1.0), then the doc tests",
        || {
            let Some(built) = built else {
                let mut command = cargo(&["test", "--workspace"]);
                command.args(test_args).envs(envs.iter().map(|(k, v)| (k, v)));
                return run(&mut command);
            };
            let mut all: Vec<_> = built.into_iter().map(|s| s.with_env(&envs)).collect();
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
            // The image test waits for the background build.
            for suite in &mut all {
                if suite.name == "xtask" && !suite.is_integration() {
                    image_test = Some(suite.with("the image", &["--exact", IMAGE_TEST], &[]));
                    *suite = suite.with("without the image test", &["--skip", IMAGE_TEST], &[]);
                }
            }
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
    steps.run(
        "the container image and the lints, finished (waited for), then the image test",
        || {
            background.wait()?;
            match image_test {
                Some(test) => suites::run(vec![test], 1, &logs),
                None => Ok(()),
            }
        },
    )?;
    steps.summary();
    eprintln!("==> all steps passed");
    Ok(())
}

/// `cargo xtask lint`: clippy with warnings denied on the workspace's every
/// target, then on each guest for its wasm target.
pub fn lint() -> Result<()> {
    run(&mut cargo(&[
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]))?;
    crate::guests::clippy_all()
}

/// The Go-built tools the tests run, and where they are.
struct Tools {
    binaries: wasmop_testenv::Binaries,
    registry: std::path::PathBuf,
    promtool: std::path::PathBuf,
    otelcol: std::path::PathBuf,
    helm: std::path::PathBuf,
    cosign: std::path::PathBuf,
}

impl Tools {
    /// Builds what is missing and says where each is.
    fn ensure() -> Result<Self> {
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
        let helm = wasmop_testenv::ensure_helm()?;
        eprintln!("    TEST_ASSET_HELM={}", helm.display());
        let cosign = wasmop_testenv::ensure_cosign()?;
        eprintln!("    TEST_ASSET_COSIGN={}", cosign.display());
        Ok(Self {
            binaries,
            registry,
            promtool,
            otelcol,
            helm,
            cosign,
        })
    }

    /// The environment the tests find them by.
    fn env(&self) -> Vec<(String, OsString)> {
        let mut envs: Vec<(String, OsString)> = self
            .binaries
            .env_vars()
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        envs.push(("TEST_ASSET_REGISTRY".into(), self.registry.clone().into()));
        envs.push(("TEST_ASSET_PROMTOOL".into(), self.promtool.clone().into()));
        envs.push(("TEST_ASSET_OTELCOL".into(), self.otelcol.clone().into()));
        envs.push(("TEST_ASSET_HELM".into(), self.helm.clone().into()));
        envs.push(("TEST_ASSET_COSIGN".into(), self.cosign.clone().into()));
        envs
    }
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
    "metacontroller",
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
