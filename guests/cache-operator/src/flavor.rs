//! The builds of the operator: v1; v2 for the hot-swap tests and demo; and
//! a broken one for the rollout tests and demo.
//!
//! The Cargo features `v2` and `broken` pick the flavor a build exports. The logic takes
//! the flavor as a value rather than testing the feature everywhere, so both
//! flavors are unit-tested by one `cargo test`.

/// The label every v2 child carries (interface contract with the hot-swap
/// tests): `apps.example.com/version: v2`. Not under `wasmop.dev/`: those
/// keys are the host's alone.
pub const VERSION_LABEL: &str = "apps.example.com/version";
/// The value of [`VERSION_LABEL`] on v2 children.
pub const VERSION_V2: &str = "v2";
/// The label that makes the broken build fail a Cache's reconcile
/// (interface contract with the rollout tests): any value.
pub const BREAK_LABEL: &str = "apps.example.com/break";

/// Which build of the operator is running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flavor {
    /// Deployment, Service and ConfigMap.
    V1,
    /// As v1, plus the label `apps.example.com/version: v2` on every child and a
    /// PodDisruptionBudget.
    V2,
    /// As v1 with a logic bug: the Deployment is scaled to zero replicas,
    /// and a Cache labelled [`BREAK_LABEL`] fails to reconcile.
    Broken,
}

impl Flavor {
    /// The flavor this build exports: `V2` with the Cargo feature `v2`,
    /// `Broken` with `broken`.
    pub const CURRENT: Self = if cfg!(feature = "broken") {
        Self::Broken
    } else if cfg!(feature = "v2") {
        Self::V2
    } else {
        Self::V1
    };

    /// True for v2, which adds the version label and the PodDisruptionBudget.
    pub fn is_v2(self) -> bool {
        self == Self::V2
    }

    /// True for the broken build.
    pub fn is_broken(self) -> bool {
        self == Self::Broken
    }
}
