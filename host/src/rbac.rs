//! `wasmop rbac`: the least-privilege ClusterRole for a set of guests.
//!
//! Exactly what the host does on the guests' behalf and nothing else:
//! - primary kind: get, list, watch; `patch` on `<plural>/status` (status
//!   is written by server-side apply); `update` on `<plural>/finalizers`
//!   (the API server requires it to set `blockOwnerDeletion` on children);
//!   and, only for guests that declare a finalizer, `patch` on the primary
//!   kind itself, since adding and removing a finalizer is a metadata patch;
//! - child kinds: get, list, watch, create, patch, delete;
//! - events.k8s.io events: create, patch;
//! - core configmaps: get, list, watch (the guest list and the module
//!   ConfigMaps it references).

use std::collections::{BTreeMap, BTreeSet};

use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

use crate::model::{Description, KindRef};

/// The plural resource name of a kind. Offline there is no discovery, so
/// this uses kube's English pluralisation, which is right for the built-in
/// kinds and for CRDs that follow the convention (`Cache` → `caches`).
fn plural(kind: &KindRef) -> String {
    ApiResource::from_gvk(&GroupVersionKind::gvk(
        &kind.group,
        &kind.version,
        &kind.kind,
    ))
    .plural
}

/// Builds the ClusterRole named `name` for `descriptions`.
pub fn cluster_role(name: &str, descriptions: &[Description]) -> Value {
    let mut grants: BTreeMap<(String, String), BTreeSet<&'static str>> = BTreeMap::new();
    let mut grant = |group: &str, resource: String, verbs: &[&'static str]| {
        grants
            .entry((group.to_string(), resource))
            .or_default()
            .extend(verbs);
    };
    for d in descriptions {
        let p = plural(&d.primary);
        grant(&d.primary.group, p.clone(), &["get", "list", "watch"]);
        grant(&d.primary.group, format!("{p}/status"), &["patch"]);
        grant(&d.primary.group, format!("{p}/finalizers"), &["update"]);
        if d.finalizer.is_some() {
            grant(&d.primary.group, p.clone(), &["patch"]);
        }
        for c in &d.children {
            grant(
                &c.kind.group,
                plural(&c.kind),
                &["get", "list", "watch", "create", "patch", "delete"],
            );
        }
    }
    grant("events.k8s.io", "events".into(), &["create", "patch"]);
    grant("", "configmaps".into(), &["get", "list", "watch"]);

    let rules: Vec<Value> = grants
        .into_iter()
        .map(|((group, resource), verbs)| {
            json!({"apiGroups": [group], "resources": [resource], "verbs": verbs.into_iter().collect::<Vec<_>>()})
        })
        .collect();
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "wasmop"}},
        "rules": rules,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ChildKind;

    #[test]
    fn the_role_grants_exactly_what_the_host_uses() {
        let d = Description {
            primary: KindRef::new("apps.example.com", "v1alpha1", "Cache"),
            children: vec![
                ChildKind {
                    kind: KindRef::new("apps", "v1", "Deployment"),
                    cluster_scoped: false,
                },
                ChildKind {
                    kind: KindRef::new("", "v1", "ConfigMap"),
                    cluster_scoped: false,
                },
            ],
            finalizer: Some("apps.example.com/cleanup".into()),
        };
        let role = cluster_role("wasmop", &[d]);
        let rules = role["rules"].as_array().unwrap();
        let find = |g: &str, r: &str| {
            rules
                .iter()
                .find(|x| x["apiGroups"][0] == g && x["resources"][0] == r)
                .map(|x| x["verbs"].clone())
        };
        assert_eq!(
            find("apps.example.com", "caches").unwrap(),
            json!(["get", "list", "patch", "watch"])
        );
        assert_eq!(
            find("apps.example.com", "caches/status").unwrap(),
            json!(["patch"])
        );
        assert_eq!(
            find("apps.example.com", "caches/finalizers").unwrap(),
            json!(["update"])
        );
        assert_eq!(
            find("apps", "deployments").unwrap(),
            json!(["create", "delete", "get", "list", "patch", "watch"])
        );
        // ConfigMap is both a child kind and the guest list source: the union.
        assert_eq!(
            find("", "configmaps").unwrap(),
            json!(["create", "delete", "get", "list", "patch", "watch"])
        );
        assert_eq!(
            find("events.k8s.io", "events").unwrap(),
            json!(["create", "patch"])
        );
        assert_eq!(rules.len(), 6);
        assert!(
            rules
                .iter()
                .all(|r| r["verbs"].as_array().unwrap().iter().all(|v| v != "*"))
        );
    }
}
