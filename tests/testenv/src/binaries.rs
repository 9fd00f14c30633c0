//! Finding, or building from Go modules, the five control-plane binaries.
//!
//! Prebuilt envtest tarballs cannot be downloaded on this project's machines,
//! but the Go module proxy can be reached, so `tests/controlplane` (a Go module
//! of ours) pins Kubernetes, etcd and kwok and we build the binaries from it.
//! A build is slow (see README), so it happens only when the binaries are
//! missing, into a cache directory keyed by everything that changes the output
//! ([`GoBuild`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::gobuild::{GoBuild, prebuilt};

/// Kubernetes version the binaries report on `/version`; must match the
/// `k8s.io/kubernetes` version pinned in `tests/controlplane/go.mod`.
const KUBE_VERSION: &str = "v1.36.1";

/// The Go packages to build, in the order of [`COMPONENTS`].
const PACKAGES: [&str; 5] = [
    "go.etcd.io/etcd/server/v3",
    "k8s.io/kubernetes/cmd/kube-apiserver",
    "k8s.io/kubernetes/cmd/kube-controller-manager",
    "k8s.io/kubernetes/cmd/kube-scheduler",
    "sigs.k8s.io/kwok/cmd/kwok",
];

/// File names of the binaries (envtest's names), with the per-binary override
/// variable for each.
const COMPONENTS: [(&str, &str); 5] = [
    ("etcd", "TEST_ASSET_ETCD"),
    ("kube-apiserver", "TEST_ASSET_KUBE_APISERVER"),
    (
        "kube-controller-manager",
        "TEST_ASSET_KUBE_CONTROLLER_MANAGER",
    ),
    ("kube-scheduler", "TEST_ASSET_KUBE_SCHEDULER"),
    ("kwok", "TEST_ASSET_KWOK"),
];

/// Measured on this project's 2-core machines: a cold build (empty Go build
/// cache, modules already downloaded) of all five binaries. Printed so that
/// whoever waits knows how long.
const COLD_BUILD_MINUTES: &str = "8";

/// Paths of the five control-plane binaries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binaries {
    /// `etcd` (built from `go.etcd.io/etcd/server/v3`).
    pub etcd: PathBuf,
    /// `kube-apiserver`.
    pub kube_apiserver: PathBuf,
    /// `kube-controller-manager`.
    pub kube_controller_manager: PathBuf,
    /// `kube-scheduler`.
    pub kube_scheduler: PathBuf,
    /// `kwok`, which plays the kubelet for fake nodes.
    pub kwok: PathBuf,
}

impl Binaries {
    /// The directory holding all five binaries, if they share one; that is
    /// what `KUBEBUILDER_ASSETS` should point at.
    pub fn dir(&self) -> Option<&Path> {
        let dir = self.etcd.parent()?;
        self.all()
            .iter()
            .all(|path| path.parent() == Some(dir))
            .then_some(dir)
    }

    /// The environment variables that make another process (a test binary
    /// started by `cargo test`) use exactly these binaries: every
    /// `TEST_ASSET_*` variable, and `KUBEBUILDER_ASSETS` when they share a
    /// directory.
    pub fn env_vars(&self) -> Vec<(&'static str, OsString)> {
        let mut vars: Vec<(&'static str, OsString)> = COMPONENTS
            .iter()
            .zip(self.all())
            .map(|((_, var), path)| (*var, path.as_os_str().to_owned()))
            .collect();
        if let Some(dir) = self.dir() {
            vars.push(("KUBEBUILDER_ASSETS", dir.as_os_str().to_owned()));
        }
        vars
    }

    fn all(&self) -> [&PathBuf; 5] {
        [
            &self.etcd,
            &self.kube_apiserver,
            &self.kube_controller_manager,
            &self.kube_scheduler,
            &self.kwok,
        ]
    }

    fn from_paths(
        [
            etcd,
            kube_apiserver,
            kube_controller_manager,
            kube_scheduler,
            kwok,
        ]: [PathBuf; 5],
    ) -> Self {
        Self {
            etcd,
            kube_apiserver,
            kube_controller_manager,
            kube_scheduler,
            kwok,
        }
    }
}

/// Returns the control-plane binaries, building them first if needed.
///
/// For each binary, in this order:
/// 1. `TEST_ASSET_ETCD`, `TEST_ASSET_KUBE_APISERVER`,
///    `TEST_ASSET_KUBE_CONTROLLER_MANAGER`, `TEST_ASSET_KUBE_SCHEDULER`,
///    `TEST_ASSET_KWOK`: the path of that binary (an error if it does not exist);
/// 2. `KUBEBUILDER_ASSETS`: a directory holding `etcd`, `kube-apiserver`,
///    `kube-controller-manager`, `kube-scheduler` and `kwok`;
/// 3. otherwise the build of `tests/controlplane` cached in
///    `${XDG_CACHE_HOME:-$HOME/.cache}/wasmop/controlplane/<hash>`, where the
///    hash covers go.mod, go.sum, `go version` and the build flags. It is
///    built (with progress on stderr) when missing; the build goes to a
///    temporary directory that is renamed into place, and a lock file keeps
///    two processes from building at once.
///
/// Envtest's own asset directories hold only etcd and kube-apiserver; with
/// such a `KUBEBUILDER_ASSETS` the other three come from the build (a stderr
/// line says so).
pub fn ensure_binaries() -> Result<Binaries> {
    let assets = std::env::var_os("KUBEBUILDER_ASSETS")
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from);
    let mut paths: [Option<PathBuf>; 5] = Default::default();
    let mut missing = Vec::new();
    for (slot, (name, var)) in paths.iter_mut().zip(COMPONENTS) {
        *slot = prebuilt(var)?.or_else(|| {
            assets
                .as_ref()
                .map(|dir| dir.join(name))
                .filter(|path| path.is_file())
        });
        if slot.is_none() {
            missing.push(name);
        }
    }
    if !missing.is_empty() {
        if let Some(dir) = &assets {
            eprintln!(
                "controlplane: KUBEBUILDER_ASSETS={} lacks {}; using the build of tests/controlplane for those",
                dir.display(),
                missing.join(", ")
            );
        }
        let built = ensure_built()?;
        for (slot, from_build) in paths.iter_mut().zip(built.all()) {
            slot.get_or_insert_with(|| from_build.clone());
        }
    }
    Ok(Binaries::from_paths(
        paths.map(|path| path.expect("every slot is filled above")),
    ))
}

/// The `tests/controlplane` Go module this crate was compiled next to.
fn controlplane_module_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../controlplane")
}

/// The Go module `tests/controlplane` and what it builds.
fn controlplane_build() -> GoBuild {
    GoBuild {
        name: "controlplane",
        module: controlplane_module_dir(),
        packages: &PACKAGES,
        outputs: &[
            "etcd",
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
            "kwok",
        ],
        // Go names etcd's binary after its package directory.
        renames: &[("server", "etcd"), ("v3", "etcd")],
        ldflags: ldflags(),
        tags: "",
        cold_build_minutes: COLD_BUILD_MINUTES,
    }
}

/// Builds the binaries of `tests/controlplane` unless its cache directory
/// already holds them.
fn ensure_built() -> Result<Binaries> {
    Ok(binaries_in(&controlplane_build().ensure()?))
}

/// The binaries' paths inside a build directory.
fn binaries_in(dir: &Path) -> Binaries {
    Binaries::from_paths(COMPONENTS.map(|(name, _)| dir.join(name)))
}

/// `-ldflags` for the build: strip the symbol tables (smaller binaries,
/// faster links) and set the version `/version` reports (without it,
/// `v0.0.0-master`).
fn ldflags() -> String {
    let minor = KUBE_VERSION.split('.').nth(1).unwrap_or_default();
    format!(
        "-s -w -X k8s.io/component-base/version.gitVersion={KUBE_VERSION} \
         -X k8s.io/component-base/version.gitMajor=1 \
         -X k8s.io/component-base/version.gitMinor={minor}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binaries_share_a_dir_only_when_all_parents_match() {
        let binaries = binaries_in(Path::new("/opt/cp"));
        assert_eq!(binaries.dir(), Some(Path::new("/opt/cp")));
        assert!(
            binaries
                .env_vars()
                .iter()
                .any(|(var, value)| *var == "KUBEBUILDER_ASSETS" && value == "/opt/cp")
        );

        let mixed = Binaries {
            kwok: PathBuf::from("/elsewhere/kwok"),
            ..binaries
        };
        assert_eq!(mixed.dir(), None);
        assert!(
            mixed
                .env_vars()
                .iter()
                .all(|(var, _)| *var != "KUBEBUILDER_ASSETS")
        );
    }

    #[test]
    fn ldflags_set_the_pinned_kubernetes_version() {
        let flags = ldflags();
        assert!(flags.contains("gitVersion=v1.36.1"));
        assert!(flags.contains("gitMinor=36"));
    }
}
