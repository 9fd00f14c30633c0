"""``Cache`` in its two versions, and the conversion between them (the Rust
guest's ``conversion.rs``).

``v1alpha1`` (the seeds' shape): ``spec.port``, and ``spec.config`` as a map
of names to values. ``v1beta1``: ``spec.ports.client``, and ``spec.config``
as a list of ``{name, value}`` sorted by name. Everything else (metadata,
status with ``lastGoodImage`` and ``failedImage``, the other spec fields such
as ``upgrade``, fields this guest does not know) is carried as it is, so a
round trip through the other version gives back the same object.
"""

from __future__ import annotations

import json
from typing import Any, Dict

#: The first version, the one the seeds define.
V1ALPHA1 = "v1alpha1"
#: The second version, with ``spec.ports`` and ``spec.config`` as a list.
V1BETA1 = "v1beta1"


def _quoted(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _utf8(key: str) -> bytes:
    return key.encode("utf-8")


def convert(obj: Dict[str, Any], desired_api_version: str) -> Dict[str, Any]:
    """``obj`` (a Cache in either version) in ``desired_api_version``
    (``<group>/v1alpha1`` or ``<group>/v1beta1``). Raises ``ValueError`` for
    an unknown version, an object of another group, or a spec whose shape
    does not fit the version it claims."""
    group, slash, desired = desired_api_version.partition("/")
    if not slash:
        raise ValueError(f"{_quoted(desired_api_version)} is not <group>/<version>")
    api_version = obj.get("apiVersion")
    if not isinstance(api_version, str) or "/" not in api_version:
        raise ValueError("the object has no apiVersion <group>/<version>")
    current_group, _, current = api_version.partition("/")
    if current_group != group:
        raise ValueError(f"cannot convert a Cache of group {current_group} to group {group}")
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else None
    if (current, desired) == (V1ALPHA1, V1BETA1):
        if spec is not None:
            _up(spec)
    elif (current, desired) == (V1BETA1, V1ALPHA1):
        if spec is not None:
            _down(spec)
    elif not (current == desired and current in (V1ALPHA1, V1BETA1)):
        raise ValueError(f"cannot convert a Cache from {current} to {desired}")
    obj["apiVersion"] = desired_api_version
    return obj


def _up(spec: Dict[str, Any]) -> None:
    """The v1alpha1 spec as v1beta1, in place."""
    if "port" in spec:
        spec["ports"] = {"client": spec.pop("port")}
    if "config" in spec:
        config = spec.pop("config")
        if not isinstance(config, dict):
            raise ValueError("v1alpha1 spec.config must be a map")
        spec["config"] = [{"name": name, "value": config[name]} for name in sorted(config, key=_utf8)]


def _down(spec: Dict[str, Any]) -> None:
    """The v1beta1 spec as v1alpha1, in place."""
    if "ports" in spec:
        ports = spec.pop("ports")
        if not isinstance(ports, dict):
            raise ValueError("v1beta1 spec.ports must be an object")
        rest = dict(ports)
        if "client" in rest:
            spec["port"] = rest.pop("client")
        if rest:
            other = sorted(rest, key=_utf8)[0]
            raise ValueError(f"v1beta1 spec.ports.{other} has no v1alpha1 equivalent")
    if "config" in spec:
        entries = spec.pop("config")
        if not isinstance(entries, list):
            raise ValueError("v1beta1 spec.config must be a list")
        config: Dict[str, Any] = {}
        for entry in entries:
            name = entry.get("name") if isinstance(entry, dict) else None
            if not isinstance(name, str):
                raise ValueError("every v1beta1 spec.config entry needs a name")
            if name in config:
                raise ValueError(f"v1beta1 spec.config names {_quoted(name)} twice")
            config[name] = entry["value"] if "value" in entry else ""
        spec["config"] = config
