//! A real Kubernetes control plane for wasmop's tests.
//!
//! wasmop's behaviour is talking to a Kubernetes API server, so its tests run
//! against a real one, never a mock: a mock would encode our own assumptions,
//! while the real server enforces OpenAPI schemas, CEL rules, server-side
//! apply conflicts, the status subresource, generations, finalizers and
//! resourceVersions. Like kubebuilder's envtest, [`TestEnv`] starts etcd and
//! kube-apiserver as child processes on 127.0.0.1; beyond envtest it also
//! starts kube-controller-manager (garbage collection, Deployments, ...),
//! kube-scheduler and [kwok](https://kwok.sigs.k8s.io), which plays the
//! kubelet for a fake node so Pods become Running and Ready.
//!
//! The binaries come from [`ensure_binaries`]: envtest's `KUBEBUILDER_ASSETS`
//! / `TEST_ASSET_*` variables if set, else a cached build of the Go module in
//! `tests/controlplane`.
//!
//! Faults are real too ([`Component`], [`TestEnv::kill`],
//! [`TestEnv::restart`], [`TestEnv::pause`], [`TestEnv::compact_etcd`]): a
//! component is killed, stopped or restarted as a process.
//!
//! Test binaries use [`harness`] (`harness = false` in Cargo.toml): one
//! control plane per binary, a namespace per test.
//!
//! ```no_run
//! use std::sync::Arc;
//!
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::api::{Api, PostParams};
//! use wasmop_testenv::{TestEnv, harness};
//!
//! async fn config_maps_round_trip(env: Arc<TestEnv>) -> anyhow::Result<()> {
//!     let namespace = env.create_namespace("round-trip").await?;
//!     let api: Api<ConfigMap> = Api::namespaced(env.client(), &namespace);
//!     let mut map = ConfigMap::default();
//!     map.metadata.name = Some("example".to_owned());
//!     api.create(&PostParams::default(), &map).await?;
//!     assert!(api.get_opt("example").await?.is_some());
//!     Ok(())
//! }
//!
//! fn main() -> std::process::ExitCode {
//!     harness::run(wasmop_testenv::tests![config_maps_round_trip])
//! }
//! ```
//!
//! Environment variables:
//! - `KUBEBUILDER_ASSETS`, `TEST_ASSET_ETCD`, `TEST_ASSET_KUBE_APISERVER`,
//!   `TEST_ASSET_KUBE_CONTROLLER_MANAGER`, `TEST_ASSET_KUBE_SCHEDULER`,
//!   `TEST_ASSET_KWOK`: use these binaries instead of building;
//! - `TEST_ASSET_REGISTRY`: the OCI registry binary to use instead of
//!   building `tests/registry` ([`Registry`]);
//! - `TEST_ASSET_HELM`: the helm binary to use instead of building
//!   `tests/helm` ([`ensure_helm`]);
//! - `TEST_ASSET_COSIGN`: the cosign binary to use instead of building
//!   `tests/cosign` ([`ensure_cosign`]);
//! - `WASMOP_SKIP_CLUSTER_TESTS=1`: if the control plane cannot start,
//!   report the tests as ignored instead of failed;
//! - `WASMOP_KEEP_TESTENV=1`: keep the temporary directory (logs, audit log,
//!   certificates) after the control plane stops.

mod audit;
mod binaries;
pub mod cache;
mod cosign;
mod cost;
pub mod crd;
mod env;
mod faults;
mod gobuild;
pub mod harness;
mod helm;
mod monitoring;
mod peers;
mod pki;
mod process;
mod registry;
mod window;

pub use audit::{WRITE_VERBS, effective_user};
pub use binaries::{Binaries, ensure_binaries};
pub use cosign::{COSIGN_VERSION, ensure_cosign};
pub use cost::{Cost, cost};
pub use env::{NODE_NAME, TestEnv};
pub use faults::Component;
pub use helm::{HELM_VERSION, ensure_helm};
pub use monitoring::{
    PROMETHEUS_OPERATOR_VERSION, ensure_otelcol, ensure_promtool, prometheus_operator_crds,
};
pub use peers::{ensure_kubebuilder_cache, ensure_kubebuilder_cache_finished};
pub use registry::{BasicAuth, REGISTRY_VERSION, Registry, ensure_registry_binary};
pub use window::Window;

/// `wasmop run`'s leader election with short leases, so failovers in the
/// tests and the demo show within seconds (the defaults, 15 s, 10 s and
/// 2 s, are controller-runtime's).
pub const SHORT_LEASE: &[&str] = &[
    "--leader-elect",
    "--leader-elect-lease-duration",
    "6s",
    "--leader-elect-renew-deadline",
    "4s",
    "--leader-elect-retry-period",
    "1s",
];

/// The lease duration of [`SHORT_LEASE`].
pub const SHORT_LEASE_DURATION: std::time::Duration = std::time::Duration::from_secs(6);

/// The machine's CPU model, from /proc/cpuinfo ("unknown" elsewhere), for
/// the benches' reports.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, model)| model.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into())
}
