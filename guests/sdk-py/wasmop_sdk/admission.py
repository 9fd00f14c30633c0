"""Admission: what a guest implements to default and validate objects of
its primary kind, as the Rust SDK's ``Admission`` (``guests/sdk/src/admission.rs``).

The host calls ``admit`` twice per create or update: first with
``review.mutating`` true, where the answer's patch defaults the object, then
with the defaulted object and ``mutating`` false, where only the verdict
counts. Both calls must give the same verdict for the same object, and a
patch must be idempotent (nothing left to default the second time).

``Patch`` refuses, as it is built, every path the host refuses in a patch
(``apiVersion``, ``kind``, ``status``, ``metadata`` other than ``labels`` and
``annotations``, keys under ``wasmop.dev/``), so a guest's mistake names the
path instead of failing the request at the host.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Protocol

from wit_world.imports import types

__all__ = ["Admission", "Patch", "Review", "allow", "deny", "pointer_segment", "refused_path"]

_HOST_PREFIX = "wasmop.dev/"
_OPERATIONS = {
    "create": types.Operation.CREATE,
    "update": types.Operation.UPDATE,
    "delete": types.Operation.DELETE,
    "connect": types.Operation.CONNECT,
}


class Admission(Protocol):
    """Defaulting and validation of the guest's primary kind."""

    def admit(self, review: "Review") -> types.AdmissionResponse:
        """The verdict on one request."""


def _parse(text: Optional[str], what: str) -> Optional[Dict[str, Any]]:
    if text is None:
        return None
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(f"the {what} is not a JSON object")
    return value


class Review:
    """One admission request, its objects parsed once."""

    def __init__(self, wire: types.AdmissionReview) -> None:
        #: The request as the host sent it.
        self.wire = wire
        #: The object as it would be stored; ``None`` for a delete.
        self.object: Optional[Dict[str, Any]] = _parse(wire.object, "object")
        #: The object before the request (updates and deletes).
        self.old_object: Optional[Dict[str, Any]] = _parse(wire.old_object, "old object")
        #: The guest-list entry's settings, parsed; ``None`` when it has none.
        self.settings: Any = None if wire.settings is None else json.loads(wire.settings)

    @classmethod
    def of(cls, operation: str, obj: Optional[Dict[str, Any]], mutating: bool, settings: Any = None) -> "Review":
        """A request for ``operation`` ("create", "update", …) of ``obj`` (tests)."""
        return cls(
            types.AdmissionReview(
                operation=_OPERATIONS[operation],
                object=None if obj is None else json.dumps(obj),
                old_object=None,
                sub_resource="",
                dry_run=False,
                username="",
                groups=[],
                mutating=mutating,
                settings=None if settings is None else json.dumps(settings),
            )
        )

    @property
    def operation(self) -> str:
        """What the request does: "create", "update", "delete" or "connect"."""
        return next(name for name, value in _OPERATIONS.items() if value == self.wire.operation)

    @property
    def mutating(self) -> bool:
        """True in the defaulting call, false in the validating one."""
        return self.wire.mutating


def allow(warnings: Optional[List[str]] = None) -> types.AdmissionResponse:
    """Admits the request unchanged, with ``warnings`` shown to the user."""
    return types.AdmissionResponse(allowed=True, message="", code=None, patch=None, warnings=list(warnings or []))


def deny(message: str, code: Optional[int] = None) -> types.AdmissionResponse:
    """Denies the request with ``message``, shown to the user; ``code`` is
    the HTTP status (400–599, default 403)."""
    if code is not None and not 400 <= code <= 599:
        raise ValueError(f"a denial's code is an HTTP error status (400-599), not {code}")
    return types.AdmissionResponse(allowed=False, message=message, code=code, patch=None, warnings=[])


def pointer_segment(key: str) -> str:
    """The RFC 6901 segment for ``key``: ``~`` and ``/`` escaped."""
    return key.replace("~", "~0").replace("/", "~1")


def _segments(pointer: str) -> List[str]:
    if pointer and not pointer.startswith("/"):
        raise ValueError(f"{pointer!r} is not a JSON pointer (it must start with /)")
    return [s.replace("~1", "/").replace("~0", "~") for s in pointer[1:].split("/")] if pointer else []


_NO_VALUE = object()


def refused_path(pointer: str, value: Any = _NO_VALUE) -> Optional[str]:
    """Why the host would refuse a patch operation at ``pointer`` (setting
    ``value``; none given for a removal), or ``None`` when it would not."""
    parts = _segments(pointer) + [None, None, None]
    top, field, key = parts[0], parts[1], parts[2]
    if top is None:
        return "the whole object"
    if top in ("apiVersion", "kind", "status"):
        return top
    if top != "metadata":
        return None
    if field not in ("labels", "annotations"):
        return "metadata" if field is None else f"metadata.{field}"
    if key is None:
        if value is _NO_VALUE:
            return f"metadata.{field} as a whole (remove one key at a time)"
        host_key = next((k for k in value if k.startswith(_HOST_PREFIX)), None) if isinstance(value, dict) else None
        return None if host_key is None else f"metadata.{field}.{host_key}"
    return f"metadata.{field}.{key}" if key.startswith(_HOST_PREFIX) else None


class Patch:
    """A JSON Patch (RFC 6902) built one operation at a time."""

    def __init__(self) -> None:
        self._ops: List[Dict[str, Any]] = []

    def add(self, pointer: str, value: Any) -> "Patch":
        """Sets the member at ``pointer`` (its parent must exist) to ``value``."""
        return self._push({"op": "add", "path": pointer, "value": value}, value)

    def replace(self, pointer: str, value: Any) -> "Patch":
        """Replaces the existing member at ``pointer`` with ``value``."""
        return self._push({"op": "replace", "path": pointer, "value": value}, value)

    def remove(self, pointer: str) -> "Patch":
        """Removes the existing member at ``pointer``."""
        return self._push({"op": "remove", "path": pointer}, _NO_VALUE)

    def _push(self, op: Dict[str, Any], value: Any) -> "Patch":
        refused = refused_path(op["path"], value)
        if refused is not None:
            raise ValueError(f"an admission patch may not change {refused} (path {op['path']})")
        self._ops.append(op)
        return self

    @property
    def operations(self) -> List[Dict[str, Any]]:
        """The operations, as JSON values."""
        return list(self._ops)

    def is_empty(self) -> bool:
        """Whether there is nothing to patch."""
        return not self._ops

    def allow(self, warnings: Optional[List[str]] = None) -> types.AdmissionResponse:
        """Admits the request with this patch (none when empty)."""
        response = allow(warnings)
        if self._ops:
            response.patch = json.dumps(self._ops, separators=(",", ":"), ensure_ascii=False)
        return response
