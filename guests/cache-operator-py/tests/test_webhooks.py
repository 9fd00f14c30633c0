import copy
import json

import pytest
from wit_world.imports import types

from admission import admit
from cache import CacheOperator
from conversion import convert
from registry import REGISTRATION_REFUSED, Registry
from wasmop_sdk import Request, Review

ALPHA = "apps.example.com/v1alpha1"
BETA = "apps.example.com/v1beta1"
NOW = "2024-05-01T12:00:00Z"


def cache(spec, api_version=ALPHA):
    return {"apiVersion": api_version, "kind": "Cache", "metadata": {"name": "c", "namespace": "n", "uid": "u"}, "spec": spec}


@pytest.mark.parametrize(
    "image,says",
    [("redis", "has no tag"), ("redis:latest", "latest"), ("localhost:5000/redis", "has no tag"), ("redis:", "empty tag")],
)
def test_images_without_a_fixed_tag_are_denied_with_the_reason(image, says):
    response = admit(Review.of("create", cache({"image": image}), False))
    assert not response.allowed and says in response.message


def test_defaulting_adds_the_eviction_policy_once_in_either_shape_and_the_default_image():
    def patch(spec, api_version=ALPHA, settings=None):
        return json.loads(admit(Review.of("create", cache(spec, api_version), True, settings)).patch or "[]")

    assert patch({"image": "redis:7.2"}) == [
        {"op": "add", "path": "/spec/config", "value": {"maxmemory-policy": "allkeys-lru"}}
    ]
    assert patch({"image": "redis:7.2", "config": {"maxmemory": "1mb"}})[0]["path"] == "/spec/config/maxmemory-policy"
    assert patch({"image": "redis:7.2", "config": [{"name": "maxmemory", "value": "1mb"}]}, BETA)[0]["path"] == "/spec/config/-"
    assert patch({"config": {"redis.conf": "x"}}, ALPHA, {"defaultImage": "redis:7.4"}) == [
        {"op": "add", "path": "/spec/image", "value": "redis:7.4"}
    ]
    unknown = admit(Review.of("create", cache({"image": "redis:7.2", "config": {"b": "1", "a": "1"}}), False))
    assert not unknown.allowed and '"a"' in unknown.message


def test_a_cache_round_trips_through_v1beta1_and_what_does_not_fit_is_an_error_naming_it():
    obj = cache({"image": "redis:7.2", "port": 7000, "config": {"b": "2", "a": "1"}, "upgrade": {"timeoutSeconds": 30}})
    beta = convert(copy.deepcopy(obj), BETA)
    assert beta["spec"] == {
        "image": "redis:7.2",
        "upgrade": {"timeoutSeconds": 30},
        "ports": {"client": 7000},
        "config": [{"name": "a", "value": "1"}, {"name": "b", "value": "2"}],
    }
    back = convert(beta, ALPHA)
    assert back["spec"]["config"] == {"a": "1", "b": "2"} and back["spec"]["port"] == 7000
    with pytest.raises(ValueError, match='"a" twice'):
        convert(cache({"config": [{"name": "a"}, {"name": "a"}]}, BETA), ALPHA)
    with pytest.raises(ValueError, match="ports.admin"):
        convert(cache({"ports": {"client": 1, "admin": 2}}, BETA), ALPHA)
    with pytest.raises(ValueError, match="from v1alpha1 to v9"):
        convert(cache({}), "apps.example.com/v9")
    with pytest.raises(ValueError, match="group"):
        convert(cache({}), "other.example.com/v1beta1")


def request(related):
    return Request(
        types.ReconcileRequest(
            parent=json.dumps(cache({"image": "redis:7.2", "auth": {"secretRef": {"name": "creds", "key": "password"}}})),
            observed=[],
            deleting=False,
            now=1_714_564_800,
            settings=None,
            related=[types.ObservedObject("v1", "Secret", "creds", json.dumps(o)) for o in related],
        )
    )


def test_a_missing_password_secret_holds_the_cache_pending_and_a_found_one_rolls_the_pods_with_its_hash():
    wire = CacheOperator().reconcile(request([])).to_wire()
    assert json.loads(wire.status)["phase"] == "Pending"
    assert [e.reason for e in wire.events] == ["SecretMissing", "PhaseChanged"]
    found = CacheOperator().reconcile(request([{"metadata": {"name": "creds"}, "data": {"password": "czNjcjN0"}}]))
    deployment = next(json.loads(c) for c in found.to_wire().children if json.loads(c)["kind"] == "Deployment")
    assert deployment["spec"]["template"]["spec"]["containers"][0]["env"][0]["valueFrom"]["secretKeyRef"]["name"] == "creds"
    assert len(deployment["spec"]["template"]["metadata"]["annotations"]["apps.example.com/secret-hash"]) == 16


def test_a_registration_that_cannot_be_sent_is_refused_and_backs_off():
    registry = Registry("http://r.example.com:8089/", "c1", "team", 6380, 2)
    assert registry.url == "http://r.example.com:8089/caches/team/c1"
    assert registry.address() == "c1.team.svc:6380"
    status = {"conditions": []}
    event, wait = registry.register(status, NOW)
    assert event[1] == REGISTRATION_REFUSED and wait == 2
    event, wait = registry.register(status, "2024-05-01T12:00:40Z")
    assert event is None and wait == 40
    assert registry.deregister(None, NOW) == ("not-registered",)
    assert registry.deregister(status, NOW) == ("not-registered",)
