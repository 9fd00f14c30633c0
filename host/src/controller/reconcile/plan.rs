//! Plan: from the observed state and the guest's validated answer to the
//! writes that make the cluster what the answer asks. Pure: nothing is
//! sent, nothing is read but the arguments.
//!
//! A desired child is written when it is missing, when the guest's wish
//! changed (the desired-hash annotation) or when the cluster drifted from
//! it ([`apply::drift`]); an observed child neither desired nor kept is
//! pruned; the status is written when the parent does not show it already
//! ([`status::plan`]).
//!
//! A guest made from a Metacontroller controller gives each child kind an
//! update strategy, which decides what happens to a child that exists and
//! differs from the answer (changed or drifted, as above; for the
//! strategies that recreate, only changed): `OnDelete` leaves it, `InPlace`
//! writes it, `Recreate` prunes it (the next reconcile creates it anew); the
//! rolling ones do the same for the first such child of the
//! kind in the answer's order, and only while no child of the kind is
//! missing and every one already as the answer wants passes the strategy's
//! status checks. A child that is missing is created whatever the strategy.
//!
//! A Metacontroller decorator's parent is its target, another controller's
//! object: the host keeps no condition on it, writes its status only where
//! the hook answered one, and merges the labels and annotations the hook
//! set (a `null` removes one) where the target does not show them yet.

use std::sync::Arc;

use kube::ResourceExt;
use kube::api::DynamicObject;
use kube::core::ApiResource;
use serde_json::{Map, Value, json};

use crate::controller::apply::{self, Owner};
use crate::controller::discovery::ResolvedKind;
use crate::controller::status::{self, HostCondition, StatusWrites};
use crate::metacontroller::definition::{ChildResource, Method};
use crate::metacontroller::sync::Decoration;
use crate::validate::Validated;

/// What a plan is made from, besides the answer.
#[derive(Clone, Copy)]
pub struct Inputs<'a> {
    /// The parent, as the host last saw or wrote it.
    pub parent: &'a DynamicObject,
    /// The parent's kind.
    pub primary: &'a ApiResource,
    /// The child kinds the controller watches; `observed` names them by
    /// index.
    pub children: &'a [ResolvedKind],
    /// The guest's name, stamped on every child.
    pub guest: &'a str,
    /// The parent's shard, when its guest has several.
    pub shard: Option<u16>,
    /// The parent's observed children, by index of their kind.
    pub observed: &'a [(usize, Arc<DynamicObject>)],
    /// Each child kind's update strategy, by index, for a guest made from
    /// a Metacontroller controller; `None`: every child is written as the
    /// answer has it.
    pub strategies: Option<&'a [ChildResource]>,
    /// The schema the parent's CRD gives `.status`, for a guest whose
    /// status is pruned to it (a Metacontroller controller's, see
    /// [`status::plan`]); `None`: written as the guest answers it.
    pub status_schema: Option<&'a serde_json::Value>,
    /// The parent is a Metacontroller decorator's target, with the labels
    /// and annotations its hook set on it.
    pub decoration: Option<&'a Decoration>,
}

/// One write a reconcile makes to a child.
#[derive(Debug)]
pub enum Step<'a> {
    /// Write a desired child: apply it when it is observed, create it
    /// behind the ownership fence when it is not.
    Write {
        /// The index of its kind.
        kind: usize,
        /// Its name.
        name: &'a str,
        /// Its namespace (`None`: cluster-scoped).
        namespace: Option<&'a str>,
        /// The child as the host applies it ([`apply::stamp`]).
        stamped: serde_json::Value,
        /// The child as observed, when it exists.
        observed: Option<Arc<DynamicObject>>,
        /// Why it is written: missing, changed or drifted.
        why: String,
    },
    /// Delete an observed child that is neither desired nor kept (with its
    /// UID as the precondition: only that very object goes).
    Prune {
        /// The index of its kind.
        kind: usize,
        /// The child as observed.
        child: Arc<DynamicObject>,
    },
}

/// The writes an answer needs.
#[derive(Debug)]
pub struct Plan<'a> {
    /// The children's writes: the desired ones first, in the answer's
    /// order, then the prunes.
    pub steps: Vec<Step<'a>>,
    /// Desired children that already are as the answer wants them.
    pub converged: usize,
    /// The status writes.
    pub status: StatusWrites,
    /// A decorator's merge patch of its target's labels and annotations.
    pub decorate: Option<Value>,
}

impl Plan<'_> {
    /// Whether the answer asks for no write at all.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty() && self.status.is_empty()
    }

    /// Whether the answer asks for a write of a child or of the guest's
    /// status (what the progress check counts; the host's own condition is
    /// not the guest's write).
    pub fn writes_for_the_guest(&self) -> bool {
        !self.steps.is_empty() || self.status.guest.is_some() || self.decorate.is_some()
    }
}

/// The writes `answer` needs on `inputs`, a condition the host stamps
/// timed `now`.
pub fn plan<'a>(inputs: Inputs<'_>, answer: &'a Validated, now: &str) -> Plan<'a> {
    let Inputs {
        parent,
        primary,
        children,
        guest,
        shard,
        observed,
        strategies,
        status_schema,
        decoration,
    } = inputs;
    let strategy = |kind: usize| strategies.and_then(|s| s.get(kind));
    let uid = parent.uid().unwrap_or_default();
    let name = parent.name_any();
    let owner = Owner {
        api_version: &primary.api_version,
        kind: &primary.kind,
        name: &name,
        uid: &uid,
        namespace: parent.metadata.namespace.as_deref(),
        shard,
    };
    let mut steps = Vec::new();
    let mut converged = 0;
    let mut kept = vec![false; observed.len()];
    // Per child kind: a child is being created, or one already as the
    // answer wants fails the status checks (a rolling update waits); the
    // children that differ and wait for their turn.
    let mut held = vec![false; children.len()];
    let mut waiting: Vec<(usize, usize, Step<'a>)> = Vec::new();
    for child in &answer.children {
        let kind = children
            .iter()
            .position(|k| k.kind.matches(&child.api_version, &child.kind))
            .expect("validated: declared kind");
        let stamped = apply::stamp(child, owner, guest);
        let current = observed.iter().position(|(k, o)| {
            *k == kind && o.name_any() == child.name && o.metadata.namespace == child.namespace
        });
        let why = match current {
            None => {
                held[kind] = true;
                "missing".to_owned()
            }
            Some(i) => {
                kept[i] = true;
                // A child a strategy would delete is recreated only for a
                // change of the guest's wish: what the API server adds to
                // it (a Pod's service account volume) is no reason.
                let drift = apply::drift(&stamped, &observed[i].1).filter(|_| {
                    !strategy(kind).is_some_and(|s| s.method.recreates())
                        || apply::wish_changed(&stamped, &observed[i].1)
                });
                match drift {
                    None => {
                        converged += 1;
                        if let Some(s) = strategy(kind).filter(|s| s.method.rolling()) {
                            let shown = serde_json::to_value(&*observed[i].1).unwrap_or_default();
                            held[kind] |= !s.passes(&shown);
                        }
                        continue;
                    }
                    Some(why) => why,
                }
            }
        };
        let write = Step::Write {
            kind,
            name: &child.name,
            namespace: child.namespace.as_deref(),
            stamped,
            observed: current.map(|i| observed[i].1.clone()),
            why,
        };
        match (current, strategy(kind).map(|s| s.method)) {
            (None, _) | (_, None | Some(Method::InPlace)) => steps.push(write),
            (Some(_), Some(Method::OnDelete)) => {}
            (Some(i), Some(Method::Recreate)) => kept[i] = false,
            (Some(i), Some(Method::RollingInPlace | Method::RollingRecreate)) => {
                waiting.push((kind, i, write));
            }
        }
    }
    // A rolling update moves the first waiting child of each kind that
    // nothing holds back.
    let mut moved = vec![false; children.len()];
    for (kind, i, write) in waiting {
        if held[kind] || moved[kind] {
            continue;
        }
        moved[kind] = true;
        match strategy(kind).map(|s| s.method) {
            Some(Method::RollingRecreate) => kept[i] = false,
            _ => steps.push(write),
        }
    }
    for (i, (kind, child)) in observed.iter().enumerate() {
        let keep = answer.keep.iter().any(|k| {
            k.name == child.name_any() && children[*kind].kind.matches(&k.api_version, &k.kind)
        });
        if !kept[i] && !keep {
            steps.push(Step::Prune {
                kind: *kind,
                child: child.clone(),
            });
        }
    }
    Plan {
        steps,
        converged,
        status: status::plan(
            parent,
            answer.status.as_ref(),
            if decoration.is_some() {
                HostCondition::Omitted
            } else {
                HostCondition::Succeeded
            },
            now,
            status_schema,
        ),
        decorate: decoration.and_then(|d| decorate(parent, d)),
    }
}

/// The merge patch that sets `decoration` on `target`, if it does not show
/// it already.
fn decorate(target: &DynamicObject, decoration: &Decoration) -> Option<Value> {
    let mut metadata = Map::new();
    let fields = [
        ("labels", &decoration.labels, target.labels()),
        ("annotations", &decoration.annotations, target.annotations()),
    ];
    for (field, wanted, shown) in fields {
        let patch: Map<String, Value> = wanted
            .iter()
            .filter(|(key, value)| shown.get(*key) != value.as_ref())
            .map(|(key, value)| (key.clone(), value.clone().map_or(Value::Null, Value::from)))
            .collect();
        if !patch.is_empty() {
            metadata.insert(field.to_owned(), Value::Object(patch));
        }
    }
    (!metadata.is_empty()).then(|| json!({ "metadata": metadata }))
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::model::{ChildKind, Description, KindRef, ReconcileResponse};
    use crate::protected::ProtectedObjects;
    use crate::runtime::Limits;
    use crate::validate::{self, ParentScope, Rules, Violation};

    const GUEST: &str = "cache-operator";
    const NOW: &str = "2026-12-06T12:00:00Z";

    fn primary() -> ApiResource {
        ApiResource {
            group: "apps.example.com".into(),
            version: "v1alpha1".into(),
            api_version: "apps.example.com/v1alpha1".into(),
            kind: "Cache".into(),
            plural: "caches".into(),
        }
    }

    fn config_maps() -> Vec<ResolvedKind> {
        vec![ResolvedKind {
            kind: KindRef::new("", "v1", "ConfigMap"),
            resource: ApiResource {
                group: String::new(),
                version: "v1".into(),
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                plural: "configmaps".into(),
            },
            namespaced: true,
        }]
    }

    fn description() -> Description {
        let mut description =
            Description::new(KindRef::new("apps.example.com", "v1alpha1", "Cache"));
        description
            .children
            .push(ChildKind::namespaced(KindRef::new("", "v1", "ConfigMap")));
        description
    }

    fn parent(status: Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "apps.example.com/v1alpha1", "kind": "Cache",
            "metadata": {"name": "demo", "namespace": "ns", "uid": "parent-uid", "generation": 2},
            "spec": {"image": "redis:7"},
            "status": status,
        }))
        .unwrap()
    }

    fn config_map(name: &str, data: Value) -> String {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
            .to_string()
    }

    /// The answer as the reconcile checks it.
    fn check(parent: &DynamicObject, raw: ReconcileResponse) -> Result<Validated, Violation> {
        validate::validate(
            Rules {
                description: &description(),
                bounds: Limits::default().bounds(),
                parent: ParentScope {
                    namespace: parent.metadata.namespace.as_deref(),
                    namespaced_children: false,
                },
                protected: &ProtectedObjects::new(),
            },
            raw,
        )
    }

    fn answer(parent: &DynamicObject, children: &[String], status: Option<Value>) -> Validated {
        check(
            parent,
            ReconcileResponse {
                children: children.to_vec(),
                status: status.map(|s| s.to_string()),
                ..ReconcileResponse::default()
            },
        )
        .expect("a valid answer")
    }

    /// `child` as the API server shows it once the host applied it: stamped,
    /// with the fields the server adds.
    fn applied(
        parent: &DynamicObject,
        answer: &Validated,
        index: usize,
        uid: &str,
    ) -> Arc<DynamicObject> {
        let kinds = config_maps();
        let plan = plan(inputs(parent, &kinds, &[]), answer, NOW);
        let Step::Write { stamped, .. } = &plan.steps[index] else {
            panic!("a write")
        };
        let mut object = stamped.clone();
        object["metadata"]["uid"] = uid.into();
        object["metadata"]["resourceVersion"] = "7".into();
        object["metadata"]["creationTimestamp"] = "2026-12-06T11:00:00Z".into();
        Arc::new(serde_json::from_value(object).unwrap())
    }

    fn inputs<'a>(
        parent: &'a DynamicObject,
        kinds: &'a [ResolvedKind],
        observed: &'a [(usize, Arc<DynamicObject>)],
    ) -> Inputs<'a> {
        static PRIMARY: std::sync::LazyLock<ApiResource> = std::sync::LazyLock::new(primary);
        Inputs {
            parent,
            primary: &PRIMARY,
            children: kinds,
            guest: GUEST,
            shard: None,
            observed,
            strategies: None,
            status_schema: None,
            decoration: None,
        }
    }

    /// What a plan asks for, in a form a case can state.
    #[derive(Debug, PartialEq)]
    enum Asked {
        Write {
            name: String,
            exists: bool,
            why: String,
        },
        Prune {
            name: String,
            uid: String,
        },
    }

    fn asked(plan: &Plan<'_>) -> Vec<Asked> {
        plan.steps
            .iter()
            .map(|step| match step {
                Step::Write {
                    name,
                    observed,
                    why,
                    ..
                } => Asked::Write {
                    name: (*name).to_owned(),
                    exists: observed.is_some(),
                    why: why.clone(),
                },
                Step::Prune { child, .. } => Asked::Prune {
                    name: child.name_any(),
                    uid: child.uid().unwrap_or_default(),
                },
            })
            .collect()
    }

    #[test]
    fn each_case_plans_exactly_the_writes_it_needs() {
        let ready = json!({"phase": "Ready", "conditions": [{"type": "Ready", "status": "True",
            "reason": "Available", "message": "", "lastTransitionTime": "2026-12-06T10:00:00Z"}]});
        let shown = {
            let mut s = ready.clone();
            s["observedGeneration"] = 2.into();
            s
        };
        let config = config_map("demo-config", json!({"maxmemory": "64mb"}));
        let converged_parent = parent(shown.clone());
        let existing = applied(
            &converged_parent,
            &answer(&converged_parent, std::slice::from_ref(&config), None),
            0,
            "child-uid",
        );
        let later = {
            let mut s = ready.clone();
            s["conditions"][0]["lastTransitionTime"] = "2026-12-06T11:59:59Z".into();
            s
        };
        struct Case {
            name: &'static str,
            children: Vec<String>,
            status: Option<Value>,
            keep: bool,
            observed: bool,
            asks: Vec<Asked>,
            status_write: bool,
        }
        let cases = [
            Case {
                name: "a converged parent plans no write",
                children: vec![config.clone()],
                status: Some(ready.clone()),
                keep: false,
                observed: true,
                asks: vec![],
                status_write: false,
            },
            Case {
                name: "a status that differs only in a condition's time plans nothing",
                children: vec![config.clone()],
                status: Some(later),
                keep: false,
                observed: true,
                asks: vec![],
                status_write: false,
            },
            Case {
                name: "a changed child plans one apply",
                children: vec![config_map("demo-config", json!({"maxmemory": "128mb"}))],
                status: Some(ready.clone()),
                keep: false,
                observed: true,
                asks: vec![Asked::Write {
                    name: "demo-config".into(),
                    exists: true,
                    why: "desired state changed".into(),
                }],
                status_write: false,
            },
            Case {
                name: "a missing child plans one create",
                children: vec![config.clone()],
                status: None,
                keep: false,
                observed: false,
                asks: vec![Asked::Write {
                    name: "demo-config".into(),
                    exists: false,
                    why: "missing".into(),
                }],
                status_write: false,
            },
            Case {
                name: "a removed child plans one prune with its UID precondition",
                children: vec![],
                status: None,
                keep: false,
                observed: true,
                asks: vec![Asked::Prune {
                    name: "demo-config".into(),
                    uid: "child-uid".into(),
                }],
                status_write: false,
            },
            Case {
                name: "a kept child is neither written nor pruned",
                children: vec![],
                status: None,
                keep: true,
                observed: true,
                asks: vec![],
                status_write: false,
            },
            Case {
                name: "a changed status plans one status write",
                children: vec![config.clone()],
                status: Some(json!({"phase": "Degraded"})),
                keep: false,
                observed: true,
                asks: vec![],
                status_write: true,
            },
        ];
        let kinds = config_maps();
        for case in cases {
            let parent = parent(shown.clone());
            let mut answer = answer(&parent, &case.children, case.status);
            if case.keep {
                answer.keep.push(crate::model::ObjectRef {
                    api_version: "v1".into(),
                    kind: "ConfigMap".into(),
                    name: "demo-config".into(),
                });
            }
            let observed: Vec<_> = if case.observed {
                vec![(0, existing.clone())]
            } else {
                vec![]
            };
            let plan = plan(inputs(&parent, &kinds, &observed), &answer, NOW);
            assert_eq!(asked(&plan), case.asks, "{}", case.name);
            assert_eq!(
                plan.status.guest.is_some(),
                case.status_write,
                "{}",
                case.name
            );
            assert!(plan.status.host.is_none(), "{}", case.name);
            assert_eq!(
                plan.is_empty(),
                case.asks.is_empty() && !case.status_write,
                "{}",
                case.name
            );
        }
    }

    #[test]
    fn a_condition_whose_status_changes_gets_the_new_time() {
        let parent = parent(
            json!({"observedGeneration": 2, "conditions": [{"type": "Ready",
            "status": "True", "lastTransitionTime": "2026-12-06T10:00:00Z"}]}),
        );
        let answer = answer(
            &parent,
            &[],
            Some(json!({"conditions": [{"type": "Ready", "status": "False",
                "lastTransitionTime": NOW}]})),
        );
        let plan = plan(inputs(&parent, &config_maps(), &[]), &answer, NOW);
        let written = plan.status.guest.expect("a status write");
        assert_eq!(written["conditions"][0]["lastTransitionTime"], NOW);
        assert_eq!(written["observedGeneration"], 2);
    }

    #[test]
    fn a_success_after_a_failure_plans_the_hosts_condition_back_to_true() {
        let failed = json!({"conditions": [{"type": wasmop_contract::names::HOST_CONDITION,
            "status": "False", "reason": "ApplyFailed", "message": "boom"}]});
        let parent = parent(failed);
        let answer = answer(&parent, &[], None);
        let plan = plan(inputs(&parent, &config_maps(), &[]), &answer, NOW);
        assert!(!plan.writes_for_the_guest());
        let host = plan.status.host.expect("the host's condition");
        assert_eq!(host["conditions"][0]["status"], "True");
        assert_eq!(host["conditions"][0]["lastTransitionTime"], NOW);
    }

    #[test]
    fn a_refused_answer_plans_nothing_and_names_the_rule() {
        let parent = parent(json!({}));
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "stolen"}})
            .to_string();
        let refused = check(
            &parent,
            ReconcileResponse {
                children: vec![secret],
                ..ReconcileResponse::default()
            },
        )
        .expect_err("an undeclared kind is refused");
        assert!(
            matches!(refused, Violation::UndeclaredKind { ref kind, .. } if kind == "Secret"),
            "{refused:?}"
        );
        assert!(
            refused.to_string().contains("undeclared kind v1/Secret"),
            "{refused}"
        );
    }

    /// Observed children, by index of their kind.
    type Observed = Vec<(usize, Arc<DynamicObject>)>;

    /// A child kind with `method`, whose rolling updates wait for the
    /// condition `Ready` to be `True`.
    fn strategy(method: Method) -> ChildResource {
        ChildResource {
            name: crate::metacontroller::definition::ResourceName {
                path: "spec.childResources[0]".into(),
                api_version: "v1".into(),
                resource: "configmaps".into(),
            },
            method,
            checks: vec![crate::metacontroller::definition::ConditionCheck {
                type_: "Ready".into(),
                status: Some("True".into()),
                reason: None,
            }],
        }
    }

    #[test]
    fn each_update_strategy_treats_a_child_that_differs_as_metacontroller_does() {
        let parent = parent(json!({}));
        // The ConfigMap `name` holding version `v`, as applied, its
        // condition `Ready` as `ready` says.
        let shown = |name: &str, v: &str, ready: bool| {
            let answer = answer(&parent, &[config_map(name, json!({"v": v}))], None);
            let mut shown = (*applied(&parent, &answer, 0, &format!("uid-{name}"))).clone();
            shown.data["status"] = json!({"conditions": [{"type": "Ready",
                "status": if ready { "True" } else { "False" }}]});
            Arc::new(shown)
        };
        let old = |name: &str, ready: bool| shown(name, "1", ready);
        let new = |name: &str| config_map(name, json!({"v": "2"}));
        let write = |name: &str, exists: bool| Asked::Write {
            name: name.into(),
            exists,
            why: if exists {
                "desired state changed"
            } else {
                "missing"
            }
            .into(),
        };
        let prune = |name: &str| Asked::Prune {
            name: name.into(),
            uid: format!("uid-{name}"),
        };
        let both = vec![(0, old("a", true)), (0, old("b", true))];
        // `a` already as the answer wants (v2); `b` still v1.
        let a_done = |ready: bool| vec![(0, shown("a", "2", ready)), (0, old("b", true))];
        type Case = (&'static str, Method, Observed, Vec<String>, Vec<Asked>);
        let cases: Vec<Case> = vec![
            (
                "OnDelete leaves existing children, creates the missing",
                Method::OnDelete,
                both.clone(),
                vec![new("a"), new("b"), new("c")],
                vec![write("c", false)],
            ),
            (
                "InPlace writes every child that differs",
                Method::InPlace,
                both.clone(),
                vec![new("a"), new("b")],
                vec![write("a", true), write("b", true)],
            ),
            (
                "Recreate prunes every child that differs",
                Method::Recreate,
                both.clone(),
                vec![new("a"), new("b")],
                vec![prune("a"), prune("b")],
            ),
            (
                "RollingInPlace writes the first child that differs",
                Method::RollingInPlace,
                both.clone(),
                vec![new("a"), new("b")],
                vec![write("a", true)],
            ),
            (
                "RollingRecreate prunes the first child that differs, in the answer's order",
                Method::RollingRecreate,
                both.clone(),
                vec![new("b"), new("a")],
                vec![prune("b")],
            ),
            (
                "a rolling update waits while a child is missing",
                Method::RollingRecreate,
                both.clone(),
                vec![new("a"), new("b"), new("c")],
                vec![write("c", false)],
            ),
            (
                "a rolling update waits while an updated child fails the checks",
                Method::RollingInPlace,
                a_done(false),
                vec![new("a"), new("b")],
                vec![],
            ),
            (
                "a rolling update moves on once the updated child passes them",
                Method::RollingInPlace,
                a_done(true),
                vec![new("a"), new("b")],
                vec![write("b", true)],
            ),
            (
                "a child the answer omits is pruned whatever the strategy",
                Method::OnDelete,
                both.clone(),
                vec![new("a")],
                vec![prune("b")],
            ),
        ];
        for (name, method, observed, children, asks) in cases {
            let strategies = [strategy(method)];
            let answer = answer(&parent, &children, None);
            let kinds = config_maps();
            let mut inputs = inputs(&parent, &kinds, &observed);
            inputs.strategies = Some(&strategies);
            assert_eq!(asked(&plan(inputs, &answer, NOW)), asks, "{name}");
        }
    }

    #[test]
    fn a_decorator_merges_only_the_labels_and_annotations_its_target_lacks() {
        use crate::metacontroller::sync::Decoration;
        let mut target = parent(json!({"replicas": 1}));
        target.metadata.labels = Some(
            [("kept", "v"), ("old", "x")]
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .into(),
        );
        let labels = |pairs: &[(&str, Option<&str>)]| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.map(str::to_owned)))
                .collect()
        };
        let kinds = config_maps();
        let answer = check(&target, ReconcileResponse::default()).unwrap();
        let planned = |decoration: &Decoration| {
            let plan = plan(
                Inputs {
                    decoration: Some(decoration),
                    ..inputs(&target, &kinds, &[])
                },
                &answer,
                NOW,
            );
            (plan.decorate, plan.status.is_empty())
        };
        let decoration = Decoration {
            labels: labels(&[
                ("kept", Some("v")),
                ("old", None),
                ("new", Some("n")),
                ("absent", None),
            ]),
            annotations: labels(&[("note", Some("x"))]),
        };
        // No host condition on another controller's object, and no status
        // the hook did not answer.
        assert_eq!(
            planned(&decoration),
            (
                Some(
                    json!({"metadata": {"labels": {"old": null, "new": "n"}, "annotations": {"note": "x"}}})
                ),
                true
            )
        );
        let shown = Decoration {
            labels: labels(&[("kept", Some("v")), ("absent", None)]),
            annotations: labels(&[]),
        };
        assert_eq!(planned(&shown), (None, true));
    }
}
