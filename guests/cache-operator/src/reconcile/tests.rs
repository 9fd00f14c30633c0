//! Behaviour of whole reconciles, driven the way the host drives the guest:
//! a parent and observed children in, children, status and events out.

use std::time::{Duration, UNIX_EPOCH};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};
use wasmop_guest::time::time_at;
use wasmop_guest::{Event, EventType, ReconcileResponse, Request, Response};

use super::reconcile;
use crate::children::CONFIG_HASH_ANNOTATION;
use crate::flavor::Flavor;

fn at(seconds: u64) -> Time {
    time_at(UNIX_EPOCH + Duration::from_secs(1_700_000_000 + seconds))
}

fn spec() -> Value {
    json!({
        "image": "redis:7.2",
        "replicas": 2,
        "port": 6379,
        "config": {"redis.conf": "maxmemory 64mb"}
    })
}

/// A Cache as the API server returns it.
fn parent(spec: Value, status: Option<Value>) -> Value {
    let mut parent = json!({
        "apiVersion": "apps.example.com/v1alpha1",
        "kind": "Cache",
        "metadata": {
            "name": "demo",
            "namespace": "default",
            "uid": "0b7a6f4e-0000-4000-8000-000000000001",
            "resourceVersion": "100",
            "generation": 3,
            "finalizers": ["apps.example.com/cache-cleanup"]
        },
        "spec": spec
    });
    if let Some(status) = status {
        parent["status"] = status;
    }
    parent
}

/// What the API server would hold after the host applied `desired`: the
/// host's stamps, server metadata and, for a Deployment, a status with
/// `ready` of its pods ready (all updated).
fn as_applied(desired: &Value, ready: i64) -> Value {
    let mut object = desired.clone();
    let metadata = object["metadata"].as_object_mut().unwrap();
    metadata.insert("namespace".into(), json!("default"));
    metadata.insert("uid".into(), json!("child-uid"));
    metadata.insert("resourceVersion".into(), json!("7"));
    metadata.insert("creationTimestamp".into(), json!("2024-01-01T00:00:00Z"));
    metadata.insert(
        "ownerReferences".into(),
        json!([{"apiVersion": "apps.example.com/v1alpha1", "kind": "Cache", "name": "demo",
                "uid": "0b7a6f4e-0000-4000-8000-000000000001", "controller": true,
                "blockOwnerDeletion": true}]),
    );
    metadata
        .entry("labels")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .unwrap()
        .insert("wasmop.dev/guest".into(), json!("cache-operator"));
    if object["kind"] == "Deployment" {
        let replicas = object["spec"]["replicas"].as_i64().unwrap();
        object["metadata"]["generation"] = json!(5);
        object["metadata"]["annotations"] = json!({"deployment.kubernetes.io/revision": "1"});
        object["status"] = json!({
            "observedGeneration": 5,
            "replicas": replicas,
            "updatedReplicas": replicas,
            "readyReplicas": ready,
            "availableReplicas": ready
        });
    }
    object
}

fn request(parent: Value, observed: Vec<Value>) -> Request {
    Request::new(parent, observed, false)
}

/// A response with its children and status parsed back, and its wire form.
#[derive(Debug)]
struct Rendered {
    children: Vec<Value>,
    status: Option<Value>,
    events: Vec<Event>,
    finalized: bool,
    requeue_after_seconds: Option<u32>,
    /// The observed children kept, as `kind/name`.
    kept: Vec<String>,
    wire: ReconcileResponse,
}

fn rendered(response: Response) -> Rendered {
    Rendered {
        children: response.child_values(),
        status: response.status_value(),
        events: response.events.clone(),
        finalized: response.finalized,
        requeue_after_seconds: response.requeue_after_seconds,
        kept: response
            .kept()
            .iter()
            .map(|r| format!("{}/{}", r.kind, r.name))
            .collect(),
        wire: response.into_wire(),
    }
}

fn run(request: &Request, now: &Time) -> Rendered {
    rendered(reconcile(request, now, Flavor::V1).unwrap())
}

/// A parent and its observed children, as the host would send them.
struct State {
    parent: Value,
    observed: Vec<Value>,
}

impl State {
    fn request(&self) -> Request {
        request(self.parent.clone(), self.observed.clone())
    }
}

fn kinds(response: &Rendered) -> Vec<String> {
    response
        .children
        .iter()
        .map(|c| {
            format!(
                "{}/{}",
                c["kind"].as_str().unwrap(),
                c["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect()
}

fn reasons(response: &Rendered) -> Vec<&str> {
    response.events.iter().map(|e| e.reason.as_str()).collect()
}

fn child<'a>(response: &'a Rendered, kind: &str) -> &'a Value {
    response
        .children
        .iter()
        .find(|c| c["kind"] == kind)
        .unwrap()
}

/// The parent and children after the host applied `response` and every pod
/// became ready: what the next resync sees.
fn converged(parent_spec: Value) -> State {
    let first = run(&request(parent(parent_spec.clone(), None), vec![]), &at(0));
    let observed: Vec<Value> = first.children.iter().map(|c| as_applied(c, 2)).collect();
    let progressing = run(
        &request(
            parent(parent_spec.clone(), first.status.clone()),
            observed.clone(),
        ),
        &at(10),
    );
    State {
        parent: parent(parent_spec, progressing.status),
        observed,
    }
}

#[test]
fn a_new_cache_gets_config_map_deployment_and_service() {
    let response = run(&request(parent(spec(), None), vec![]), &at(0));
    assert_eq!(
        kinds(&response),
        ["ConfigMap/demo-config", "Deployment/demo", "Service/demo"]
    );
    assert_eq!(reasons(&response), ["Created", "PhaseChanged"]);
    assert!(
        response
            .events
            .iter()
            .all(|e| e.event_type == EventType::Normal)
    );
    let status = response.status.as_ref().unwrap();
    assert_eq!(status["phase"], "Pending");
    assert_eq!(status["readyReplicas"], 0);
    assert!(!response.finalized);
    assert_eq!(response.requeue_after_seconds, None);
}

#[test]
fn children_follow_the_spec() {
    let response = run(&request(parent(spec(), None), vec![]), &at(0));
    let deployment = child(&response, "Deployment");
    assert_eq!(deployment["spec"]["replicas"], 2);
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "redis:7.2");
    assert_eq!(container["ports"][0]["containerPort"], 6379);
    assert_eq!(
        child(&response, "Service")["spec"]["ports"][0]["port"],
        6379
    );
    assert_eq!(
        child(&response, "ConfigMap")["data"],
        json!({"redis.conf": "maxmemory 64mb"})
    );
    for c in &response.children {
        assert_eq!(
            c["metadata"]["labels"],
            json!({"app": "cache", "cache": "demo"})
        );
        assert!(c["metadata"].get("ownerReferences").is_none());
        assert!(c["metadata"].get("namespace").is_none());
    }
}

#[test]
fn defaults_fill_a_minimal_spec() {
    let response = run(
        &request(parent(json!({"image": "redis:7.2"}), None), vec![]),
        &at(0),
    );
    let deployment = child(&response, "Deployment");
    assert_eq!(deployment["spec"]["replicas"], 1);
    assert_eq!(
        child(&response, "Service")["spec"]["ports"][0]["port"],
        6379
    );
}

#[test]
fn a_deployment_with_ready_pods_makes_the_cache_ready() {
    let converged = converged(spec());
    let status = converged.parent["status"].clone();
    assert_eq!(status["phase"], "Ready");
    assert_eq!(status["readyReplicas"], 2);
    let conditions = status["conditions"].as_array().unwrap();
    let available = conditions
        .iter()
        .find(|c| c["type"] == "Available")
        .unwrap();
    assert_eq!(available["status"], "True");
    assert_eq!(available["observedGeneration"], 3);
    let progressing = conditions
        .iter()
        .find(|c| c["type"] == "Progressing")
        .unwrap();
    assert_eq!(progressing["status"], "False");
    assert!(
        status.get("observedGeneration").is_none(),
        "the host adds observedGeneration"
    );
}

#[test]
fn a_partly_ready_deployment_is_progressing() {
    let first = run(&request(parent(spec(), None), vec![]), &at(0));
    let observed: Vec<Value> = first.children.iter().map(|c| as_applied(c, 1)).collect();
    let response = run(
        &request(parent(spec(), first.status.clone()), observed),
        &at(5),
    );
    let status = response.status.as_ref().unwrap();
    assert_eq!(status["phase"], "Progressing");
    assert_eq!(status["readyReplicas"], 1);
    assert_eq!(reasons(&response), ["PhaseChanged"]);
    assert_eq!(
        response.events[0].message,
        "phase changed from Pending to Progressing"
    );
}

#[test]
fn a_converged_resync_gives_identical_output_and_no_events() {
    let converged = converged(spec());
    let once = run(&converged.request(), &at(100)).wire;
    let twice = run(&converged.request(), &at(200)).wire;
    assert_eq!(
        once, twice,
        "output must not depend on the clock once converged"
    );
    assert!(
        once.events.is_empty(),
        "a no-op reconcile emits no events: {:?}",
        once.events
    );
    // The status is exactly what the parent already shows.
    let status: Value = serde_json::from_str(once.status.as_deref().unwrap()).unwrap();
    assert_eq!(status, converged.parent["status"]);
}

#[test]
fn a_converged_resync_desires_what_is_observed() {
    let converged = converged(spec());
    let response = run(&converged.request(), &at(100));
    for desired in &response.children {
        let observed = converged
            .observed
            .iter()
            .find(|o| o["kind"] == desired["kind"])
            .unwrap();
        assert_eq!(&as_applied(desired, 2), observed, "{}", desired["kind"]);
    }
}

#[test]
fn changing_replicas_scales_the_deployment() {
    let converged = converged(spec());
    let mut parent = converged.parent.clone();
    parent["spec"]["replicas"] = json!(3);
    let response = run(&request(parent, converged.observed.clone()), &at(100));
    assert_eq!(child(&response, "Deployment")["spec"]["replicas"], 3);
    assert_eq!(reasons(&response), ["Scaled", "PhaseChanged"]);
    assert_eq!(
        response.events[0].message,
        "scaling Deployment demo from 2 to 3 replicas"
    );
    assert_eq!(response.status.unwrap()["phase"], "Progressing");
}

#[test]
fn changing_the_image_of_a_ready_cache_is_an_upgrade_that_stays_ready() {
    let converged = converged(spec());
    assert_eq!(converged.parent["status"]["lastGoodImage"], "redis:7.2");
    let mut parent = converged.parent.clone();
    parent["spec"]["image"] = json!("redis:7.4");
    let response = run(&request(parent, converged.observed.clone()), &at(100));
    assert_eq!(image_of(&response), "redis:7.4");
    assert_eq!(reasons(&response), ["ImageChanged"]);
    let status = response.status.as_ref().unwrap();
    assert_eq!(status["phase"], "Ready", "the old pods still serve");
    assert_eq!(status["lastGoodImage"], "redis:7.2");
    let upgrading = condition(status, "Upgrading");
    assert_eq!(
        (
            &upgrading["status"],
            &upgrading["reason"],
            &upgrading["message"]
        ),
        (
            &json!("True"),
            &json!("RollingOut"),
            &json!("redis:7.2 -> redis:7.4")
        )
    );
    assert_eq!(condition(status, "Progressing")["status"], "True");
}

/// The image of the `cache` container of the desired Deployment.
fn image_of(response: &Rendered) -> &str {
    child(response, "Deployment")["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap()
}

/// The condition `type_` of `status`.
fn condition<'a>(status: &'a Value, type_: &str) -> &'a Value {
    status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == type_)
        .unwrap_or_else(|| panic!("no condition {type_} in {status}"))
}

/// `state` after `image` was asked for and its rollout got as far as the
/// Deployment `rollout` (applied from the answer, then edited), the
/// parent's status the answer's: the reconcile after that one sees it.
fn upgraded(state: &State, image: &str, now: u64) -> (Value, Rendered) {
    let mut parent = state.parent.clone();
    parent["spec"]["image"] = json!(image);
    let response = run(&request(parent.clone(), state.observed.clone()), &at(now));
    parent["status"] = response.status.clone().unwrap();
    (parent, response)
}

/// The observed children with the Deployment replaced by `desired`
/// applied and given `status`.
fn with_deployment(observed: &[Value], desired: &Value, status: Value) -> Vec<Value> {
    observed
        .iter()
        .map(|o| {
            if o["kind"] == "Deployment" {
                let mut d = as_applied(desired, 2);
                d["status"] = status.clone();
                d
            } else {
                o.clone()
            }
        })
        .collect()
}

#[test]
fn an_upgrade_that_completes_moves_the_last_good_image_with_one_event() {
    let state = converged(spec());
    let (parent, first) = upgraded(&state, "redis:7.4", 100);
    let done = with_deployment(
        &state.observed,
        child(&first, "Deployment"),
        json!({"observedGeneration": 5, "replicas": 2, "updatedReplicas": 2, "readyReplicas": 2}),
    );
    let response = run(&request(parent.clone(), done.clone()), &at(110));
    assert_eq!(reasons(&response), ["Upgraded"]);
    assert_eq!(response.events[0].event_type, EventType::Normal);
    let status = response.status.clone().unwrap();
    assert_eq!(status["phase"], "Ready");
    assert_eq!(status["lastGoodImage"], "redis:7.4");
    for type_ in ["Upgrading", "Upgraded"] {
        let c = condition(&status, type_);
        assert_eq!(c["reason"], "Upgraded", "{type_}");
        assert_eq!(c["message"], "redis:7.2 -> redis:7.4", "{type_}");
    }
    assert_eq!(condition(&status, "Upgrading")["status"], "False");
    assert_eq!(condition(&status, "Upgraded")["status"], "True");
    // Converged again: the same status, no event.
    let mut parent = parent;
    parent["status"] = status.clone();
    let again = run(&request(parent, done), &at(120));
    assert!(again.events.is_empty(), "{:?}", again.events);
    assert_eq!(again.status.unwrap(), status);
}

#[test]
fn a_rollout_past_its_deadline_goes_back_to_the_last_good_image_and_stays_there() {
    let state = converged(spec());
    let failing = "redis:7.4-never-ready";
    let (parent, first) = upgraded(&state, failing, 100);
    let stuck = with_deployment(
        &state.observed,
        child(&first, "Deployment"),
        json!({"observedGeneration": 5, "replicas": 3, "updatedReplicas": 1, "readyReplicas": 2,
            "conditions": [{"type": "Progressing", "status": "False",
                "reason": "ProgressDeadlineExceeded"}]}),
    );
    let response = run(&request(parent.clone(), stuck.clone()), &at(400));
    assert_eq!(image_of(&response), "redis:7.2");
    assert_eq!(
        reasons(&response),
        ["ImageChanged", "UpgradeRolledBack", "PhaseChanged"]
    );
    assert_eq!(response.events[1].event_type, EventType::Warning);
    assert_eq!(
        response.events[1].message,
        "the rollout of redis:7.4-never-ready made no progress for 300 s (ProgressDeadlineExceeded); rolled back to redis:7.2"
    );
    let status = response.status.clone().unwrap();
    assert_eq!(status["phase"], "Degraded");
    assert_eq!(status["lastGoodImage"], "redis:7.2");
    assert_eq!(status["failedImage"], failing);
    for type_ in ["Upgrading", "Upgraded"] {
        let c = condition(&status, type_);
        assert_eq!(
            (&c["status"], &c["reason"], &c["message"]),
            (
                &json!("False"),
                &json!("RolledBack"),
                &json!(response.events[1].message)
            ),
            "{type_}"
        );
    }

    // Rolling back and rolled back: the Deployment keeps the last good
    // image, the status stays as it is, nothing is said twice.
    let mut parent = parent;
    parent["status"] = status.clone();
    assert_eq!(parent["spec"]["image"], failing, "spec.image is the user's");
    let rolled_back = with_deployment(
        &state.observed,
        child(&response, "Deployment"),
        json!({"observedGeneration": 5, "replicas": 2, "updatedReplicas": 2, "readyReplicas": 2}),
    );
    for (observed, now) in [(stuck, 410), (rolled_back, 420)] {
        let again = run(&request(parent.clone(), observed), &at(now));
        assert_eq!(image_of(&again), "redis:7.2");
        assert!(
            again.events.iter().all(|e| e.reason == "ImageChanged"),
            "{:?}",
            again.events
        );
        let again_status = again.status.unwrap();
        assert_eq!(again_status["phase"], "Degraded");
        assert_eq!(again_status["failedImage"], failing);
        for type_ in ["Upgrading", "Upgraded"] {
            assert_eq!(
                condition(&again_status, type_),
                condition(&status, type_),
                "{type_} keeps its time"
            );
        }
    }

    // Deleting it scales down the image it runs, not the one that failed.
    let mut deleting = parent.clone();
    deleting["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
    let cleanup = run(
        &Request::new(deleting, state.observed.clone(), true),
        &at(430),
    );
    assert_eq!(image_of(&cleanup), "redis:7.2");

    // A new spec.image is a new upgrade.
    parent["spec"]["image"] = json!("redis:7.4");
    let next = run(&request(parent, state.observed.clone()), &at(440));
    assert_eq!(image_of(&next), "redis:7.4");
    let next_status = next.status.unwrap();
    assert_eq!(next_status["phase"], "Ready");
    assert!(next_status.get("failedImage").is_none(), "{next_status}");
    assert_eq!(condition(&next_status, "Upgrading")["status"], "True");
}

#[test]
fn the_first_rollout_is_no_upgrade() {
    let converged = converged(spec());
    let status = &converged.parent["status"];
    assert_eq!(status["lastGoodImage"], "redis:7.2");
    let types: Vec<&Value> = status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["type"])
        .collect();
    assert_eq!(types, ["Available", "Progressing"]);
}

#[test]
fn a_paused_cache_does_not_upgrade() {
    let converged = converged(spec());
    let mut parent = converged.parent.clone();
    parent["spec"]["paused"] = json!(true);
    parent["spec"]["image"] = json!("redis:7.4");
    let response = run(&request(parent, converged.observed.clone()), &at(100));
    assert!(response.children.is_empty());
    let status = response.status.unwrap();
    assert_eq!(status["lastGoodImage"], "redis:7.2");
    assert!(
        status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["type"] != "Upgrading"),
        "{status}"
    );
}

#[test]
fn changing_the_config_changes_the_pod_template_hash() {
    let converged = converged(spec());
    let hash = |r: &Rendered| {
        child(r, "Deployment")["spec"]["template"]["metadata"]["annotations"]
            [CONFIG_HASH_ANNOTATION]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let before = run(&converged.request(), &at(100));
    let mut parent = converged.parent.clone();
    parent["spec"]["config"]["redis.conf"] = json!("maxmemory 128mb");
    let after = run(&request(parent, converged.observed.clone()), &at(100));
    assert_ne!(hash(&before), hash(&after));
    assert_eq!(
        child(&after, "ConfigMap")["data"]["redis.conf"],
        "maxmemory 128mb"
    );
    assert_eq!(reasons(&after), ["ConfigChanged", "PhaseChanged"]);
}

#[test]
fn a_hand_edited_deployment_is_set_back() {
    let mut converged = converged(spec());
    let deployment = converged
        .observed
        .iter_mut()
        .find(|o| o["kind"] == "Deployment")
        .unwrap();
    deployment["spec"]["replicas"] = json!(5);
    let response = run(&converged.request(), &at(100));
    assert_eq!(child(&response, "Deployment")["spec"]["replicas"], 2);
    assert!(reasons(&response).contains(&"Scaled"));
}

#[test]
fn an_empty_image_is_a_permanent_error() {
    let err = reconcile(
        &request(parent(json!({"image": ""}), None), vec![]),
        &at(0),
        Flavor::V1,
    )
    .unwrap_err();
    assert!(!err.is_retryable());
    assert!(err.message.contains("spec.image"), "{err}");
}

#[test]
fn a_spec_of_the_wrong_shape_is_a_permanent_error() {
    let err = reconcile(
        &request(
            parent(json!({"image": "redis", "replicas": "two"}), None),
            vec![],
        ),
        &at(0),
        Flavor::V1,
    )
    .unwrap_err();
    assert!(!err.is_retryable());
}

#[test]
fn a_parent_without_a_name_is_a_permanent_error() {
    let err = reconcile(
        &request(json!({"spec": spec()}), vec![]),
        &at(0),
        Flavor::V1,
    )
    .unwrap_err();
    assert!(!err.is_retryable());
}

#[test]
fn identical_input_gives_byte_identical_output() {
    let req = request(parent(spec(), None), vec![]);
    let a = run(&req, &at(0)).wire;
    let b = run(&req, &at(0)).wire;
    assert_eq!(a, b);
}

#[test]
fn paused_keeps_the_observed_children_without_sending_them_back() {
    let converged = converged(spec());
    let mut parent = converged.parent.clone();
    parent["spec"]["paused"] = json!(true);
    parent["spec"]["replicas"] = json!(7);
    parent["spec"]["image"] = json!("redis:8");
    let response = run(&request(parent, converged.observed.clone()), &at(100));
    assert!(response.children.is_empty(), "paused must not write");
    assert_eq!(
        response.kept,
        ["ConfigMap/demo-config", "Deployment/demo", "Service/demo"]
    );
    let status = response.status.as_ref().unwrap();
    assert_eq!(status["phase"], "Paused");
    assert_eq!(status["readyReplicas"], 2);
    assert_eq!(reasons(&response), ["PhaseChanged"]);
}

#[test]
fn a_paused_resync_changes_nothing_and_emits_nothing() {
    let converged = converged(spec());
    let mut parent = converged.parent.clone();
    parent["spec"]["paused"] = json!(true);
    let first = run(
        &request(parent.clone(), converged.observed.clone()),
        &at(100),
    );
    parent["status"] = first.status.clone().unwrap();
    let again = run(&request(parent, converged.observed.clone()), &at(200));
    assert!(again.events.is_empty());
    assert_eq!(again.status, first.status);
    assert_eq!(again.kept, first.kept);
}

#[test]
fn paused_keeps_whatever_it_observes_even_a_budget_left_by_v2() {
    let converged = converged(spec());
    let mut observed = converged.observed.clone();
    observed.push(json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "demo"}}));
    let mut parent = converged.parent.clone();
    parent["spec"]["paused"] = json!(true);
    let v1 = run(&request(parent, observed), &at(100));
    assert_eq!(v1.kept.len(), 4);
    assert!(v1.children.is_empty());
}

#[test]
fn a_paused_cache_with_nothing_observed_creates_nothing() {
    let mut s = spec();
    s["paused"] = json!(true);
    let response = run(&request(parent(s, None), vec![]), &at(0));
    assert!(response.children.is_empty() && response.kept.is_empty());
    assert_eq!(response.status.unwrap()["phase"], "Paused");
}

#[test]
fn unpausing_applies_the_spec_again() {
    let converged = converged(spec());
    let mut parent = converged.parent.clone();
    parent["spec"]["paused"] = json!(true);
    let paused = run(
        &request(parent.clone(), converged.observed.clone()),
        &at(100),
    );
    parent["status"] = paused.status.unwrap();
    parent["spec"]["paused"] = json!(false);
    parent["spec"]["replicas"] = json!(4);
    let response = run(&request(parent, converged.observed.clone()), &at(200));
    assert_eq!(child(&response, "Deployment")["spec"]["replicas"], 4);
    assert!(
        response
            .events
            .iter()
            .any(|e| e.message == "phase changed from Paused to Progressing")
    );
}

fn deleting(observed: Vec<Value>) -> Request {
    let mut parent = parent(spec(), None);
    parent["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
    Request::new(parent, observed, true)
}

#[test]
fn deletion_scales_the_deployment_to_zero_and_waits() {
    let converged = converged(spec());
    let response = run(&deleting(converged.observed.clone()), &at(100));
    assert!(!response.finalized);
    assert_eq!(response.requeue_after_seconds, Some(30));
    assert_eq!(reasons(&response), ["CleanupStarted"]);
    assert_eq!(
        response.events[0].message,
        "scaling Deployment demo from 2 to 0 replicas before deletion"
    );
    // The Deployment is the one child desired, as the spec says but with
    // no replicas; the others are kept as they are.
    assert_eq!(kinds(&response), ["Deployment/demo"]);
    let deployment = child(&response, "Deployment");
    assert_eq!(deployment["spec"]["replicas"], 0);
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["image"],
        "redis:7.2"
    );
    assert_eq!(response.kept, ["ConfigMap/demo-config", "Service/demo"]);
    assert_eq!(
        response.status, None,
        "the status of a terminating Cache is left alone"
    );
}

#[test]
fn deletion_waits_while_pods_are_still_stopping() {
    let converged = converged(spec());
    let mut observed = converged.observed.clone();
    let deployment = observed
        .iter_mut()
        .find(|o| o["kind"] == "Deployment")
        .unwrap();
    deployment["spec"]["replicas"] = json!(0);
    deployment["status"]["replicas"] = json!(1);
    let response = run(&deleting(observed), &at(100));
    assert!(!response.finalized);
    assert_eq!(response.requeue_after_seconds, Some(30));
    assert_eq!(reasons(&response), ["CleanupWaiting"]);
    assert_eq!(
        response.events[0].message,
        "waiting for 1 pod(s) of Deployment demo to stop"
    );
}

#[test]
fn deletion_finishes_once_no_pods_are_left() {
    let converged = converged(spec());
    for status in [json!({"replicas": 0, "observedGeneration": 6}), json!({})] {
        let mut observed = converged.observed.clone();
        let deployment = observed
            .iter_mut()
            .find(|o| o["kind"] == "Deployment")
            .unwrap();
        deployment["spec"]["replicas"] = json!(0);
        deployment["status"] = status;
        let response = run(&deleting(observed), &at(100));
        assert!(response.finalized);
        assert_eq!(response.requeue_after_seconds, None);
        assert_eq!(reasons(&response), ["CleanupComplete"]);
        assert!(response.children.is_empty());
        assert_eq!(response.kept.len(), 3, "nothing is pruned on the way out");
    }
}

#[test]
fn deletion_without_a_deployment_finishes_at_once() {
    let response = run(&deleting(vec![]), &at(0));
    assert!(response.finalized);
    assert!(response.children.is_empty());
    assert_eq!(reasons(&response), ["CleanupComplete"]);
}

#[test]
fn deletion_works_for_a_paused_or_invalid_cache() {
    let mut parent = deleting(vec![]).parent().clone();
    parent["spec"] = json!({"image": "", "paused": true});
    let response = run(&Request::new(parent.clone(), vec![], true), &at(0));
    assert!(response.finalized);
    // With pods still running but a spec that makes no Deployment, the
    // Deployment is left to the garbage collector.
    let converged = converged(spec());
    let response = run(&Request::new(parent, converged.observed, true), &at(0));
    assert!(response.finalized);
    assert!(response.children.is_empty());
    assert_eq!(reasons(&response), ["CleanupSkipped"]);
}

#[test]
fn v2_labels_every_child_and_adds_a_disruption_budget() {
    let response =
        rendered(reconcile(&request(parent(spec(), None), vec![]), &at(0), Flavor::V2).unwrap());
    assert_eq!(
        kinds(&response),
        [
            "ConfigMap/demo-config",
            "Deployment/demo",
            "Service/demo",
            "PodDisruptionBudget/demo"
        ]
    );
    for c in &response.children {
        assert_eq!(
            c["metadata"]["labels"]["apps.example.com/version"], "v2",
            "{}",
            c["kind"]
        );
    }
    let deployment = child(&response, "Deployment");
    assert!(
        deployment["spec"]["selector"]["matchLabels"]
            .get("apps.example.com/version")
            .is_none()
    );
}

#[test]
fn swapping_v1_to_v2_changes_only_labels_and_adds_the_budget() {
    let converged = converged(spec());
    let v2 = rendered(reconcile(&converged.request(), &at(100), Flavor::V2).unwrap());
    assert!(
        v2.events.is_empty(),
        "a label change is not a rollout: {:?}",
        v2.events
    );
    assert_eq!(v2.status.as_ref(), Some(&converged.parent["status"]));
    assert_eq!(v2.children.len(), 4);
}

#[test]
fn the_operator_trait_runs_natively_with_the_real_clock() {
    use wasmop_guest::Operator;
    let response =
        rendered(crate::CacheOperator::reconcile(request(parent(spec(), None), vec![])).unwrap());
    assert_eq!(
        response.children.len(),
        if cfg!(feature = "v2") { 4 } else { 3 }
    );
}

fn with_auth() -> Value {
    let mut spec = spec();
    spec["auth"] = json!({"secretRef": {"name": "creds", "key": "password"}});
    spec
}

fn secret(value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "creds", "namespace": "default"},
        "data": {"password": value}})
}

#[test]
fn a_missing_secret_creates_nothing_and_says_which_secret() {
    let response = run(&request(parent(with_auth(), None), vec![]), &at(0));
    assert!(response.children.is_empty());
    let status = response.status.as_ref().unwrap();
    assert_eq!(status["phase"], "Pending");
    let available = &status["conditions"][0];
    assert_eq!(
        (
            &available["type"],
            &available["status"],
            &available["reason"]
        ),
        (
            &json!("Available"),
            &json!("False"),
            &json!("SecretMissing")
        )
    );
    assert!(available["message"].as_str().unwrap().contains("creds"));
    assert_eq!(reasons(&response), ["SecretMissing", "PhaseChanged"]);
    assert_eq!(response.events[0].event_type, EventType::Warning);
}

#[test]
fn a_secret_that_goes_missing_keeps_the_deployment_as_it_is() {
    let state = converged(spec());
    let missing = Request::new(parent(with_auth(), None), state.observed.clone(), false);
    let response = run(&missing, &at(20));
    assert!(response.children.is_empty());
    assert_eq!(
        response.kept,
        ["ConfigMap/demo-config", "Deployment/demo", "Service/demo"]
    );
    let again = run(
        &Request::new(
            parent(with_auth(), response.status.clone()),
            state.observed,
            false,
        ),
        &at(30),
    );
    assert_eq!(again.status, response.status);
    assert!(again.events.is_empty(), "{:?}", again.events);
}

#[test]
fn a_found_secret_reaches_the_pods_and_a_rotation_rolls_them() {
    let found = |value: &str| {
        let request = request(parent(with_auth(), None), vec![]).with_related(vec![secret(value)]);
        run(&request, &at(0))
    };
    let first = found("czNjcjN0");
    let deployment = child(&first, "Deployment");
    let template = &deployment["spec"]["template"];
    assert_eq!(
        template["spec"]["containers"][0]["env"][0]["valueFrom"]["secretKeyRef"],
        json!({"name": "creds", "key": "password"})
    );
    let hash = template["metadata"]["annotations"]["apps.example.com/secret-hash"].clone();
    assert!(hash.is_string());
    let rotated = found("bmV3");
    assert_ne!(
        child(&rotated, "Deployment")["spec"]["template"]["metadata"]["annotations"]["apps.example.com/secret-hash"],
        hash
    );
}

#[test]
fn the_default_image_setting_fills_an_empty_image() {
    let mut spec = spec();
    spec["image"] = json!("");
    let settings = wasmop_guest::Settings::from_json(Some(r#"{"defaultImage":"valkey:8"}"#.into()));
    let request = request(parent(spec.clone(), None), vec![]).with_settings(settings);
    let response = run(&request, &at(0));
    assert_eq!(
        child(&response, "Deployment")["spec"]["template"]["spec"]["containers"][0]["image"],
        "valkey:8"
    );
    let without = reconcile(
        &self::request(parent(spec, None), vec![]),
        &at(0),
        Flavor::V1,
    );
    assert!(without.unwrap_err().message.contains("defaultImage"));
}

#[test]
fn the_broken_build_scales_to_zero_and_fails_a_labelled_cache() {
    let broken = rendered(
        reconcile(
            &request(parent(spec(), None), vec![]),
            &at(0),
            Flavor::Broken,
        )
        .unwrap(),
    );
    assert_eq!(child(&broken, "Deployment")["spec"]["replicas"], 0);
    let mut labelled = parent(spec(), None);
    labelled["metadata"]["labels"] = json!({crate::flavor::BREAK_LABEL: "yes"});
    let err = reconcile(&request(labelled.clone(), vec![]), &at(0), Flavor::Broken).unwrap_err();
    assert!(err.is_retryable());
    assert!(err.message.contains(crate::flavor::BREAK_LABEL), "{err}");
    // The working builds do not care about the label.
    assert!(reconcile(&request(labelled, vec![]), &at(0), Flavor::V1).is_ok());
}
