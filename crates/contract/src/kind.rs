//! Kubernetes kinds as the WIT names them.

use serde::{Deserialize, Serialize};

/// A Kubernetes kind: `group` is empty for the core group ("" for
/// ConfigMap, "apps" for Deployment). The WIT `kind-ref`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(
    feature = "wasmtime",
    derive(
        wasmtime::component::ComponentType,
        wasmtime::component::Lift,
        wasmtime::component::Lower
    )
)]
#[cfg_attr(feature = "wasmtime", component(record))]
pub struct KindRef {
    /// API group, empty for the core group.
    pub group: String,
    /// API version inside the group, e.g. "v1" or "v1alpha1".
    pub version: String,
    /// Kind, e.g. "Deployment".
    pub kind: String,
}

impl KindRef {
    /// A kind from its parts; use this for custom resources.
    pub fn new(
        group: impl Into<String>,
        version: impl Into<String>,
        kind: impl Into<String>,
    ) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
        }
    }

    /// The `apiVersion` objects of this kind carry: `group/version`, or just
    /// `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Whether an object's `apiVersion` and `kind` name this kind.
    pub fn matches(&self, api_version: &str, kind: &str) -> bool {
        self.kind == kind
            && match api_version.split_once('/') {
                Some((group, version)) => self.group == group && self.version == version,
                None => self.group.is_empty() && self.version == api_version,
            }
    }

    /// Whether `other` is the same resource (group and kind), whatever the
    /// version: two versions of one kind are one set of objects.
    pub fn same_resource(&self, other: &KindRef) -> bool {
        self.group == other.group && self.kind == other.kind
    }

    /// The kind of a k8s-openapi type (or any type implementing its
    /// `Resource`), e.g. `KindRef::of::<Deployment>()`.
    #[cfg(feature = "k8s")]
    pub fn of<K: k8s_openapi::Resource>() -> Self {
        Self::new(K::GROUP, K::VERSION, K::KIND)
    }
}

impl std::fmt::Display for KindRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.api_version(), self.kind)
    }
}

/// A kind the guest may create as a child of its parent. The WIT
/// `child-kind`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(
    feature = "wasmtime",
    derive(
        wasmtime::component::ComponentType,
        wasmtime::component::Lift,
        wasmtime::component::Lower
    )
)]
#[cfg_attr(feature = "wasmtime", component(record))]
pub struct ChildKind {
    /// The child's kind.
    pub kind: KindRef,
    /// True when the kind is cluster-scoped. The host refuses a declaration
    /// that disagrees with the API server's discovery.
    #[cfg_attr(feature = "wasmtime", component(name = "cluster-scoped"))]
    pub cluster_scoped: bool,
}

impl ChildKind {
    /// A namespaced child kind given by its parts.
    pub fn namespaced(kind: KindRef) -> Self {
        Self {
            kind,
            cluster_scoped: false,
        }
    }

    /// A cluster-scoped child kind given by its parts.
    pub fn cluster_scoped(kind: KindRef) -> Self {
        Self {
            kind,
            cluster_scoped: true,
        }
    }

    /// The child kind of a k8s-openapi type, its scope taken from the type:
    /// `ChildKind::of::<ConfigMap>()`.
    #[cfg(feature = "k8s")]
    pub fn of<K>() -> Self
    where
        K: k8s_openapi::Resource,
        K::Scope: ObjectScope,
    {
        Self {
            kind: KindRef::of::<K>(),
            cluster_scoped: <K::Scope as ObjectScope>::CLUSTER_SCOPED,
        }
    }
}

/// How objects of a related kind map to the parents that read them. The
/// WIT `related-by`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(
    feature = "wasmtime",
    derive(
        wasmtime::component::ComponentType,
        wasmtime::component::Lift,
        wasmtime::component::Lower
    )
)]
#[cfg_attr(feature = "wasmtime", component(variant))]
pub enum RelatedBy {
    /// The object whose name the parent gives at this JSON pointer (RFC
    /// 6901, e.g. "/spec/auth/secretRef/name"), in the parent's namespace.
    #[cfg_attr(feature = "wasmtime", component(name = "name-at"))]
    NameAt(String),
    /// The objects in the parent's namespace whose labels match the label
    /// selector the parent gives at this JSON pointer: a map of labels, or
    /// a LabelSelector (`matchLabels`, `matchExpressions`).
    #[cfg_attr(feature = "wasmtime", component(name = "selector-at"))]
    SelectorAt(String),
    /// Every object of the kind in the parent's namespace.
    #[cfg_attr(feature = "wasmtime", component(name = "namespace"))]
    Namespace,
}

/// A kind the guest reads beside its children but never writes: the host
/// watches it, hands each reconcile the objects that map to its parent and
/// reconciles exactly the parents a change maps to. The WIT `related-kind`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(
    feature = "wasmtime",
    derive(
        wasmtime::component::ComponentType,
        wasmtime::component::Lift,
        wasmtime::component::Lower
    )
)]
#[cfg_attr(feature = "wasmtime", component(record))]
pub struct RelatedKind {
    /// The related kind (namespaced).
    pub kind: KindRef,
    /// How its objects map to parents.
    pub by: RelatedBy,
    /// Only metadata is watched and sent (apiVersion, kind, metadata).
    #[cfg_attr(feature = "wasmtime", component(name = "metadata-only"))]
    pub metadata_only: bool,
}

impl RelatedKind {
    /// Objects of `kind` named by the string at `pointer` in the parent.
    pub fn name_at(kind: KindRef, pointer: impl Into<String>) -> Self {
        Self::new(kind, RelatedBy::NameAt(pointer.into()))
    }

    /// Objects of `kind` selected by the label selector at `pointer` in the
    /// parent.
    pub fn selector_at(kind: KindRef, pointer: impl Into<String>) -> Self {
        Self::new(kind, RelatedBy::SelectorAt(pointer.into()))
    }

    /// Every object of `kind` in the parent's namespace.
    pub fn namespace(kind: KindRef) -> Self {
        Self::new(kind, RelatedBy::Namespace)
    }

    fn new(kind: KindRef, by: RelatedBy) -> Self {
        Self {
            kind,
            by,
            metadata_only: false,
        }
    }

    /// Only the objects' metadata is watched and sent.
    #[must_use]
    pub fn metadata_only(mut self) -> Self {
        self.metadata_only = true;
        self
    }
}

/// The scope of a k8s-openapi resource as a constant, so
/// [`ChildKind::of`] can fill `cluster_scoped` from the type alone.
/// Implemented for the two scopes an object can have.
#[cfg(feature = "k8s")]
pub trait ObjectScope: k8s_openapi::ResourceScope {
    /// True for cluster-scoped kinds.
    const CLUSTER_SCOPED: bool;
}

#[cfg(feature = "k8s")]
impl ObjectScope for k8s_openapi::ClusterResourceScope {
    const CLUSTER_SCOPED: bool = true;
}

#[cfg(feature = "k8s")]
impl ObjectScope for k8s_openapi::NamespaceResourceScope {
    const CLUSTER_SCOPED: bool = false;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_version_joins_group_and_version_and_matches_both_forms() {
        let core = KindRef::new("", "v1", "ConfigMap");
        assert_eq!(core.api_version(), "v1");
        assert!(core.matches("v1", "ConfigMap"));
        assert!(!core.matches("apps/v1", "ConfigMap"));
        let apps = KindRef::new("apps", "v1", "Deployment");
        assert_eq!(apps.to_string(), "apps/v1/Deployment");
        assert!(apps.matches("apps/v1", "Deployment"));
        assert!(!apps.matches("v1", "Deployment"));
        assert!(!apps.matches("apps/v2", "Deployment"));
    }

    #[test]
    fn two_versions_of_a_kind_are_the_same_resource() {
        let v1 = KindRef::new("autoscaling", "v1", "HorizontalPodAutoscaler");
        let v2 = KindRef::new("autoscaling", "v2", "HorizontalPodAutoscaler");
        assert!(v1.same_resource(&v2));
        assert!(!v1.same_resource(&KindRef::new("", "v1", "HorizontalPodAutoscaler")));
    }
}
