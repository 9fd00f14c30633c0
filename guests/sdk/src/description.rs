//! What a guest manages: its primary kind, its child kinds and its finalizer.

use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope, Resource, ResourceScope};

/// A Kubernetes kind; `group` is empty for the core group. Mirrors the WIT
/// `kind-ref`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KindRef {
    /// API group, empty for the core group ("" for ConfigMap, "apps" for
    /// Deployment).
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

    /// The kind of a k8s-openapi type (or any type implementing
    /// [`Resource`]), e.g. `KindRef::of::<Deployment>()`.
    pub fn of<K: Resource>() -> Self {
        Self::new(K::GROUP, K::VERSION, K::KIND)
    }

    /// The `apiVersion` field of objects of this kind: `group/version`, or
    /// just `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// The scope of a k8s-openapi resource as a constant, so [`ChildKind::of`]
/// can fill `cluster_scoped` from the type alone.
///
/// Implemented for the two scopes a child can have; subresources cannot be
/// children.
pub trait ObjectScope: ResourceScope {
    /// True for cluster-scoped kinds.
    const CLUSTER_SCOPED: bool;
}

impl ObjectScope for ClusterResourceScope {
    const CLUSTER_SCOPED: bool = true;
}

impl ObjectScope for NamespaceResourceScope {
    const CLUSTER_SCOPED: bool = false;
}

/// A kind the guest may create as a child of its parent. Mirrors the WIT
/// `child-kind`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChildKind {
    /// The child's kind.
    pub kind: KindRef,
    /// True when the kind is cluster-scoped. The host refuses a declaration
    /// that disagrees with the API server's discovery.
    pub cluster_scoped: bool,
}

impl ChildKind {
    /// The child kind of a k8s-openapi type, its scope taken from the type:
    /// `ChildKind::of::<ConfigMap>()`.
    pub fn of<K>() -> Self
    where
        K: Resource,
        K::Scope: ObjectScope,
    {
        Self {
            kind: KindRef::of::<K>(),
            cluster_scoped: <K::Scope as ObjectScope>::CLUSTER_SCOPED,
        }
    }

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
}

/// What a guest manages, returned by [`Operator::describe`]. Mirrors the WIT
/// `description`.
///
/// [`Operator::describe`]: crate::Operator::describe
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Description {
    /// The parent kind the guest reconciles.
    pub primary: KindRef,
    /// Every kind the guest may return as a desired child; the host watches
    /// each and rejects any other.
    pub children: Vec<ChildKind>,
    /// A finalizer name; when set the host adds it to every parent and calls
    /// the guest with `deleting = true` until it answers `finalized`.
    pub finalizer: Option<String>,
}

impl Description {
    /// A description of a guest that manages `primary` and has no children
    /// or finalizer yet.
    pub fn new(primary: KindRef) -> Self {
        Self {
            primary,
            children: Vec::new(),
            finalizer: None,
        }
    }

    /// Adds a child kind.
    #[must_use]
    pub fn child(mut self, child: ChildKind) -> Self {
        self.children.push(child);
        self
    }

    /// Declares the finalizer.
    #[must_use]
    pub fn finalizer(mut self, name: impl Into<String>) -> Self {
        self.finalizer = Some(name.into());
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::api::rbac::v1::ClusterRoleBinding;

    #[test]
    fn kind_ref_of_a_core_type_has_an_empty_group() {
        let kind = KindRef::of::<ConfigMap>();
        assert_eq!(kind, KindRef::new("", "v1", "ConfigMap"));
        assert_eq!(kind.api_version(), "v1");
    }

    #[test]
    fn kind_ref_api_version_joins_group_and_version() {
        assert_eq!(KindRef::of::<Deployment>().api_version(), "apps/v1");
    }

    #[test]
    fn child_kind_of_takes_the_scope_from_the_type() {
        assert!(!ChildKind::of::<Deployment>().cluster_scoped);
        assert!(ChildKind::of::<ClusterRoleBinding>().cluster_scoped);
    }

    #[test]
    fn description_builder_collects_children_and_finalizer() {
        let description = Description::new(KindRef::new("apps.example.com", "v1alpha1", "Cache"))
            .child(ChildKind::of::<ConfigMap>())
            .finalizer("apps.example.com/cleanup");
        assert_eq!(description.children.len(), 1);
        assert_eq!(
            description.finalizer.as_deref(),
            Some("apps.example.com/cleanup")
        );
    }
}
