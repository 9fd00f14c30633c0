"""A test guest whose ``admit`` and ``convert`` misbehave as the object's
``spec.attack`` says, answering in the WIT's own types so that none of the
SDK's checks (``Patch``, ``convert_all``) stands between it and the host: the
tests show the host refuses its answers exactly as it refuses the Rust hostile
guest's (``guests/hostile/src/webhooks.rs``, the same attack names; see
``guests/hostile-ts/src/index.ts`` for the table).
"""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import types

from wasmop_sdk import Response, describe, export_admission, export_operator, kind_ref


def _attack(obj):
    spec = (obj or {}).get("spec") if isinstance(obj, dict) else None
    attack = spec.get("attack") if isinstance(spec, dict) else None
    return attack if isinstance(attack, str) else "none"


def _allowed(**fields):
    answer = {"allowed": True, "message": "", "code": None, "patch": None, "warnings": []}
    answer.update(fields)
    return types.AdmissionResponse(**answer)


def _patched(ops):
    return _allowed(patch=json.dumps(ops))


_PATCHES = {
    "admit-rename": [{"op": "replace", "path": "/metadata/name", "value": "renamed"}],
    "admit-owner": [
        {
            "op": "add",
            "path": "/metadata/ownerReferences",
            "value": [
                {
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "name": "kube-system",
                    "uid": "00000000-0000-0000-0000-000000000000",
                    "controller": True,
                }
            ],
        }
    ],
    "admit-finalizer": [{"op": "add", "path": "/metadata/finalizers", "value": ["hostile.example.com/never"]}],
    "admit-host-label": [{"op": "add", "path": "/metadata/labels", "value": {"wasmop.dev/guest": "someone-else"}}],
    "admit-status": [{"op": "add", "path": "/status", "value": {"ok": True}}],
    "admit-kind": [{"op": "replace", "path": "/kind", "value": "Secret"}],
}


class _Hostile:
    def describe(self, settings):
        return describe(kind_ref("test.wasmop.dev", "v1alpha1", "Hostile"), [])

    def reconcile(self, request):
        return Response()

    def admit(self, review):
        attack = _attack(review.object)
        if attack == "admit-deny":
            return _allowed(allowed=False, message="hostile says no", code=422)
        if attack == "admit-bad-code":
            return _allowed(allowed=False, message="a denial that claims success", code=200)
        if attack == "admit-warnings":
            return _allowed(warnings=["w"] * 1000)
        if attack == "admit-bad-patch":
            return _allowed(patch='{"op": "nonsense"}')
        if attack == "admit-throw":
            raise RuntimeError("hostile raised in admit")
        if attack in _PATCHES:
            return _patched(_PATCHES[attack])
        return _allowed()


Operator = export_operator(_Hostile())
# `admit` goes through the SDK's export only for its error reporting; its
# answer is the raw one above.
Admission = export_admission(_Hostile())


class Conversion(exports.Conversion):
    """The hostile ``convert``, in the WIT's types."""

    def convert(self, objects, desired_api_version):
        try:
            values = [json.loads(text) for text in objects]
        except ValueError as e:
            raise Err(str(e)) from None
        if any(_attack(v) == "convert-drop" for v in values):
            return []
        out = []
        for obj in values:
            attack = _attack(obj)
            if attack != "convert-stale":
                obj["apiVersion"] = desired_api_version
            meta = obj.setdefault("metadata", {})
            if attack == "convert-rename":
                meta["name"] = "renamed"
            elif attack == "convert-host-label":
                meta["labels"] = {"wasmop.dev/guest": "someone-else"}
            elif attack == "convert-host-condition":
                obj["status"] = {
                    "conditions": [
                        {
                            "type": "GuestReconciled",
                            "status": "True",
                            "reason": "Forged",
                            "message": "",
                            "lastTransitionTime": "2024-01-01T00:00:00Z",
                        }
                    ]
                }
            out.append(json.dumps(obj))
        return out
