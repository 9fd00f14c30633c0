//! The operators wasmop is measured against, built from Go modules of ours
//! under `tests/peers` the way the control plane is, and only when a bench
//! asks for one.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::gobuild::GoBuild;

/// `tests/peers/kubebuilder-cache`: the seeds' controller-runtime Cache
/// operator as their chapter 3 writes it, built if missing; returns the
/// binary.
pub fn ensure_kubebuilder_cache() -> Result<PathBuf> {
    ensure_peer(&["kubebuilder-cache"])
}

/// `tests/peers/kubebuilder-cache-finished`: the same operator as the
/// seeds' stages 4 and 5 finish it (finalizer and cleanup, conditions,
/// Events, the ConfigMap), built if missing; returns the binary.
pub fn ensure_kubebuilder_cache_finished() -> Result<PathBuf> {
    ensure_peer(&["kubebuilder-cache-finished"])
}

/// Builds the peer module `tests/peers/<name>` into the binary `<name>`,
/// `binary` holding the name.
fn ensure_peer(binary: &'static [&'static str; 1]) -> Result<PathBuf> {
    let name = binary[0];
    let build = GoBuild {
        name,
        module: Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../peers")
            .join(name),
        packages: &["."],
        outputs: binary,
        renames: &[],
        ldflags: "-s -w".to_owned(),
        tags: "",
        cold_build_minutes: "2",
    };
    Ok(build.ensure()?.join(name))
}
