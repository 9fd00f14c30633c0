//! `cargo xtask build-guests`: build every guest component and put it where
//! the host, the tests and the demo look for it.
//!
//! Each guest is built with `cargo build --profile guest --target <its
//! target>` (the `guest` profile in the root `Cargo.toml` optimises for
//! speed) and copied to `target/guests/<guest-name>.wasm`. The
//! cache-operator targets `wasm32-unknown-unknown`, linked into a component
//! by the toolchain's `wasm-component-ld` (see `.cargo/config.toml`): its
//! only import is the WIT `log`. The TypeScript and Python cache-operators
//! are built by their SDKs' build scripts ([`crate::languages`]). The hostile guest targets `wasm32-wasip2`
//! because its attacks call WASI (files, sockets, environment) to prove the
//! host grants none of it. The names are an
//! interface contract: `cache-operator.wasm`, `cache-operator-v2.wasm`,
//! `cache-operator-broken.wasm` (the rollout tests' candidate with a logic bug),
//! `cache-operator-registry.wasm` (the build that imports `wasi:http` for
//! its `registryUrl`), `hostile.wasm`, `cache-operator-ts.wasm`,
//! `cache-operator-py.wasm`, their registry builds
//! `cache-operator-ts-registry.wasm` and `cache-operator-py-registry.wasm`,
//! `hostile-ts.wasm` and `hostile-py.wasm` (the hostile guest's webhook
//! attacks in those languages), `cache-operator-go.wasm` and
//! `cache-operator-go-registry.wasm` (built by `wasmop build`),
//! `hostile-go.wasm` (Go's own attacks: heap, goroutines, panics),
//! `tutorial-cache.wasm` (the kubebuilder tutorial's logic, for the scale
//! bench), `petset.wasm` (the Metacontroller PetSet's logic as a Rust guest,
//! for the Metacontroller bench).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};

use sha2::{Digest, Sha256};

use crate::inputs::{Stamp, hash_file, hash_tree, tool_version};
use crate::process::{cargo, run};

/// A guest that imports nothing but the WIT `log`. `rust-toolchain.toml`
/// lists both targets; [`crate::toolchain::ensure_targets`] installs them.
const PURE: &str = "wasm32-unknown-unknown";
/// A guest that imports WASI (which the host links, granting nothing).
const WASI: &str = "wasm32-wasip2";
/// The Cargo profile guests are built with (defined in the root manifest).
const PROFILE: &str = "guest";
/// The profile of a guest built to be debugged: [`PROFILE`] keeping
/// function names and line tables.
const DEBUG_PROFILE: &str = "guest-debug";

/// One guest component to build.
struct Guest {
    /// The file name under `target/guests/`, without `.wasm`.
    name: &'static str,
    /// The Cargo package.
    package: &'static str,
    /// Cargo features to enable.
    features: &'static [&'static str],
    /// The Rust target: [`PURE`] or [`WASI`].
    target: &'static str,
    /// The Cargo profile: [`PROFILE`] or [`DEBUG_PROFILE`].
    profile: &'static str,
}

/// Every guest, in build order. The cache-operator flavors share one
/// package and so one output file: each is copied away right after its
/// build, and skipped while its inputs are those it was built from
/// ([`crate::inputs`]).
const GUESTS: &[Guest] = &[
    Guest {
        name: "cache-operator",
        package: "cache-operator",
        features: &[],
        target: PURE,
        profile: PROFILE,
    },
    Guest {
        name: "cache-operator-v2",
        package: "cache-operator",
        features: &["v2"],
        target: PURE,
        profile: PROFILE,
    },
    Guest {
        name: "cache-operator-broken",
        package: "cache-operator",
        features: &["broken"],
        target: PURE,
        profile: PROFILE,
    },
    Guest {
        name: "cache-operator-registry",
        package: "cache-operator",
        features: &["registry"],
        target: PURE,
        profile: PROFILE,
    },
    Guest {
        name: "hostile",
        package: "hostile-guest",
        features: &[],
        target: WASI,
        profile: PROFILE,
    },
    // The hostile guest as a debug build keeps it: names and line tables,
    // so that its traps show the guest's own stack with file and line.
    Guest {
        name: "hostile-debug",
        package: "hostile-guest",
        features: &[],
        target: WASI,
        profile: DEBUG_PROFILE,
    },
    Guest {
        name: "tutorial-cache",
        package: "tutorial-cache",
        features: &[],
        target: PURE,
        profile: PROFILE,
    },
    Guest {
        name: "petset",
        package: "petset-guest",
        features: &[],
        target: PURE,
        profile: PROFILE,
    },
];

/// Builds every guest and leaves each at `target/guests/<guest-name>.wasm`,
/// installing the guests' Rust targets first if they are missing.
pub fn build_all() -> Result<()> {
    let started = Instant::now();
    let root = workspace_root();
    let out_dir = build_rust(|_| true, GUESTS.len() + crate::languages::GUESTS.len())?;
    let toolchains = crate::languages::Toolchains::ensure(&root)?;
    for (i, guest) in crate::languages::GUESTS.iter().enumerate() {
        eprintln!(
            "--> guest {}/{}: {} ({:?})",
            GUESTS.len() + i + 1,
            GUESTS.len() + crate::languages::GUESTS.len(),
            guest.name,
            guest.lang
        );
        let installed = out_dir.join(format!("{}.wasm", guest.name));
        if !toolchains.build(&root, guest, &installed)? {
            eprintln!(
                "    {} kept: its sources, SDK, WIT and toolchain are those it was built from",
                relative_to(&installed, &root).display()
            );
        }
    }
    eprintln!(
        "--> {} guests ready in {:.1}s in {}",
        GUESTS.len() + crate::languages::GUESTS.len(),
        started.elapsed().as_secs_f64(),
        relative_to(&out_dir, &root).display()
    );
    Ok(())
}

/// Builds the guests the demo shows (the cache-operator, its v2, its broken
/// build and its Go build), not every language's.
pub fn build_demo() -> Result<()> {
    const SHOWN: &[&str] = &[
        "cache-operator",
        "cache-operator-v2",
        "cache-operator-broken",
    ];
    let root = workspace_root();
    let out_dir = build_rust(|g| SHOWN.contains(&g.name), SHOWN.len() + 1)?;
    let go = crate::languages::GUESTS
        .iter()
        .find(|g| g.name == "cache-operator-go")
        .context("no guest cache-operator-go")?;
    eprintln!(
        "--> guest {}/{}: {} (Go)",
        SHOWN.len() + 1,
        SHOWN.len() + 1,
        go.name
    );
    crate::languages::Toolchains::ensure(&root)?.build(
        &root,
        go,
        &out_dir.join(format!("{}.wasm", go.name)),
    )?;
    Ok(())
}

/// Builds the Rust guests `wanted` picks into `target/guests` (numbered out
/// of `total`), installing their Rust targets first if they are missing;
/// returns that directory.
fn build_rust(wanted: impl Fn(&Guest) -> bool, total: usize) -> Result<PathBuf> {
    let root = workspace_root();
    crate::toolchain::ensure_targets(&root)?;
    let out_dir = guest_dir();
    std::fs::create_dir_all(&out_dir)
        .with_context(|| format!("could not create {}", out_dir.display()))?;
    // `cargo -vV` of the pinned toolchain: its version and commit.
    let toolchain = tool_version(cargo(&["-vV"]).current_dir(workspace_root()))?;
    for (i, guest) in GUESTS.iter().filter(|g| wanted(g)).enumerate() {
        eprintln!(
            "--> guest {}/{total}: {}{}",
            i + 1,
            guest.name,
            if guest.features.is_empty() {
                String::new()
            } else {
                format!(" (features: {})", guest.features.join(","))
            }
        );
        let installed = out_dir.join(format!("{}.wasm", guest.name));
        let Some(stamp) = Stamp::stale(&installed, inputs_digest(&root, guest, &toolchain)?) else {
            eprintln!(
                "    {} kept: its sources, features and toolchain are those it was built from",
                relative_to(&installed, &root).display()
            );
            continue;
        };
        let built = build(&root, guest)?;
        std::fs::copy(&built, &installed).with_context(|| {
            format!(
                "could not copy {} to {}",
                built.display(),
                installed.display()
            )
        })?;
        let size = std::fs::metadata(&installed)
            .with_context(|| format!("could not stat {}", installed.display()))?
            .len();
        eprintln!(
            "    {} ({} KiB)",
            relative_to(&installed, &root).display(),
            size.div_ceil(1024)
        );
        stamp.write()?;
    }
    Ok(out_dir)
}

/// What a Rust guest is built from: every source of the workspace's guests,
/// crates and WIT, the workspace's manifests, lock file and build
/// configuration, the toolchain's version, and the guest's features and
/// target.
fn inputs_digest(root: &Path, guest: &Guest, toolchain: &str) -> Result<String> {
    let mut hash = Sha256::new();
    for dir in ["guests", "crates", "wit"] {
        hash_tree(&mut hash, root, &root.join(dir))?;
    }
    for file in [
        "Cargo.toml",
        "Cargo.lock",
        "rust-toolchain.toml",
        ".cargo/config.toml",
    ] {
        hash_file(&mut hash, root, &root.join(file))?;
    }
    for part in [
        toolchain,
        guest.target,
        guest.profile,
        &guest.features.join(","),
    ] {
        hash.update(part);
        hash.update([0]);
    }
    Ok(format!("{:x}", hash.finalize()))
}

/// Lints every guest as it is built: its own target and features, so the
/// code only compiled for wasm (the export glue, the SDK's allocator) is
/// checked too. `cargo clippy --workspace` sees only the native build.
pub fn clippy_all() -> Result<()> {
    crate::toolchain::ensure_targets(&workspace_root())?;
    // A debug build is the same code as its release build: linted once.
    for guest in GUESTS.iter().filter(|g| g.profile == PROFILE) {
        let mut command = cargo_for("clippy", guest);
        command.args(["--", "-D", "warnings"]);
        command.current_dir(workspace_root());
        run(&mut command)
            .with_context(|| format!("clippy found problems in guest {}", guest.name))?;
    }
    Ok(())
}

/// `cargo <subcommand>` for `guest`: its package, target, features and the
/// guest profile.
fn cargo_for(subcommand: &str, guest: &Guest) -> std::process::Command {
    let mut command = cargo(&[
        subcommand,
        "--profile",
        guest.profile,
        "--target",
        guest.target,
        "-p",
        guest.package,
    ]);
    if !guest.features.is_empty() {
        command.args(["--features", &guest.features.join(",")]);
    }
    command
}

/// Where the guest components end up: `<target dir>/guests`.
pub fn guest_dir() -> PathBuf {
    target_dir().join("guests")
}

/// Builds one guest and returns the path of the component Cargo produced.
fn build(root: &Path, guest: &Guest) -> Result<PathBuf> {
    let mut command = cargo_for("build", guest);
    command.current_dir(root);
    run(&mut command).with_context(|| {
        format!(
            "building guest {} failed (is the {target} target installed? `rustup target add {target}`)",
            guest.name,
            target = guest.target
        )
    })?;
    let built = target_dir()
        .join(guest.target)
        .join(guest.profile)
        .join(format!("{}.wasm", guest.package.replace('-', "_")));
    anyhow::ensure!(
        built.is_file(),
        "cargo reported success but {} does not exist",
        built.display()
    );
    Ok(built)
}

/// The workspace root: the parent of this crate's directory.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// Cargo's target directory: `$CARGO_TARGET_DIR` when set (relative paths
/// are taken from the workspace root, where the builds run), else
/// `<root>/target`.
pub fn target_dir() -> PathBuf {
    let root = workspace_root();
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => root.join(dir),
        _ => root.join("target"),
    }
}

/// `path` relative to `base` when it is inside it, for shorter progress lines.
fn relative_to<'a>(path: &'a Path, base: &Path) -> &'a Path {
    path.strip_prefix(base).unwrap_or(path)
}
