import json

import pytest
from wit_world.imports import types

from cache import CONFIG_HASH_ANNOTATION, FINALIZER, CacheOperator, config_hash
from wasmop_sdk import GuestError, Request

# Each stage's reconcile (new, paused, invalid, deleting, upgrading, rolled
# back) is in the shared cases (guests/cases/cache-operator), which every
# language's guest passes under `wasmop test`; these tests are of what a
# case cannot show.
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
    return Request.of(parent, observed, deleting=deleting, now=NOW)


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
