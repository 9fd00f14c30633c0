import json

import pytest
from wit_world.imports import types

from cache import CONFIG_HASH_ANNOTATION, FINALIZER, CacheOperator, config_hash
from wasmop_sdk import GuestError, Request

NOW = 1_714_564_800
OPERATOR = CacheOperator()


def request(spec, observed=(), deleting=False, status=None):
    parent = {
        "apiVersion": "apps.example.com/v1alpha1",
        "kind": "Cache",
        "metadata": {"name": "demo", "generation": 1},
        "spec": spec,
    }
    if status is not None:
        parent["status"] = status
    return Request(
        types.ReconcileRequest(
            parent=json.dumps(parent),
            observed=[
                types.ObservedObject(o["apiVersion"], o["kind"], o["metadata"]["name"], json.dumps(o)) for o in observed
            ],
            deleting=deleting,
            now=NOW,
            settings=None,
            related=[],
        )
    )


def test_describe_names_the_cache_kind_its_three_child_kinds_and_the_finalizer():
    description = OPERATOR.describe(None)
    assert description.primary == types.KindRef("apps.example.com", "v1alpha1", "Cache")
    assert [c.kind.kind for c in description.children] == ["ConfigMap", "Deployment", "Service"]
    assert description.finalizer == FINALIZER
    assert description.related[0].kind == types.KindRef("", "v1", "Secret")
    assert OPERATOR.describe({"version": "v1beta1"}).primary.version == "v1beta1"
    with pytest.raises(ValueError, match="unknown setting"):
        OPERATOR.describe({"registry": "http://x"})
    with pytest.raises(ValueError, match="registryUrl"):
        OPERATOR.describe({"registryUrl": "ftp://x"})
    with pytest.raises(ValueError, match="must not be empty"):
        OPERATOR.describe({"defaultImage": " "})


def test_a_new_cache_gets_its_config_map_deployment_and_service_and_is_pending():
    wire = OPERATOR.reconcile(request({"image": "redis:7.2", "replicas": 2, "config": {"maxmemory": "256mb"}})).to_wire()
    children = [json.loads(c) for c in wire.children]
    assert [f"{c['kind']}/{c['metadata']['name']}" for c in children] == [
        "ConfigMap/demo-config",
        "Deployment/demo",
        "Service/demo",
    ]
    assert children[1]["spec"]["replicas"] == 2
    assert children[1]["spec"]["template"]["metadata"]["annotations"][CONFIG_HASH_ANNOTATION] == "9bfc358df2e7da64"
    assert config_hash({"maxmemory": "256mb"}) == "9bfc358df2e7da64"
    assert json.loads(wire.status)["phase"] == "Pending"
    assert [e.reason for e in wire.events] == ["Created", "PhaseChanged"]


def test_an_invalid_spec_is_a_permanent_error():
    with pytest.raises(GuestError, match="between 1 and 10"):
        OPERATOR.reconcile(request({"image": "redis", "replicas": 11}))
    with pytest.raises(GuestError, match="spec.image must not be empty"):
        OPERATOR.reconcile(request({"image": ""}))


def test_a_paused_cache_keeps_every_child_as_it_is():
    observed = [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "demo"}}]
    wire = OPERATOR.reconcile(request({"image": "redis", "paused": True}, observed)).to_wire()
    assert wire.children == []
    assert wire.keep == [types.ObjectRef("v1", "Service", "demo")]
    assert json.loads(wire.status)["phase"] == "Paused"


def test_deletion_scales_the_deployment_to_zero_then_lets_the_cache_go():
    running = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "demo"},
        "spec": {"replicas": 2},
        "status": {"replicas": 2},
    }
    scaling = OPERATOR.reconcile(request({"image": "redis"}, [running], deleting=True)).to_wire()
    assert not scaling.finalized
    assert json.loads(scaling.children[0])["spec"]["replicas"] == 0
    assert scaling.requeue_after_seconds == 2
    stopped = dict(running, status={"replicas": 0})
    done = OPERATOR.reconcile(request({"image": "redis"}, [stopped], deleting=True)).to_wire()
    assert done.finalized
    assert [e.reason for e in done.events] == ["CleanupComplete"]


def deployment_of(image, status):
    """A Deployment of one replica running ``image``, as the API server shows it."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "demo", "generation": 2},
        "spec": {
            "replicas": 1,
            "template": {
                "metadata": {"annotations": {CONFIG_HASH_ANNOTATION: config_hash({})}},
                "spec": {"containers": [{"name": "cache", "image": image, "ports": [{"containerPort": 6379}]}]},
            },
        },
        "status": dict({"observedGeneration": 2}, **status),
    }


def image_of(wire):
    deployment = next(json.loads(c) for c in wire.children if json.loads(c)["kind"] == "Deployment")
    return deployment["spec"]["template"]["spec"]["containers"][0]["image"]


def condition_of(status, type_):
    return next((c for c in status["conditions"] if c["type"] == type_), None)


def test_the_upgrade_timeout_is_the_deployments_progress_deadline_30_to_3600_seconds():
    wire = OPERATOR.reconcile(request({"image": "redis:7.2", "upgrade": {"timeoutSeconds": 45}})).to_wire()
    assert json.loads(wire.children[1])["spec"]["progressDeadlineSeconds"] == 45
    defaulted = OPERATOR.reconcile(request({"image": "redis:7.2"})).to_wire()
    assert json.loads(defaulted.children[1])["spec"]["progressDeadlineSeconds"] == 300
    for bad in (29, 3601):
        with pytest.raises(GuestError, match=f"spec.upgrade.timeoutSeconds must be between 30 and 3600, got {bad}"):
            OPERATOR.reconcile(request({"image": "redis:7.2", "upgrade": {"timeoutSeconds": bad}}))


def test_a_first_rollout_sets_the_last_good_image_and_is_no_upgrade():
    ready = deployment_of("redis:7.2", {"replicas": 1, "updatedReplicas": 1, "readyReplicas": 1})
    status = json.loads(OPERATOR.reconcile(request({"image": "redis:7.2"}, [ready])).to_wire().status)
    assert status["phase"] == "Ready"
    assert status["lastGoodImage"] == "redis:7.2"
    assert condition_of(status, "Upgrading") is None


def test_a_new_image_rolls_out_while_the_cache_stays_ready_then_completes_with_one_upgraded_event():
    old = deployment_of("redis:7.2", {"replicas": 1, "updatedReplicas": 1, "readyReplicas": 1})
    rolling = OPERATOR.reconcile(
        request({"image": "redis:7.4"}, [old], status={"phase": "Ready", "lastGoodImage": "redis:7.2"})
    ).to_wire()
    assert image_of(rolling) == "redis:7.4"
    status = json.loads(rolling.status)
    assert status["phase"] == "Ready"
    upgrading = condition_of(status, "Upgrading")
    assert (upgrading["status"], upgrading["reason"]) == ("True", "RollingOut")
    done = deployment_of("redis:7.4", {"replicas": 1, "updatedReplicas": 1, "readyReplicas": 1})
    complete = OPERATOR.reconcile(request({"image": "redis:7.4"}, [done], status=status)).to_wire()
    assert [(e.event_type, e.reason) for e in complete.events] == [(types.EventType.NORMAL, "Upgraded")]
    after = json.loads(complete.status)
    assert after["lastGoodImage"] == "redis:7.4"
    assert condition_of(after, "Upgraded")["status"] == "True"


def test_a_rollout_past_its_deadline_goes_back_to_the_last_good_image_and_is_not_tried_again():
    stuck = deployment_of(
        "redis:7.4-never-ready",
        {
            "replicas": 2,
            "updatedReplicas": 1,
            "readyReplicas": 1,
            "conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}],
        },
    )
    spec = {"image": "redis:7.4-never-ready", "upgrade": {"timeoutSeconds": 30}}
    back = OPERATOR.reconcile(
        request(spec, [stuck], status={"phase": "Ready", "lastGoodImage": "redis:7.2"})
    ).to_wire()
    assert image_of(back) == "redis:7.2"
    assert [(e.event_type, e.reason) for e in back.events] == [
        (types.EventType.NORMAL, "ImageChanged"),
        (types.EventType.WARNING, "UpgradeRolledBack"),
        (types.EventType.NORMAL, "PhaseChanged"),
    ]
    status = json.loads(back.status)
    assert status["phase"] == "Degraded"
    assert status["failedImage"] == "redis:7.4-never-ready"
    assert "redis:7.4-never-ready" in condition_of(status, "Upgraded")["message"]
    held = OPERATOR.reconcile(request(spec, [stuck], status=status)).to_wire()
    assert image_of(held) == "redis:7.2"
    assert json.loads(held.status)["conditions"] == status["conditions"]
