import json

import pytest
from wit_world.imports import types

from cache import CONFIG_HASH_ANNOTATION, FINALIZER, CacheOperator, config_hash
from wasmop_sdk import GuestError, Request

NOW = 1_714_564_800
OPERATOR = CacheOperator()


def request(spec, observed=(), deleting=False):
    return Request(
        types.ReconcileRequest(
            parent=json.dumps(
                {
                    "apiVersion": "apps.example.com/v1alpha1",
                    "kind": "Cache",
                    "metadata": {"name": "demo", "generation": 1},
                    "spec": spec,
                }
            ),
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
    with pytest.raises(ValueError, match="unknown setting"):
        OPERATOR.describe({"registryUrl": "http://x"})
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
