//! What a guest manages: the WIT `description`.

use serde::{Deserialize, Serialize};

use crate::{ChildKind, KindRef, RelatedKind};

/// What a guest manages: its answer to `describe`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(
    feature = "wasmtime",
    derive(
        wasmtime::component::ComponentType,
        wasmtime::component::Lift,
        wasmtime::component::Lower
    )
)]
#[cfg_attr(feature = "wasmtime", component(record))]
pub struct Description {
    /// The parent kind the guest reconciles: a custom resource.
    pub primary: KindRef,
    /// Every kind the guest may return as a desired child; the host watches
    /// each and refuses any other.
    pub children: Vec<ChildKind>,
    /// A finalizer name such as "apps.example.com/cleanup". When set, the
    /// host adds it to every parent and calls the guest with
    /// `deleting = true` until it answers `finalized`.
    pub finalizer: Option<String>,
    /// Kinds the guest reads but never writes; each reconcile gets the
    /// objects that map to its parent in `related`.
    pub related: Vec<RelatedKind>,
}

impl Description {
    /// A guest that manages `primary` and has no children or finalizer yet.
    pub fn new(primary: KindRef) -> Self {
        Self {
            primary,
            children: Vec::new(),
            finalizer: None,
            related: Vec::new(),
        }
    }

    /// Adds a related kind.
    #[must_use]
    pub fn related(mut self, related: RelatedKind) -> Self {
        self.related.push(related);
        self
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

    /// The declaration of a child kind, if the guest declared it.
    pub fn child_kind(&self, api_version: &str, kind: &str) -> Option<&ChildKind> {
        self.children
            .iter()
            .find(|c| c.kind.matches(api_version, kind))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builder_collects_children_and_finalizer() {
        let d = Description::new(KindRef::new("apps.example.com", "v1alpha1", "Cache"))
            .child(ChildKind::namespaced(KindRef::new("", "v1", "ConfigMap")))
            .finalizer("apps.example.com/cleanup");
        assert_eq!(d.children.len(), 1);
        assert_eq!(d.finalizer.as_deref(), Some("apps.example.com/cleanup"));
        assert!(d.child_kind("v1", "ConfigMap").is_some());
        assert!(d.child_kind("v1", "Secret").is_none());
    }
}
