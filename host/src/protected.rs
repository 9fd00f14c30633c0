//! The host's own objects, which no guest may write: the guest list, the
//! module ConfigMaps it names, the leader-election Lease, the webhook
//! configurations and Secrets the host manages.
//!
//! Most of these are already out of a guest's reach (the host writes only
//! what a parent controls), but a parent living in the host's namespace
//! could name one as a child; the set makes the refusal explicit, with its
//! own reason (`ProtectedObject`), even when namespace, kind and name all
//! line up. Each part of the host that owns objects replaces its own share
//! of the set as those objects change (the guest list when it is read
//! again, for example).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, RwLock};

/// One protected object.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProtectedRef {
    /// API group ("" for core).
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Namespace; `None` for a cluster-scoped object.
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

impl ProtectedRef {
    /// A core ConfigMap in `namespace`.
    pub fn config_map(namespace: &str, name: &str) -> Self {
        Self::namespaced("", "ConfigMap", namespace, name)
    }

    /// A namespaced object.
    pub fn namespaced(group: &str, kind: &str, namespace: &str, name: &str) -> Self {
        Self {
            group: group.into(),
            kind: kind.into(),
            namespace: Some(namespace.into()),
            name: name.into(),
        }
    }

    /// A cluster-scoped object.
    pub fn cluster(group: &str, kind: &str, name: &str) -> Self {
        Self {
            group: group.into(),
            kind: kind.into(),
            namespace: None,
            name: name.into(),
        }
    }
}

impl std::fmt::Display for ProtectedRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.group.is_empty() {
            String::new()
        } else {
            format!(".{}", self.group)
        };
        match &self.namespace {
            Some(ns) => write!(f, "{}{group} {ns}/{}", self.kind, self.name),
            None => write!(f, "{}{group} {}", self.kind, self.name),
        }
    }
}

/// The shared set of protected objects. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct ProtectedObjects {
    by_owner: Arc<RwLock<HashMap<&'static str, BTreeSet<ProtectedRef>>>>,
}

impl ProtectedObjects {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Replaces the objects `owner` (a part of the host, e.g. "guest-list")
    /// protects.
    pub fn set(&self, owner: &'static str, objects: impl IntoIterator<Item = ProtectedRef>) {
        self.by_owner
            .write()
            .expect("protected lock")
            .insert(owner, objects.into_iter().collect());
    }

    /// Whether the object is protected.
    pub fn contains(&self, group: &str, kind: &str, namespace: Option<&str>, name: &str) -> bool {
        self.by_owner
            .read()
            .expect("protected lock")
            .values()
            .flatten()
            .any(|p| {
                p.group == group
                    && p.kind == kind
                    && p.namespace.as_deref() == namespace
                    && p.name == name
            })
    }

    /// Every protected object, sorted.
    pub fn all(&self) -> Vec<ProtectedRef> {
        let owners = self.by_owner.read().expect("protected lock");
        let all: BTreeSet<_> = owners.values().flatten().cloned().collect();
        all.into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_owner_replaces_only_its_own_share() {
        let set = ProtectedObjects::new();
        set.set(
            "guest-list",
            [ProtectedRef::config_map("wasmop-system", "wasmop-guests")],
        );
        set.set(
            "lease",
            [ProtectedRef::namespaced(
                "coordination.k8s.io",
                "Lease",
                "wasmop-system",
                "wasmop",
            )],
        );
        assert!(set.contains("", "ConfigMap", Some("wasmop-system"), "wasmop-guests"));
        assert!(!set.contains("", "ConfigMap", Some("other"), "wasmop-guests"));
        set.set(
            "guest-list",
            [ProtectedRef::config_map("wasmop-system", "new-list")],
        );
        assert!(!set.contains("", "ConfigMap", Some("wasmop-system"), "wasmop-guests"));
        assert!(set.contains(
            "coordination.k8s.io",
            "Lease",
            Some("wasmop-system"),
            "wasmop"
        ));
        assert_eq!(set.all().len(), 2);
    }
}
