//! cosign, the Sigstore signing tool, built from `tests/cosign` (a Go module
//! of ours that pins it) the way the control plane is, and only when a test
//! asks for it: the tests sign guest modules with it and check with it what
//! `wasmop push --sign-key` signed.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::gobuild::{GoBuild, prebuilt};

/// The cosign release `tests/cosign/go.mod` pins: the newest that builds
/// with the Go this project's machines have (3.1.4 needs Go 1.27).
pub const COSIGN_VERSION: &str = "v3.1.3";

/// Measured on this project's 2-core machines: 2 min 32 s (3 min 44 s of
/// CPU) with the modules downloaded and Go's build cache holding the
/// control plane's build.
const COLD_BUILD_MINUTES: &str = "4";

/// `cosign`, built first if it is missing (`TEST_ASSET_COSIGN` names a
/// prebuilt one instead).
pub fn ensure_cosign() -> Result<PathBuf> {
    if let Some(path) = prebuilt("TEST_ASSET_COSIGN")? {
        return Ok(path);
    }
    let build = GoBuild {
        name: "cosign",
        module: Path::new(env!("CARGO_MANIFEST_DIR")).join("../cosign"),
        packages: &["github.com/sigstore/cosign/v3/cmd/cosign"],
        outputs: &["cosign"],
        renames: &[],
        ldflags: format!("-s -w -X sigs.k8s.io/release-utils/version.gitVersion={COSIGN_VERSION}"),
        tags: "",
        cold_build_minutes: COLD_BUILD_MINUTES,
    };
    Ok(build.ensure()?.join("cosign"))
}
