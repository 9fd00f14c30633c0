//! The tools the host's monitoring is checked with: `promtool`, built from
//! `tests/monitoring` (a Go module of ours that pins it) the way the
//! control plane is, the Prometheus Operator's CRDs, from that project's
//! Go module, and an OpenTelemetry Collector built from `tests/otelcol`
//! (an OTLP receiver and the file exporter).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::gobuild::{GoBuild, prebuilt};

/// Measured on this project's 2-core machines: 1 min 52 s with Go's build
/// cache warm from the control plane's build (they share the Kubernetes
/// client packages).
const COLD_BUILD_MINUTES: &str = "3";

/// The Prometheus Operator release whose CRDs (`monitoring.coreos.com/v1`)
/// the kit's `kubectl apply --dry-run=server` runs against.
pub const PROMETHEUS_OPERATOR_VERSION: &str = "v0.85.0";

fn module() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../monitoring")
}

/// `promtool`, built first if it is missing (`TEST_ASSET_PROMTOOL` names a
/// prebuilt one instead). Built with `remove_all_sd`: without Prometheus'
/// service discovery plugins (the cloud SDKs), which no check of rules or
/// metrics uses.
pub fn ensure_promtool() -> Result<PathBuf> {
    if let Some(path) = prebuilt("TEST_ASSET_PROMTOOL")? {
        return Ok(path);
    }
    let build = GoBuild {
        name: "promtool",
        module: module(),
        packages: &["github.com/prometheus/prometheus/cmd/promtool"],
        outputs: &["promtool"],
        renames: &[],
        ldflags: "-s -w".to_owned(),
        tags: "remove_all_sd",
        cold_build_minutes: COLD_BUILD_MINUTES,
    };
    Ok(build.ensure()?.join("promtool"))
}

/// The test OpenTelemetry Collector (`tests/otelcol`), built first if it
/// is missing (`TEST_ASSET_OTELCOL` names a prebuilt one instead).
pub fn ensure_otelcol() -> Result<PathBuf> {
    if let Some(path) = prebuilt("TEST_ASSET_OTELCOL")? {
        return Ok(path);
    }
    let build = GoBuild {
        name: "otelcol",
        module: Path::new(env!("CARGO_MANIFEST_DIR")).join("../otelcol"),
        packages: &["."],
        outputs: &["otelcol"],
        renames: &[],
        ldflags: "-s -w".to_owned(),
        tags: "",
        cold_build_minutes: "2",
    };
    Ok(build.ensure()?.join("otelcol"))
}

/// The Prometheus Operator's CRD manifests, from its Go module at
/// [`PROMETHEUS_OPERATOR_VERSION`] (downloaded into Go's module cache,
/// checked against the checksum database, once).
pub fn prometheus_operator_crds() -> Result<Vec<PathBuf>> {
    let module =
        format!("github.com/prometheus-operator/prometheus-operator@{PROMETHEUS_OPERATOR_VERSION}");
    let output = Command::new("go")
        .args(["mod", "download", "-json", &module])
        .current_dir(module_dir()?)
        .output()
        .context("running `go mod download`: Go must be on PATH")?;
    let info: serde_json::Value = serde_json::from_slice(&output.stdout).with_context(|| {
        format!(
            "`go mod download {module}` printed no JSON: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    })?;
    if let Some(error) = info["Error"].as_str() {
        bail!("`go mod download {module}`: {error}");
    }
    let dir = Path::new(
        info["Dir"]
            .as_str()
            .context("no Dir in go mod download's answer")?,
    )
    .join("example/prometheus-operator-crd");
    let mut crds: Vec<PathBuf> = std::fs::read_dir(&dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()?;
    crds.retain(|p| p.extension().is_some_and(|e| e == "yaml"));
    crds.sort();
    if crds.is_empty() {
        bail!("no CRDs in {}", dir.display());
    }
    Ok(crds)
}

fn module_dir() -> Result<PathBuf> {
    module()
        .canonicalize()
        .context("tests/monitoring not found")
}
