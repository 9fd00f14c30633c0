//! Checks a guest's answer before anything reaches the API server.
//!
//! All or nothing: one bad child, a bad status, a bad event or a bad keep
//! and nothing from that reconcile is applied. The checks keep a guest
//! inside its lane: only declared kinds, only the parent's namespace, only
//! metadata the host can stamp ([`metadata`]), none of the host's own
//! objects, bounded events with well-formed reasons. What the host writes
//! beyond this (only children the parent controls) is decided against the
//! cluster, in `controller::apply`. [`description`] checks what a guest
//! describes when its module loads; [`names`] holds Kubernetes' name rules.

pub mod description;
pub mod metadata;
pub mod names;

use serde_json::{Map, Value};
use wasmop_contract::Reason;
use wasmop_contract::names::HOST_CONDITION;

use crate::model::{Description, Event, ObjectRef, ReconcileResponse};
use crate::protected::ProtectedObjects;

pub use wasmop_contract::names::GUEST_LABEL;

/// Events a guest message keeps: what Kubernetes allows in an Event note.
pub const MAX_EVENT_MESSAGE: usize = 1024;

/// A guest answer that broke a rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Violation {
    /// More children than the guest's limit.
    #[error("too many children: {count}, limit {limit}")]
    TooManyChildren {
        /// Returned.
        count: usize,
        /// Allowed.
        limit: usize,
    },
    /// A child is not valid JSON or not a JSON object.
    #[error("child #{index} is not a JSON object: {reason}")]
    InvalidJson {
        /// Position in the response.
        index: usize,
        /// Parser message.
        reason: String,
    },
    /// A child lacks apiVersion, kind or metadata.name.
    #[error("child #{index} is missing {field}")]
    MissingField {
        /// Position in the response.
        index: usize,
        /// The missing field.
        field: &'static str,
    },
    /// A child's kind was not declared by the guest's `describe`.
    #[error("child {name:?} has undeclared kind {api_version}/{kind}")]
    UndeclaredKind {
        /// Child name.
        name: String,
        /// Its apiVersion.
        api_version: String,
        /// Its kind.
        kind: String,
    },
    /// A namespaced child names another namespace.
    #[error(
        "child {kind}/{name} targets namespace {namespace:?}, only the parent's namespace {parent:?} is allowed"
    )]
    ForeignNamespace {
        /// Child kind.
        kind: String,
        /// Child name.
        name: String,
        /// Namespace the guest set.
        namespace: String,
        /// The parent's namespace.
        parent: String,
    },
    /// A namespaced child for a cluster-scoped parent.
    #[error("child {kind}/{name} is namespaced but the parent is cluster-scoped")]
    NamespacedChildOfClusterParent {
        /// Child kind.
        kind: String,
        /// Child name.
        name: String,
    },
    /// A namespaced child of a cluster-scoped parent that names no
    /// namespace.
    #[error(
        "child {kind}/{name} is namespaced and its parent is cluster-scoped: it must name its metadata.namespace"
    )]
    NoNamespaceUnderClusterParent {
        /// Its kind.
        kind: String,
        /// Its name.
        name: String,
    },
    /// A cluster-scoped child for a namespaced parent.
    #[error(
        "child {kind}/{name} is cluster-scoped but the parent is namespaced; Kubernetes cannot garbage-collect it through an ownerReference"
    )]
    ClusterChildOfNamespacedParent {
        /// Child kind.
        kind: String,
        /// Child name.
        name: String,
    },
    /// The child's metadata has a field or shape the host does not stamp.
    #[error("child {kind}/{name}: {source}")]
    Metadata {
        /// Child kind.
        kind: String,
        /// Child name.
        name: String,
        /// What is wrong.
        source: metadata::Error,
    },
    /// Not a valid Kubernetes object name.
    #[error("child {kind} has invalid name {name:?}: {reason}")]
    InvalidName {
        /// Child kind.
        kind: String,
        /// The name.
        name: String,
        /// Why.
        reason: &'static str,
    },
    /// Two children with the same kind and name.
    #[error("child {kind}/{name} appears twice")]
    Duplicate {
        /// Child kind.
        kind: String,
        /// Child name.
        name: String,
    },
    /// A Secret child that asks the cluster for a ServiceAccount's token,
    /// from a guest whose entry does not name ServiceAccount in
    /// `privilegedKinds`.
    #[error(
        "child Secret/{name} asks the cluster for a ServiceAccount's token ({how}); the guest list must name \"ServiceAccount\" in this guest's privilegedKinds"
    )]
    TokenSecret {
        /// The Secret's name.
        name: String,
        /// What asks for the token.
        how: String,
    },
    /// A child that is one of the host's own objects.
    #[error("child {kind}/{name} is the host's own object; no guest may write it")]
    Protected {
        /// Child kind.
        kind: String,
        /// Child name.
        name: String,
    },
    /// The status is not a JSON object.
    #[error("status is not a JSON object: {0}")]
    InvalidStatus(String),
    /// More events than the guest's limit.
    #[error("too many events: {count}, limit {limit}")]
    TooManyEvents {
        /// Returned.
        count: usize,
        /// Allowed.
        limit: usize,
    },
    /// An event reason that is not CamelCase of at most 128 characters.
    #[error("event reason {reason:?} {why}")]
    InvalidEventReason {
        /// The reason.
        reason: String,
        /// Why.
        why: &'static str,
    },
    /// More kept children than the guest's child limit.
    #[error("too many kept children: {count}, limit {limit}")]
    TooManyKept {
        /// Returned.
        count: usize,
        /// Allowed.
        limit: usize,
    },
    /// A child both kept and desired.
    #[error("{0} is both kept and desired")]
    KeptAndDesired(ObjectRef),
}

impl Violation {
    /// The reason for Events, conditions and metrics.
    pub fn reason(&self) -> Reason {
        match self {
            Self::Protected { .. } => Reason::ProtectedObject,
            _ => Reason::InvalidGuestResponse,
        }
    }
}

/// A child the guest wants, checked, with its kind declaration resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct DesiredChild {
    /// `apiVersion` of the child.
    pub api_version: String,
    /// `kind` of the child.
    pub kind: String,
    /// `metadata.name`.
    pub name: String,
    /// Whether the kind is cluster-scoped.
    pub cluster_scoped: bool,
    /// The namespace it is written to: the parent's, or the one it names
    /// under a cluster-scoped parent that may have namespaced children;
    /// `None` for a cluster-scoped child.
    pub namespace: Option<String>,
    /// The object as the guest returned it.
    pub object: Map<String, Value>,
}

/// A checked guest answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Validated {
    /// Desired children.
    pub children: Vec<DesiredChild>,
    /// Desired status, without the host's own condition.
    pub status: Option<Map<String, Value>>,
    /// Requested requeue delay in seconds.
    pub requeue_after_seconds: Option<u32>,
    /// Deletion path: cleanup done.
    pub finalized: bool,
    /// Events to record (messages cut to [`MAX_EVENT_MESSAGE`]).
    pub events: Vec<Event>,
    /// Observed children to leave as they are.
    pub keep: Vec<ObjectRef>,
}

/// Where the parent lives, for the namespace rules.
#[derive(Clone, Copy, Debug)]
pub struct ParentScope<'a> {
    /// The parent's namespace; `None` for a cluster-scoped parent.
    pub namespace: Option<&'a str>,
    /// A cluster-scoped parent may have namespaced children, each naming
    /// its namespace (Metacontroller's controllers); for every other
    /// guest a namespaced child needs a namespaced parent.
    pub namespaced_children: bool,
}

/// How much one answer may hold: the guest's limits on children and
/// Events (`runtime::Limits::bounds`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// Desired children, and kept ones, at most.
    pub max_children: usize,
    /// Events at most.
    pub max_events: usize,
    /// Whether a Secret child may ask for a ServiceAccount's token (the
    /// entry names `ServiceAccount` in `privilegedKinds`).
    pub service_account_tokens: bool,
}

/// The Secret types whose objects the cluster fills with a token.
pub const TOKEN_SECRET_TYPES: &[&str] = &[
    "kubernetes.io/service-account-token",
    "bootstrap.kubernetes.io/token",
];

/// What makes `object` (a Secret) ask the cluster for a token, if anything.
fn token_request(object: &Map<String, Value>) -> Option<String> {
    if let Some(kind) = object
        .get("type")
        .and_then(Value::as_str)
        .filter(|t| TOKEN_SECRET_TYPES.contains(t))
    {
        return Some(format!("type {kind}"));
    }
    object
        .get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(Value::as_object)
        .filter(|a| a.contains_key("kubernetes.io/service-account.name"))
        .map(|_| "the annotation kubernetes.io/service-account.name".to_owned())
}

/// What a guest's answer is checked against.
#[derive(Clone, Copy, Debug)]
pub struct Rules<'a> {
    /// What the guest declared.
    pub description: &'a Description,
    /// How much the answer may hold.
    pub bounds: Bounds,
    /// Where the parent lives.
    pub parent: ParentScope<'a>,
    /// The host's own objects.
    pub protected: &'a ProtectedObjects,
}

/// Checks `raw` against the rules above. Returns every child parsed, or the
/// first violation.
pub fn validate(rules: Rules<'_>, raw: ReconcileResponse) -> Result<Validated, Violation> {
    let ReconcileResponse {
        children: raw_children,
        status,
        requeue_after_seconds,
        finalized,
        events,
        keep,
    } = raw;
    let limits = rules.bounds;
    if raw_children.len() > limits.max_children {
        return Err(Violation::TooManyChildren {
            count: raw_children.len(),
            limit: limits.max_children,
        });
    }
    let mut children: Vec<DesiredChild> = Vec::with_capacity(raw_children.len());
    for (index, text) in raw_children.iter().enumerate() {
        let child = check_child(rules, index, text)?;
        if children.iter().any(|c| {
            c.kind == child.kind
                && c.api_version == child.api_version
                && c.name == child.name
                && c.namespace == child.namespace
        }) {
            return Err(Violation::Duplicate {
                kind: child.kind,
                name: child.name,
            });
        }
        children.push(child);
    }
    let status = match status.as_deref() {
        None => None,
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) => Some(without_host_condition(map)),
            Ok(other) => {
                return Err(Violation::InvalidStatus(format!(
                    "got {}",
                    type_name(&other)
                )));
            }
            Err(e) => return Err(Violation::InvalidStatus(e.to_string())),
        },
    };
    if events.len() > limits.max_events {
        return Err(Violation::TooManyEvents {
            count: events.len(),
            limit: limits.max_events,
        });
    }
    let mut events = events;
    for e in &mut events {
        names::event_reason(&e.reason).map_err(|why| Violation::InvalidEventReason {
            reason: e.reason.clone(),
            why,
        })?;
        truncate(&mut e.message, MAX_EVENT_MESSAGE);
    }
    if keep.len() > limits.max_children {
        return Err(Violation::TooManyKept {
            count: keep.len(),
            limit: limits.max_children,
        });
    }
    if let Some(both) = keep.iter().find(|k| {
        children
            .iter()
            .any(|c| c.api_version == k.api_version && c.kind == k.kind && c.name == k.name)
    }) {
        return Err(Violation::KeptAndDesired(both.clone()));
    }
    Ok(Validated {
        children,
        status,
        requeue_after_seconds,
        finalized,
        events,
        keep,
    })
}

/// The status without the host's own condition: the host alone writes it,
/// so a guest that copies its previous conditions neither takes it over
/// nor drops it (one rule, in the WIT).
pub fn without_host_condition(mut status: Map<String, Value>) -> Map<String, Value> {
    if let Some(list) = status.get_mut("conditions").and_then(Value::as_array_mut) {
        list.retain(|c| c["type"] != HOST_CONDITION);
        if list.is_empty() {
            status.remove("conditions");
        }
    }
    status
}

fn check_child(rules: Rules<'_>, index: usize, text: &str) -> Result<DesiredChild, Violation> {
    let object = match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => map,
        Ok(other) => {
            return Err(Violation::InvalidJson {
                index,
                reason: format!("got {}", type_name(&other)),
            });
        }
        Err(e) => {
            return Err(Violation::InvalidJson {
                index,
                reason: e.to_string(),
            });
        }
    };
    let field = |name: &'static str| -> Result<String, Violation> {
        object
            .get(name)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .ok_or(Violation::MissingField { index, field: name })
    };
    let api_version = field("apiVersion")?;
    let kind = field("kind")?;
    let metadata = object.get("metadata").and_then(Value::as_object);
    let name = metadata
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or(Violation::MissingField {
            index,
            field: "metadata.name",
        })?
        .to_string();
    let Some(declared) = rules.description.child_kind(&api_version, &kind) else {
        return Err(Violation::UndeclaredKind {
            name,
            api_version,
            kind,
        });
    };
    if let Err(reason) = names::dns_subdomain(&name) {
        return Err(Violation::InvalidName { kind, name, reason });
    }
    let metadata = metadata.expect("name was found in metadata");
    if let Err(source) = metadata::check(metadata) {
        return Err(Violation::Metadata { kind, name, source });
    }
    let namespace = metadata
        .get("namespace")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty());
    let target_namespace = if !declared.cluster_scoped {
        match rules.parent.namespace {
            None if rules.parent.namespaced_children => match namespace {
                Some(ns) => Some(ns),
                None => {
                    return Err(Violation::NoNamespaceUnderClusterParent { kind, name });
                }
            },
            None => return Err(Violation::NamespacedChildOfClusterParent { kind, name }),
            Some(parent_ns) => {
                if let Some(ns) = namespace.filter(|ns| *ns != parent_ns) {
                    return Err(Violation::ForeignNamespace {
                        kind,
                        name,
                        namespace: ns.to_string(),
                        parent: parent_ns.to_string(),
                    });
                }
                Some(parent_ns)
            }
        }
    } else if rules.parent.namespace.is_some() {
        // Kubernetes garbage collection cannot follow an ownerReference from
        // a cluster-scoped object to a namespaced owner: it would treat the
        // child as orphaned and delete it.
        return Err(Violation::ClusterChildOfNamespacedParent { kind, name });
    } else if let Some(ns) = namespace {
        return Err(Violation::ForeignNamespace {
            kind,
            name,
            namespace: ns.to_string(),
            parent: String::new(),
        });
    } else {
        None
    };
    if rules
        .protected
        .contains(&declared.kind.group, &kind, target_namespace, &name)
    {
        return Err(Violation::Protected { kind, name });
    }
    if declared.kind.group.is_empty()
        && kind == "Secret"
        && !rules.bounds.service_account_tokens
        && let Some(how) = token_request(&object)
    {
        return Err(Violation::TokenSecret { name, how });
    }
    Ok(DesiredChild {
        api_version,
        kind,
        name,
        cluster_scoped: declared.cluster_scoped,
        namespace: target_namespace.map(str::to_owned),
        object,
    })
}

pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn truncate(s: &mut String, max: usize) {
    if s.len() > max {
        s.truncate(s.floor_char_boundary(max));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::{ChildKind, KindRef};
    use crate::protected::ProtectedRef;

    /// The defaults of `runtime::Limits`.
    fn bounds() -> Bounds {
        Bounds {
            max_children: 100,
            max_events: 16,
            service_account_tokens: false,
        }
    }

    #[test]
    fn a_secret_that_asks_for_a_token_needs_the_guest_lists_word() {
        let description = Description::new(KindRef::new("apps.example.com", "v1alpha1", "Cache"))
            .child(ChildKind::namespaced(KindRef::new("", "v1", "Secret")));
        let protected = ProtectedObjects::new();
        let rules = |tokens: bool| Rules {
            description: &description,
            bounds: Bounds {
                service_account_tokens: tokens,
                ..bounds()
            },
            parent: ParentScope {
                namespace: Some("a"),
                namespaced_children: false,
            },
            protected: &protected,
        };
        let by_type = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "t"},
            "type": "kubernetes.io/service-account-token"});
        let by_annotation = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "t",
            "annotations": {"kubernetes.io/service-account.name": "default"}}});
        let bootstrap = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "t"},
            "type": "bootstrap.kubernetes.io/token"});
        for secret in [&by_type, &by_annotation, &bootstrap] {
            let err = validate(rules(false), raw(vec![secret.clone()])).unwrap_err();
            assert!(matches!(err, Violation::TokenSecret { .. }), "{err}");
            assert!(err.to_string().contains("privilegedKinds"), "{err}");
            assert!(validate(rules(true), raw(vec![secret.clone()])).is_ok());
        }
        let plain = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "p"},
            "type": "Opaque"});
        assert!(validate(rules(false), raw(vec![plain])).is_ok());
    }

    fn description() -> Description {
        Description::new(KindRef::new("apps.example.com", "v1alpha1", "Cache"))
            .child(ChildKind::namespaced(KindRef::new("", "v1", "ConfigMap")))
            .child(ChildKind::cluster_scoped(KindRef::new(
                "rbac.authorization.k8s.io",
                "v1",
                "ClusterRole",
            )))
    }

    fn raw(children: Vec<Value>) -> ReconcileResponse {
        ReconcileResponse {
            children: children.iter().map(ToString::to_string).collect(),
            status: Some(json!({"phase": "Ready"}).to_string()),
            ..ReconcileResponse::default()
        }
    }

    fn validate_in(
        namespace: Option<&str>,
        bounds: Bounds,
        protected: &ProtectedObjects,
        raw: ReconcileResponse,
    ) -> Result<Validated, Violation> {
        validate(
            Rules {
                description: &description(),
                bounds,
                parent: ParentScope {
                    namespace,
                    namespaced_children: false,
                },
                protected,
            },
            raw,
        )
    }

    fn check_raw(raw: ReconcileResponse) -> Result<Validated, Violation> {
        validate_in(Some("team-a"), bounds(), &ProtectedObjects::new(), raw)
    }

    fn check(children: Vec<Value>) -> Result<Validated, Violation> {
        check_raw(raw(children))
    }

    fn cm(meta: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta})
    }

    #[test]
    fn a_well_formed_answer_passes() {
        let v = check(vec![cm(json!({"name": "demo-config"}))]).unwrap();
        assert_eq!(v.children.len(), 1);
        assert_eq!(v.status.unwrap()["phase"], "Ready");
    }

    #[test]
    fn a_child_in_another_namespace_is_refused() {
        let err = check(vec![cm(json!({"name": "x", "namespace": "kube-system"}))]).unwrap_err();
        assert!(matches!(err, Violation::ForeignNamespace { .. }), "{err}");
    }

    #[test]
    fn an_undeclared_kind_is_refused() {
        let crb = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "pwn"}});
        assert!(matches!(
            check(vec![crb]).unwrap_err(),
            Violation::UndeclaredKind { .. }
        ));
    }

    #[test]
    fn owner_references_and_host_keys_set_by_the_guest_are_refused() {
        for meta in [
            json!({"name": "x", "ownerReferences": [{"uid": "1"}]}),
            json!({"name": "x", "labels": {GUEST_LABEL: "other"}}),
            json!({"name": "x", "labels": {GUEST_LABEL: "cache"}}),
            json!({"name": "x", "labels": null}),
        ] {
            let err = check(vec![cm(meta.clone())]).unwrap_err();
            assert!(matches!(err, Violation::Metadata { .. }), "{meta}: {err}");
            assert_eq!(err.reason(), Reason::InvalidGuestResponse);
        }
    }

    #[test]
    fn invalid_json_and_bad_names_are_refused() {
        let bad = ReconcileResponse {
            children: vec!["{not json".into()],
            ..raw(vec![])
        };
        assert!(matches!(
            check_raw(bad).unwrap_err(),
            Violation::InvalidJson { .. }
        ));
        assert!(matches!(
            check(vec![cm(json!({"name": "Bad_Name"}))]).unwrap_err(),
            Violation::InvalidName { .. }
        ));
    }

    #[test]
    fn cluster_scoped_children_need_a_cluster_scoped_parent_and_no_namespace() {
        let cr = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"}});
        let err = check(vec![cr.clone()]).unwrap_err();
        assert!(
            matches!(err, Violation::ClusterChildOfNamespacedParent { .. }),
            "{err}"
        );
        let cluster =
            |c: Value| validate_in(None, bounds(), &ProtectedObjects::new(), raw(vec![c]));
        assert!(cluster(cr).is_ok());
        let named = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r", "namespace": "team-a"}});
        assert!(matches!(
            cluster(named).unwrap_err(),
            Violation::ForeignNamespace { .. }
        ));
    }

    #[test]
    fn namespaced_children_of_a_cluster_scoped_parent_name_their_namespace_where_allowed() {
        let cm = |meta: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta});
        let protected = ProtectedObjects::new();
        let description = description();
        let under_cluster = |namespaced_children: bool, child: Value| {
            validate(
                Rules {
                    description: &description,
                    bounds: bounds(),
                    parent: ParentScope {
                        namespace: None,
                        namespaced_children,
                    },
                    protected: &protected,
                },
                raw(vec![child]),
            )
        };
        let placed = under_cluster(true, cm(json!({"name": "s", "namespace": "one"}))).unwrap();
        assert_eq!(placed.children[0].namespace.as_deref(), Some("one"));
        let two = validate(
            Rules {
                description: &description,
                bounds: bounds(),
                parent: ParentScope {
                    namespace: None,
                    namespaced_children: true,
                },
                protected: &protected,
            },
            raw(vec![
                cm(json!({"name": "s", "namespace": "one"})),
                cm(json!({"name": "s", "namespace": "two"})),
            ]),
        );
        assert_eq!(two.unwrap().children.len(), 2, "one name in two namespaces");
        assert!(matches!(
            under_cluster(true, cm(json!({"name": "s"}))).unwrap_err(),
            Violation::NoNamespaceUnderClusterParent { .. }
        ));
        assert!(matches!(
            under_cluster(false, cm(json!({"name": "s", "namespace": "one"}))).unwrap_err(),
            Violation::NamespacedChildOfClusterParent { .. }
        ));
        // A namespaced parent's children stay in its namespace either way.
        assert_eq!(
            check(vec![cm(json!({"name": "s"}))]).unwrap().children[0]
                .namespace
                .as_deref(),
            Some("team-a")
        );
    }

    #[test]
    fn status_must_be_an_object_and_children_are_bounded() {
        let bad = ReconcileResponse {
            status: Some("[1]".into()),
            ..raw(vec![])
        };
        assert!(matches!(
            check_raw(bad).unwrap_err(),
            Violation::InvalidStatus(_)
        ));
        let limits = Bounds {
            max_children: 1,
            ..bounds()
        };
        let two = raw(vec![cm(json!({"name": "a"})), cm(json!({"name": "b"}))]);
        let err = validate_in(Some("a"), limits, &ProtectedObjects::new(), two);
        assert!(matches!(
            err.unwrap_err(),
            Violation::TooManyChildren { .. }
        ));
    }

    #[test]
    fn duplicate_children_are_refused() {
        let err = check(vec![cm(json!({"name": "a"})), cm(json!({"name": "a"}))]).unwrap_err();
        assert!(matches!(err, Violation::Duplicate { .. }));
    }

    #[test]
    fn the_hosts_own_objects_are_refused_with_their_own_reason() {
        let protected = ProtectedObjects::new();
        protected.set(
            "guest-list",
            [ProtectedRef::config_map("team-a", "wasmop-guests")],
        );
        let err = validate_in(
            Some("team-a"),
            bounds(),
            &protected,
            raw(vec![cm(json!({"name": "wasmop-guests"}))]),
        )
        .unwrap_err();
        assert_eq!(err.reason(), Reason::ProtectedObject, "{err}");
        // The same name in another namespace is the guest's to use.
        assert!(
            validate_in(
                Some("team-b"),
                bounds(),
                &protected,
                raw(vec![cm(json!({"name": "wasmop-guests"}))]),
            )
            .is_ok()
        );
    }

    #[test]
    fn events_are_bounded_and_their_reasons_must_be_camel_case() {
        let many = ReconcileResponse {
            events: vec![Event::normal("Tick", "m"); bounds().max_events + 1],
            ..raw(vec![])
        };
        assert!(matches!(
            check_raw(many).unwrap_err(),
            Violation::TooManyEvents { .. }
        ));
        let control = ReconcileResponse {
            events: vec![Event::warning("Bad\nReason", "m")],
            ..raw(vec![])
        };
        assert!(matches!(
            check_raw(control).unwrap_err(),
            Violation::InvalidEventReason { .. }
        ));
        let long = ReconcileResponse {
            events: vec![Event::normal("Ok", "x".repeat(5000))],
            ..raw(vec![])
        };
        assert_eq!(
            check_raw(long).unwrap().events[0].message.len(),
            MAX_EVENT_MESSAGE
        );
    }

    #[test]
    fn a_child_both_kept_and_desired_is_refused() {
        let both = ReconcileResponse {
            keep: vec![ObjectRef::new("v1", "ConfigMap", "a")],
            ..raw(vec![cm(json!({"name": "a"}))])
        };
        assert!(matches!(
            check_raw(both).unwrap_err(),
            Violation::KeptAndDesired(_)
        ));
    }

    #[test]
    fn the_host_condition_is_stripped_from_the_desired_status() {
        let forged = ReconcileResponse {
            status: Some(
                json!({"phase": "Ready", "conditions": [
                    {"type": "GuestReconciled", "status": "True"},
                    {"type": "Available", "status": "True"}
                ]})
                .to_string(),
            ),
            ..raw(vec![])
        };
        let status = check_raw(forged).unwrap().status.unwrap();
        assert_eq!(
            status["conditions"],
            json!([{"type": "Available", "status": "True"}])
        );
        let only_host = ReconcileResponse {
            status: Some(json!({"conditions": [{"type": "GuestReconciled"}]}).to_string()),
            ..raw(vec![])
        };
        assert!(
            check_raw(only_host)
                .unwrap()
                .status
                .unwrap()
                .get("conditions")
                .is_none()
        );
    }
}
