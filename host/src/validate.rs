//! Checks a guest's answer before anything reaches the API server.
//!
//! All or nothing: one bad child, a bad status or a bad event and nothing
//! from that reconcile is applied. The checks are the ones that keep a guest
//! inside its lane: only declared kinds, only the parent's namespace, no
//! ownership claims of its own, no label pointing at another guest.

use serde_json::{Map, Value};

use crate::model::{Description, GuestEvent, RawResponse};
use crate::runtime::Limits;

/// The label the host stamps on every child with the owning guest's name
/// (interface contract).
pub const GUEST_LABEL: &str = "wasmop.dev/guest";

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
    /// The guest set ownerReferences itself.
    #[error("child {kind}/{name} sets ownerReferences; only the host stamps ownership")]
    OwnerReferences {
        /// Child kind.
        kind: String,
        /// Child name.
        name: String,
    },
    /// The guest label names another guest.
    #[error("child {kind}/{name} carries label {GUEST_LABEL}={value:?}, which is not this guest")]
    ForeignGuestLabel {
        /// Child kind.
        kind: String,
        /// Child name.
        name: String,
        /// The label value the guest set.
        value: String,
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
    /// The status is not a JSON object.
    #[error("status is not a JSON object: {0}")]
    InvalidStatus(String),
    /// An event with an empty or over-long reason.
    #[error("event reason {0:?} must be 1 to 128 characters")]
    InvalidEventReason(String),
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
    /// The object as the guest returned it.
    pub object: Map<String, Value>,
}

/// A checked guest answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Validated {
    /// Desired children.
    pub children: Vec<DesiredChild>,
    /// Desired status.
    pub status: Option<Map<String, Value>>,
    /// Requested requeue delay in seconds.
    pub requeue_after_seconds: Option<u32>,
    /// Deletion path: cleanup done.
    pub finalized: bool,
    /// Events to record (message cut to the 1 KiB Kubernetes allows).
    pub events: Vec<GuestEvent>,
}

/// Where the parent lives, for the namespace rules.
#[derive(Clone, Copy, Debug)]
pub struct ParentScope<'a> {
    /// The parent's namespace; `None` for a cluster-scoped parent.
    pub namespace: Option<&'a str>,
}

/// Checks `raw` against the guest's description, its limits and the rules
/// above. Returns every child parsed, or the first violation.
pub fn validate(
    guest: &str,
    description: &Description,
    limits: &Limits,
    parent: ParentScope<'_>,
    raw: RawResponse,
) -> Result<Validated, Violation> {
    if raw.children.len() > limits.max_children {
        return Err(Violation::TooManyChildren {
            count: raw.children.len(),
            limit: limits.max_children,
        });
    }
    let mut children: Vec<DesiredChild> = Vec::with_capacity(raw.children.len());
    for (index, text) in raw.children.iter().enumerate() {
        let child = check_child(guest, description, parent, index, text)?;
        if children.iter().any(|c| {
            c.kind == child.kind && c.api_version == child.api_version && c.name == child.name
        }) {
            return Err(Violation::Duplicate {
                kind: child.kind,
                name: child.name,
            });
        }
        children.push(child);
    }
    let status = match raw.status.as_deref() {
        None => None,
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) => Some(map),
            Ok(other) => {
                return Err(Violation::InvalidStatus(format!(
                    "got {}",
                    type_name(&other)
                )));
            }
            Err(e) => return Err(Violation::InvalidStatus(e.to_string())),
        },
    };
    let mut events = raw.events;
    for e in &mut events {
        if e.reason.is_empty() || e.reason.len() > 128 {
            return Err(Violation::InvalidEventReason(e.reason.clone()));
        }
        truncate(&mut e.message, 1024);
    }
    Ok(Validated {
        children,
        status,
        requeue_after_seconds: raw.requeue_after_seconds,
        finalized: raw.finalized,
        events,
    })
}

fn check_child(
    guest: &str,
    description: &Description,
    parent: ParentScope<'_>,
    index: usize,
    text: &str,
) -> Result<DesiredChild, Violation> {
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
    let Some(declared) = description.child(&api_version, &kind) else {
        return Err(Violation::UndeclaredKind {
            name,
            api_version,
            kind,
        });
    };
    if let Err(reason) = check_name(&name) {
        return Err(Violation::InvalidName { kind, name, reason });
    }
    let metadata = metadata.expect("name was found in metadata");
    if metadata
        .get("ownerReferences")
        .is_some_and(|v| !v.is_null())
    {
        return Err(Violation::OwnerReferences { kind, name });
    }
    if let Some(value) = metadata.get("labels").and_then(|l| l.get(GUEST_LABEL))
        && value.as_str() != Some(guest)
    {
        let value = value
            .as_str()
            .map_or_else(|| value.to_string(), str::to_string);
        return Err(Violation::ForeignGuestLabel { kind, name, value });
    }
    let namespace = metadata
        .get("namespace")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty());
    if !declared.cluster_scoped {
        match parent.namespace {
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
            }
        }
    } else if parent.namespace.is_some() {
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
    }
    Ok(DesiredChild {
        api_version,
        kind,
        name,
        cluster_scoped: declared.cluster_scoped,
        object,
    })
}

/// A DNS-1123 subdomain, the rule most kinds use for names; kinds with a
/// stricter rule (Service: DNS-1035 label) are checked by the API server.
fn check_name(name: &str) -> Result<(), &'static str> {
    if name.len() > 253 {
        return Err("longer than 253 characters");
    }
    let ok_chars = name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
    if !ok_chars {
        return Err("only lowercase letters, digits, '-' and '.' are allowed");
    }
    let alnum = |b: Option<u8>| b.is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if !alnum(name.bytes().next()) || !alnum(name.bytes().last()) {
        return Err("must start and end with a lowercase letter or digit");
    }
    Ok(())
}

fn type_name(v: &Value) -> &'static str {
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
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::{ChildKind, KindRef};

    fn description() -> Description {
        Description {
            primary: KindRef::new("apps.example.com", "v1alpha1", "Cache"),
            children: vec![
                ChildKind {
                    kind: KindRef::new("", "v1", "ConfigMap"),
                    cluster_scoped: false,
                },
                ChildKind {
                    kind: KindRef::new("rbac.authorization.k8s.io", "v1", "ClusterRole"),
                    cluster_scoped: true,
                },
            ],
            finalizer: None,
        }
    }

    fn raw(children: Vec<Value>) -> RawResponse {
        RawResponse {
            children: children.iter().map(ToString::to_string).collect(),
            status: Some(json!({"phase": "Ready"}).to_string()),
            requeue_after_seconds: None,
            finalized: false,
            events: vec![],
        }
    }

    fn check(children: Vec<Value>) -> Result<Validated, Violation> {
        validate(
            "cache",
            &description(),
            &Limits::default(),
            ParentScope {
                namespace: Some("team-a"),
            },
            raw(children),
        )
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
    fn owner_references_set_by_the_guest_are_refused() {
        let err = check(vec![cm(
            json!({"name": "x", "ownerReferences": [{"uid": "1"}]}),
        )])
        .unwrap_err();
        assert!(matches!(err, Violation::OwnerReferences { .. }));
    }

    #[test]
    fn a_guest_label_naming_another_guest_is_refused() {
        let err = check(vec![cm(
            json!({"name": "x", "labels": {GUEST_LABEL: "other"}}),
        )])
        .unwrap_err();
        assert!(matches!(err, Violation::ForeignGuestLabel { .. }));
        assert!(
            check(vec![cm(
                json!({"name": "x", "labels": {GUEST_LABEL: "cache"}})
            )])
            .is_ok()
        );
    }

    #[test]
    fn invalid_json_and_bad_names_are_refused() {
        let bad = RawResponse {
            children: vec!["{not json".into()],
            ..raw(vec![])
        };
        let err = validate(
            "cache",
            &description(),
            &Limits::default(),
            ParentScope {
                namespace: Some("a"),
            },
            bad,
        );
        assert!(matches!(err.unwrap_err(), Violation::InvalidJson { .. }));
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
        let cluster = |c: Value| {
            validate(
                "cache",
                &description(),
                &Limits::default(),
                ParentScope { namespace: None },
                raw(vec![c]),
            )
        };
        assert!(cluster(cr).is_ok());
        let named = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r", "namespace": "team-a"}});
        assert!(matches!(
            cluster(named).unwrap_err(),
            Violation::ForeignNamespace { .. }
        ));
    }

    #[test]
    fn status_must_be_an_object_and_children_are_bounded() {
        let bad = RawResponse {
            status: Some("[1]".into()),
            ..raw(vec![])
        };
        let err = validate(
            "cache",
            &description(),
            &Limits::default(),
            ParentScope {
                namespace: Some("a"),
            },
            bad,
        );
        assert!(matches!(err.unwrap_err(), Violation::InvalidStatus(_)));
        let limits = Limits {
            max_children: 1,
            ..Limits::default()
        };
        let two = raw(vec![cm(json!({"name": "a"})), cm(json!({"name": "b"}))]);
        let err = validate(
            "cache",
            &description(),
            &limits,
            ParentScope {
                namespace: Some("a"),
            },
            two,
        );
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
}
