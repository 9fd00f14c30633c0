//! Resolving the kinds a guest declares against the API server.
//!
//! A guest names kinds (group, version, kind); the host needs their plural
//! resource names and scope. Discovery is the only reliable source:
//! guessing plurals breaks on kinds like `NetworkPolicy`, and a declared
//! scope that disagrees with the server is a guest bug worth refusing early.

use kube::Client;
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::{Scope, pinned_kind};

use crate::model::{Description, KindRef};

/// A kind resolved by discovery.
#[derive(Clone, Debug)]
pub struct ResolvedKind {
    /// The declared kind.
    pub kind: KindRef,
    /// Group, version, kind and plural as the server serves them.
    pub resource: ApiResource,
    /// Whether the server says it is namespaced.
    pub namespaced: bool,
}

/// All kinds of one guest, resolved.
#[derive(Clone, Debug)]
pub struct ResolvedKinds {
    /// The parent kind.
    pub primary: ResolvedKind,
    /// The child kinds, in declaration order.
    pub children: Vec<ResolvedKind>,
}

/// Why the guest's kinds cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server does not serve the kind.
    #[error("kind {kind} is not served by the API server: {source}")]
    NotServed {
        /// The kind.
        kind: KindRef,
        /// The discovery error.
        source: kube::Error,
    },
    /// Declared scope disagrees with discovery.
    #[error("kind {kind} is declared {declared} but the API server serves it {actual}")]
    ScopeMismatch {
        /// The kind.
        kind: KindRef,
        /// What the guest declared.
        declared: &'static str,
        /// What discovery says.
        actual: &'static str,
    },
}

/// Resolves every kind of `description`.
pub async fn resolve(client: &Client, description: &Description) -> Result<ResolvedKinds, Error> {
    // One discovery request per kind, all at once: a swap waits for the
    // slowest, not for the sum.
    let (primary, resolved) = futures::try_join!(
        resolve_one(client, &description.primary),
        futures::future::try_join_all(
            description
                .children
                .iter()
                .map(|child| resolve_one(client, &child.kind))
        ),
    )?;
    let mut children = Vec::with_capacity(description.children.len());
    for (child, resolved) in description.children.iter().zip(resolved) {
        if resolved.namespaced == child.cluster_scoped {
            return Err(Error::ScopeMismatch {
                kind: child.kind.clone(),
                declared: scope_name(!child.cluster_scoped),
                actual: scope_name(resolved.namespaced),
            });
        }
        children.push(resolved);
    }
    Ok(ResolvedKinds { primary, children })
}

async fn resolve_one(client: &Client, kind: &KindRef) -> Result<ResolvedKind, Error> {
    let gvk = GroupVersionKind::gvk(&kind.group, &kind.version, &kind.kind);
    let (resource, caps) = pinned_kind(client, &gvk)
        .await
        .map_err(|source| Error::NotServed {
            kind: kind.clone(),
            source,
        })?;
    Ok(ResolvedKind {
        kind: kind.clone(),
        resource,
        namespaced: caps.scope == Scope::Namespaced,
    })
}

fn scope_name(namespaced: bool) -> &'static str {
    if namespaced {
        "namespaced"
    } else {
        "cluster-scoped"
    }
}
