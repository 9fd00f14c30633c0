"""Registering each Cache with an external registry, and removing it there
before the finalizer goes (the Rust guest's ``registry.rs``).

With the setting ``registryUrl`` (and the host granting that origin in the
guest's ``allowedOutboundHosts``), a Ready Cache is registered once with
``PUT {registryUrl}/caches/{namespace}/{name}`` and body ``{"namespace",
"name", "address"}`` (the Service's ``name.namespace.svc:port``); the
condition ``Registered`` records it. A failure that may have stored something
(no answer, a timeout, a 5xx) is ``RegistryUnavailable``; one that cannot have
(a 4xx, the host refusing the request) is ``RegistrationRefused``, unless the
Cache was registered before under another address. Retries wait as long as
the registry has been failing (2 s, 4 s, 8 s … at most 5 min), kept in the
condition's transition time, so the guest stays stateless.

On deletion a Cache that may be in the registry is removed with ``DELETE`` on
the same URL before the answer is ``finalized``, a 404 counting as removed;
while that fails the Cache stays, with reason ``CleanupBlocked``.
"""

from __future__ import annotations

import copy
import datetime
import json
from typing import Any, Dict, List, Optional, Tuple

from wasmop_sdk import find_condition, http, set_condition

REGISTERED = "Registered"
REGISTRY_UNAVAILABLE = "RegistryUnavailable"
CLEANUP_BLOCKED = "CleanupBlocked"
DEREGISTERED = "Deregistered"
REGISTRATION_REFUSED = "RegistrationRefused"
MIN_RETRY_SECONDS = 2
MAX_RETRY_SECONDS = 300

#: An Event: type, reason, message.
Event = Tuple[str, str, str]


def _seconds(at: str) -> int:
    """``2024-05-01T12:00:00Z`` in seconds since the Unix epoch (``strptime``
    needs a module componentize-py's runtime lacks)."""
    date, _, time = at.rstrip("Z").partition("T")
    year, month, day = (int(p) for p in date.split("-"))
    hour, minute, second = (int(float(p)) for p in time.split(":"))
    moment = datetime.datetime(year, month, day, hour, minute, second, tzinfo=datetime.timezone.utc)
    return int(moment.timestamp())


class Registry:
    """The registry of one Cache."""

    def __init__(self, base: str, name: str, namespace: str, port: int, generation: Optional[int]) -> None:
        self.url = f"{base.rstrip('/')}/caches/{namespace}/{name}"
        self._name, self._namespace, self._port, self._generation = name, namespace, port, generation

    def address(self) -> str:
        """Where clients reach the Cache: its Service."""
        return f"{self._name}.{self._namespace}.svc:{self._port}"

    def _set(self, conditions: List[Dict[str, Any]], state: str, reason: str, message: str, now: str) -> bool:
        return set_condition(conditions, REGISTERED, state, reason, message, self._generation, now)

    def register(self, status: Dict[str, Any], now: str) -> Tuple[Optional[Event], Optional[int]]:
        """Registers a Ready Cache unless ``status`` shows it registered at
        its current address. Returns an Event for a change and, after a
        failure, the seconds to wait before the next try."""
        conditions = status["conditions"]
        message = f"registered as {self.address()}"
        current = find_condition(conditions, REGISTERED)
        if current is not None and current.get("status") == "True" and current.get("message") == message:
            return None, None
        body = json.dumps(
            {"namespace": self._namespace, "name": self._name, "address": self.address()}, separators=(",", ":")
        )
        try:
            response = http.send("PUT", self.url, body.encode("utf-8"))
        except http.HttpError as e:
            return self._unavailable(conditions, str(e), e.kind != "failed", now)
        if response.is_success():
            self._set(conditions, "True", "Registered", message, now)
            return ("normal", "Registered", f"{message} at {self.url}"), None
        return self._unavailable(conditions, f"the registry answered {response.status}", response.status < 500, now)

    def _unavailable(
        self, conditions: List[Dict[str, Any]], error: str, definite: bool, now: str
    ) -> Tuple[Optional[Event], int]:
        message = f"registering at {self.url} failed: {error}"
        reason = REGISTRATION_REFUSED if definite and not _may_be_registered(conditions) else REGISTRY_UNAVAILABLE
        changed = self._set(conditions, "False", reason, message, now)
        return (("warning", reason, message) if changed else None), _retry_after(conditions, now)

    def deregister(self, previous: Optional[Dict[str, Any]], now: str) -> Tuple[str, ...]:
        """Removes the Cache from the registry if it may be there:
        ``("not-registered",)``, ``("removed", status)`` or ``("blocked",
        status, event, retry_after)``."""
        if previous is None:
            return ("not-registered",)
        status = _status_fields(previous)
        conditions = status.get("conditions") if isinstance(status.get("conditions"), list) else []
        if not _may_be_registered(conditions):
            return ("not-registered",)
        status["conditions"] = conditions
        current = find_condition(conditions, REGISTERED)
        registered = current is not None and current.get("status") == "True"
        try:
            response = http.send("DELETE", self.url)
            if response.is_success() or response.status == 404:
                self._set(conditions, "False", DEREGISTERED, f"removed from {self.url}", now)
                return ("removed", status)
            error = f"the registry answered {response.status}"
        except http.HttpError as e:
            error = str(e)
        message = f"deleting {self.url} failed: {error}; the Cache stays until it succeeds"
        changed = self._set(conditions, "True" if registered else "Unknown", CLEANUP_BLOCKED, message, now)
        event = ("warning", CLEANUP_BLOCKED, message) if changed else None
        return ("blocked", status, event, _retry_after(conditions, now))


def _status_fields(previous: Dict[str, Any]) -> Dict[str, Any]:
    """The fields of a Cache's status the operator reports, as the Rust
    guest's ``CacheStatus`` reads them: ``readyReplicas`` (0 when absent),
    ``phase``, ``observedGeneration``, ``lastGoodImage``, ``failedImage`` and
    ``conditions``."""
    copied = copy.deepcopy(previous)
    ready = copied.get("readyReplicas")
    status: Dict[str, Any] = {"readyReplicas": ready if isinstance(ready, int) else 0}
    for key in ("phase", "observedGeneration", "lastGoodImage", "failedImage"):
        if copied.get(key) is not None:
            status[key] = copied[key]
    if isinstance(copied.get("conditions"), list) and copied["conditions"]:
        status["conditions"] = copied["conditions"]
    return status


def _may_be_registered(conditions: List[Dict[str, Any]]) -> bool:
    condition = find_condition(conditions, REGISTERED)
    return condition is not None and condition.get("reason") not in (DEREGISTERED, REGISTRATION_REFUSED)


def _retry_after(conditions: List[Dict[str, Any]], now: str) -> int:
    condition = find_condition(conditions, REGISTERED)
    since = 0 if condition is None else _seconds(now) - _seconds(condition["lastTransitionTime"])
    return max(MIN_RETRY_SECONDS, min(max(since, 0), MAX_RETRY_SECONDS))
