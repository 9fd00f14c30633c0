"""Conversion: what a guest implements to convert its primary kind between
versions, as the Rust SDK's ``Conversion`` (``guests/sdk/src/admission.rs``).

The API server sends a ConversionReview whenever it reads or writes an
object in a version other than the one it stores; the host hands the objects
to ``convert`` one by one through ``convert_all``. An answer must keep the
object's kind and its metadata's identity (name, namespace, uid,
resourceVersion, generation) and carry the desired ``apiVersion``;
``convert_all`` refuses one that does not, with a message naming the field,
before the host would.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Protocol, Tuple

__all__ = ["Conversion", "convert_all", "split_api_version"]

_IDENTITY = ("name", "namespace", "uid", "resourceVersion", "generation")


class Conversion(Protocol):
    """Conversion of the guest's primary kind between its versions."""

    def convert(self, obj: Dict[str, Any], desired_api_version: str) -> Dict[str, Any]:
        """``obj`` in ``desired_api_version`` (e.g. "apps.example.com/v1beta1"),
        with ``apiVersion`` set to it. Keep ``kind`` and ``metadata`` (only
        labels and annotations may change). Raise to fail the API server's
        whole request with the message."""


def split_api_version(api_version: str) -> Tuple[str, str]:
    """``(group, version)`` of an ``apiVersion`` ("apps/v1"; "" for the core
    group's "v1")."""
    group, slash, version = api_version.partition("/")
    return (group, version) if slash else ("", api_version)


def _identity(obj: Dict[str, Any]) -> List[Any]:
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    return [meta.get(key) for key in _IDENTITY]


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def convert_all(conversion: Conversion, objects: List[str], desired_api_version: str) -> List[str]:
    """Every object of one request (JSON text) through ``conversion``, in
    order, each answer checked against the object it came from."""
    out = []
    for i, text in enumerate(objects):
        try:
            obj = json.loads(text)
        except ValueError as e:
            raise ValueError(f"object {i} is not JSON: {e}") from None
        if not isinstance(obj, dict):
            raise ValueError(f"object {i} is not a JSON object")
        # The guest may change the object it is given: keep what it must keep first.
        kind, identity = obj.get("kind"), _identity(obj)
        converted = conversion.convert(obj, desired_api_version)
        if converted.get("apiVersion") != desired_api_version:
            raise ValueError(
                f"object {i} was converted to apiVersion {converted.get('apiVersion')}, not {desired_api_version}"
            )
        if converted.get("kind") != kind:
            raise ValueError(f"object {i} changed its kind")
        for key, before, after in zip(_IDENTITY, identity, _identity(converted)):
            if before != after:
                raise ValueError(f"object {i} changed metadata.{key}")
        out.append(_compact(converted))
    return out
