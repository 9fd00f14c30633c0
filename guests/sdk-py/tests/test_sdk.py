import pytest
from componentize_py_types import Err
from wit_world.imports import types

from wasmop_sdk import (
    GuestError,
    Request,
    Response,
    canonical_json,
    export_operator,
    fnv1a64,
    kinds,
    labels,
    object_meta,
    request_wire,
    rfc3339,
    set_condition,
)

NOW = "2024-05-01T12:00:00Z"
LATER = "2024-05-01T12:05:00Z"


def wire(name="p", observed=(), settings=None):
    parent = {"metadata": {"name": name, "generation": 3}, "status": {"phase": "Ready"}}
    return request_wire(parent, observed, now=1_714_564_800, settings=settings)


def test_times_are_whole_seconds_in_utc():
    assert rfc3339(1_714_564_800) == NOW


def test_a_condition_keeps_its_transition_time_until_its_status_flips():
    conditions = []
    assert set_condition(conditions, "Ready", "False", "Creating", "", 1, NOW)
    assert not set_condition(conditions, "Ready", "False", "Creating", "", 1, LATER)
    assert set_condition(conditions, "Ready", "False", "Waiting", "x", 2, LATER)
    assert conditions[0]["lastTransitionTime"] == NOW
    assert set_condition(conditions, "Ready", "True", "Done", "", 2, LATER)
    assert conditions[0]["lastTransitionTime"] == LATER
    assert len(conditions) == 1
    with pytest.raises(ValueError):
        set_condition(conditions, "Ready", "yes", "", "", None, NOW)


def test_metadata_carries_a_name_and_sorted_labels_nothing_the_host_stamps():
    assert object_meta("demo") == {"name": "demo"}
    assert list(object_meta("demo", labels({"b": "2", "a": "1"}))["labels"]) == ["a", "b"]


def test_a_child_the_host_would_refuse_is_refused_with_a_clear_message():
    response = Response()
    with pytest.raises(GuestError, match="no apiVersion"):
        response.child({"kind": "ConfigMap", "metadata": {"name": "x"}})
    with pytest.raises(GuestError, match="no metadata.name"):
        response.child({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}})
    with pytest.raises(GuestError, match="ownerReferences"):
        response.child({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "ownerReferences": []}})
    with pytest.raises(GuestError, match="wasmop.dev/guest"):
        response.child(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "labels": {"wasmop.dev/guest": "o"}}}
        )
    response.child({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})
    assert response.to_wire().children == ['{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}']


def test_the_request_is_parsed_once_and_children_are_found_by_kind_and_name():
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "p"}}
    request = Request(wire(observed=[deployment], settings='{"a": 1}'))
    assert (request.name, request.generation, request.now) == ("p", 3, NOW)
    assert request.settings == {"a": 1}
    assert request.observed_named(kinds.deployment, "p")["metadata"]["name"] == "p"
    assert request.observed_named(kinds.service, "p") is None
    kept = Response().keep_observed(request).to_wire().keep
    assert kept == [types.ObjectRef(api_version="apps/v1", kind="Deployment", name="p")]


def test_the_config_hash_matches_the_rust_guests():
    # The values guests/cache-operator's `config_hash` (Rust) pins.
    assert fnv1a64(canonical_json({})) == "08f44b07b5901a25"
    assert fnv1a64(canonical_json({"maxmemory": "256mb"})) == "9bfc358df2e7da64"
    assert canonical_json({"b": "2", "a": "1", "é": "x"}) == '{"a":"1","b":"2","é":"x"}'


def test_raised_errors_become_reconcile_errors_the_host_understands():
    class Op:
        def describe(self, settings):
            raise ValueError("no settings wanted")

        def reconcile(self, request):
            if request.name == "bug":
                raise KeyError("oops")
            raise GuestError.permanent("spec.image must not be empty")

    exported = export_operator(Op())()
    with pytest.raises(Err) as refused:
        exported.describe("{}")
    assert refused.value.value == "no settings wanted"
    with pytest.raises(Err) as failed:
        exported.reconcile(wire("c"))
    assert failed.value.value == types.ReconcileError(types.ErrorKind.PERMANENT, "spec.image must not be empty")
    with pytest.raises(Err) as bug:
        exported.reconcile(wire("bug"))
    assert bug.value.value.kind == types.ErrorKind.RETRYABLE
    assert "KeyError" in bug.value.value.message
