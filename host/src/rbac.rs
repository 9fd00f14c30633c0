//! `wasmop rbac`: the least-privilege roles for a set of guests.
//!
//! Exactly what the host does on the guests' behalf and nothing else. A
//! ClusterRole (parents and children may live in any namespace):
//! - primary kind: get, list, watch; `patch` on `<plural>/status` (status
//!   is written by server-side apply); `update` on `<plural>/finalizers`
//!   (the API server requires it to set `blockOwnerDeletion` on children);
//!   and, only for guests that declare a finalizer, `patch` on the primary
//!   kind itself, since adding and removing a finalizer is a metadata patch;
//! - the primary kind's CustomResourceDefinition: `get`, by name only (the
//!   host checks that a CRD serves the kind before it starts the guest);
//! - child kinds: get, list, watch, create, patch, delete;
//! - related kinds: get, list, watch, nothing more (the host never writes
//!   them);
//! - events.k8s.io events: create, patch.
//!
//! And a Role in the guest list's namespace: configmaps get, list, watch
//! (the guest list and the module ConfigMaps it names), nothing
//! cluster-wide; the rollout status ConfigMap beside the list (`create`,
//! which Kubernetes cannot limit by name, and `patch` on that one name); and the Leases of leader election (the host's, each guest's
//! or shard's, each replica's, whose identity is not known ahead): create,
//! get, list, watch, patch, update, in that namespace only; and `get` on the guest
//! list's pull Secrets by name (`--pull-secret`), none without. Every description is checked as the host checks it when a
//! module loads, so no wildcard and no built-in primary kind ever reaches a
//! rule; a rule that grants Secrets, RBAC objects or a cluster-scoped kind
//! carries a comment naming the guests that ask for it.
//!
//! With `--guest-identity impersonate` the same rules are split by guest:
//! each guest's rules go to its own ClusterRole, bound to its
//! ServiceAccount `wasmop-guest-<guest>` in the guest list's namespace,
//! which the guest's requests impersonate ([`impersonating_roles`]). The
//! host's ClusterRole keeps only the webhook configurations and the
//! converted CRDs it writes itself, and its Role adds its own Events (about
//! the guest list) and `impersonate` on those ServiceAccounts by name.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use kube::core::{ApiResource, GroupVersionKind};

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

/// One guest, named, as `wasmop rbac` sees it.
#[derive(Clone, Debug)]
pub struct GuestRbac {
    /// The guest's name (its file stem).
    pub name: String,
    /// What it describes.
    pub description: Description,
    /// Whether its module exports `admit` (the host writes its webhook
    /// configurations).
    pub admits: bool,
    /// Whether its module exports `convert` (the host sets its CRD's
    /// conversion).
    pub converts: bool,
    /// The namespaces its guest list entry confines it to (empty: every
    /// namespace).
    pub namespaces: Vec<String>,
    /// Whether it is a Metacontroller decorator, whose primary kind is its
    /// targets' (labels and annotations patched, any kind).
    pub decorates: bool,
}

/// Why the roles cannot be printed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A rule would hold a wildcard (a description that passed the checks
    /// cannot give one; this is the last line of defence).
    #[error("refusing to print a wildcard rule for {0}")]
    Wildcard(String),
}

#[derive(Default)]
struct Rule {
    verbs: BTreeSet<&'static str>,
    resource_names: BTreeSet<String>,
    notes: BTreeSet<String>,
}

/// Where the host's own objects live: the guest list's namespace and the
/// leader-election Lease's name.
#[derive(Clone, Copy, Debug)]
pub struct HostObjects<'a> {
    /// The host's ServiceAccount (in the guest list's namespace), bound to
    /// the host's roles.
    pub account: &'a str,
    /// The guest list's namespace (the Role's).
    pub namespace: &'a str,
    /// The Lease's name.
    pub lease: &'a str,
    /// The guest list's name: the host writes the ConfigMap
    /// `<list>-status` beside it.
    pub list: &'a str,
    /// The guest list's `pullSecret`s, which the host reads.
    pub pull_secrets: &'a [String],
    /// The webhooks' certificate Secret (`--webhook-cert-secret`) in the
    /// guest list's namespace, which the host reads or creates.
    pub webhook_cert_secret: Option<&'a str>,
}

/// The roles for `guests` when every guest acts under the host's identity
/// (`--guest-identity host`): a ClusterRole `name` with every guest's
/// rules and a Role `name` in the guest list's namespace, as YAML
/// documents.
pub fn roles(name: &str, host: HostObjects<'_>, guests: &[GuestRbac]) -> Result<String, Error> {
    let mut out = cluster_role(name, &guest_rules(guests), &webhook_rules(guests))?;
    out.push_str("---\n");
    out.push_str(&host_role(name, host, ""));
    out.push_str(&host_identity(name, host));
    Ok(out)
}

/// The host's ServiceAccount and its bindings to the ClusterRole and the
/// Role `name`: with the roles, a working install.
fn host_identity(name: &str, host: HostObjects<'_>) -> String {
    let (account, namespace) = (host.account, host.namespace);
    let subject = format!(
        "subjects:\n  - kind: ServiceAccount\n    name: {account}\n    namespace: {namespace}\n"
    );
    format!(
        "---\n# The host's identity, bound to the roles above\n\
         apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: {account}\n  namespace: {namespace}\n  labels:\n    app.kubernetes.io/name: wasmop\n\
         ---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: {name}\n  labels:\n    app.kubernetes.io/name: wasmop\n\
         roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: {name}\n{subject}\
         ---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: {name}\n  namespace: {namespace}\n  labels:\n    app.kubernetes.io/name: wasmop\n\
         roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: {name}\n{subject}"
    )
}

/// The roles for `guests` when each guest impersonates its own
/// ServiceAccount (`--guest-identity impersonate`): per guest, the
/// ServiceAccount `wasmop-guest-<guest>` in the guest list's namespace, a
/// ClusterRole `<name>-guest-<guest>` with that guest's rules alone and a
/// ClusterRoleBinding of the two; for the host, a ClusterRole `name` with
/// what the host does itself cluster-wide (webhook configurations, the
/// guests' CRDs: kind claims and conversion) and a Role `name` with the guest list's objects, its own
/// Events and `impersonate` on exactly those ServiceAccounts.
pub fn impersonating_roles(
    name: &str,
    host: HostObjects<'_>,
    guests: &[GuestRbac],
) -> Result<String, Error> {
    let own: BTreeMap<(String, String), Rule> = BTreeMap::new();
    let mut out = cluster_role(name, &own, &webhook_rules(guests))?;
    // Modules under one name are one guest's versions: one identity.
    let mut by_name: BTreeMap<&str, Vec<GuestRbac>> = BTreeMap::new();
    for guest in guests {
        by_name.entry(&guest.name).or_default().push(guest.clone());
    }
    let accounts: Vec<String> = by_name
        .keys()
        .map(|name| crate::client::guest_service_account(name))
        .collect();
    let _ = write!(
        out,
        "---\n{}",
        host_role(
            name,
            host,
            &format!(
                "  # The host's own Events (about the guest list)\n\
                 \x20 - apiGroups: [events.k8s.io]\n    resources: [events]\n    verbs: [create, patch]\n\
                 \x20 # Each guest's requests impersonate its ServiceAccount, and only those\n\
                 \x20 - apiGroups: [\"\"]\n    resources: [serviceaccounts]\n    resourceNames: [{}]\n    verbs: [impersonate]\n",
                accounts.join(", ")
            )
        )
    );
    for ((guest, versions), account) in by_name.iter().zip(&accounts) {
        let role = format!("{name}-guest-{guest}");
        let namespace = host.namespace;
        let labels = format!(
            "  labels:\n    app.kubernetes.io/name: wasmop\n    wasmop.dev/guest: {guest:?}\n"
        );
        let subject = format!(
            "subjects:\n  - kind: ServiceAccount\n    name: {account}\n    namespace: {namespace}\n"
        );
        let _ = write!(
            out,
            "---\n# Guest {guest:?}: the identity its requests carry, and what it may do\n\
             apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: {account}\n  namespace: {namespace}\n{labels}---\n"
        );
        let rules = guest_rules(versions);
        let confined: BTreeSet<&str> = versions
            .iter()
            .flat_map(|v| &v.namespaces)
            .map(String::as_str)
            .collect();
        // A guest of every namespace: one ClusterRole and its binding. A
        // guest confined to namespaces: the API server itself keeps it
        // there, a Role and RoleBinding in each, and a ClusterRole with
        // only what has no namespace (its CRD, cluster-scoped children).
        let (cluster, namespaced) = if confined.is_empty() {
            (rules, BTreeMap::new())
        } else {
            let cluster_scoped = cluster_scoped_resources(versions);
            rules
                .into_iter()
                .partition(|(key, _)| cluster_scoped.contains(key))
        };
        out.push_str(&cluster_role(&role, &cluster, "")?);
        let _ = write!(
            out,
            "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: {role}\n{labels}\
             roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: {role}\n{subject}"
        );
        for scope in &confined {
            out.push_str("---\n");
            out.push_str(&namespaced_role(&role, scope, &namespaced)?);
            let _ = write!(
                out,
                "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: {role}\n  namespace: {scope}\n{labels}\
                 roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: {role}\n{subject}"
            );
        }
    }
    out.push_str(&host_identity(name, host));
    Ok(out)
}

/// The resources of `guests`' rules that have no namespace: CRDs, and the
/// child kinds they declare cluster-scoped.
fn cluster_scoped_resources(guests: &[GuestRbac]) -> BTreeSet<(String, String)> {
    let mut out: BTreeSet<(String, String)> = guests
        .iter()
        .flat_map(|g| &g.description.children)
        .filter(|c| c.cluster_scoped)
        .map(|c| (c.kind.group.clone(), plural(&c.kind)))
        .collect();
    out.insert((
        "apiextensions.k8s.io".to_owned(),
        "customresourcedefinitions".to_owned(),
    ));
    out
}

/// The CRDs of the guests that convert, whose conversion the host writes.
fn converted_crds(guests: &[GuestRbac]) -> BTreeSet<String> {
    guests
        .iter()
        .filter(|g| g.converts)
        .map(|g| crd_name(&g.description.primary))
        .collect()
}

fn crd_name(kind: &KindRef) -> String {
    format!("{}.{}", plural(kind), kind.group)
}

/// What the host does on `guests`' behalf: their parents, children,
/// related objects, CRDs (by name) and Events.
fn guest_rules(guests: &[GuestRbac]) -> BTreeMap<(String, String), Rule> {
    let mut rules: BTreeMap<(String, String), Rule> = BTreeMap::new();
    let mut grant = |group: &str, resource: String, verbs: &[&'static str]| {
        rules
            .entry((group.to_string(), resource))
            .or_default()
            .verbs
            .extend(verbs);
    };
    let mut notes: Vec<((String, String), String)> = Vec::new();
    let mut crds: BTreeSet<String> = BTreeSet::new();
    for guest in guests {
        let d = &guest.description;
        let p = plural(&d.primary);
        grant(&d.primary.group, p.clone(), &["get", "list", "watch"]);
        grant(&d.primary.group, format!("{p}/status"), &["patch"]);
        grant(&d.primary.group, format!("{p}/finalizers"), &["update"]);
        if d.finalizer.is_some() || guest.decorates {
            grant(&d.primary.group, p.clone(), &["patch"]);
        }
        if guest.decorates {
            notes.push((
                (d.primary.group.clone(), p.clone()),
                format!(
                    "the targets of decorator {:?}: their labels and annotations",
                    guest.name
                ),
            ));
        }
        // A decorator's built-in target kind has no CRD to read or claim.
        if !crate::validate::description::is_builtin_group(&d.primary.group) {
            grant(
                "apiextensions.k8s.io",
                "customresourcedefinitions".into(),
                &["get"],
            );
            crds.insert(crd_name(&d.primary));
        }
        for c in &d.children {
            let resource = plural(&c.kind);
            if let Some(what) = sensitive(&c.kind, c.cluster_scoped) {
                notes.push((
                    (c.kind.group.clone(), resource.clone()),
                    format!("{what}: asked for by guest {:?}", guest.name),
                ));
            }
            grant(
                &c.kind.group,
                resource,
                &["get", "list", "watch", "create", "patch", "delete"],
            );
        }
        for r in &d.related {
            let resource = plural(&r.kind);
            if let Some(what) = sensitive(&r.kind, false) {
                notes.push((
                    (r.kind.group.clone(), resource.clone()),
                    format!("{what}: read (a related kind) by guest {:?}", guest.name),
                ));
            }
            grant(&r.kind.group, resource, &["get", "list", "watch"]);
        }
    }
    grant("events.k8s.io", "events".into(), &["create", "patch"]);
    for (key, note) in notes {
        if let Some(rule) = rules.get_mut(&key) {
            rule.notes.insert(note);
        }
    }
    if let Some(rule) = rules.get_mut(&(
        "apiextensions.k8s.io".to_owned(),
        "customresourcedefinitions".to_owned(),
    )) {
        rule.resource_names = crds;
    }
    rules
}

/// What the host itself writes for `guests`: the webhook configurations of
/// the guests that admit, by name (create cannot be limited to names), and
/// the guests' CRDs, by name, for the claims on their kinds (`claims`) and
/// the conversion of those whose guests convert; as rules of a ClusterRole.
fn webhook_rules(guests: &[GuestRbac]) -> String {
    let webhook_configs: BTreeSet<String> = guests
        .iter()
        .filter(|g| g.admits)
        .map(|g| crate::webhook::config_name(&g.name))
        .collect();
    let converted_crds = converted_crds(guests);
    let mut extra = String::new();
    if !webhook_configs.is_empty() {
        let names: Vec<_> = webhook_configs.iter().map(String::as_str).collect();
        let _ = write!(
            extra,
            "  # Webhook configurations of the guests that admit (wasmop-<guest>)\n\
             \x20 - apiGroups: [admissionregistration.k8s.io]\n    resources: [mutatingwebhookconfigurations, validatingwebhookconfigurations]\n    verbs: [create]\n\
             \x20 - apiGroups: [admissionregistration.k8s.io]\n    resources: [mutatingwebhookconfigurations, validatingwebhookconfigurations]\n    resourceNames: [{}]\n    verbs: [delete, get, patch]\n",
            names.join(", ")
        );
    }
    let crds: BTreeSet<String> = guests
        .iter()
        .filter(|g| !crate::validate::description::is_builtin_group(&g.description.primary.group))
        .map(|g| crd_name(&g.description.primary))
        .filter(|name| !name.ends_with('.'))
        .collect();
    if !crds.is_empty() {
        let names: Vec<_> = crds.iter().map(String::as_str).collect();
        let what = if converted_crds.is_empty() {
            "the claims on their kinds (claims.wasmop.dev)"
        } else {
            "the claims on their kinds (claims.wasmop.dev) and the conversion of those whose guests convert"
        };
        let _ = write!(
            extra,
            "  # The guests' CRDs: {what}\n\
             \x20 - apiGroups: [apiextensions.k8s.io]\n    resources: [customresourcedefinitions]\n    resourceNames: [{}]\n    verbs: [get, patch]\n",
            names.join(", ")
        );
    }
    extra
}

/// A Role `name` in `namespace` with `rules`.
fn namespaced_role(
    name: &str,
    namespace: &str,
    rules: &BTreeMap<(String, String), Rule>,
) -> Result<String, Error> {
    let mut out = format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: {name}\n  namespace: {namespace}\n  labels:\n    app.kubernetes.io/name: wasmop\n"
    );
    write_rules(&mut out, rules, "")?;
    Ok(out)
}

/// A ClusterRole `name` with `rules` and then the rules written in `extra`.
fn cluster_role(
    name: &str,
    rules: &BTreeMap<(String, String), Rule>,
    extra: &str,
) -> Result<String, Error> {
    let mut out = format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: {name}\n  labels:\n    app.kubernetes.io/name: wasmop\n"
    );
    write_rules(&mut out, rules, extra)?;
    Ok(out)
}

/// `rules:` with `rules` and then the rules written in `extra`.
fn write_rules(
    out: &mut String,
    rules: &BTreeMap<(String, String), Rule>,
    extra: &str,
) -> Result<(), Error> {
    if rules.is_empty() && extra.is_empty() {
        out.push_str("rules: []\n");
        return Ok(());
    }
    out.push_str("rules:\n");
    for ((group, resource), rule) in rules {
        if group.contains('*') || resource.contains('*') {
            return Err(Error::Wildcard(format!("{group}/{resource}")));
        }
        for note in &rule.notes {
            let _ = writeln!(out, "  # {note}");
        }
        let _ = writeln!(out, "  - apiGroups: [{}]", quote(group));
        let _ = writeln!(out, "    resources: [{resource}]");
        if !rule.resource_names.is_empty() {
            let names: Vec<_> = rule.resource_names.iter().map(String::as_str).collect();
            let _ = writeln!(out, "    resourceNames: [{}]", names.join(", "));
        }
        let verbs: Vec<_> = rule.verbs.iter().copied().collect();
        let _ = writeln!(out, "    verbs: [{}]", verbs.join(", "));
    }
    out.push_str(extra);
    Ok(())
}

/// The Role `name` in the guest list's namespace: the guest list and its
/// module ConfigMaps, the rollout status beside it, the leader-election
/// Lease, the pull and certificate Secrets, then the rules in `extra`.
fn host_role(name: &str, host: HostObjects<'_>, extra: &str) -> String {
    let HostObjects {
        namespace,
        lease,
        list,
        pull_secrets,
        webhook_cert_secret,
        ..
    } = host;
    let mut out = String::new();
    let status = crate::rollout::record::status_name(list);
    let _ = write!(
        out,
        "# The guest list and the module ConfigMaps it names, the rollout status beside\n\
         # the list, and the leader-election Lease, in the guest list's namespace only.\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: {name}\n  namespace: {namespace}\n  labels:\n    app.kubernetes.io/name: wasmop\nrules:\n\
         \x20 - apiGroups: [\"\"]\n    resources: [configmaps]\n    verbs: [get, list, watch]\n\
         \x20 # The rollout status ConfigMap: created once (a create cannot be limited by\n\
         \x20 # name), then patched by name only\n\
         \x20 - apiGroups: [\"\"]\n    resources: [configmaps]\n    verbs: [create]\n\
         \x20 - apiGroups: [\"\"]\n    resources: [configmaps]\n    resourceNames: [{status}]\n    verbs: [patch]\n\
         \x20 # The Leases of leader election: the host's ({lease}), each guest's or shard's\n\
         \x20 # ({lease}-<guest>[-<k>]) and each replica's ({lease}-replica-<identity>, an\n\
         \x20 # identity not known ahead), all read from one watch: in this namespace only\n\
         \x20 - apiGroups: [coordination.k8s.io]\n    resources: [leases]\n    verbs: [create, get, list, patch, update, watch]\n"
    );
    if !pull_secrets.is_empty() {
        let mut names: Vec<&str> = pull_secrets.iter().map(String::as_str).collect();
        names.sort_unstable();
        names.dedup();
        let _ = write!(
            out,
            "  # Secrets: the guest list's pull Secrets, read by the host, by name only\n\
             \x20 - apiGroups: [\"\"]\n    resources: [secrets]\n    resourceNames: [{}]\n    verbs: [get]\n",
            names.join(", ")
        );
    }
    if let Some(secret) = webhook_cert_secret {
        let _ = write!(
            out,
            "  # Secrets: the webhooks' certificate, read (or created, when absent) by the host\n\
             \x20 - apiGroups: [\"\"]\n    resources: [secrets]\n    verbs: [create]\n\
             \x20 - apiGroups: [\"\"]\n    resources: [secrets]\n    resourceNames: [{secret}]\n    verbs: [get]\n"
        );
    }
    out.push_str(extra);
    out
}

/// What makes a child kind worth a comment: Secrets (their data), RBAC
/// objects (privilege), cluster-scoped kinds (reach beyond a namespace).
fn sensitive(kind: &KindRef, cluster_scoped: bool) -> Option<&'static str> {
    if kind.group.is_empty() && kind.kind == "Secret" {
        Some("Secrets")
    } else if kind.group == "rbac.authorization.k8s.io" {
        Some("RBAC objects")
    } else if cluster_scoped {
        Some("a cluster-scoped kind")
    } else {
        None
    }
}

fn quote(group: &str) -> String {
    if group.is_empty() {
        "\"\"".to_owned()
    } else {
        group.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ChildKind;
    use k8s_openapi::api::rbac::v1::{ClusterRole, Role};

    const HOST: HostObjects<'static> = HostObjects {
        account: "wasmop",
        pull_secrets: &[],
        webhook_cert_secret: None,
        namespace: "wasmop-system",
        lease: "wasmop",
        list: "wasmop-guests",
    };

    #[test]
    fn pull_secrets_are_read_by_name_in_the_list_namespace_only() {
        let secrets = ["regcred".to_owned(), "other".to_owned()];
        let host = HostObjects {
            pull_secrets: &secrets,
            ..HOST
        };
        let text = roles("wasmop", host, &[cache()]).unwrap();
        let (_, role) = parse(&text);
        let rules = role.rules.unwrap();
        let secret_rule = rules
            .iter()
            .find(|r| {
                r.resources
                    .as_ref()
                    .is_some_and(|r| r.contains(&"secrets".to_owned()))
            })
            .unwrap();
        assert_eq!(secret_rule.verbs, ["get"]);
        assert_eq!(
            secret_rule.resource_names.as_deref(),
            Some(&["other".to_owned(), "regcred".to_owned()][..])
        );
        let (_, without) = parse(&roles("wasmop", HOST, &[cache()]).unwrap());
        assert!(without.rules.unwrap().iter().all(|r| {
            r.resources
                .as_ref()
                .is_none_or(|r| !r.contains(&"secrets".to_owned()))
        }));
    }

    fn cache() -> GuestRbac {
        GuestRbac {
            name: "cache-operator".into(),
            description: Description::new(KindRef::new("apps.example.com", "v1alpha1", "Cache"))
                .child(ChildKind::namespaced(KindRef::new(
                    "apps",
                    "v1",
                    "Deployment",
                )))
                .child(ChildKind::namespaced(KindRef::new("", "v1", "ConfigMap")))
                .finalizer("apps.example.com/cleanup"),
            admits: false,
            converts: false,
            namespaces: Vec::new(),
            decorates: false,
        }
    }

    fn parse(text: &str) -> (ClusterRole, Role) {
        let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(text).unwrap();
        (
            serde_json::from_value(docs[0].clone()).unwrap(),
            serde_json::from_value(docs[1].clone()).unwrap(),
        )
    }

    #[test]
    fn a_decorator_patches_its_built_in_targets_and_reads_no_crd_for_them() {
        let exposer = GuestRbac {
            name: "exposer".into(),
            description: Description::new(KindRef::new("apps", "v1", "Deployment"))
                .child(ChildKind::namespaced(KindRef::new("", "v1", "Service"))),
            admits: false,
            converts: false,
            namespaces: Vec::new(),
            decorates: true,
        };
        let text = roles("wasmop", HOST, &[exposer]).unwrap();
        let (role, _) = parse(&text);
        let rules = role.rules.unwrap();
        let deployments = rules
            .iter()
            .find(|r| r.resources.as_deref() == Some(&["deployments".to_owned()][..]))
            .unwrap();
        assert_eq!(deployments.verbs, ["get", "list", "patch", "watch"]);
        assert!(
            text.contains("# the targets of decorator \"exposer\": their labels and annotations"),
            "{text}"
        );
        assert!(!text.contains("customresourcedefinitions"), "{text}");
    }

    #[test]
    fn related_kinds_are_only_read_and_related_secrets_are_named() {
        use crate::model::RelatedKind;
        let mut guest = cache();
        guest.description = guest.description.related(RelatedKind::name_at(
            KindRef::new("", "v1", "Secret"),
            "/spec/auth/secretRef/name",
        ));
        let text = roles("wasmop", HOST, &[guest]).unwrap();
        let (role, _) = parse(&text);
        let secrets: Vec<_> = role
            .rules
            .unwrap()
            .into_iter()
            .filter(|r| {
                r.resources
                    .as_ref()
                    .is_some_and(|r| r.contains(&"secrets".to_owned()))
            })
            .collect();
        assert_eq!(secrets.len(), 1);
        assert_eq!(secrets[0].verbs, ["get", "list", "watch"]);
        assert!(text.contains("# Secrets: read (a related kind) by guest \"cache-operator\"\n  - apiGroups: [\"\"]\n    resources: [secrets]"), "{text}");
    }

    #[test]
    fn the_roles_grant_exactly_what_the_host_uses() {
        let (role, list_role) = parse(&roles("wasmop", HOST, &[cache()]).unwrap());
        let rules = role.rules.unwrap();
        let find = |g: &str, r: &str| {
            rules
                .iter()
                .find(|x| {
                    x.api_groups.as_deref() == Some(&[g.to_owned()][..])
                        && x.resources.as_deref() == Some(&[r.to_owned()][..])
                })
                .map(|x| x.verbs.clone())
        };
        let verbs = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            find("apps.example.com", "caches").unwrap(),
            verbs(&["get", "list", "patch", "watch"])
        );
        assert_eq!(
            find("apps.example.com", "caches/status").unwrap(),
            verbs(&["patch"])
        );
        assert_eq!(
            find("apps.example.com", "caches/finalizers").unwrap(),
            verbs(&["update"])
        );
        assert_eq!(
            find("apps", "deployments").unwrap(),
            verbs(&["create", "delete", "get", "list", "patch", "watch"])
        );
        // The guest list's ConfigMaps are read in its namespace only.
        assert_eq!(
            find("", "configmaps").unwrap(),
            verbs(&["create", "delete", "get", "list", "patch", "watch"])
        );
        let crd = rules
            .iter()
            .find(|r| r.resources.as_deref() == Some(&["customresourcedefinitions".to_owned()][..]))
            .unwrap();
        assert_eq!(
            crd.resource_names.as_deref(),
            Some(&["caches.apps.example.com".to_owned()][..])
        );
        assert_eq!(crd.verbs, verbs(&["get"]));
        // The host claims the kind on its CRD, by name.
        let claims = rules
            .iter()
            .filter(|r| {
                r.resources.as_deref() == Some(&["customresourcedefinitions".to_owned()][..])
            })
            .nth(1)
            .unwrap();
        assert_eq!(claims.resource_names, crd.resource_names);
        assert_eq!(claims.verbs, verbs(&["get", "patch"]));
        assert_eq!(
            find("events.k8s.io", "events").unwrap(),
            verbs(&["create", "patch"])
        );
        assert_eq!(rules.len(), 8);
        assert_eq!(
            list_role.metadata.namespace.as_deref(),
            Some("wasmop-system")
        );
        assert_eq!(
            list_role.rules.unwrap()[0].verbs,
            verbs(&["get", "list", "watch"])
        );
    }

    #[test]
    fn secrets_rbac_and_cluster_scoped_kinds_carry_a_comment_naming_the_guest() {
        let guest = GuestRbac {
            name: "vault".into(),
            description: Description::new(KindRef::new("example.com", "v1", "Vault"))
                .child(ChildKind::namespaced(KindRef::new("", "v1", "Secret")))
                .child(ChildKind::namespaced(KindRef::new(
                    "rbac.authorization.k8s.io",
                    "v1",
                    "Role",
                )))
                .child(ChildKind::cluster_scoped(KindRef::new(
                    "",
                    "v1",
                    "Namespace",
                ))),
            admits: false,
            converts: false,
            namespaces: Vec::new(),
            decorates: false,
        };
        let text = roles("wasmop", HOST, &[guest]).unwrap();
        for note in [
            "# Secrets: asked for by guest \"vault\"",
            "# RBAC objects: asked for by guest \"vault\"",
            "# a cluster-scoped kind: asked for by guest \"vault\"",
        ] {
            assert!(text.contains(note), "{note} missing in:\n{text}");
        }
        assert!(!text.contains('*'));
    }

    #[test]
    fn webhooks_get_their_configurations_and_crd_by_name_and_the_certificate_secret() {
        let guest = GuestRbac {
            admits: true,
            converts: true,
            ..cache()
        };
        let host = HostObjects {
            webhook_cert_secret: Some("wasmop-webhook-tls"),
            ..HOST
        };
        let text = roles("wasmop", host, &[guest]).unwrap();
        let (cluster, role) = parse(&text);
        let rules = cluster.rules.unwrap();
        let named = rules
            .iter()
            .find(|r| {
                r.api_groups.as_deref() == Some(&["admissionregistration.k8s.io".to_owned()])
                    && r.resource_names.is_some()
            })
            .expect("named webhook rule");
        assert_eq!(
            named.resource_names.as_deref(),
            Some(&["wasmop-cache-operator".to_owned()][..])
        );
        assert_eq!(named.verbs, ["delete", "get", "patch"]);
        let crd_patch = rules
            .iter()
            .find(|r| {
                r.resources.as_deref() == Some(&["customresourcedefinitions".to_owned()])
                    && r.verbs == ["get", "patch"]
            })
            .expect("CRD patch rule");
        assert_eq!(
            crd_patch.resource_names.as_deref(),
            Some(&["caches.apps.example.com".to_owned()][..])
        );
        let secret = role
            .rules
            .unwrap()
            .into_iter()
            .find(|r| r.resource_names.as_deref() == Some(&["wasmop-webhook-tls".to_owned()][..]))
            .expect("certificate Secret rule");
        assert_eq!(secret.verbs, ["get"]);
        // A guest without the exports gets no webhook rule; the host may
        // still claim its kind on its CRD, by name.
        let plain = roles("wasmop", HOST, &[cache()]).unwrap();
        assert!(!plain.contains("admissionregistration") && !plain.contains("conversion"));
        assert!(plain.contains(
            "  # The guests' CRDs: the claims on their kinds (claims.wasmop.dev)\n  - apiGroups: [apiextensions.k8s.io]\n    resources: [customresourcedefinitions]\n    resourceNames: [caches.apps.example.com]\n    verbs: [get, patch]\n"
        ));
    }

    #[test]
    fn impersonation_gives_each_guest_its_own_account_and_the_host_only_its_own_work() {
        use k8s_openapi::api::core::v1::ServiceAccount;
        use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
        let vault = GuestRbac {
            name: "vault".into(),
            description: Description::new(KindRef::new("example.com", "v1", "Vault"))
                .child(ChildKind::namespaced(KindRef::new("", "v1", "Secret"))),
            admits: false,
            converts: true,
            namespaces: Vec::new(),
            decorates: false,
        };
        let mut v2 = cache();
        v2.description = v2
            .description
            .child(ChildKind::namespaced(KindRef::new("", "v1", "Service")));
        let text = impersonating_roles("wasmop", HOST, &[cache(), v2, vault]).unwrap();
        assert!(!text.contains('*'));
        let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).unwrap();
        let docs: Vec<_> = docs.into_iter().filter(|d| !d.is_null()).collect();
        let names: Vec<(&str, &str)> = docs
            .iter()
            .map(|d| {
                (
                    d["kind"].as_str().unwrap(),
                    d["metadata"]["name"].as_str().unwrap(),
                )
            })
            .collect();
        // Two modules under one name are one guest: one identity.
        assert_eq!(
            names,
            [
                ("ClusterRole", "wasmop"),
                ("Role", "wasmop"),
                ("ServiceAccount", "wasmop-guest-cache-operator"),
                ("ClusterRole", "wasmop-guest-cache-operator"),
                ("ClusterRoleBinding", "wasmop-guest-cache-operator"),
                ("ServiceAccount", "wasmop-guest-vault"),
                ("ClusterRole", "wasmop-guest-vault"),
                ("ClusterRoleBinding", "wasmop-guest-vault"),
                ("ServiceAccount", "wasmop"),
                ("ClusterRoleBinding", "wasmop"),
                ("RoleBinding", "wasmop"),
            ]
        );
        // The host: the guests' CRDs by name (claims, conversion), nothing
        // of the guests' kinds.
        let host: ClusterRole = serde_json::from_value(docs[0].clone()).unwrap();
        let host_rules = host.rules.unwrap();
        assert!(host_rules.iter().all(|r| r.api_groups.as_deref()
            == Some(&["apiextensions.k8s.io".to_owned()][..])
            && r.resource_names.as_deref()
                == Some(
                    &[
                        "caches.apps.example.com".to_owned(),
                        "vaults.example.com".to_owned()
                    ][..]
                )));
        let role: Role = serde_json::from_value(docs[1].clone()).unwrap();
        let rules = role.rules.unwrap();
        let impersonate = rules
            .iter()
            .find(|r| r.verbs == ["impersonate"])
            .expect("the impersonate rule");
        assert_eq!(
            impersonate.resources.as_deref(),
            Some(&["serviceaccounts".to_owned()][..])
        );
        assert_eq!(
            impersonate.resource_names.as_deref(),
            Some(
                &[
                    "wasmop-guest-cache-operator".to_owned(),
                    "wasmop-guest-vault".to_owned()
                ][..]
            )
        );
        assert!(
            rules
                .iter()
                .any(|r| r.api_groups.as_deref() == Some(&["events.k8s.io".to_owned()][..]))
        );
        // Each guest: its own rules (both versions' for the cache-operator),
        // none of the other's.
        let resources = |doc: &serde_json::Value| -> Vec<String> {
            let role: ClusterRole = serde_json::from_value(doc.clone()).unwrap();
            role.rules
                .unwrap()
                .into_iter()
                .flat_map(|r| r.resources.unwrap_or_default())
                .collect()
        };
        let cache_rules = resources(&docs[3]);
        assert!(cache_rules.contains(&"deployments".to_owned()));
        assert!(cache_rules.contains(&"services".to_owned()));
        assert!(!cache_rules.contains(&"secrets".to_owned()));
        assert!(!cache_rules.iter().any(|r| r.starts_with("vaults")));
        let vault_rules = resources(&docs[6]);
        assert!(vault_rules.contains(&"secrets".to_owned()));
        assert!(
            !vault_rules
                .iter()
                .any(|r| r == "deployments" || r.starts_with("caches"))
        );
        let account: ServiceAccount = serde_json::from_value(docs[2].clone()).unwrap();
        assert_eq!(account.metadata.namespace.as_deref(), Some("wasmop-system"));
        let binding: ClusterRoleBinding = serde_json::from_value(docs[4].clone()).unwrap();
        assert_eq!(binding.role_ref.name, "wasmop-guest-cache-operator");
        let subject = &binding.subjects.unwrap()[0];
        assert_eq!(
            (
                subject.kind.as_str(),
                subject.name.as_str(),
                subject.namespace.as_deref()
            ),
            (
                "ServiceAccount",
                "wasmop-guest-cache-operator",
                Some("wasmop-system")
            )
        );
    }

    #[test]
    fn a_guest_confined_to_namespaces_is_granted_roles_there_and_its_crd_alone_cluster_wide() {
        use k8s_openapi::api::rbac::v1::RoleBinding;
        let mut guest = cache();
        guest.namespaces = vec!["team-a".into(), "team-b".into()];
        let text = impersonating_roles("wasmop", HOST, &[guest]).unwrap();
        let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).unwrap();
        let docs: Vec<_> = docs.into_iter().filter(|d| !d.is_null()).collect();
        let named = |kind: &str, name: &str, namespace: Option<&str>| {
            docs.iter()
                .find(|d| {
                    d["kind"] == kind
                        && d["metadata"]["name"] == name
                        && d["metadata"]["namespace"].as_str() == namespace
                })
                .cloned()
                .unwrap_or_else(|| panic!("no {kind} {name} in {namespace:?}:\n{text}"))
        };
        let cluster: ClusterRole =
            serde_json::from_value(named("ClusterRole", "wasmop-guest-cache-operator", None))
                .unwrap();
        let cluster_rules = cluster.rules.unwrap();
        assert_eq!(cluster_rules.len(), 1, "{cluster_rules:?}");
        assert_eq!(
            cluster_rules[0].resources.as_deref(),
            Some(&["customresourcedefinitions".to_owned()][..])
        );
        for namespace in ["team-a", "team-b"] {
            let role: Role = serde_json::from_value(named(
                "Role",
                "wasmop-guest-cache-operator",
                Some(namespace),
            ))
            .unwrap();
            let resources: Vec<String> = role
                .rules
                .unwrap()
                .into_iter()
                .flat_map(|r| r.resources.unwrap_or_default())
                .collect();
            for resource in [
                "caches",
                "caches/status",
                "deployments",
                "configmaps",
                "events",
            ] {
                assert!(resources.contains(&resource.to_owned()), "{resources:?}");
            }
            let binding: RoleBinding = serde_json::from_value(named(
                "RoleBinding",
                "wasmop-guest-cache-operator",
                Some(namespace),
            ))
            .unwrap();
            assert_eq!(binding.role_ref.kind, "Role");
            let subject = &binding.subjects.unwrap()[0];
            assert_eq!(subject.name, "wasmop-guest-cache-operator");
            assert_eq!(subject.namespace.as_deref(), Some("wasmop-system"));
        }
        assert!(
            !docs
                .iter()
                .any(|d| d["kind"] == "Role" && d["metadata"]["namespace"] == "team-c")
        );
    }

    #[test]
    fn the_output_alone_is_a_working_install_of_the_host_identity() {
        use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleBinding};
        for text in [
            roles("wasmop", HOST, &[cache()]).unwrap(),
            impersonating_roles("wasmop", HOST, &[cache()]).unwrap(),
        ] {
            let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).unwrap();
            let docs: Vec<_> = docs.into_iter().filter(|d| !d.is_null()).collect();
            let account = docs
                .iter()
                .find(|d| d["kind"] == "ServiceAccount" && d["metadata"]["name"] == "wasmop")
                .expect("the host's ServiceAccount");
            assert_eq!(account["metadata"]["namespace"], "wasmop-system");
            let cluster: ClusterRoleBinding = serde_json::from_value(
                docs.iter()
                    .find(|d| {
                        d["kind"] == "ClusterRoleBinding" && d["metadata"]["name"] == "wasmop"
                    })
                    .unwrap()
                    .clone(),
            )
            .unwrap();
            assert_eq!(cluster.role_ref.name, "wasmop");
            let role: RoleBinding = serde_json::from_value(
                docs.iter()
                    .find(|d| d["kind"] == "RoleBinding" && d["metadata"]["name"] == "wasmop")
                    .unwrap()
                    .clone(),
            )
            .unwrap();
            assert_eq!(role.role_ref.kind, "Role");
            assert_eq!(role.subjects.unwrap()[0].name, "wasmop");
        }
    }
}
