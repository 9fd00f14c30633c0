//! The checks of a guest's description, made when a module version loads:
//! a version that fails one is refused like a bad module, and the running
//! version keeps serving. `wasmop rbac` refuses the same descriptions, so
//! it never prints a rule for a kind the host would not serve.

use std::collections::HashSet;

use crate::model::{Description, KindRef, RelatedBy};

use super::names;

/// Most child kinds one guest may declare. Every child kind costs a watch
/// and a cache; the operators this host is for own a handful.
pub const MAX_CHILD_KINDS: usize = 32;

/// Most related kinds one guest may declare (each costs a watch and a
/// cache).
pub const MAX_RELATED_KINDS: usize = 16;
/// Longest JSON pointer a related kind may name.
pub const MAX_POINTER_BYTES: usize = 256;

/// A description the host refuses.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The primary kind is a built-in kind: a guest may reconcile only a
    /// custom resource, not, say, every Secret.
    #[error("primary kind {0} is a built-in kind; a guest reconciles a custom resource")]
    BuiltinPrimary(KindRef),
    /// A child kind is the primary kind: its children would be reconciled
    /// as parents again, without bound.
    #[error("child kind {0} is the primary kind")]
    ChildIsPrimary(KindRef),
    /// The same group and kind is declared twice (in any versions): the
    /// host would watch one set of objects twice and prune what one watch
    /// sees but the answer names under the other.
    #[error("child kind {0} is declared more than once")]
    DuplicateKind(KindRef),
    /// More child kinds than [`MAX_CHILD_KINDS`].
    #[error("{0} child kinds declared, at most {MAX_CHILD_KINDS} are allowed")]
    TooManyKinds(usize),
    /// A group, version or kind that is not a valid name (a wildcard, an
    /// empty kind).
    #[error("kind {kind}: {part} {value:?} {why}")]
    InvalidName {
        /// The kind, as `apiVersion/kind`.
        kind: String,
        /// Which part: group, version or kind.
        part: &'static str,
        /// The offending text.
        value: String,
        /// Why.
        why: &'static str,
    },
    /// More related kinds than [`MAX_RELATED_KINDS`].
    #[error("{0} related kinds declared, at most {MAX_RELATED_KINDS} are allowed")]
    TooManyRelated(usize),
    /// The same group and kind is related twice.
    #[error("related kind {0} is declared more than once")]
    DuplicateRelated(KindRef),
    /// A related kind's pointer is no JSON pointer, or too long.
    #[error("related kind {kind}: {pointer:?} {why}")]
    Pointer {
        /// The related kind.
        kind: KindRef,
        /// The pointer.
        pointer: String,
        /// Why.
        why: &'static str,
    },
    /// A child or related kind grants power in the cluster, and the guest
    /// list does not name it in this guest's `privilegedKinds`.
    #[error(
        "{role} kind {kind} grants power ({power}): the guest list must name {name:?} in this guest's privilegedKinds"
    )]
    Privileged {
        /// `child`, `related` or (a decorator's) `target`.
        role: &'static str,
        /// The kind, as `apiVersion/kind`.
        kind: String,
        /// What power.
        power: &'static str,
        /// The kind as `privilegedKinds` names it.
        name: String,
    },
    /// The finalizer is not a qualified name with a domain prefix; the API
    /// server would refuse it on every parent.
    #[error("finalizer {name:?} {why}")]
    Finalizer {
        /// The finalizer.
        name: String,
        /// Why.
        why: &'static str,
    },
}

/// The kinds that grant power in a cluster a guest may name as children
/// or related kinds only where the guest list allows them for it
/// (`privilegedKinds`): `Any` for `wasmop rbac`, which only prints what a
/// module asks for (with a comment on each such rule).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PrivilegedKinds {
    /// These, named `<Kind>.<group>` (`<Kind>` for the core group).
    Named(std::collections::BTreeSet<String>),
    /// Every kind.
    Any,
}

impl Default for PrivilegedKinds {
    fn default() -> Self {
        Self::Named(std::collections::BTreeSet::new())
    }
}

impl PrivilegedKinds {
    /// Whether `kind` is allowed.
    pub fn allows(&self, kind: &KindRef) -> bool {
        match self {
            Self::Any => true,
            Self::Named(names) => names.contains(&privileged_name(kind)),
        }
    }
}

/// `kind` as `privilegedKinds` names it: `<Kind>.<group>`, or `<Kind>` for
/// the core group.
pub fn privileged_name(kind: &KindRef) -> String {
    if kind.group.is_empty() {
        kind.kind.clone()
    } else {
        format!("{}.{}", kind.kind, kind.group)
    }
}

/// What power objects of `kind` grant, if any: over permissions (RBAC,
/// OpenShift's authorization and security constraints), admission, the
/// API itself (CRDs, APIServices, API Priority and Fairness), identities
/// (ServiceAccounts, whose tokens act as them; certificate signing
/// requests), the cluster's machinery (Namespaces, Nodes, RuntimeClasses,
/// PriorityClasses, storage classes, drivers and PersistentVolumes, which
/// can mount a node's disk), coordination (Leases, which other
/// controllers elect their leaders on), traffic (Endpoints and
/// EndpointSlices, which redirect a Service) and devices (resource.k8s.io).
pub fn power_of(kind: &KindRef) -> Option<&'static str> {
    match (kind.group.as_str(), kind.kind.as_str()) {
        ("rbac.authorization.k8s.io" | "authorization.openshift.io", _) => Some("RBAC"),
        ("security.openshift.io", _) => Some("security constraints"),
        ("admissionregistration.k8s.io", _) => Some("admission control"),
        ("apiextensions.k8s.io", _) => Some("API definitions"),
        ("apiregistration.k8s.io", _) => Some("API serving"),
        ("flowcontrol.apiserver.k8s.io", _) => Some("API priority and fairness"),
        ("certificates.k8s.io", _) => Some("certificates"),
        ("", "ServiceAccount") => Some("identities and their tokens"),
        ("", "Namespace") => Some("namespaces"),
        ("", "Node") => Some("nodes"),
        ("node.k8s.io", _) => Some("container runtimes"),
        ("scheduling.k8s.io", _) => Some("scheduling priority"),
        ("storage.k8s.io", _) | ("", "PersistentVolume") => Some("storage"),
        ("resource.k8s.io", _) => Some("devices"),
        ("coordination.k8s.io", _) => Some("leader election"),
        ("discovery.k8s.io", "EndpointSlice") | ("", "Endpoints") => Some("service traffic"),
        _ => None,
    }
}

/// Checks `description` (see the module docs), with the powerful kinds
/// `privileged` allows.
pub fn check(description: &Description, privileged: &PrivilegedKinds) -> Result<(), Error> {
    check_as(description, privileged, false)
}

/// [`check`] for a Metacontroller decorator, whose primary kind is its
/// targets' (another controller's objects, of any kind): a built-in kind
/// is allowed, and one that grants power must be in `privileged`, as a
/// child's must.
pub fn check_decorator(
    description: &Description,
    privileged: &PrivilegedKinds,
) -> Result<(), Error> {
    check_as(description, privileged, true)
}

fn check_as(
    description: &Description,
    privileged: &PrivilegedKinds,
    decorator: bool,
) -> Result<(), Error> {
    let target = decorator.then_some(("target", &description.primary));
    let powers = description
        .children
        .iter()
        .map(|c| ("child", &c.kind))
        .chain(description.related.iter().map(|r| ("related", &r.kind)))
        .chain(target);
    for (role, kind) in powers {
        if let Some(power) = power_of(kind)
            && !privileged.allows(kind)
        {
            return Err(Error::Privileged {
                role,
                kind: kind.to_string(),
                power,
                name: privileged_name(kind),
            });
        }
    }
    check_kind(&description.primary)?;
    if !decorator && is_builtin_group(&description.primary.group) {
        return Err(Error::BuiltinPrimary(description.primary.clone()));
    }
    if description.children.len() > MAX_CHILD_KINDS {
        return Err(Error::TooManyKinds(description.children.len()));
    }
    let mut seen = HashSet::new();
    for child in &description.children {
        check_kind(&child.kind)?;
        if child.kind.same_resource(&description.primary) {
            return Err(Error::ChildIsPrimary(child.kind.clone()));
        }
        if !seen.insert((child.kind.group.as_str(), child.kind.kind.as_str())) {
            return Err(Error::DuplicateKind(child.kind.clone()));
        }
    }
    if description.related.len() > MAX_RELATED_KINDS {
        return Err(Error::TooManyRelated(description.related.len()));
    }
    let mut related = HashSet::new();
    for r in &description.related {
        check_kind(&r.kind)?;
        if !related.insert((r.kind.group.as_str(), r.kind.kind.as_str())) {
            return Err(Error::DuplicateRelated(r.kind.clone()));
        }
        if let RelatedBy::NameAt(pointer) | RelatedBy::SelectorAt(pointer) = &r.by {
            check_pointer(pointer).map_err(|why| Error::Pointer {
                kind: r.kind.clone(),
                pointer: pointer.clone(),
                why,
            })?;
        }
    }
    if let Some(finalizer) = &description.finalizer {
        names::finalizer(finalizer).map_err(|why| Error::Finalizer {
            name: finalizer.clone(),
            why,
        })?;
    }
    Ok(())
}

/// An RFC 6901 pointer ("/"-separated tokens in which `~` is only `~0` or
/// `~1`) into what a parent's user writes and the host watches for
/// changes: its spec, `metadata.name`, labels or annotations. Never its
/// status, which the guest writes itself and whose changes reconcile
/// nothing.
fn check_pointer(pointer: &str) -> Result<(), &'static str> {
    if pointer.len() > MAX_POINTER_BYTES {
        return Err("is longer than 256 bytes");
    }
    if !pointer.starts_with('/') {
        return Err("is no JSON pointer: it must start with \"/\"");
    }
    let into = |prefix: &str| pointer == prefix || pointer.starts_with(&format!("{prefix}/"));
    if !(into("/spec")
        || pointer == "/metadata/name"
        || pointer.starts_with("/metadata/labels/")
        || pointer.starts_with("/metadata/annotations/"))
    {
        return Err(
            "must point into the parent's spec, metadata.name, metadata.labels or metadata.annotations",
        );
    }
    let mut chars = pointer.chars();
    while let Some(c) = chars.next() {
        if c == '~' && !matches!(chars.next(), Some('0' | '1')) {
            return Err("is no JSON pointer: \"~\" must be \"~0\" or \"~1\"");
        }
        if c.is_control() {
            return Err("holds a control character");
        }
    }
    Ok(())
}

fn check_kind(kind: &KindRef) -> Result<(), Error> {
    let invalid = |part, value: &str, why| Error::InvalidName {
        kind: kind.to_string(),
        part,
        value: value.to_owned(),
        why,
    };
    if !kind.group.is_empty() {
        names::dns_subdomain(&kind.group).map_err(|why| invalid("group", &kind.group, why))?;
    }
    names::version(&kind.version).map_err(|why| invalid("version", &kind.version, why))?;
    names::kind(&kind.kind).map_err(|why| invalid("kind", &kind.kind, why))?;
    Ok(())
}

/// Whether `group` belongs to Kubernetes itself. A CustomResourceDefinition's
/// group must contain a dot, and the `*.k8s.io` and `*.kubernetes.io`
/// groups are reserved for the project's own APIs; the rest of the built-in
/// groups have no dot. Against a cluster the host also checks that a
/// CustomResourceDefinition serves the primary kind.
pub fn is_builtin_group(group: &str) -> bool {
    !group.contains('.')
        || group.ends_with(".k8s.io")
        || group == "k8s.io"
        || group.ends_with(".kubernetes.io")
        || group == "kubernetes.io"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ChildKind;

    fn cache() -> Description {
        Description::new(KindRef::new("apps.example.com", "v1alpha1", "Cache"))
            .child(ChildKind::namespaced(KindRef::new(
                "apps",
                "v1",
                "Deployment",
            )))
            .child(ChildKind::namespaced(KindRef::new("", "v1", "ConfigMap")))
            .finalizer("apps.example.com/cache-cleanup")
    }

    /// [`super::check`] with no powerful kind allowed.
    fn check(description: &Description) -> Result<(), Error> {
        super::check(description, &PrivilegedKinds::default())
    }

    #[test]
    fn the_cache_operator_description_passes() {
        assert_eq!(check(&cache()), Ok(()));
    }

    #[test]
    fn kinds_that_grant_power_need_the_guest_lists_word() {
        use crate::model::RelatedKind;
        let binding = KindRef::new("rbac.authorization.k8s.io", "v1", "RoleBinding");
        let namespace = KindRef::new("", "v1", "Namespace");
        let child = cache().child(ChildKind::namespaced(binding.clone()));
        let err = check(&child).unwrap_err();
        assert!(
            err.to_string().contains(
                "\"RoleBinding.rbac.authorization.k8s.io\" in this guest's privilegedKinds"
            ),
            "{err}"
        );
        let related = cache().related(RelatedKind::namespace(namespace.clone()));
        assert!(matches!(
            check(&related),
            Err(Error::Privileged { role: "related", ref name, .. }) if name == "Namespace"
        ));
        let named = |names: &[&str]| {
            PrivilegedKinds::Named(names.iter().map(|n| (*n).to_owned()).collect())
        };
        assert_eq!(
            super::check(&child, &named(&["RoleBinding.rbac.authorization.k8s.io"])),
            Ok(())
        );
        // Named for another kind, or by another spelling: still refused.
        assert!(super::check(&child, &named(&["Role.rbac.authorization.k8s.io"])).is_err());
        assert!(super::check(&child, &named(&["rolebindings"])).is_err());
        assert_eq!(super::check(&related, &PrivilegedKinds::Any), Ok(()));
        // ConfigMaps, Deployments, Secrets: no power of their own.
        assert_eq!(power_of(&KindRef::new("", "v1", "Secret")), None);
    }

    #[test]
    fn related_kinds_are_checked_like_children_with_their_pointers() {
        use crate::model::RelatedKind;
        let secret = KindRef::new("", "v1", "Secret");
        let ok = cache()
            .related(RelatedKind::name_at(
                secret.clone(),
                "/spec/auth/secretRef/name",
            ))
            .related(RelatedKind::selector_at(
                KindRef::new("", "v1", "Service"),
                "/spec/selector",
            ))
            .related(RelatedKind::namespace(KindRef::new("", "v1", "ConfigMap")).metadata_only());
        assert_eq!(check(&ok), Ok(()));
        for pointer in [
            "/spec",
            "/metadata/name",
            "/metadata/labels/app",
            "/metadata/annotations/x~1y",
        ] {
            let d = cache().related(RelatedKind::name_at(secret.clone(), pointer));
            assert_eq!(check(&d), Ok(()), "{pointer:?}");
        }
        let twice = cache()
            .related(RelatedKind::name_at(secret.clone(), "/spec/a"))
            .related(RelatedKind::namespace(KindRef::new("", "v2", "Secret")));
        assert!(matches!(check(&twice), Err(Error::DuplicateRelated(_))));
        for pointer in [
            "spec/name",
            "",
            "/status/secret",
            "/metadata/ownerReferences/0/name",
            "/specx",
            "/spec/a~2b",
            "/spec/a~",
            &format!("/{}", "x".repeat(300)),
            "/spec/a\u{7}",
        ] {
            let d = cache().related(RelatedKind::name_at(secret.clone(), pointer));
            assert!(
                matches!(check(&d), Err(Error::Pointer { .. })),
                "{pointer:?}"
            );
        }
        let wildcard = cache().related(RelatedKind::namespace(KindRef::new("*", "v1", "*")));
        assert!(matches!(check(&wildcard), Err(Error::InvalidName { .. })));
        let many = (0..=MAX_RELATED_KINDS).fold(cache(), |d, i| {
            d.related(RelatedKind::namespace(KindRef::new(
                "example.com",
                "v1",
                format!("K{i}"),
            )))
        });
        assert!(matches!(check(&many), Err(Error::TooManyRelated(_))));
    }

    #[test]
    fn a_built_in_primary_kind_is_refused() {
        for group in [
            "",
            "apps",
            "rbac.authorization.k8s.io",
            "node.kubernetes.io",
        ] {
            let d = Description::new(KindRef::new(group, "v1", "Secret"));
            assert!(
                matches!(check(&d), Err(Error::BuiltinPrimary(_))),
                "{group:?}"
            );
        }
    }

    #[test]
    fn a_decorators_built_in_target_is_allowed_and_a_powerful_one_needs_the_guest_lists_word() {
        let deployments = Description::new(KindRef::new("apps", "v1", "Deployment"))
            .child(ChildKind::namespaced(KindRef::new("", "v1", "Service")));
        assert_eq!(
            check_decorator(&deployments, &PrivilegedKinds::default()),
            Ok(())
        );
        let roles = Description::new(KindRef::new(
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRole",
        ));
        assert!(matches!(
            check_decorator(&roles, &PrivilegedKinds::default()),
            Err(Error::Privileged { role: "target", .. })
        ));
        assert_eq!(check_decorator(&roles, &PrivilegedKinds::Any), Ok(()));
    }

    #[test]
    fn the_primary_kind_as_a_child_and_duplicate_kinds_are_refused() {
        let own = cache().child(ChildKind::namespaced(KindRef::new(
            "apps.example.com",
            "v1beta1",
            "Cache",
        )));
        assert!(matches!(check(&own), Err(Error::ChildIsPrimary(_))));
        let twice = cache().child(ChildKind::namespaced(KindRef::new(
            "apps",
            "v1beta1",
            "Deployment",
        )));
        assert!(matches!(check(&twice), Err(Error::DuplicateKind(_))));
    }

    #[test]
    fn wildcards_empty_kinds_and_too_many_kinds_are_refused() {
        for kind in [
            KindRef::new("*", "v1", "Thing"),
            KindRef::new("example.com", "*", "Thing"),
            KindRef::new("example.com", "v1", "*"),
            KindRef::new("example.com", "v1", ""),
        ] {
            let d = cache().child(ChildKind::namespaced(kind.clone()));
            assert!(
                matches!(check(&d), Err(Error::InvalidName { .. })),
                "{kind}"
            );
        }
        let many = (0..=MAX_CHILD_KINDS).fold(cache(), |d, i| {
            d.child(ChildKind::namespaced(KindRef::new(
                "example.com",
                "v1",
                format!("K{i}"),
            )))
        });
        assert!(matches!(check(&many), Err(Error::TooManyKinds(_))));
    }

    #[test]
    fn a_finalizer_without_a_domain_prefix_is_refused() {
        let d = cache().finalizer("cleanup");
        let err = check(&d).unwrap_err();
        assert!(err.to_string().contains("domain prefix"), "{err}");
    }
}
