"""The seeds' ``Cache`` operator in Python, with the Rust guest's behaviour.

For a Cache (``apps.example.com/v1alpha1``) it wants a ConfigMap
``<name>-config`` holding ``spec.config``, a Deployment ``<name>`` running
``spec.image`` with the config mounted and its hash on the pod template (a
config change rolls the pods), and a Service ``<name>``. It reports
``readyReplicas``, ``phase`` and the conditions ``Available`` and
``Progressing``; while ``paused`` it keeps every child as it is; on deletion
its finalizer scales the Deployment to zero and holds the Cache until the
pods are gone.

Settings: ``defaultImage`` (the image of a Cache with an empty
``spec.image``) and ``apiGroup`` (the Cache kind's group). The Rust guest's
``spec.auth`` and ``registryUrl`` are not part of this port.

Everything is a pure function of the request: a converged Cache gets the
same children and status on every resync, and the host writes nothing.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

from wasmop_sdk import (
    GuestError,
    ObjectRef,
    Request,
    Response,
    canonical_json,
    conditions_of,
    describe,
    fnv1a64,
    kind_ref,
    kinds,
    labels,
    log,
    object_meta,
    set_condition,
)

GROUP = "apps.example.com"
FINALIZER = "apps.example.com/cache-cleanup"
CONFIG_HASH_ANNOTATION = "apps.example.com/config-hash"
CONFIG_MOUNT_PATH = "/etc/cache"
CONTAINER_NAME = "cache"
PORT_NAME = "cache"
CONFIG_VOLUME = "config"
DEFAULT_REPLICAS = 1
DEFAULT_PORT = 6379
MAX_REPLICAS = 10
#: How often a deleting Cache is looked at while its pods stop.
POLL_SECONDS = 2

_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
_API_GROUP = re.compile(r"^[a-z0-9.-]+$")


def parse_settings(value: Any) -> Dict[str, str]:
    """The settings, checked: unknown keys and empty values are refused."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError("settings must be a map")
    for key, v in value.items():
        if key not in ("defaultImage", "apiGroup"):
            raise ValueError(f'unknown setting "{key}", expected one of defaultImage, apiGroup')
        if not isinstance(v, str):
            raise ValueError(f"settings.{key} must be a string")
    if "defaultImage" in value and value["defaultImage"].strip() == "":
        raise ValueError("settings.defaultImage must not be empty")
    group = value.get("apiGroup")
    if group is not None and ("." not in group or len(group) > 253 or not _API_GROUP.match(group)):
        raise ValueError(f'settings.apiGroup "{group}" is not an API group (a lowercase DNS name with a dot)')
    return dict(value)


def _is_config_map_key(key: str) -> bool:
    return 0 < len(key) <= 253 and key not in (".", "..") and bool(_CONFIG_KEY.match(key))


def _int(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def spec_of(cache: Dict[str, Any], settings: Dict[str, str]) -> Dict[str, Any]:
    """The spec with defaults applied."""
    raw = cache.get("spec") if isinstance(cache.get("spec"), dict) else {}
    image = raw.get("image") if isinstance(raw.get("image"), str) else ""
    if image.strip() == "" and "defaultImage" in settings:
        image = settings["defaultImage"]
    config = raw.get("config") if isinstance(raw.get("config"), dict) else {}
    replicas = raw.get("replicas")
    port = raw.get("port")
    return {
        "image": image,
        "replicas": replicas if isinstance(replicas, (int, float)) and not isinstance(replicas, bool) else DEFAULT_REPLICAS,
        "port": port if isinstance(port, (int, float)) and not isinstance(port, bool) else DEFAULT_PORT,
        "config": {str(k): str(v) for k, v in config.items()},
        "paused": raw.get("paused") is True,
    }


def validate(spec: Dict[str, Any]) -> None:
    """A violation is permanent: retrying cannot fix it."""
    if spec["image"].strip() == "":
        raise GuestError.permanent("spec.image must not be empty (this guest has no setting defaultImage)")
    replicas = spec["replicas"]
    if _int(replicas) is None or not 1 <= replicas <= MAX_REPLICAS:
        raise GuestError.permanent(f"spec.replicas must be between 1 and {MAX_REPLICAS}, got {replicas}")
    port = spec["port"]
    if _int(port) is None or not 1 <= port <= 65535:
        raise GuestError.permanent(f"spec.port must be between 1 and 65535, got {port}")
    for key in spec["config"]:
        if not _is_config_map_key(key):
            raise GuestError.permanent(
                f'spec.config key "{key}" is not a valid file name '
                "(letters, digits, '-', '_' and '.', at most 253 characters)"
            )


def config_hash(config: Dict[str, str]) -> str:
    """The 64-bit FNV-1a hash of the config as sorted compact JSON (the Rust guest's)."""
    return fnv1a64(canonical_json(config))


def _selector(name: str) -> Dict[str, str]:
    return labels({"app": "cache", "cache": name})


def _config_map(name: str, spec: Dict[str, Any]) -> Dict[str, Any]:
    obj: Dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": object_meta(f"{name}-config", _selector(name)),
    }
    if spec["config"]:
        obj["data"] = spec["config"]
    return obj


def _deployment(name: str, spec: Dict[str, Any], hash_: str, replicas: Optional[int] = None) -> Dict[str, Any]:
    selector = _selector(name)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": object_meta(name, _selector(name)),
        "spec": {
            "replicas": spec["replicas"] if replicas is None else replicas,
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": selector, "annotations": {CONFIG_HASH_ANNOTATION: hash_}},
                "spec": {
                    "containers": [
                        {
                            "name": CONTAINER_NAME,
                            "image": spec["image"],
                            "ports": [{"name": PORT_NAME, "containerPort": spec["port"]}],
                            "volumeMounts": [{"name": CONFIG_VOLUME, "mountPath": CONFIG_MOUNT_PATH, "readOnly": True}],
                        }
                    ],
                    "volumes": [{"name": CONFIG_VOLUME, "configMap": {"name": f"{name}-config"}}],
                },
            },
        },
    }


def _service(name: str, spec: Dict[str, Any]) -> Dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": object_meta(name, _selector(name)),
        "spec": {
            "selector": _selector(name),
            "ports": [{"name": PORT_NAME, "port": spec["port"], "targetPort": spec["port"]}],
        },
    }


def _get(obj: Any, *path: Any) -> Any:
    for key in path:
        if isinstance(obj, dict):
            obj = obj.get(key)
        elif isinstance(obj, list) and isinstance(key, int):
            obj = obj[key] if 0 <= key < len(obj) else None
        else:
            return None
    return obj


def _fingerprint(observed: Dict[str, Any]) -> Tuple[Any, Any, Any, Any]:
    """(replicas, image, port, config hash) as the Deployment's spec asks."""
    containers = _get(observed, "spec", "template", "spec", "containers")
    container = next(
        (c for c in containers if isinstance(c, dict) and c.get("name") == CONTAINER_NAME),
        None,
    ) if isinstance(containers, list) else None
    image = _get(container, "image")
    hash_ = _get(observed, "spec", "template", "metadata", "annotations", CONFIG_HASH_ANNOTATION)
    return (
        _int(_get(observed, "spec", "replicas")),
        image if isinstance(image, str) else None,
        _int(_get(container, "ports", 0, "containerPort")),
        hash_ if isinstance(hash_, str) else None,
    )


def _rollout_complete(observed: Dict[str, Any], desired: Tuple[Any, Any, Any, Any]) -> bool:
    status = observed.get("status")
    if not isinstance(status, dict):
        return False
    seen = _int(status.get("observedGeneration"))
    generation = _get(observed, "metadata", "generation")
    seen_latest = True if generation is None else seen is not None and seen >= generation
    replicas = desired[0]
    return (
        _fingerprint(observed) == desired
        and seen_latest
        and all((_int(status.get(f)) or 0) == replicas for f in ("replicas", "updatedReplicas", "readyReplicas"))
    )


def _ready(observed: Optional[Dict[str, Any]]) -> int:
    return _int(_get(observed, "status", "readyReplicas")) or 0


def status_of(
    previous: Optional[Dict[str, Any]],
    phase: str,
    ready: int,
    replicas: int,
    generation: Optional[int],
    now: str,
) -> Dict[str, Any]:
    """The status to report, keeping the previous conditions' transition times."""
    conditions = conditions_of(previous)
    counts = f"{ready}/{replicas} replicas ready"
    if phase == "Pending":
        available = ("False", "DeploymentPending")
    elif ready > 0:
        available = ("True", "ReplicasAvailable")
    else:
        available = ("False", "NoReplicasAvailable")
    progressing = {
        "Pending": ("True", "Creating", "creating the Deployment, Service and ConfigMap"),
        "Progressing": ("True", "RollingOut", counts),
        "Ready": ("False", "RolloutComplete", counts),
        "Paused": ("Unknown", "Paused", "spec.paused is true: children are left as they are"),
    }[phase]
    set_condition(conditions, "Available", available[0], available[1], counts, generation, now)
    set_condition(conditions, "Progressing", *progressing, generation, now)
    status: Dict[str, Any] = {"readyReplicas": ready, "phase": phase}
    if conditions:
        status["conditions"] = conditions
    return status


def _phase_event(previous: Optional[Dict[str, Any]], phase: str) -> List[Tuple[str, str]]:
    before = (previous or {}).get("phase")
    before = before if isinstance(before, str) else None
    if before == phase:
        return []
    return [("PhaseChanged", f"phase is {phase}" if before is None else f"phase changed from {before} to {phase}")]


def _change_events(name: str, observed: Optional[Dict[str, Any]], wanted: Tuple[Any, Any, Any, Any]) -> List[Tuple[str, str]]:
    if observed is None:
        return [("Created", f"creating Deployment {name}, Service {name} and ConfigMap {name}-config")]
    was = _fingerprint(observed)
    events = []
    if was[0] != wanted[0]:
        events.append(("Scaled", f"scaling Deployment {name} from {was[0] or 0} to {wanted[0] or 0} replicas"))
    if was[1] != wanted[1]:
        events.append(
            ("ImageChanged", f"updating Deployment {name} from image {was[1] or '(none)'} to {wanted[1] or '(none)'}")
        )
    if was[3] != wanted[3]:
        events.append(("ConfigChanged", f"the config changed; rolling the pods of Deployment {name}"))
    return events


def _reconcile_deletion(request: Request, name: str, spec: Dict[str, Any]) -> Response:
    def is_deployment(ref: ObjectRef) -> bool:
        return ref.api_version == "apps/v1" and ref.kind == "Deployment" and ref.name == name

    response = Response().keep_observed(request, is_deployment)
    observed = request.observed_named(kinds.deployment, name)
    if observed is None:
        return response.finalize().normal("CleanupComplete", f"no Deployment {name} left; the Cache can go")
    ref = ObjectRef(api_version="apps/v1", kind="Deployment", name=name)
    pods = _int(_get(observed, "status", "replicas")) or 0
    if pods == 0:
        return (
            response.keep(ref)
            .finalize()
            .normal("CleanupComplete", f"all pods of Deployment {name} have stopped; the Cache can go")
        )
    try:
        validate(spec)
    except GuestError as e:
        return (
            response.keep(ref)
            .finalize()
            .warning(
                "CleanupSkipped",
                f"cannot scale Deployment {name} down ({e.message}); the garbage collector removes it with the Cache",
            )
        )
    response.child(_deployment(name, spec, config_hash(spec["config"]), replicas=0))
    wanted = _fingerprint(observed)[0] or 0
    response.requeue_after(POLL_SECONDS)
    if wanted == 0:
        return response.normal("CleanupWaiting", f"waiting for {pods} pod(s) of Deployment {name} to stop")
    return response.normal("CleanupStarted", f"scaling Deployment {name} from {wanted} to 0 replicas before deletion")


def _reconcile_paused(request: Request, name: str, spec: Dict[str, Any]) -> Response:
    response = Response().keep_observed(request)
    previous = request.status
    for reason, message in _phase_event(previous, "Paused"):
        response.normal(reason, message)
    ready = _ready(request.observed_named(kinds.deployment, name))
    return response.status(status_of(previous, "Paused", ready, spec["replicas"], request.generation, request.now))


def reconcile(request: Request) -> Response:
    """One reconcile of a Cache."""
    try:
        settings = parse_settings(request.settings)
    except ValueError as e:
        raise GuestError.permanent(str(e)) from None
    name = request.name
    if name == "":
        raise GuestError.permanent("the Cache has no metadata.name")
    spec = spec_of(request.parent, settings)
    # Deletion first: a paused or invalid Cache must still be deletable.
    if request.deleting:
        return _reconcile_deletion(request, name, spec)
    if spec["paused"]:
        return _reconcile_paused(request, name, spec)
    validate(spec)
    hash_ = config_hash(spec["config"])
    wanted = (spec["replicas"], spec["image"], spec["port"], hash_)
    observed = request.observed_named(kinds.deployment, name)
    if observed is None:
        phase = "Pending"
    elif _rollout_complete(observed, wanted):
        phase = "Ready"
    else:
        phase = "Progressing"
    previous = request.status
    response = Response()
    for reason, message in _change_events(name, observed, wanted) + _phase_event(previous, phase):
        log.info(f"cache {name}: {reason}: {message}")
        response.normal(reason, message)
    return (
        response.child(_config_map(name, spec))
        .child(_deployment(name, spec, hash_))
        .child(_service(name, spec))
        .status(status_of(previous, phase, _ready(observed), spec["replicas"], request.generation, request.now))
    )


class CacheOperator:
    """The Cache operator."""

    def describe(self, settings: Any):
        parsed = parse_settings(settings)
        return describe(
            kind_ref(parsed.get("apiGroup", GROUP), "v1alpha1", "Cache"),
            [kinds.config_map, kinds.deployment, kinds.service],
            finalizer=FINALIZER,
        )

    def reconcile(self, request: Request) -> Response:
        return reconcile(request)
