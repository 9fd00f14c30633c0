"""The guest-list entry's ``settings`` for the cache-operator (the Rust
guest's ``CacheSettings``): ``defaultImage``, ``apiGroup``, ``version`` and
``registryUrl``."""

from __future__ import annotations

import json
import re
from typing import Any, Dict

from conversion import V1ALPHA1, V1BETA1
from wasmop_sdk import http

_KEYS = ("defaultImage", "apiGroup", "version", "registryUrl")
_API_GROUP = re.compile(r"^[a-z0-9.-]+$")
_URL = re.compile(r"^https?://.")


def parse_settings(value: Any) -> Dict[str, str]:
    """The settings, checked: unknown keys and empty values are refused.
    ``registryUrl`` needs the build with outbound HTTP
    (``cache-operator-py-registry``), except in unit tests."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError("settings must be a map")
    for key, v in value.items():
        if key not in _KEYS:
            raise ValueError(f'unknown setting "{key}", expected one of {", ".join(_KEYS)}')
        if not isinstance(v, str):
            raise ValueError(f"settings.{key} must be a string")
    if "defaultImage" in value and value["defaultImage"].strip() == "":
        raise ValueError("settings.defaultImage must not be empty")
    group = value.get("apiGroup")
    if group is not None and ("." not in group or len(group) > 253 or not _API_GROUP.match(group)):
        raise ValueError(f'settings.apiGroup "{group}" is not an API group (a lowercase DNS name with a dot)')
    version = value.get("version")
    if version is not None and version not in (V1ALPHA1, V1BETA1):
        raise ValueError(f"settings.version {json.dumps(version)} is not a Cache version (v1alpha1 or v1beta1)")
    url = value.get("registryUrl")
    if url is not None and not http.AVAILABLE and _is_component():
        raise ValueError("settings.registryUrl needs the cache-operator-py-registry build, which imports outbound HTTP")
    if url is not None and not (_URL.match(url) and not any(c in url for c in "?#@")):
        raise ValueError(
            f"settings.registryUrl {json.dumps(url)} must be an http:// or https:// URL without user info or query"
        )
    return dict(value)


def version_of(settings: Dict[str, str]) -> str:
    """The Cache version reconciled: ``version``, default ``v1alpha1``."""
    return settings.get("version", V1ALPHA1)


def _is_component() -> bool:
    """Whether this runs as the component (not under pytest)."""
    import sys

    return sys.platform == "wasi"
