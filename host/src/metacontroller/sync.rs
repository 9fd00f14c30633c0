//! One reconcile of a Metacontroller controller: the request its sync (or
//! finalize) hook gets, and its answer turned into the host's writes; the
//! customize hook's request and answer.
//!
//! The request is Metacontroller's. A `CompositeController`'s hook gets
//! `controller` (the definition), `parent`, `children` keyed
//! `<Kind>.<apiVersion>` and then by name (by `namespace/name` under a
//! cluster-scoped parent), `related` (what the customize hook selected,
//! keyed the same way; `{}` without one) and `finalizing`; a
//! `DecoratorController`'s gets `object` for `parent` and `attachments` for
//! `children`. The answer's `children` (`attachments`) are those that
//! should exist; what the request had and the answer omits is deleted.
//! What happens to a child that exists and differs from the answer is its
//! resource's update strategy, which the host's plan applies
//! (`controller/reconcile/plan.rs`), where it knows whether a child differs
//! from what was last applied. A decorator's `labels` and `annotations`
//! (a `null` value removes the key) are its [`Decoration`] of the target.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::core::Selector;
use serde_json::{Map, Value, json};

use super::definition::{Controller, api_version};
use crate::model::{ReconcileRequest, ReconcileResponse};

/// Rules one customize answer may hold at most: each is a cache of its
/// resource the host keeps.
pub const MAX_RELATED_RULES: usize = 16;

/// Names one customize rule may list at most.
pub const MAX_RELATED_NAMES: usize = 256;

/// The hook to call and the body to send it.
#[derive(Debug)]
pub struct HookCall {
    /// The hook's path in the hooks folder (`sync` for `sync.js`).
    pub route: String,
    /// Which hook it is, for messages: "sync", "finalize" or "customize".
    pub hook: &'static str,
    /// The JSON body Metacontroller would POST.
    pub body: String,
}

/// What a decorator sets on its target besides attachments: each label
/// and annotation to its value, or `None` to remove it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decoration {
    /// `labels`.
    pub labels: BTreeMap<String, Option<String>>,
    /// `annotations`.
    pub annotations: BTreeMap<String, Option<String>>,
}

impl Decoration {
    /// Whether it asks for nothing.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.annotations.is_empty()
    }
}

/// The reconcile's answer, and a decorator's decoration of its target.
#[derive(Debug, Default)]
pub struct Answer {
    /// The writes of children and status.
    pub response: ReconcileResponse,
    /// Labels and annotations for the target (a decorator's alone).
    pub decoration: Option<Decoration>,
}

/// One rule of a customize answer, checked: the objects of `resource`
/// (`apiVersion`) in `namespace` (every namespace: `None`), by `names` or
/// by `labels`.
#[derive(Clone, Debug)]
pub struct RelatedRule {
    /// `apiVersion`.
    pub api_version: String,
    /// The plural resource name.
    pub resource: String,
    /// `namespace` (a namespaced parent's own when it names none).
    pub namespace: Option<String>,
    /// `names`.
    pub names: Option<Vec<String>>,
    /// `labelSelector` (everything when neither it nor `names` is given).
    pub labels: Option<Selector>,
}

/// The customize hook's call for `parent`, when the definition has one.
pub fn customize(controller: &Controller, parent: &Value) -> Option<HookCall> {
    let route = controller.definition.hooks.customize.clone()?;
    let body = json!({
        "controller": controller.definition.object,
        "parent": parent,
    });
    Some(HookCall {
        route,
        hook: "customize",
        body: body.to_string(),
    })
}

/// The rules of the customize hook's `answer` for `parent`. A namespaced
/// parent's rules stay in its namespace (Metacontroller's hook version
/// v1).
pub fn related_rules(parent: &Value, answer: &str) -> Result<Vec<RelatedRule>, String> {
    let failed = |why: String| format!("the customize hook's answer {why}");
    let answer: Value =
        serde_json::from_str(answer).map_err(|e| failed(format!("is not JSON: {e}")))?;
    let rules = match answer.get("relatedResources") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(rules)) => rules,
        Some(_) => return Err(failed("has a `relatedResources` that is not a list".into())),
    };
    if rules.len() > MAX_RELATED_RULES {
        return Err(failed(format!(
            "names {} related resources, more than the {MAX_RELATED_RULES} a controller may watch",
            rules.len()
        )));
    }
    let parent_namespace = parent
        .pointer("/metadata/namespace")
        .and_then(Value::as_str);
    rules
        .iter()
        .enumerate()
        .map(|(i, rule)| {
            let at = |why: &str| failed(format!("relatedResources[{i}] {why}"));
            let Value::Object(fields) = rule else {
                return Err(at("is not an object"));
            };
            if let Some(key) = fields.keys().find(|k| {
                !matches!(
                    k.as_str(),
                    "apiVersion" | "resource" | "namespace" | "names" | "labelSelector"
                )
            }) {
                return Err(at(&format!(
                    "has {key:?}, which this wasmop does not honour (apiVersion, resource, namespace, names, labelSelector)"
                )));
            }
            let text = |key: &str| {
                rule.get(key)
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
            };
            let api_version = text("apiVersion").ok_or_else(|| at("names no apiVersion"))?;
            let resource = text("resource").ok_or_else(|| at("names no resource"))?;
            let namespace = match (text("namespace"), parent_namespace) {
                (Some(ns), Some(own)) if ns != own => {
                    return Err(at(&format!(
                        "names namespace {ns:?}: a namespaced parent's related objects are in its own namespace ({own:?})"
                    )));
                }
                (ns, own) => ns.or(own.map(str::to_owned)),
            };
            let names = match rule.get("names") {
                None | Some(Value::Null) => None,
                Some(Value::Array(names)) if names.len() <= MAX_RELATED_NAMES => Some(
                    names
                        .iter()
                        .map(|n| n.as_str().map(str::to_owned))
                        .collect::<Option<Vec<_>>>()
                        .ok_or_else(|| at("has a name that is not a string"))?,
                ),
                Some(Value::Array(_)) => {
                    return Err(at(&format!("lists more than {MAX_RELATED_NAMES} names")));
                }
                Some(_) => return Err(at("has `names` that is not a list")),
            };
            let labels = match rule.get("labelSelector") {
                None | Some(Value::Null) => None,
                Some(selector) => {
                    let parsed: LabelSelector = serde_json::from_value(selector.clone())
                        .map_err(|e| at(&format!("has a labelSelector that is not one: {e}")))?;
                    Some(
                        Selector::try_from(parsed)
                            .map_err(|e| at(&format!("has a labelSelector that is not one: {e}")))?,
                    )
                }
            };
            if names.is_some() && labels.is_some() {
                return Err(at("names objects and a labelSelector: give one or the other"));
            }
            Ok(RelatedRule {
                api_version,
                resource,
                namespace,
                names,
                labels,
            })
        })
        .collect()
}

/// `related` as the hooks get it: each object under `<Kind>.<apiVersion>`
/// (every kind in `kinds` present, if empty) and its name, or
/// `namespace/name` where the parent is cluster-scoped.
pub fn related_map(
    parent_namespaced: bool,
    kinds: &[String],
    objects: impl IntoIterator<Item = Value>,
) -> Value {
    let mut related = Map::new();
    for kind in kinds {
        related.insert(kind.clone(), Value::Object(Map::new()));
    }
    for object in objects {
        let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str);
        let key = format!(
            "{}.{}",
            text("/kind").unwrap_or(""),
            text("/apiVersion").unwrap_or("")
        );
        let name = match text("/metadata/namespace") {
            Some(ns) if !parent_namespaced => {
                format!("{ns}/{}", text("/metadata/name").unwrap_or(""))
            }
            _ => text("/metadata/name").unwrap_or("").to_owned(),
        };
        if let Value::Object(by_name) = related.entry(key).or_insert_with(|| json!({})) {
            by_name.insert(name, object);
        }
    }
    Value::Object(related)
}

/// The hook call for `wire`, with the `related` objects the customize
/// hook selected: the finalize hook while the parent is being deleted
/// (and the definition has one), else the sync hook.
pub fn request(
    controller: &Controller,
    wire: &ReconcileRequest,
    related: &Value,
) -> Result<HookCall, String> {
    let parent: Value =
        serde_json::from_str(&wire.parent).map_err(|e| format!("the parent is not JSON: {e}"))?;
    let mut children = Map::new();
    for child in &controller.children {
        children.insert(child.children_key(), Value::Object(Map::new()));
    }
    let across = !controller.parent.namespaced;
    for observed in &wire.observed {
        let Some(index) = child_index(controller, &observed.api_version, &observed.kind) else {
            continue;
        };
        let object: Value = serde_json::from_str(&observed.object)
            .map_err(|e| format!("an observed child is not JSON: {e}"))?;
        let key = match object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
        {
            Some(namespace) if across => format!("{namespace}/{}", observed.name),
            _ => observed.name.clone(),
        };
        if let Some(Value::Object(by_name)) =
            children.get_mut(&controller.children[index].children_key())
        {
            by_name.insert(key, object);
        }
    }
    let hooks = &controller.definition.hooks;
    let finalizing = wire.deleting && hooks.finalize.is_some();
    let (route, hook) = match (&hooks.finalize, finalizing) {
        (Some(route), true) => (route.clone(), "finalize"),
        _ => (hooks.sync.clone(), "sync"),
    };
    let (parent_key, children_key) = if controller.decorates() {
        ("object", "attachments")
    } else {
        ("parent", "children")
    };
    let body = json!({
        "controller": controller.definition.object,
        parent_key: parent,
        children_key: children,
        "related": related,
        "finalizing": finalizing,
    });
    Ok(HookCall {
        route,
        hook,
        body: body.to_string(),
    })
}

fn child_index(controller: &Controller, api: &str, kind: &str) -> Option<usize> {
    controller
        .children
        .iter()
        .position(|c| c.kind == kind && api_version(&c.group, &c.version) == api)
}

/// The host's writes for the hook's `answer` to `wire`.
pub fn response(
    controller: &Controller,
    wire: &ReconcileRequest,
    hook: &str,
    answer: &str,
) -> Result<Answer, String> {
    let answer: Value = serde_json::from_str(answer)
        .map_err(|e| format!("the {hook} hook's answer is not JSON: {e}"))?;
    let Value::Object(answer) = answer else {
        return Err(format!("the {hook} hook's answer is not a JSON object"));
    };
    let mut response = ReconcileResponse::default();
    match answer.get("status") {
        None | Some(Value::Null) => {}
        Some(status @ Value::Object(_)) => response.status = Some(status.to_string()),
        Some(_) => return Err(format!("the {hook} hook's `status` is not an object")),
    }
    let resync = controller.definition.resync_seconds;
    response.requeue_after_seconds = match answer.get("resyncAfterSeconds") {
        None | Some(Value::Null) => resync,
        Some(v) => match v.as_f64() {
            Some(s) if s > 0.0 => Some(s.ceil().min(f64::from(u32::MAX)) as u32),
            Some(_) => resync,
            None => {
                return Err(format!(
                    "the {hook} hook's `resyncAfterSeconds` is not a number"
                ));
            }
        },
    };
    if wire.deleting {
        response.finalized = match answer.get("finalized") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(done)) => *done,
            Some(_) => {
                return Err(format!(
                    "the {hook} hook's `finalized` is not true or false"
                ));
            }
        };
    }
    let (children_key, resources) = if controller.decorates() {
        ("attachments", "attachments")
    } else {
        ("children", "childResources")
    };
    let desired = match answer.get(children_key) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(children)) => children.clone(),
        Some(_) => return Err(format!("the {hook} hook's `{children_key}` is not a list")),
    };
    for child in desired {
        let api = child
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        let kind = child.get("kind").and_then(Value::as_str).unwrap_or("");
        if child_index(controller, api, kind).is_none() {
            let name = child
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            return Err(format!(
                "the {hook} hook answered a child {kind:?} of {api:?} ({name:?}), which the definition's {resources} do not list"
            ));
        }
        response.children.push(child.to_string());
    }
    let decoration = if controller.decorates() {
        let decoration = Decoration {
            labels: string_map(&answer, "labels", hook)?,
            annotations: string_map(&answer, "annotations", hook)?,
        };
        // The keys and values as a child's would be checked (a removal
        // checked by its key alone).
        let shown = |map: &BTreeMap<String, Option<String>>| {
            map.iter()
                .map(|(k, v)| (k.clone(), Value::from(v.as_deref().unwrap_or(""))))
                .collect::<Map<String, Value>>()
        };
        let metadata = Map::from_iter([
            (
                "labels".to_owned(),
                Value::Object(shown(&decoration.labels)),
            ),
            (
                "annotations".to_owned(),
                Value::Object(shown(&decoration.annotations)),
            ),
        ]);
        crate::validate::metadata::check(&metadata)
            .map_err(|e| format!("the {hook} hook's answer for its target: {e}"))?;
        Some(decoration)
    } else {
        None
    };
    Ok(Answer {
        response,
        decoration,
    })
}

/// The answer's map `field` of strings or `null`s.
fn string_map(
    answer: &Map<String, Value>,
    field: &str,
    hook: &str,
) -> Result<BTreeMap<String, Option<String>>, String> {
    let not = || format!("the {hook} hook's `{field}` is not a map of strings (or null)");
    match answer.get(field) {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), Some(s.clone()))),
                Value::Null => Ok((k.clone(), None)),
                _ => Err(not()),
            })
            .collect(),
        Some(_) => Err(not()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metacontroller::definition::{Embedded, Resolved};
    use crate::model::ObservedObject;

    fn controller(method: &str, finalize: bool) -> Controller {
        let finalize = if finalize {
            "\n    finalize:\n      webhook:\n        url: http://h/finalize"
        } else {
            ""
        };
        let yaml = format!(
            "apiVersion: metacontroller.k8s.io/v1alpha1\nkind: CompositeController\nmetadata:\n  name: pets\nspec:\n  resyncPeriodSeconds: 30\n  parentResource:\n    apiVersion: example.com/v1\n    resource: pets\n  childResources:\n  - apiVersion: v1\n    resource: pods\n    updateStrategy:\n      method: {method}\n      statusChecks:\n        conditions:\n        - type: Ready\n          status: \"True\"\n  hooks:\n    sync:\n      webhook:\n        url: http://h/sync{finalize}\n"
        );
        let embedded = Embedded {
            definition: crate::metacontroller::definition::pick(&yaml, None).unwrap(),
            kinds: vec![
                Resolved {
                    group: "example.com".into(),
                    version: "v1".into(),
                    kind: "Pet".into(),
                    namespaced: true,
                },
                Resolved {
                    group: "".into(),
                    version: "v1".into(),
                    kind: "Pod".into(),
                    namespaced: true,
                },
            ],
        };
        Controller::from_embedded(&serde_json::to_string(&embedded).unwrap()).unwrap()
    }

    fn pod(name: &str, image: &str, ready: bool) -> Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns", "labels": {"wasmop.dev/guest": "pets"}},
            "spec": {"containers": [{"name": "c", "image": image, "terminationMessagePath": "/dev/termination-log"}]},
            "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]},
        })
    }

    fn want(name: &str, image: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
               "spec": {"containers": [{"name": "c", "image": image}]}})
    }

    fn wire(observed: &[Value], deleting: bool) -> ReconcileRequest {
        ReconcileRequest {
            parent: json!({"apiVersion": "example.com/v1", "kind": "Pet", "metadata": {"name": "p", "namespace": "ns"}}).to_string(),
            observed: observed
                .iter()
                .map(|o| ObservedObject {
                    api_version: "v1".into(),
                    kind: "Pod".into(),
                    name: o["metadata"]["name"].as_str().unwrap().into(),
                    object: o.to_string(),
                })
                .collect(),
            deleting,
            ..ReconcileRequest::default()
        }
    }

    fn answer(children: &[Value]) -> String {
        json!({"status": {"replicas": children.len()}, "children": children}).to_string()
    }

    fn names(response: &ReconcileResponse) -> (Vec<String>, Vec<String>) {
        let written = response
            .children
            .iter()
            .map(|c| {
                serde_json::from_str::<Value>(c).unwrap()["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        let kept = response.keep.iter().map(|k| k.name.clone()).collect();
        (written, kept)
    }

    #[test]
    fn the_request_keys_children_by_kind_and_api_version_then_name() {
        let c = controller("OnDelete", false);
        let call = request(&c, &wire(&[pod("a", "v1", true)], false), &json!({})).unwrap();
        assert_eq!(call.route, "sync");
        let body: Value = serde_json::from_str(&call.body).unwrap();
        assert_eq!(
            body["children"]["Pod.v1"]["a"]["spec"]["containers"][0]["image"],
            "v1"
        );
        assert_eq!(body["controller"]["metadata"]["name"], "pets");
        assert_eq!(body["finalizing"], false);
        assert_eq!(body["related"], json!({}));
    }

    #[test]
    fn a_deleted_parent_calls_the_finalize_hook_and_passes_finalized_on() {
        let c = controller("OnDelete", true);
        let call = request(&c, &wire(&[], true), &json!({})).unwrap();
        assert_eq!((call.route.as_str(), call.hook), ("finalize", "finalize"));
        let r = response(&c, &wire(&[], true), "finalize", r#"{"finalized": true}"#)
            .unwrap()
            .response;
        assert!(r.finalized);
        assert_eq!(
            c.finalizer().as_deref(),
            Some("metacontroller.io/compositecontroller-pets")
        );
        assert_eq!(controller("OnDelete", false).finalizer(), None);
    }

    #[test]
    fn the_answer_names_every_desired_child_status_and_resync() {
        let c = controller("RollingRecreate", false);
        let observed = [pod("a", "v1", true)];
        let desired = [want("a", "v2"), want("b", "v2")];
        let r = response(&c, &wire(&observed, false), "sync", &answer(&desired))
            .unwrap()
            .response;
        let (written, kept) = names(&r);
        assert_eq!(written, ["a", "b"]);
        assert!(kept.is_empty());
        assert_eq!(r.status.as_deref(), Some(r#"{"replicas":2}"#));
        assert_eq!(r.requeue_after_seconds, Some(30));
        assert!(!r.finalized, "finalized is read on the deletion path only");
    }

    #[test]
    fn a_bad_answer_is_the_hooks_failure_in_words() {
        let c = controller("OnDelete", false);
        let w = wire(&[], false);
        for (answer, says) in [
            ("not json", "not JSON"),
            ("[]", "not a JSON object"),
            (r#"{"children": {}}"#, "`children` is not a list"),
            (r#"{"status": "up"}"#, "`status` is not an object"),
            (
                r#"{"children": [{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}]}"#,
                "do not list",
            ),
        ] {
            let err = response(&c, &w, "sync", answer).unwrap_err();
            assert!(err.contains(says), "{answer}: {err}");
        }
    }

    #[test]
    fn customize_rules_are_read_and_a_namespaced_parent_keeps_its_own() {
        let cluster_parent = json!({"metadata": {"name": "p"}});
        let rules = related_rules(
            &cluster_parent,
            r#"{"relatedResources": [{"apiVersion": "v1", "resource": "configmaps", "namespace": "src", "names": ["settings"]}]}"#,
        )
        .unwrap();
        assert_eq!(rules[0].namespace.as_deref(), Some("src"));
        assert_eq!(
            rules[0].names.as_deref(),
            Some(&["settings".to_owned()][..])
        );
        let own = json!({"metadata": {"name": "p", "namespace": "team"}});
        let defaulted = related_rules(
            &own,
            r#"{"relatedResources": [{"apiVersion": "v1", "resource": "configmaps", "labelSelector": {"matchLabels": {"a": "b"}}}]}"#,
        )
        .unwrap();
        assert_eq!(defaulted[0].namespace.as_deref(), Some("team"));
        assert!(defaulted[0].labels.is_some());
        // (answer, what the refusal says)
        let too_many = json!({"relatedResources": vec![json!({"apiVersion": "v1", "resource": "pods"}); MAX_RELATED_RULES + 1]}).to_string();
        for (answer, says) in [
            ("nope", "not JSON"),
            (r#"{"relatedResources": {}}"#, "not a list"),
            (
                r#"{"relatedResources": [{"resource": "pods"}]}"#,
                "no apiVersion",
            ),
            (
                r#"{"relatedResources": [{"apiVersion": "v1", "resource": "pods", "namespace": "other"}]}"#,
                "its own namespace",
            ),
            (
                r#"{"relatedResources": [{"apiVersion": "v1", "resource": "pods", "names": ["a"], "labelSelector": {}}]}"#,
                "one or the other",
            ),
            (
                r#"{"relatedResources": [{"apiVersion": "v1", "resource": "pods", "namespaceSelector": {}}]}"#,
                "namespaceSelector",
            ),
            (too_many.as_str(), "more than the 16"),
        ] {
            let err = related_rules(&own, answer).unwrap_err();
            assert!(err.contains(says), "{answer}: {err}");
        }
    }

    #[test]
    fn related_objects_are_keyed_as_children_with_every_rules_kind_present() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s", "namespace": "src"}});
        let kinds = ["ConfigMap.v1".to_owned(), "Namespace.v1".to_owned()];
        let across = related_map(false, &kinds, [cm.clone()]);
        assert_eq!(across["ConfigMap.v1"]["src/s"]["metadata"]["name"], "s");
        assert_eq!(across["Namespace.v1"], json!({}));
        let within = related_map(true, &kinds, [cm]);
        assert_eq!(within["ConfigMap.v1"]["s"]["metadata"]["namespace"], "src");
    }

    #[test]
    fn a_decorator_gets_object_and_attachments_and_answers_labels_and_annotations() {
        let yaml = "apiVersion: metacontroller.k8s.io/v1alpha1\nkind: DecoratorController\nmetadata:\n  name: d\nspec:\n  resources:\n  - apiVersion: v1\n    resource: pods\n  attachments:\n  - apiVersion: v1\n    resource: pods\n  hooks:\n    sync:\n      webhook:\n        url: http://h/sync\n";
        let pod_kind = Resolved {
            group: "".into(),
            version: "v1".into(),
            kind: "Pod".into(),
            namespaced: true,
        };
        let embedded = Embedded {
            definition: crate::metacontroller::definition::pick(yaml, None).unwrap(),
            kinds: vec![pod_kind.clone(), pod_kind],
        };
        let c = Controller::from_embedded(&serde_json::to_string(&embedded).unwrap()).unwrap();
        assert!(c.decorates());
        let call = request(&c, &wire(&[pod("a", "v1", true)], false), &json!({})).unwrap();
        let body: Value = serde_json::from_str(&call.body).unwrap();
        assert_eq!(body["object"]["metadata"]["name"], "p");
        assert_eq!(body["attachments"]["Pod.v1"]["a"]["metadata"]["name"], "a");
        assert!(body.get("parent").is_none() && body.get("children").is_none());
        let answer = response(
            &c,
            &wire(&[], false),
            "sync",
            r#"{"labels": {"team": "a", "old": null}, "annotations": {"note": "x"}, "attachments": []}"#,
        )
        .unwrap();
        let decoration = answer.decoration.unwrap();
        assert_eq!(decoration.labels["team"].as_deref(), Some("a"));
        assert_eq!(decoration.labels["old"], None);
        assert_eq!(decoration.annotations["note"].as_deref(), Some("x"));
        for (answer, says) in [
            (r#"{"labels": {"wasmop.dev/guest": "x"}}"#, "wasmop.dev/"),
            (r#"{"labels": {"a": 1}}"#, "not a map of strings"),
            (r#"{"labels": {"bad key!": "x"}}"#, "labels key"),
        ] {
            let err = response(&c, &wire(&[], false), "sync", answer).unwrap_err();
            assert!(err.contains(says), "{answer}: {err}");
        }
    }
}
