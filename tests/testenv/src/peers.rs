//! The operators wasmop is measured against, built from Go modules of ours
//! under `tests/peers` the way the control plane is, and only when a bench
//! asks for one.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::gobuild::GoBuild;

/// `tests/peers/kubebuilder-cache`: the seeds' controller-runtime Cache
/// operator, built if missing; returns the binary.
pub fn ensure_kubebuilder_cache() -> Result<PathBuf> {
    let build = GoBuild {
        name: "kubebuilder-cache",
        module: Path::new(env!("CARGO_MANIFEST_DIR")).join("../peers/kubebuilder-cache"),
        packages: &["."],
        outputs: &["kubebuilder-cache"],
        renames: &[],
        ldflags: "-s -w".to_owned(),
        tags: "",
        cold_build_minutes: "2",
    };
    Ok(build.ensure()?.join("kubebuilder-cache"))
}
