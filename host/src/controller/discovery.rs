//! Resolving the kinds a guest declares against the API server.
//!
//! A guest names kinds (group, version, kind); the host needs their plural
//! resource names and scope. Discovery is the only reliable source:
//! guessing plurals breaks on kinds like `NetworkPolicy`, and a declared
//! scope that disagrees with the server is a guest bug worth refusing early.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::Api;
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
    /// The related kinds, in declaration order, with how each maps to
    /// parents and whether only metadata is watched.
    pub related: Vec<(ResolvedKind, crate::model::RelatedKind)>,
    /// Whether the primary kind's CRD converts between its versions with a
    /// webhook.
    pub converted_by_webhook: bool,
    /// The schema the primary kind's CRD gives `.status` in the declared
    /// version, as JSON, when it gives one.
    pub status_schema: Option<std::sync::Arc<serde_json::Value>>,
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
    /// No CustomResourceDefinition serves the primary kind (it is a
    /// built-in or aggregated API): a guest reconciles custom resources.
    #[error("primary kind {kind} is not served by a CustomResourceDefinition ({crd}): {reason}")]
    NotACustomResource {
        /// The kind.
        kind: KindRef,
        /// The CRD name looked for.
        crd: String,
        /// What the lookup said.
        reason: String,
    },
    /// The guest's identity may not watch a kind it declares.
    #[error(
        "kind {kind} cannot be watched by the guest's identity: it may not {verb} {resource}{where_}"
    )]
    NotWatchable {
        /// The kind.
        kind: KindRef,
        /// The verb refused (`list` or `watch`).
        verb: &'static str,
        /// The resource, `plural.group`.
        resource: String,
        /// ` in namespace <ns>`, or empty for every namespace.
        where_: String,
    },
    /// The access review itself failed.
    #[error("cannot tell whether the guest may watch {kind}: {source}")]
    AccessReview {
        /// The kind.
        kind: KindRef,
        /// The API error.
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
    let (primary, resolved, related) = futures::try_join!(
        resolve_one(client, &description.primary),
        futures::future::try_join_all(
            description
                .children
                .iter()
                .map(|child| resolve_one(client, &child.kind))
        ),
        futures::future::try_join_all(
            description
                .related
                .iter()
                .map(|related| resolve_one(client, &related.kind))
        ),
    )?;
    let (converted_by_webhook, status_schema) = served_by_a_crd(client, &primary).await?;
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
    // A related object maps to parents in its own namespace.
    if let Some(cluster) = related.iter().find(|r| !r.namespaced) {
        return Err(Error::ScopeMismatch {
            kind: cluster.kind.clone(),
            declared: "related (which must be namespaced)",
            actual: scope_name(false),
        });
    }
    let related = related
        .into_iter()
        .zip(description.related.iter().cloned())
        .collect();
    Ok(ResolvedKinds {
        primary,
        children,
        related,
        converted_by_webhook,
        status_schema,
    })
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

/// The name of the CustomResourceDefinition that serves `kind`:
/// `<plural>.<group>`.
pub fn crd_name(kind: &ResolvedKind) -> String {
    format!("{}.{}", kind.resource.plural, kind.resource.group)
}

/// Checks that a CustomResourceDefinition serves the primary kind in the
/// declared version, and tells whether it converts between its versions
/// with a webhook, and the schema of its `.status` in that version. Built-in
/// kinds are refused offline too (`validate::description`); this catches
/// aggregated APIs and groups that look custom but are not.
async fn served_by_a_crd(
    client: &Client,
    primary: &ResolvedKind,
) -> Result<(bool, Option<std::sync::Arc<serde_json::Value>>), Error> {
    // A built-in kind (a Metacontroller decorator's targets) has no CRD;
    // the description's checks let no other guest have one.
    if crate::validate::description::is_builtin_group(&primary.kind.group) {
        return Ok((false, None));
    }
    let crd = crd_name(primary);
    let refuse = |reason: String| Error::NotACustomResource {
        kind: primary.kind.clone(),
        crd: crd.clone(),
        reason,
    };
    let found = Api::<CustomResourceDefinition>::all(client.clone())
        .get_opt(&crd)
        .await
        .map_err(|e| refuse(e.to_string()))?
        .ok_or_else(|| refuse("no such CustomResourceDefinition".into()))?;
    let serves = found.spec.group == primary.kind.group
        && found.spec.names.kind == primary.kind.kind
        && found
            .spec
            .versions
            .iter()
            .any(|v| v.name == primary.kind.version && v.served);
    if serves {
        let status_schema = found
            .spec
            .versions
            .iter()
            .find(|v| v.name == primary.kind.version)
            .and_then(|v| v.schema.as_ref()?.open_api_v3_schema.as_ref())
            .and_then(|schema| schema.properties.as_ref()?.get("status"))
            .and_then(|status| serde_json::to_value(status).ok())
            .map(std::sync::Arc::new);
        Ok((
            found
                .spec
                .conversion
                .is_some_and(|c| c.strategy == "Webhook"),
            status_schema,
        ))
    } else {
        Err(refuse(format!(
            "it does not serve {} in version {}",
            primary.kind.kind, primary.kind.version
        )))
    }
}

fn scope_name(namespaced: bool) -> &'static str {
    if namespaced {
        "namespaced"
    } else {
        "cluster-scoped"
    }
}

/// Checks that `client` (the guest's, impersonating its identity when the
/// host runs guests under their own) may list and watch each of `kinds` in
/// `namespaces` (empty: every namespace), asking the API server with a
/// SelfSubjectAccessReview per kind, verb and namespace: what a new version
/// would watch is known to work before any watch starts.
pub async fn check_watchable<'a>(
    client: &Client,
    kinds: impl IntoIterator<Item = &'a ResolvedKind>,
    namespaces: &[String],
) -> Result<(), Error> {
    use k8s_openapi::api::authorization::v1::{
        ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
    };
    let reviews: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let everywhere = [String::new()];
    for kind in kinds {
        let scopes: &[String] = if kind.namespaced && !namespaces.is_empty() {
            namespaces
        } else {
            &everywhere
        };
        for namespace in scopes {
            for verb in ["list", "watch"] {
                let review = SelfSubjectAccessReview {
                    spec: SelfSubjectAccessReviewSpec {
                        resource_attributes: Some(ResourceAttributes {
                            group: Some(kind.resource.group.clone()),
                            resource: Some(kind.resource.plural.clone()),
                            verb: Some(verb.to_owned()),
                            namespace: Some(namespace.clone()).filter(|ns| !ns.is_empty()),
                            ..ResourceAttributes::default()
                        }),
                        ..SelfSubjectAccessReviewSpec::default()
                    },
                    ..SelfSubjectAccessReview::default()
                };
                let answer = reviews
                    .create(&kube::api::PostParams::default(), &review)
                    .await
                    .map_err(|source| Error::AccessReview {
                        kind: kind.kind.clone(),
                        source,
                    })?;
                if !answer.status.is_some_and(|s| s.allowed) {
                    return Err(Error::NotWatchable {
                        kind: kind.kind.clone(),
                        verb,
                        resource: if kind.resource.group.is_empty() {
                            kind.resource.plural.clone()
                        } else {
                            format!("{}.{}", kind.resource.plural, kind.resource.group)
                        },
                        where_: if namespace.is_empty() {
                            String::new()
                        } else {
                            format!(" in namespace {namespace}")
                        },
                    });
                }
            }
        }
    }
    Ok(())
}
