//! Finding, or building from Go modules, the five control-plane binaries.
//!
//! Prebuilt envtest tarballs cannot be downloaded on this project's machines,
//! but the Go module proxy can be reached, so `tests/controlplane` (a Go module
//! of ours) pins Kubernetes, etcd and kwok and we build the binaries from it.
//! A build is slow (see README), so it happens only when the binaries are
//! missing, into a cache directory keyed by everything that changes the output.

use std::ffi::OsString;
use std::fs::{self, File};
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

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
        *slot = match std::env::var_os(var).filter(|path| !path.is_empty()) {
            Some(path) => {
                let path = PathBuf::from(path);
                if !path.is_file() {
                    bail!("{var}={} does not name a file", path.display());
                }
                Some(path)
            }
            None => assets
                .as_ref()
                .map(|dir| dir.join(name))
                .filter(|path| path.is_file()),
        };
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

/// Builds the binaries of `tests/controlplane` unless its cache directory
/// already holds them.
fn ensure_built() -> Result<Binaries> {
    let module = controlplane_module_dir();
    let module = module.canonicalize().with_context(|| {
        format!(
            "Go module of the control plane not found at {}",
            module.display()
        )
    })?;
    let ldflags = ldflags();
    let go_version = go_version()?;
    let key = cache_key(&module, &go_version, &ldflags)?;
    let root = cache_root()?.join("wasmop").join("controlplane");
    let dir = root.join(&key);
    let binaries = binaries_in(&dir);
    if binaries.all().iter().all(|path| path.is_file()) {
        return Ok(binaries);
    }

    fs::create_dir_all(&root).with_context(|| format!("creating {}", root.display()))?;
    let lock_path = root.join(format!("{key}.lock"));
    let lock =
        File::create(&lock_path).with_context(|| format!("creating {}", lock_path.display()))?;
    if lock.try_lock().is_err() {
        eprintln!(
            "controlplane: another process is building the binaries; waiting for it ({})",
            lock_path.display()
        );
        lock.lock()
            .context("waiting for the control-plane build lock")?;
    }
    // Someone else may have finished the build while we waited.
    if binaries.all().iter().all(|path| path.is_file()) {
        return Ok(binaries);
    }

    // Holding the lock, no other build is running: staging directories left
    // by an interrupted one can go.
    for entry in fs::read_dir(&root)? {
        let entry = entry?;
        if entry
            .file_name()
            .to_string_lossy()
            .starts_with(&format!("{key}.tmp-"))
        {
            fs::remove_dir_all(entry.path())?;
        }
    }
    let staging = root.join(format!("{key}.tmp-{}", std::process::id()));
    fs::create_dir_all(&staging)?;
    let result = build(&module, &staging, &ldflags, &go_version);
    if let Err(err) = result {
        let _ = fs::remove_dir_all(&staging);
        return Err(err);
    }
    if dir.exists() {
        // Some binaries are missing (deleted by hand?): replace them all.
        fs::remove_dir_all(&dir)?;
    }
    fs::rename(&staging, &dir)
        .with_context(|| format!("moving {} to {}", staging.display(), dir.display()))?;
    eprintln!("controlplane: binaries ready in {}", dir.display());
    Ok(binaries)
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

/// The `go build` flags (everything but the output directory and the
/// packages); part of the cache key.
fn build_flags(ldflags: &str) -> [&str; 5] {
    ["build", "-v", "-trimpath", "-ldflags", ldflags]
}

fn go_version() -> Result<String> {
    let output = Command::new("go")
        .arg("version")
        .output()
        .context("running `go version`: the Go toolchain (go 1.26 or newer) must be on PATH to build the control plane")?;
    if !output.status.success() {
        bail!(
            "`go version` failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// sha256 of go.mod, go.sum, the Go version and the build flags (first 16 hex
/// digits: enough to tell builds apart, short enough to read).
fn cache_key(module: &Path, go_version: &str, ldflags: &str) -> Result<String> {
    let mut hash = Sha256::new();
    for file in ["go.mod", "go.sum"] {
        let path = module.join(file);
        hash.update(fs::read(&path).with_context(|| format!("reading {}", path.display()))?);
        hash.update([0]);
    }
    hash.update(go_version.as_bytes());
    hash.update([0]);
    hash.update("CGO_ENABLED=0 ");
    hash.update(build_flags(ldflags).join(" "));
    hash.update(PACKAGES.join(" "));
    Ok(hex::encode(&hash.finalize()[..8]))
}

fn cache_root() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME").filter(|dir| !dir.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    let home = std::env::var_os("HOME")
        .filter(|home| !home.is_empty())
        .context("neither XDG_CACHE_HOME nor HOME is set")?;
    Ok(PathBuf::from(home).join(".cache"))
}

/// Runs `go build` into `out`, reporting progress, then renames the etcd
/// binary (Go names it after its package directory) to `etcd`.
fn build(module: &Path, out: &Path, ldflags: &str, go_version: &str) -> Result<()> {
    let names: Vec<&str> = COMPONENTS.iter().map(|(name, _)| *name).collect();
    eprintln!(
        "controlplane: building {} from {} with {go_version} (a cold build takes ~{COLD_BUILD_MINUTES} minutes on 2 cores; cached afterwards)",
        names.join(", "),
        module.display(),
    );
    let started = Instant::now();
    let mut out_arg = out.as_os_str().to_owned();
    out_arg.push("/");
    let mut child = Command::new("go")
        .args(build_flags(ldflags))
        .arg("-o")
        .arg(out_arg)
        .args(PACKAGES)
        .current_dir(module)
        .env("CGO_ENABLED", "0")
        .stdin(Stdio::null())
        // Our stdout may be a contract (`cargo xtask testenv` prints one
        // line there), so go's goes to stderr.
        .stdout(Stdio::from(std::io::stderr().as_fd().try_clone_to_owned()?))
        .stderr(Stdio::piped())
        .spawn()
        .context("starting `go build`")?;

    // `go build -v` prints one package path per line (thousands of them), so
    // they are summarised every 15 s; anything else (errors, downloads) is
    // shown as it comes.
    let log_path = out.join("build.log");
    let mut log = File::create(&log_path)?;
    let stderr = child.stderr.take().expect("stderr is piped");
    let mut compiled = 0usize;
    let mut last_report = Instant::now();
    let mut tail: Vec<String> = Vec::new();
    for line in BufReader::new(stderr).lines() {
        let line = line?;
        writeln!(log, "{line}")?;
        if line.contains(' ') {
            eprintln!("controlplane: {line}");
            tail.push(line);
            if tail.len() > 40 {
                tail.remove(0);
            }
        } else {
            compiled += 1;
        }
        if last_report.elapsed() >= Duration::from_secs(15) {
            eprintln!(
                "controlplane: compiled {compiled} packages so far ({})",
                minutes(started.elapsed())
            );
            last_report = Instant::now();
        }
    }
    let status = child.wait()?;
    if !status.success() {
        bail!(
            "`go build` of the control plane failed ({status}) after {}; last messages:\n{}",
            minutes(started.elapsed()),
            tail.join("\n")
        );
    }
    fs::remove_file(&log_path)?;
    for go_name in ["server", "v3"] {
        let built = out.join(go_name);
        if built.is_file() {
            fs::rename(&built, out.join("etcd"))?;
        }
    }
    for (name, _) in COMPONENTS {
        if !out.join(name).is_file() {
            bail!(
                "`go build` succeeded but {} is missing",
                out.join(name).display()
            );
        }
    }
    eprintln!(
        "controlplane: go build finished in {} ({compiled} packages compiled, the rest from Go's build cache)",
        minutes(started.elapsed())
    );
    Ok(())
}

fn minutes(elapsed: Duration) -> String {
    let secs = elapsed.as_secs();
    format!("{}m{:02}s", secs / 60, secs % 60)
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
