//! Native checks of the attacks that return. The ones that never return
//! (`loop`, `memory`, `stack-overflow`) only make sense inside the sandbox
//! and are exercised by the host's hostile-guest suite.

use serde_json::{Value, json};
use wasmop_guest::{Operator, Request, Response, Settings};

use crate::HostileGuest;
use crate::attack::{FOREIGN_NAMESPACE, HUGE_RESPONSE_BYTES};

fn parent(attack: &str) -> Value {
    json!({
        "apiVersion": "test.wasmop.dev/v1alpha1",
        "kind": "Hostile",
        "metadata": {"name": "h", "namespace": "default", "generation": 1},
        "spec": {"attack": attack, "target": "127.0.0.1:1"}
    })
}

fn run(attack: &str) -> Response {
    HostileGuest::reconcile(Request::new(parent(attack), vec![], false)).unwrap()
}

#[test]
fn describe_declares_hostile_with_config_maps_services_and_secrets_and_no_finalizer() {
    let d = HostileGuest::describe(&Settings::none()).unwrap();
    assert_eq!(d.primary.group, "test.wasmop.dev");
    assert_eq!(d.primary.version, "v1alpha1");
    assert_eq!(d.primary.kind, "Hostile");
    let kinds: Vec<_> = d.children.iter().map(|c| c.kind.kind.as_str()).collect();
    assert_eq!(kinds, ["ConfigMap", "Service", "Secret"]);
    assert!(d.children.iter().all(|c| !c.cluster_scoped));
    assert_eq!(d.finalizer, None);
}

fn describe_as(attack: &str) -> Result<wasmop_guest::Description, String> {
    HostileGuest::describe(&Settings::from_value(&json!({"describe": attack})))
}

#[test]
fn the_describe_setting_picks_a_description_the_host_must_refuse() {
    assert_eq!(
        describe_as("builtin-primary").unwrap().primary.kind,
        "Secret"
    );
    let child_is_primary = describe_as("child-is-primary").unwrap();
    assert!(
        child_is_primary
            .children
            .iter()
            .any(|c| c.kind == child_is_primary.primary)
    );
    assert_eq!(
        describe_as("bad-finalizer").unwrap().finalizer.as_deref(),
        Some("cleanup")
    );
    assert_eq!(
        describe_as("too-many-children").unwrap().children.len(),
        103
    );
    assert!(
        describe_as("refuse-settings")
            .unwrap_err()
            .contains("refused on purpose")
    );
    assert!(describe_as("nonsense").is_err());
    let bad = HostileGuest::describe(&Settings::from_value(&json!({"colour": 1})));
    assert!(bad.unwrap_err().contains("colour"));
}

#[test]
fn take_over_attacks_name_the_target() {
    let mut parent = parent("take-secret");
    parent["spec"]["target"] = json!("user-secret");
    let response = HostileGuest::reconcile(Request::new(parent, vec![], false)).unwrap();
    let child = &response.child_values()[0];
    assert_eq!(
        (child["kind"].as_str(), child["metadata"]["name"].as_str()),
        (Some("Secret"), Some("user-secret"))
    );
}

#[test]
fn recreate_wants_the_child_only_while_it_is_absent_and_flap_flips_it() {
    let absent = run("recreate");
    assert_eq!(absent.child_values()[0]["metadata"]["name"], "h-flap");
    let observed = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "h-flap"}, "data": {"v": "a"}});
    let present = HostileGuest::reconcile(Request::new(
        parent("recreate"),
        vec![observed.clone()],
        false,
    ))
    .unwrap();
    assert!(present.children().is_empty());
    let flipped =
        HostileGuest::reconcile(Request::new(parent("flap"), vec![observed], false)).unwrap();
    assert_eq!(flipped.child_values()[0]["data"]["v"], "b");
    assert_eq!(run("flap").child_values()[0]["data"]["v"], "a");
}

#[test]
fn metadata_attacks_send_the_odd_shape_they_name() {
    assert!(run("null-labels").child_values()[0]["metadata"]["labels"].is_null());
    assert_eq!(
        run("host-label").child_values()[0]["metadata"]["labels"]["wasmop.dev/owner"],
        "me"
    );
    assert_eq!(run("event-flood").events.len(), 1000);
    assert!(run("event-reason").events[0].reason.contains('\n'));
    assert_eq!(run("keep-and-desire").kept().len(), 1);
}

#[test]
fn none_is_well_behaved() {
    let response = run("none");
    assert_eq!(
        response.child_values(),
        vec![json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "h-ok", "labels": {"app": "hostile"}},
            "data": {"ok": "true"}
        })]
    );
    assert_eq!(response.status_value(), Some(json!({"ok": true})));
}

#[test]
fn a_missing_attack_means_none() {
    let response = HostileGuest::reconcile(Request::new(
        json!({"metadata": {"name": "h"}}),
        vec![],
        false,
    ))
    .unwrap();
    assert_eq!(response.status_value(), Some(json!({"ok": true})));
}

#[test]
#[should_panic(expected = "on purpose")]
fn panic_panics() {
    run("panic");
}

#[test]
#[should_panic(expected = "unreachable")]
fn unreachable_panics_natively() {
    run("unreachable");
}

#[test]
fn huge_response_is_a_valid_config_map_of_twenty_mebibytes() {
    let wire = run("huge-response").into_wire();
    assert!(wire.children[0].len() > HUGE_RESPONSE_BYTES);
    let child: Value = serde_json::from_str(&wire.children[0]).unwrap();
    assert_eq!(child["kind"], "ConfigMap");
    assert_eq!(child["metadata"]["name"], "h-huge");
    assert_eq!(
        child["data"]["blob"].as_str().unwrap().len(),
        HUGE_RESPONSE_BYTES
    );
}

#[test]
fn invalid_json_is_not_json() {
    let wire = run("invalid-json").into_wire();
    assert_eq!(wire.children.len(), 1);
    assert!(serde_json::from_str::<Value>(&wire.children[0]).is_err());
}

#[test]
fn other_namespace_targets_kube_system() {
    let response = run("other-namespace");
    assert_eq!(
        response.child_values()[0]["metadata"]["namespace"],
        FOREIGN_NAMESPACE
    );
}

#[test]
fn undeclared_kind_binds_cluster_admin() {
    let response = run("undeclared-kind");
    let binding = &response.child_values()[0];
    assert_eq!(binding["apiVersion"], "rbac.authorization.k8s.io/v1");
    assert_eq!(binding["kind"], "ClusterRoleBinding");
    assert_eq!(binding["roleRef"]["name"], "cluster-admin");
}

#[test]
fn spoofed_owner_sets_a_foreign_controller() {
    let response = run("spoofed-owner");
    let children = response.child_values();
    let owners = children[0]["metadata"]["ownerReferences"]
        .as_array()
        .unwrap();
    assert_eq!(owners[0]["controller"], true);
    assert_eq!(owners[0]["name"], "someone-else");
}

#[test]
fn spoofed_label_claims_another_guest() {
    let response = run("spoofed-label");
    assert_eq!(
        response.child_values()[0]["metadata"]["labels"]["wasmop.dev/guest"],
        "someone-else"
    );
}

#[test]
fn read_file_reports_the_outcome() {
    let status = run("read-file").status_value().unwrap();
    let outcome = status["readFile"].as_str().unwrap();
    assert!(
        outcome.starts_with("ok: ") || outcome.starts_with("error: "),
        "{outcome}"
    );
}

#[test]
fn open_socket_reports_the_outcome() {
    // Port 1 on loopback is closed on any sane machine: natively this is
    // "connection refused"; inside the sandbox it must fail too.
    let status = run("open-socket").status_value().unwrap();
    let outcome = status["socket"].as_str().unwrap();
    assert!(outcome.starts_with("error: "), "{outcome}");
}

#[test]
fn env_reports_counts() {
    let status = run("env").status_value().unwrap();
    assert!(status["envVars"].is_u64());
    assert!(
        status["args"].as_u64().unwrap() >= 1,
        "natively the test binary has argv[0]"
    );
}

#[test]
fn an_unknown_attack_is_a_permanent_error() {
    let err = HostileGuest::reconcile(Request::new(parent("teleport"), vec![], false)).unwrap_err();
    assert!(!err.is_retryable());
    assert!(err.message.contains("teleport"));
}

#[test]
fn settings_choose_the_primary_kind_and_the_related_kinds() {
    let settings = Settings::from_json(Some(r#"{"primary":"HostileTwin","related":true}"#.into()));
    let d = HostileGuest::describe(&settings).unwrap();
    assert_eq!(d.primary.kind, "HostileTwin");
    assert_eq!(d.related, crate::describe::related(false));
    let metadata = Settings::from_json(Some(r#"{"related":true,"metadataOnly":true}"#.into()));
    assert!(HostileGuest::describe(&metadata).unwrap().related[1].metadata_only);
    assert!(
        HostileGuest::describe(&Settings::none())
            .unwrap()
            .related
            .is_empty()
    );
}

#[test]
fn echo_related_returns_the_related_objects_and_observed_secrets_as_given() {
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"k": "dg=="}});
    let config = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    let request = Request::new(
        parent("echo-related"),
        vec![secret.clone(), config.clone()],
        false,
    )
    .with_related(vec![secret.clone(), config.clone()]);
    let status = HostileGuest::reconcile(request)
        .unwrap()
        .status_value()
        .unwrap();
    assert_eq!(status["related"], json!([secret.clone(), config]));
    assert_eq!(status["observedSecrets"], json!([secret]));
}
