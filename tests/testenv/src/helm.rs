//! Helm, the package manager users install the chart in `deploy/chart` with,
//! built from `tests/helm` (a Go module of ours that pins it) the way the
//! control plane is, and only when a test asks for it.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::gobuild::{GoBuild, prebuilt};

/// The Helm release `tests/helm/go.mod` pins.
pub const HELM_VERSION: &str = "v4.3.2";

/// Measured on this project's 2-core machines: 3 min 14 s with the modules
/// downloaded and Go's build cache holding the control plane's build (they
/// share many Kubernetes packages).
const COLD_BUILD_MINUTES: &str = "4";

/// `helm`, built first if it is missing (`TEST_ASSET_HELM` names a prebuilt
/// one instead).
pub fn ensure_helm() -> Result<PathBuf> {
    if let Some(path) = prebuilt("TEST_ASSET_HELM")? {
        return Ok(path);
    }
    let build = GoBuild {
        name: "helm",
        module: Path::new(env!("CARGO_MANIFEST_DIR")).join("../helm"),
        packages: &["helm.sh/helm/v4/cmd/helm"],
        outputs: &["helm"],
        renames: &[],
        // `helm version` reports the release instead of its source's "v4.3".
        ldflags: format!("-s -w -X helm.sh/helm/v4/internal/version.version={HELM_VERSION}"),
        tags: "",
        cold_build_minutes: COLD_BUILD_MINUTES,
    };
    Ok(build.ensure()?.join("helm"))
}
